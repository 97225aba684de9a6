"""RAdam: Adam with its adaptive learning rate rectified while its variance is large."""
import collections
import contextlib

import numpy as np

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


class RAdam(Optimizer):
    """RAdam (Liu et al., 2020), PyTorch's ``torch.optim.RAdam`` step for step.

    For each parameter ``p`` with a gradient ``g``, at its step ``t = 1, 2, ...``, with
    ``rho_inf = 2 / (1 - beta2) - 1`` and ``rho_t = rho_inf - 2 t beta2**t / (1 - beta2**t)``
    (on the host, in double precision)::

        g = -g                                  if maximize
        p = p * (1 - lr * weight_decay)         if decoupled_weight_decay
        g = g + weight_decay * p                otherwise, if weight_decay != 0
        m = m + (1 - beta1) * (g - m)           (torch's lerp_)
        v = beta2 * v + (1 - beta2) * g * g
        m_hat = m / (1 - beta1**t)
        p = p - m_hat * lr * (sqrt(1 - beta2**t) / (sqrt(v) + eps)) * r_t   if rho_t > 5
        p = p - m_hat * lr                                                  otherwise

    where ``r_t = sqrt((rho_t - 4) (rho_t - 2) rho_inf / ((rho_inf - 4) (rho_inf - 2) rho_t))``.

    State per parameter: ``step`` (a Python int where PyTorch keeps a 0-d float32 Tensor;
    ``load_state_dict`` takes either), ``exp_avg`` (m) and ``exp_avg_sq`` (v), Tensors like
    ``p``, zeros at the first step.

    A complex parameter is stepped as real numbers, its real and imaginary parts side by
    side, as PyTorch steps it through ``view_as_real``.

    Args:
        params: Tensors or param-group dicts (see ``Optimizer``).
        lr (float): learning rate. Default: 1e-3.
        betas (tuple): decay rates of the moving averages of g and g**2.
            Default: (0.9, 0.999).
        eps (float): added to the denominator for stability. Default: 1e-8.
        weight_decay (float): L2 penalty (decoupled with ``decoupled_weight_decay``).
            Default: 0.
        decoupled_weight_decay (bool): decay the weights directly, as AdamW.
        maximize (bool): ascend the objective instead of descending it.
        foreach (bool or None), capturable (bool), differentiable (bool): PyTorch's choices
            of implementation, kept in the param groups as PyTorch keeps them; they do not
            change the arithmetic here (see ``Optimizer``). As in PyTorch, at the step,
            capturable on the CPU and foreach with differentiable raise AssertionError.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False,
                 capturable=False, differentiable=False):
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
                        maximize=maximize, foreach=foreach, capturable=capturable,
                        decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
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
            flags = _flags(group)
            for p in params:
                _check_writable(p, "mul_" if flags.decoupled else "add_")
            for p in params:
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = state_zeros(p)
                    state["exp_avg_sq"] = state_zeros(p)
                numbers = per_step_numbers(backend.xp_of(p.array), _radam_numbers,
                                           _radam_settings, self, i, p)
                with backend.device_context(p.array):
                    on_arrays(_radam_param, p.array, p._grad.array, state["exp_avg"].array,
                              state["exp_avg_sq"].array, *flags, *numbers.values())
        return loss

    def _state_keys(self, group):
        return ("step", "exp_avg", "exp_avg_sq")

    def _check_unfused_step(self, group, params):
        check_foreach_and_capturable(group, params)



_Flags = collections.namedtuple("_Flags", "maximize coupled decoupled lerp_small")


def _flags(group):
    """What chooses RAdam's array work for ``group``: maximize, weight decay in the
    gradient, decoupled weight decay, which of torch's two forms of lerp_ the mean of g
    takes (1 - beta1 < 0.5). (Whether a step is rectified is one of its numbers: the
    update of either kind is computed and the step's one chosen, so that a compiled step
    replays both.)"""
    decay = float(group["weight_decay"]) != 0
    decoupled = group["decoupled_weight_decay"]
    return _Flags(group["maximize"], decay and not decoupled, decay and decoupled,
                  abs(1.0 - float(group["betas"][0])) < 0.5)


def _radam_numbers(optimizer, i, p):
    """The host half of the step of one parameter ``p`` of group ``i``: its step count
    advanced, its version bumped, and the step's numbers, as ``_radam_param`` takes them
    (``rectified``: 1.0 where rho_t > 5, else 0.0)."""
    group = optimizer.param_groups[i]
    state = optimizer.state[p]
    state["step"] = step = state["step"] + 1
    lr, weight_decay = float(group["lr"]), float(group["weight_decay"])
    beta1, beta2 = (float(b) for b in group["betas"])
    t = float(step)
    bc1, bc2 = 1 - beta1 ** t, 1 - beta2 ** t
    rho_inf = 2 / (1 - beta2) - 1
    rho_t = rho_inf - 2 * t * (beta2 ** t) / bc2
    rectified = rho_t > 5.0
    rect = (((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            ** 0.5 if rectified else 0.0)
    count_writes([p], 2 if _flags(group).decoupled else 1)
    return {"weight_decay": weight_decay, "decay": 1 - lr * weight_decay,
            "1-beta1": 1 - beta1, "beta2": beta2, "1-beta2": 1 - beta2, "bc1": bc1,
            "lr": lr, "bc2_sqrt": bc2 ** 0.5, "eps": float(group["eps"]), "rect": rect,
            "rectified": 1.0 if rectified else 0.0}


def _radam_settings(optimizer, i, p):
    """What chose the array work of one parameter's step: the group's flags and the
    optimiser's layout (``Optimizer._layout``)."""
    return _flags(optimizer.param_groups[i]), optimizer._layout(i)


def _radam_param(p, g, m, v, maximize, coupled, decoupled, lerp_small, weight_decay, decay,
                 one_minus_beta1, beta2, one_minus_beta2, bc1, lr, bc2_sqrt, eps, rect,
                 rectified):
    """RAdam's step of one parameter on raw arrays, in PyTorch's order of operations and
    roundings (its CPU kernels' fused multiply-adds: ``fma``): ``p`` and the moments ``m``,
    ``v`` changed in place; returns ``p``."""
    param = p  # (a complex one stepped as its real view, as torch)
    p, g, m, v = real_views(p, g, m, v)
    xp = backend.xp_of(p)
    if maximize:
        g = -g
    if decoupled:  # p.mul_(1 - lr * weight_decay)
        p *= number_like(decay, p)
    elif coupled:  # g.add(p, alpha=weight_decay)
        g = fma(p, number_like(weight_decay, p), g)
    w = number_like(one_minus_beta1, m)  # m.lerp_(g, 1 - beta1), in torch's two forms
    m[...] = fma(w, g - m, m) if lerp_small else fma(w - 1, g - m, g)
    v *= number_like(beta2, v)  # v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
    v[...] = fma(number_like(one_minus_beta2, v) * g, g, v)
    plain = m / number_like(bc1, m)  # (exp_avg / bias_correction1) * lr
    plain *= number_like(lr, plain)
    # (the rectified update: of no use, and maybe not finite, where the step is not)
    with np.errstate(all="ignore") if xp is np else contextlib.nullcontext():
        adaptive = xp.sqrt(v)  # bias_correction2**0.5 / (sqrt(v) + eps), as torch's
        adaptive += number_like(eps, adaptive)  # __rtruediv__: a reciprocal, then a product
        xp.reciprocal(adaptive, out=adaptive)
        adaptive *= number_like(bc2_sqrt, adaptive)
        update = plain * adaptive
        update *= number_like(rect, update)
    update = xp.where(number_like(rectified, update) > 0, update, plain)
    p -= update  # p.add_(update, alpha=-1.0)
    return param

