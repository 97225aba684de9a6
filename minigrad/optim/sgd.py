"""SGD: stochastic gradient descent with momentum, Nesterov momentum and weight decay."""
import collections

from .. import backend
from ..autograd import no_grad
from ..autograd.function import on_arrays
from ..backend.kernels import number_like
from ..tensor import Tensor, _check_writable
from .optimizer import Optimizer, check_implementation, count_writes
from ..compile.recorder import per_step_numbers, replayed_as_call


class SGD(Optimizer):
    """Stochastic gradient descent, PyTorch's ``torch.optim.SGD`` step for step.

    For each parameter ``p`` with a gradient ``g``::

        g = -g                                  if maximize
        g = g + weight_decay * p                if weight_decay != 0
        b = g (a copy)                          at the first step, if momentum != 0
        b = momentum * b + (1 - dampening) * g  at later steps
        g = g + momentum * b  if nesterov else b
        p = p - lr * g

    State per parameter: ``momentum_buffer`` (a Tensor like ``p``), only when momentum != 0.

    Args:
        params: Tensors or param-group dicts (see ``Optimizer``).
        lr (float): learning rate. Default: 1e-3 (as PyTorch).
        momentum (float): momentum factor. Default: 0.
        dampening (float): dampening of the gradient added to the momentum. Default: 0.
        weight_decay (float): L2 penalty added to the gradient. Default: 0.
        nesterov (bool): Nesterov momentum (needs momentum > 0 and no dampening).
        maximize (bool): ascend the objective instead of descending it.
        foreach (bool or None), differentiable (bool), fused (bool or None): PyTorch's
            choices of implementation, kept in the param groups as PyTorch keeps them; they
            do not change the arithmetic here (see ``Optimizer``). fused with foreach or
            with differentiable raises RuntimeError, as in PyTorch.
    """

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False,
                 fused=None):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                        foreach=foreach, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        check_implementation(defaults)

    # mg.compile records the step as its array work, its numbers in the scalar buffer
    # (``per_step_numbers``); with a closure it replays the whole call
    @replayed_as_call(unless=lambda self, closure=None: closure is None)
    @no_grad()
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for i, group in enumerate(self.param_groups):
            self._check_step(group)
            params = [p for p in group["params"] if p._grad is not None]
            if not params:
                continue
            for p in params:
                _check_writable(p, "add_")
            flags = _flags(group)
            numbers = per_step_numbers(backend.xp_of(params[0].array), _sgd_numbers,
                                       _sgd_settings, self, i, tuple(params))
            for p in params:
                g = p._grad.array
                with backend.device_context(p.array):
                    buf, first = None, False
                    if flags.momentum:  # its buffer, made at the first step (a copy of g)
                        state = self.state[p]
                        first = state.get("momentum_buffer") is None
                        if first:
                            state["momentum_buffer"] = Tensor(
                                backend.xp_of(g).empty_like(g, order="C"))
                        buf = state["momentum_buffer"].array
                    on_arrays(_sgd_param, p.array, g, buf, *flags, first, *numbers.values())
        return loss

    _may_be_none = ("momentum_buffer",)  # PyTorch saves one before the first step so

    def _state_keys(self, group):
        return ("momentum_buffer",) if group["momentum"] != 0 else ()



_Flags = collections.namedtuple("_Flags", "maximize decay momentum nesterov")


def _flags(group):
    """What chooses SGD's array work for ``group``: maximize, weight decay (!= 0), momentum
    (!= 0), nesterov."""
    return _Flags(group["maximize"], float(group["weight_decay"]) != 0,
                  float(group["momentum"]) != 0, group["nesterov"])


def _sgd_numbers(optimizer, i, params):
    """The host half of a step of param group ``i``: the versions of its parameters that
    have a gradient (``params``) bumped, and the step's numbers, as ``_sgd_param`` takes
    them."""
    group = optimizer.param_groups[i]
    count_writes(params, 1)
    return {"weight_decay": float(group["weight_decay"]),
            "momentum": float(group["momentum"]),
            "1-dampening": 1.0 - float(group["dampening"]),
            "-lr": -float(group["lr"])}


def _sgd_settings(optimizer, i, params):
    """What chose the array work: the group's flags and the optimiser's layout
    (``Optimizer._layout``)."""
    return _flags(optimizer.param_groups[i]), optimizer._layout(i)


def _sgd_param(p, g, buf, maximize, decay, momentum_on, nesterov, first, weight_decay,
               momentum, one_minus_dampening, minus_lr):
    """SGD's step of one parameter on raw arrays: ``p`` and the momentum buffer ``buf``
    (None without momentum; at the ``first`` step, filled with the gradient) changed in
    place; returns ``p``."""
    if maximize:
        g = -g
    if decay:  # g.add(p, alpha=weight_decay)
        g = _scaled_sum(g, p, weight_decay)
    if momentum_on:
        if first:  # torch: grad.clone()
            buf[...] = g
        else:  # buf.mul_(momentum).add_(g, alpha=1 - dampening)
            buf *= number_like(momentum, buf)
            backend.add_scaled(buf, buf, g, one_minus_dampening)
        g = _scaled_sum(g, buf, momentum) if nesterov else buf
    backend.add_scaled(p, p, g, minus_lr)  # p.add_(g, alpha=-lr)
    return p


def _scaled_sum(x, y, alpha):
    """x + alpha * y in a new array, rounded as PyTorch's ``add(alpha=)`` (once, in float32:
    see ``backend.add_scaled``)."""
    return backend.add_scaled(backend.xp_of(x).empty_like(x), x, y, alpha)
