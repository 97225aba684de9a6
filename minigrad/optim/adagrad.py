"""Adagrad: each coordinate's step divided by the root of its summed squared gradients."""
import collections

from .. import backend
from ..autograd import no_grad
from ..autograd.function import on_arrays
from ..backend.kernels import number_like
from ..tensor import Tensor, _check_writable
from ..backend import fma
from ._complex import real_views
from .optimizer import (Optimizer, check_foreach_and_capturable, check_implementation,
                        count_writes)
from ..compile.recorder import per_step_numbers, replayed_as_call


class Adagrad(Optimizer):
    """Adagrad (Duchi et al., 2011), PyTorch's ``torch.optim.Adagrad`` step for step.

    For each parameter ``p`` with a gradient ``g``, at its step ``t = 1, 2, ...``::

        g = -g                                  if maximize
        g = g + weight_decay * p                if weight_decay != 0
        clr = lr / (1 + (t - 1) * lr_decay)     (on the host, in double precision)
        s = s + g * g
        p = p - clr * g / (sqrt(s) + eps)

    State per parameter, made for every parameter at construction as PyTorch makes it:
    ``step`` (a Python int, 0 until the first step, where PyTorch keeps a 0-d float32
    Tensor; ``load_state_dict`` takes either) and ``sum`` (s, a Tensor like ``p`` filled
    with ``initial_accumulator_value``).

    A complex parameter is stepped as real numbers, its real and imaginary parts side by
    side, as PyTorch steps it through ``view_as_real``.

    Args:
        params: Tensors or param-group dicts (see ``Optimizer``).
        lr (float): learning rate. Default: 1e-2.
        lr_decay (float): decay of the learning rate with the step count. Default: 0.
        weight_decay (float): L2 penalty added to the gradient. Default: 0.
        initial_accumulator_value (float): the first value of s. Default: 0.
        eps (float): added to the denominator for stability. Default: 1e-10.
        maximize (bool): ascend the objective instead of descending it.
        foreach (bool or None), differentiable (bool), fused (bool or None): PyTorch's
            choices of implementation, kept in the param groups as PyTorch keeps them; they
            do not change the arithmetic here (see ``Optimizer``). fused with foreach or
            with differentiable raises RuntimeError, as in PyTorch; at the step, foreach
            with differentiable raises AssertionError.
    """

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0,
                 initial_accumulator_value=0, eps=1e-10, foreach=None, *, maximize=False,
                 differentiable=False, fused=None):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError("Invalid initial_accumulator_value value: "
                             f"{initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        fused=fused)
        super().__init__(params, defaults)
        check_implementation(defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, group)

    def _init_state(self, p, group):
        """``step`` 0 and ``sum`` filled with initial_accumulator_value: the one given to
        the constructor, whatever a param group says (as PyTorch fills it)."""
        state = self.state[p]
        state["step"] = 0
        value = float(self.defaults["initial_accumulator_value"])
        if p.array.dtype.kind == "c":  # (both parts, as torch's complex(value, value))
            value = complex(value, value)
        state["sum"] = Tensor(backend.xp_of(p.array).full_like(p.array, value))

    # mg.compile records the step as its array work, its numbers in the scalar buffer
    # (``per_step_numbers``); with a closure it replays the whole call
    @replayed_as_call(unless=lambda self, closure=None: closure is None)
    @no_grad()
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for i, group in enumerate(self.param_groups):
            self._check_step(group)
            params = [p for p in group["params"] if p._grad is not None]
            for p in params:
                _check_writable(p, "add_")
            flags = _flags(group)
            for p in params:
                state = self.state[p]
                if not state:  # (a parameter of a group added after construction)
                    self._init_state(p, group)
                numbers = per_step_numbers(backend.xp_of(p.array), _adagrad_numbers,
                                           _adagrad_settings, self, i, p)
                with backend.device_context(p.array):
                    on_arrays(_adagrad_param, p.array, p._grad.array, state["sum"].array,
                              *flags, *numbers.values())
        return loss

    def _state_keys(self, group):
        return ("step", "sum")

    def _check_unfused_step(self, group, params):
        check_foreach_and_capturable(group, params)


_Flags = collections.namedtuple("_Flags", "maximize decay")


def _flags(group):
    """What chooses Adagrad's array work for ``group``: maximize, weight decay (!= 0)."""
    return _Flags(group["maximize"], float(group["weight_decay"]) != 0)


def _adagrad_numbers(optimizer, i, p):
    """The host half of the step of one parameter ``p`` of group ``i``: its step count
    advanced, its version bumped, and the step's numbers, as ``_adagrad_param`` takes them
    (``-clr = -lr / (1 + (t - 1) * lr_decay)`` at its new step count ``t``)."""
    group = optimizer.param_groups[i]
    state = optimizer.state[p]
    state["step"] = step = state["step"] + 1
    count_writes([p], 1)
    clr = float(group["lr"]) / (1 + (step - 1) * float(group["lr_decay"]))
    return {"weight_decay": float(group["weight_decay"]), "eps": float(group["eps"]),
            "-clr": -clr}


def _adagrad_settings(optimizer, i, p):
    """What chose the array work of one parameter's step: the group's flags and the
    optimiser's layout (``Optimizer._layout``)."""
    return _flags(optimizer.param_groups[i]), optimizer._layout(i)


def _adagrad_param(p, g, s, maximize, decay, weight_decay, eps, minus_clr):
    """Adagrad's step of one parameter on raw arrays, in PyTorch's order of operations and
    roundings (its CPU kernels' fused multiply-adds: ``fma``):
    ``p`` and the sum of squares ``s`` changed in place; returns ``p``."""
    param = p  # (a complex one stepped as its real view, as torch)
    p, g, s = real_views(p, g, s)
    xp = backend.xp_of(p)
    if maximize:
        g = -g
    if decay:  # g.add(p, alpha=weight_decay)
        g = fma(p, number_like(weight_decay, p), g)
    s[...] = fma(g, g, s)  # s.addcmul_(g, g, value=1)
    std = xp.sqrt(s)  # s.sqrt().add_(eps)
    std += number_like(eps, std)
    p += number_like(minus_clr, p) * g / std  # p.addcdiv_(g, std, value=-clr)
    return param
