"""NAdam: Adam with Nesterov momentum (Dozat, 2016)."""
import collections
import math
import numbers

import numpy as np

from .. import backend
from ..arguments import _is_array
from ..autograd import no_grad
from ..autograd.function import on_arrays
from ..backend.kernels import number_like
from ..tensor import Tensor, _check_writable
from ..backend import fma
from ._complex import real_views
from .optimizer import (Optimizer, check_foreach_and_capturable, check_implementation,
                        count_writes, state_zeros)
from ..compile.recorder import per_step_numbers, replayed_as_call


class NAdam(Optimizer):
    """NAdam (Dozat, 2016), PyTorch's ``torch.optim.NAdam`` step for step.

    For each parameter ``p`` with a gradient ``g``, at its step ``t = 1, 2, ...``, with
    ``mu_t = beta1 * (1 - 0.5 * 0.96**(t * momentum_decay))`` (on the host, in double
    precision)::

        g = -g                                  if maximize
        p = p * (1 - lr * weight_decay)         if decoupled_weight_decay
        g = g + weight_decay * p                otherwise, if weight_decay != 0
        P = P * mu_t                            (P: mu_product, a float32 number as in torch)
        m = m + (1 - beta1) * (g - m)           (torch's lerp_)
        v = beta2 * v + (1 - beta2) * g * g
        denom = sqrt(v / (1 - beta2**t)) + eps
        p = p - (lr * (1 - mu_t) / (1 - P)) * g / denom
        p = p - (lr * mu_{t+1} / (1 - P * mu_{t+1})) * m / denom

    State per parameter: ``step`` (a Python int where PyTorch keeps a 0-d float32 Tensor),
    ``mu_product`` (P: a Python float holding the float32 number of PyTorch's 0-d float32
    Tensor, 1 before the first step), ``exp_avg`` (m) and ``exp_avg_sq`` (v), Tensors like
    ``p``. ``load_state_dict`` takes ``step`` and ``mu_product`` as numbers or one-element
    Tensors.

    A complex parameter is stepped as real numbers, its real and imaginary parts side by
    side, as PyTorch steps it through ``view_as_real``.

    Args:
        params: Tensors or param-group dicts (see ``Optimizer``).
        lr (float): learning rate. Default: 2e-3.
        betas (tuple): decay rates of the moving averages of g and g**2.
            Default: (0.9, 0.999).
        eps (float): added to the denominator for stability. Default: 1e-8.
        weight_decay (float): L2 penalty (decoupled with ``decoupled_weight_decay``).
            Default: 0.
        momentum_decay (float): how fast the momentum factor ``mu_t`` warms up.
            Default: 4e-3.
        decoupled_weight_decay (bool): decay the weights directly, as AdamW (NAdamW).
        maximize (bool): ascend the objective instead of descending it.
        foreach (bool or None), capturable (bool), differentiable (bool): PyTorch's choices
            of implementation, kept in the param groups as PyTorch keeps them; they do not
            change the arithmetic here (see ``Optimizer``). As in PyTorch, at the step,
            capturable on the CPU and foreach with differentiable raise AssertionError.
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False):
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
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize,
                        foreach=foreach, capturable=capturable,
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
                    state["mu_product"] = 1.0
                    state["exp_avg"] = state_zeros(p)
                    state["exp_avg_sq"] = state_zeros(p)
                numbers = per_step_numbers(backend.xp_of(p.array), _nadam_numbers,
                                           _nadam_settings, self, i, p)
                with backend.device_context(p.array):
                    on_arrays(_nadam_param, p.array, p._grad.array, state["exp_avg"].array,
                              state["exp_avg_sq"].array, *flags, *numbers.values())
        return loss

    def _state_keys(self, group):
        # (mu_product, a number, is checked and loaded by ``load_state_dict`` here)
        return ("step", "exp_avg", "exp_avg_sq")

    def _check_unfused_step(self, group, params):
        check_foreach_and_capturable(group, params, "params, mu_products and state_steps")

    def load_state_dict(self, state_dict):
        """``Optimizer.load_state_dict``, with each parameter's ``mu_product`` (a number or
        a one-element Tensor, as PyTorch saves it) rounded to float32 as PyTorch keeps it;
        ValueError, before anything changes, where a parameter's state lacks it or it is
        not a finite number."""
        products = {}
        if isinstance(state_dict, dict) and isinstance(state_dict.get("state"), dict):
            state = {}
            for index, saved in state_dict["state"].items():
                if isinstance(saved, dict) and saved:
                    saved = dict(saved)
                    if "mu_product" not in saved:
                        raise ValueError(f"the state of parameter {index} has no "
                                         "'mu_product' (NAdam keeps it)")
                    products[index] = _mu_product(saved.pop("mu_product"), index)
                state[index] = saved
            state_dict = dict(state_dict, state=state)
        super().load_state_dict(state_dict)
        for group, saved in zip(self.param_groups, state_dict["param_groups"]):
            for index, p in zip(saved["params"], group["params"]):
                if index in products:
                    self.state[p]["mu_product"] = products[index]




def _mu_product(value, index):
    """A saved mu_product as PyTorch keeps it: a float32 number (as a Python float)."""
    shown = value
    if _is_array(value):
        value = Tensor(value)
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise ValueError(f"state 'mu_product' of parameter {index} is a Tensor of shape "
                             f"{tuple(value.shape)}, not a single number")
        value = shown = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real) \
            or not math.isfinite(value):
        raise ValueError(f"state 'mu_product' of parameter {index} is {shown!r}, not a "
                         "finite number")
    return float(np.float32(value))


_Flags = collections.namedtuple("_Flags", "maximize coupled decoupled lerp_small")


def _flags(group):
    """What chooses NAdam's array work for ``group``: maximize, weight decay in the
    gradient, decoupled weight decay, which of torch's two forms of lerp_ the mean of g
    takes (1 - beta1 < 0.5)."""
    decay = float(group["weight_decay"]) != 0
    decoupled = group["decoupled_weight_decay"]
    return _Flags(group["maximize"], decay and not decoupled, decay and decoupled,
                  abs(1.0 - float(group["betas"][0])) < 0.5)


def _nadam_numbers(optimizer, i, p):
    """The host half of the step of one parameter ``p`` of group ``i``: its step count and
    mu_product advanced (the product rounded to float32, as PyTorch's float32 Tensor
    ``mu_product *= mu``), its version bumped, and the step's numbers, as
    ``_nadam_param`` takes them."""
    group = optimizer.param_groups[i]
    state = optimizer.state[p]
    state["step"] = step = state["step"] + 1
    lr, weight_decay = float(group["lr"]), float(group["weight_decay"])
    beta1, beta2 = (float(b) for b in group["betas"])
    momentum_decay = float(group["momentum_decay"])
    t = float(step)
    mu = beta1 * (1.0 - 0.5 * (0.96 ** (t * momentum_decay)))
    mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((t + 1) * momentum_decay)))
    product = float(np.float32(state["mu_product"]) * np.float32(mu))
    state["mu_product"] = product
    flags = _flags(group)
    count_writes([p], 3 if flags.decoupled else 2)
    return {"weight_decay": weight_decay, "decay": 1 - lr * weight_decay,
            "1-beta1": 1 - beta1, "beta2": beta2, "1-beta2": 1 - beta2,
            "bc2": 1 - beta2 ** t, "eps": float(group["eps"]),
            "grad_value": -lr * (1.0 - mu) / (1.0 - product),
            "avg_value": (-lr * mu_next) / (1.0 - product * mu_next)}


def _nadam_settings(optimizer, i, p):
    """What chose the array work of one parameter's step: the group's flags and the
    optimiser's layout (``Optimizer._layout``)."""
    return _flags(optimizer.param_groups[i]), optimizer._layout(i)


def _nadam_param(p, g, m, v, maximize, coupled, decoupled, lerp_small, weight_decay, decay,
                 one_minus_beta1, beta2, one_minus_beta2, bc2, eps, grad_value, avg_value):
    """NAdam's step of one parameter on raw arrays, in PyTorch's order of operations and
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
    denom = v / number_like(bc2, v)  # v.div(bias_correction2).sqrt().add_(eps)
    xp.sqrt(denom, out=denom)
    denom += number_like(eps, denom)
    p += number_like(grad_value, p) * g / denom  # p.addcdiv_(g, denom, value=...)
    p += number_like(avg_value, p) * m / denom  # p.addcdiv_(m, denom, value=...)
    return param

