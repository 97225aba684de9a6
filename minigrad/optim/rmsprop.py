"""RMSprop: gradients divided by a running root mean square of their recent magnitudes."""
import collections

from .. import backend
from ..autograd import no_grad
from ..autograd.function import on_arrays
from ..backend.kernels import number_like
from ..tensor import Tensor, _check_writable
from ..backend import fma
from ._complex import real_views
from .optimizer import (Optimizer, check_foreach_and_capturable, check_implementation,
                        count_writes, state_zeros)
from ..compile.recorder import per_step_numbers, replayed_as_call


class RMSprop(Optimizer):
    """RMSprop (Hinton's lecture notes; centered as Graves, 2013), PyTorch's
    ``torch.optim.RMSprop`` step for step.

    For each parameter ``p`` with a gradient ``g``::

        g = -g                                  if maximize
        g = g + weight_decay * p                if weight_decay != 0
        v = alpha * v + (1 - alpha) * g * g
        a = a + (1 - alpha) * (g - a)           if centered (torch's lerp_)
        avg = sqrt(v - a * a) + eps  if centered, else sqrt(v) + eps
        b = momentum * b + g / avg              if momentum > 0
        p = p - lr * b                          if momentum > 0
        p = p - lr * g / avg                    otherwise

    State per parameter: ``step`` (a Python int where PyTorch keeps a 0-d float32 Tensor;
    ``load_state_dict`` takes either), ``square_avg`` (v), and ``momentum_buffer`` (b,
    only when momentum > 0) and ``grad_avg`` (a, only when centered): Tensors like ``p``,
    all zeros at the first step.

    A complex parameter is stepped as real numbers, its real and imaginary parts side by
    side, as PyTorch steps it through ``view_as_real``.

    Args:
        params: Tensors or param-group dicts (see ``Optimizer``).
        lr (float): learning rate. Default: 1e-2.
        alpha (float): smoothing constant of the running mean of g**2. Default: 0.99.
        eps (float): added to the denominator for stability. Default: 1e-8.
        weight_decay (float): L2 penalty added to the gradient. Default: 0.
        momentum (float): momentum factor. Default: 0.
        centered (bool): normalise by an estimate of the gradient's variance (the mean of
            g**2 less the square of the mean of g).
        maximize (bool): ascend the objective instead of descending it.
        capturable (bool), foreach (bool or None), differentiable (bool): PyTorch's choices
            of implementation, kept in the param groups as PyTorch keeps them; they do not
            change the arithmetic here (see ``Optimizer``). As in PyTorch, at the step,
            capturable on the CPU and foreach with differentiable raise AssertionError.
    """

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach,
                        maximize=maximize, differentiable=differentiable)
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
            for p in params:  # the state, made at the first step (before the host half)
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["square_avg"] = state_zeros(p)
                    if flags.momentum:
                        state["momentum_buffer"] = state_zeros(p)
                    if flags.centered:
                        state["grad_avg"] = state_zeros(p)
            numbers = per_step_numbers(backend.xp_of(params[0].array), _rmsprop_numbers,
                                       _rmsprop_settings, self, i, tuple(params))
            for p in params:
                state = self.state[p]
                with backend.device_context(p.array):
                    on_arrays(_rmsprop_param, p.array, p._grad.array,
                              state["square_avg"].array,
                              state["grad_avg"].array if flags.centered else None,
                              state["momentum_buffer"].array if flags.momentum else None,
                              *flags, *numbers.values())
        return loss

    def _state_keys(self, group):
        keys = ("step", "square_avg")
        if float(group["momentum"]) > 0:
            keys += ("momentum_buffer",)
        return keys + ("grad_avg",) if group["centered"] else keys

    def _check_unfused_step(self, group, params):
        check_foreach_and_capturable(group, params)



_Flags = collections.namedtuple("_Flags", "maximize decay centered lerp_small momentum")


def _flags(group):
    """What chooses RMSprop's array work for ``group``: maximize, weight decay (!= 0),
    centered, which of torch's two forms of lerp_ the running mean of g takes (1 - alpha <
    0.5), momentum (> 0)."""
    return _Flags(group["maximize"], float(group["weight_decay"]) != 0, group["centered"],
                  abs(1.0 - float(group["alpha"])) < 0.5, float(group["momentum"]) > 0)


def _rmsprop_numbers(optimizer, i, params):
    """The host half of a step of param group ``i``: the step counts and versions of its
    parameters that have a gradient (``params``) advanced, and the step's numbers, as
    ``_rmsprop_param`` takes them."""
    group = optimizer.param_groups[i]
    for p in params:
        state = optimizer.state[p]
        state["step"] += 1
    count_writes(params, 1)
    alpha = float(group["alpha"])
    return {"weight_decay": float(group["weight_decay"]), "alpha": alpha,
            "1-alpha": 1.0 - alpha, "eps": float(group["eps"]),
            "momentum": float(group["momentum"]), "-lr": -float(group["lr"])}


def _rmsprop_settings(optimizer, i, params):
    """What chose the array work: the group's flags and the optimiser's layout
    (``Optimizer._layout``)."""
    return _flags(optimizer.param_groups[i]), optimizer._layout(i)


def _rmsprop_param(p, g, v, a, b, maximize, decay, centered, lerp_small, momentum_on,
                   weight_decay, alpha, one_minus_alpha, eps, momentum, minus_lr):
    """RMSprop's step of one parameter on raw arrays, in PyTorch's order of operations and
    roundings (its CPU kernels' fused multiply-adds: ``fma``):
    ``p``, the running means ``v`` (of g**2) and ``a`` (of g; None unless centered) and
    the momentum buffer ``b`` (None without momentum) changed in place; returns ``p``."""
    param = p  # (a complex one stepped as its real view, as torch)
    p, g, v, a, b = real_views(p, g, v, a, b)
    xp = backend.xp_of(p)
    if maximize:
        g = -g
    if decay:  # g.add(p, alpha=weight_decay)
        g = fma(p, number_like(weight_decay, p), g)
    v *= number_like(alpha, v)  # v.mul_(alpha).addcmul_(g, g, value=1 - alpha)
    v[...] = fma(number_like(one_minus_alpha, v) * g, g, v)
    if centered:  # a.lerp_(g, 1 - alpha), in torch's two forms
        w = number_like(one_minus_alpha, a)
        a[...] = fma(w, g - a, a) if lerp_small else fma(w - 1, g - a, g)
        avg = fma(-a, a, v)  # v.addcmul(a, a, value=-1).sqrt_()
        xp.sqrt(avg, out=avg)
    else:
        avg = xp.sqrt(v)
    avg += number_like(eps, avg)
    if momentum_on:  # b.mul_(momentum).addcdiv_(g, avg); p.add_(b, alpha=-lr)
        b *= number_like(momentum, b)
        b += g / avg
        p[...] = fma(b, number_like(minus_lr, p), p)
    else:  # p.addcdiv_(g, avg, value=-lr)
        p += number_like(minus_lr, p) * g / avg
    return param

