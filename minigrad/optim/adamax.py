"""Adamax: Adam with the infinity norm of the gradients in place of their second moment."""
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


class Adamax(Optimizer):
    """Adamax (Kingma & Ba, 2015, section 7), PyTorch's ``torch.optim.Adamax`` step for step.

    For each parameter ``p`` with a gradient ``g``, at its step ``t = 1, 2, ...``::

        g = -g                                  if maximize
        g = g + weight_decay * p                if weight_decay != 0
        m = m + (1 - beta1) * (g - m)           (torch's lerp_)
        u = max(beta2 * u, |g| + eps)
        p = p - (lr / (1 - beta1**t)) * m / u   (the factor on the host, in double precision)

    State per parameter: ``step`` (a Python int where PyTorch keeps a 0-d float32 Tensor;
    ``load_state_dict`` takes either), ``exp_avg`` (m) and ``exp_inf`` (u), Tensors like
    ``p``, zeros at the first step.

    A complex parameter is stepped as real numbers, its real and imaginary parts side by
    side, as PyTorch steps it through ``view_as_real``.

    Args:
        params: Tensors or param-group dicts (see ``Optimizer``).
        lr (float): learning rate. Default: 2e-3.
        betas (tuple): decay rates of the mean of g and of its infinity norm.
            Default: (0.9, 0.999).
        eps (float): added to |g| for stability. Default: 1e-8.
        weight_decay (float): L2 penalty added to the gradient. Default: 0.
        maximize (bool): ascend the objective instead of descending it.
        foreach (bool or None), differentiable (bool), capturable (bool): PyTorch's choices
            of implementation, kept in the param groups as PyTorch keeps them; they do not
            change the arithmetic here (see ``Optimizer``). As in PyTorch, at the step,
            capturable on the CPU and foreach with differentiable raise AssertionError.
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
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
            for p in params:
                _check_writable(p, "add_")
            flags = _flags(group)
            for p in params:
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = state_zeros(p)
                    state["exp_inf"] = state_zeros(p)
                numbers = per_step_numbers(backend.xp_of(p.array), _adamax_numbers,
                                           _adamax_settings, self, i, p)
                with backend.device_context(p.array):
                    on_arrays(_adamax_param, p.array, p._grad.array, state["exp_avg"].array,
                              state["exp_inf"].array, *flags, *numbers.values())
        return loss

    def _state_keys(self, group):
        return ("step", "exp_avg", "exp_inf")

    def _check_unfused_step(self, group, params):
        check_foreach_and_capturable(group, params)



_Flags = collections.namedtuple("_Flags", "maximize decay lerp_small")


def _flags(group):
    """What chooses Adamax's array work for ``group``: maximize, weight decay (!= 0), which
    of torch's two forms of lerp_ the mean of g takes (1 - beta1 < 0.5)."""
    return _Flags(group["maximize"], float(group["weight_decay"]) != 0,
                  abs(1.0 - float(group["betas"][0])) < 0.5)


def _adamax_numbers(optimizer, i, p):
    """The host half of the step of one parameter ``p`` of group ``i``: its step count
    advanced, its version bumped, and the step's numbers, as ``_adamax_param`` takes them
    (``-clr = -lr / (1 - beta1**t)`` at its new step count ``t``)."""
    group = optimizer.param_groups[i]
    state = optimizer.state[p]
    state["step"] = step = state["step"] + 1
    count_writes([p], 1)
    beta1, beta2 = (float(b) for b in group["betas"])
    return {"weight_decay": float(group["weight_decay"]), "1-beta1": 1.0 - beta1,
            "beta2": beta2, "eps": float(group["eps"]),
            "-clr": -(float(group["lr"]) / (1 - beta1 ** float(step)))}


def _adamax_settings(optimizer, i, p):
    """What chose the array work of one parameter's step: the group's flags and the
    optimiser's layout (``Optimizer._layout``)."""
    return _flags(optimizer.param_groups[i]), optimizer._layout(i)


def _adamax_param(p, g, m, u, maximize, decay, lerp_small, weight_decay, one_minus_beta1,
                  beta2, eps, minus_clr):
    """Adamax's step of one parameter on raw arrays, in PyTorch's order of operations and
    roundings (its CPU kernels' fused multiply-adds: ``fma``): ``p`` and the moments ``m``,
    ``u`` changed in place; returns ``p``."""
    param = p  # (a complex one stepped as its real view, as torch)
    p, g, m, u = real_views(p, g, m, u)
    xp = backend.xp_of(p)
    if maximize:
        g = -g
    if decay:  # g.add(p, alpha=weight_decay)
        g = fma(p, number_like(weight_decay, p), g)
    w = number_like(one_minus_beta1, m)  # m.lerp_(g, 1 - beta1), in torch's two forms
    m[...] = fma(w, g - m, m) if lerp_small else fma(w - 1, g - m, g)
    u *= number_like(beta2, u)  # torch.maximum(u.mul_(beta2), g.abs().add_(eps), out=u)
    bound = xp.abs(g)
    bound += number_like(eps, bound)
    xp.maximum(u, bound, out=u)
    p += number_like(minus_clr, p) * m / u  # p.addcdiv_(m, u, value=-clr)
    return param

