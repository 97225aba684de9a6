"""Adam and AdamW: adaptive moment estimation, with L2 or decoupled weight decay."""
from .. import backend
from ..autograd import no_grad
from ..autograd.function import on_arrays
from ..backend.kernels import number_like
from ..tensor import Tensor, _check_writable
from .optimizer import (CAPTURABLE_DEVICES, Optimizer, check_implementation, count_writes,
                        state_zeros)
from ..compile.recorder import per_step_numbers, replayed_as_call


class Adam(Optimizer):
    """Adam (Kingma & Ba, 2015), PyTorch's ``torch.optim.Adam`` step for step.

    For each parameter ``p`` with a gradient ``g``, at step ``t = 1, 2, ...``::

        g = -g                                   if maximize
        p = p * (1 - lr * weight_decay)          if decoupled_weight_decay (AdamW)
        g = g + weight_decay * p                 otherwise, if weight_decay != 0
        m = m + (1 - beta1) * (g - m)            (torch's lerp_, i.e. beta1 * m + (1 - beta1) * g)
        v = beta2 * v + (1 - beta2) * g * g
        v_max = max(v_max, v); v = v_max         if amsgrad
        denom = sqrt(v) / sqrt(1 - beta2**t) + eps
        p = p - (lr / (1 - beta1**t)) * m / denom

    State per parameter: ``step`` (a Python int where PyTorch keeps a 0-d float32 Tensor:
    the bias corrections are computed on the host in double precision, as PyTorch does
    with ``step.item()``; ``load_state_dict`` takes either), ``exp_avg`` (m),
    ``exp_avg_sq`` (v) and, with amsgrad, ``max_exp_avg_sq`` (Tensors like ``p``). On the
    CPU, without amsgrad, the moments of a param group are views of two flat arrays, and a
    step in which every parameter of the group has a gradient runs once over all of them
    (see ``_step_together``): the same numbers, far fewer calls for a model of many small
    parameters.

    Args:
        params: Tensors or param-group dicts (see ``Optimizer``).
        lr (float): learning rate. Default: 1e-3.
        betas (tuple): decay rates of the moving averages of g and g**2. Default: (0.9, 0.999).
        eps (float): added to the denominator for stability. Default: 1e-8.
        weight_decay (float): L2 penalty (decoupled with ``decoupled_weight_decay``). Default: 0.
        amsgrad (bool): normalise by the running maximum of v (Reddi et al., 2018).
        maximize (bool): ascend the objective instead of descending it.
        decoupled_weight_decay (bool): decay the weights directly, as AdamW.
        foreach (bool or None), capturable (bool), differentiable (bool), fused (bool or
            None): PyTorch's choices of implementation, kept in the param groups as PyTorch
            keeps them; they do not change the arithmetic here (see ``Optimizer``). As in
            PyTorch, fused with foreach or differentiable raises RuntimeError at
            construction; at the step, capturable without fused on the CPU, and foreach
            with differentiable, raise AssertionError.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        for i, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {beta}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)
        check_implementation(defaults)

    # mg.compile records the step as its array work, its numbers in the scalar buffer
    # (``per_step_numbers``); with amsgrad or a closure it replays the whole call
    @replayed_as_call(unless=lambda self, closure=None: closure is None and not any(
        group["amsgrad"] for group in self.param_groups))
    @no_grad()
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for i, group in enumerate(self.param_groups):
            self._check_step(group)
            update = _AdamUpdate(group)
            if self._step_together(i, group, update):
                continue
            for p in group["params"]:
                grad = p._grad
                if grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = state_zeros(p)
                    state["exp_avg_sq"] = state_zeros(p)
                    if update.amsgrad:
                        state["max_exp_avg_sq"] = state_zeros(p)
                with backend.device_context(p.array):
                    update(self, i, p, grad.array, state)
        return loss

    def _state_keys(self, group):
        keys = ("step", "exp_avg", "exp_avg_sq")
        return keys + ("max_exp_avg_sq",) if group["amsgrad"] else keys

    def _check_unfused_step(self, group, params):
        if group["capturable"] and any(p.device.type == "cpu" for p in params):
            devices = CAPTURABLE_DEVICES[:-1] if group["foreach"] else CAPTURABLE_DEVICES
            raise AssertionError("If capturable=True, params and state_steps must be on "
                                 f"supported devices: {devices}.")
        if group["foreach"] and group["differentiable"] and params:
            raise AssertionError("_foreach ops don't support autograd")

    def _step_together(self, i, group, update):
        """The step of a whole param group at once, where its parameters allow (on the
        CPU, one dtype, each with a gradient and at the same step count, no amsgrad): the
        moments of the group live in two flat arrays (``_Moments``; each parameter's
        ``exp_avg`` and ``exp_avg_sq`` are views of them), the gradients are gathered into
        a third (which then holds the denominator), and Adam's arithmetic runs once over
        all of them instead of once per parameter, where the interpreter's cost per call
        would dominate. The same operations on each element as the step of one parameter,
        so the same bits, at the cost of two temporaries the size of the whole group
        during the step. False (nothing done) where the parameters do not allow it."""
        params = group["params"]
        if update.amsgrad or len(params) < 2 or len({id(p) for p in params}) < len(params):
            return False
        dtype, state, states, steps = params[0].array.dtype, self.state, [], set()
        for p in params:
            g, s = p._grad, state.get(p)
            if g is None or type(p.array) is not backend.np.ndarray or p.array.dtype != dtype \
                    or g.array.dtype != dtype or g.array.shape != p.array.shape:
                return False
            states.append(s)
            steps.add(0 if s is None else s.get("step", 0))
        if len(steps) != 1:
            return False
        moments = getattr(self, "_moments", None)
        if moments is None:
            moments = self._moments = {}
        flat = moments.get(id(group))
        if flat is None or not flat.holds(group, states):
            flat = moments[id(group)] = _Moments(group, state)
        for p in params:  # (before anything changes; its first change is a mul_ in AdamW)
            _check_writable(p, "mul_" if update.decoupled_on else "add_")
        numbers = per_step_numbers(backend.np, _adam_group_numbers, _adam_group_settings,
                                   self, i)
        on_arrays(_adam_flat, flat.m, flat.v, flat.bounds, update.maximize, update.coupled,
                  update.decoupled_on, *numbers.values(),
                  *[p.array for p in params], *[p._grad.array for p in params])
        return True


def _adam_group_numbers(optimizer, i):
    """The host half of the step of param group ``i`` taken at once: the step count of
    each parameter advanced, their versions bumped, and the step's numbers."""
    group = optimizer.param_groups[i]
    flat = optimizer._moments[id(group)]
    step = flat.states[0]["step"] + 1
    for s in flat.states:
        s["step"] = step
    update = _AdamUpdate(group)
    count_writes(group["params"], update.writes)
    return update.numbers(step)


def _adam_group_settings(optimizer, i):
    """What chose the array work of ``_step_together``: the group's flags and the
    optimiser's layout (``Optimizer._layout``)."""
    return _flags(optimizer.param_groups[i]), optimizer._layout(i)


def _adam_flat(m, v, bounds, maximize, coupled, decoupled, beta1, beta2, eps, weight_decay,
               decay, step_size, bc2_sqrt, *arrays):
    """Adam's step of a param group at once (see ``Adam._step_together``) on raw arrays: the
    parameters (the first half of ``arrays``) and the flat moments ``m``, ``v`` changed in
    place, from the gradients (the second half); returns ``m``."""
    np = backend.np
    n = len(arrays) // 2
    params, grads = arrays[:n], arrays[n:]
    if decoupled:
        for p in params:
            p *= number_like(decay, p)
    if not (maximize or coupled) and backend.adam_into(params, grads, m, v, bounds, beta1,
                                                        beta2, step_size, bc2_sqrt, eps):
        return m  # (on the host: each parameter updated in one pass, the same bits)
    g = np.concatenate([a.reshape(-1) for a in grads])
    if maximize:
        np.negative(g, out=g)
    if coupled:
        wd = np.concatenate([p.reshape(-1) for p in params])
        wd *= number_like(weight_decay, wd)
        g += wd
    change = backend.adam(g, m, v, beta1, beta2, step_size, bc2_sqrt, eps, scratch=True)
    for p, (start, stop) in zip(params, bounds):
        p += change[start:stop].reshape(p.shape)
    return m


def _adam_param_numbers(optimizer, i, p):
    """The host half of the step of one parameter ``p`` of group ``i``: its step count
    advanced, its version bumped, and the step's numbers."""
    state = optimizer.state[p]
    state["step"] = step = state["step"] + 1
    update = _AdamUpdate(optimizer.param_groups[i])
    count_writes([p], update.writes)
    return update.numbers(step)


def _adam_param_settings(optimizer, i, p):
    """What chose the array work of one parameter's step: the group's flags and the
    optimiser's layout (``Optimizer._layout``)."""
    return _flags(optimizer.param_groups[i]), optimizer._layout(i)


def _flags(group):
    """(amsgrad, maximize, weight decay in the gradient, decoupled weight decay) of
    ``group``: what chooses Adam's array work."""
    decay = float(group["weight_decay"]) != 0
    decoupled = group["decoupled_weight_decay"]
    return group["amsgrad"], group["maximize"], decay and not decoupled, decay and decoupled


def _adam_param(p, g, m, v, maximize, coupled, decoupled, beta1, beta2, eps, weight_decay,
                decay, step_size, bc2_sqrt):
    """Adam's step of one parameter on raw arrays (without amsgrad): ``p`` and the moments
    ``m``, ``v`` changed in place; returns ``p``."""
    if maximize:
        g = -g
    if decoupled:
        p *= number_like(decay, p)
    elif coupled:
        g = g + number_like(weight_decay, p) * p
    p += backend.adam(g, m, v, beta1, beta2, step_size, bc2_sqrt, eps)
    return p




class _Moments:
    """Adam's moments of the parameters of one param group as two flat arrays, ``m`` and
    ``v``: each parameter's ``state["exp_avg"]`` and ``state["exp_avg_sq"]`` is a Tensor
    viewing its stretch of them (made from the state it had, zeros where it had none)."""

    def __init__(self, group, state):
        np = backend.np
        params = group["params"]
        self.group, self.params = group, list(params)
        dtype = params[0].array.dtype
        sizes = [p.array.size for p in params]
        starts = [0]
        for n in sizes:
            starts.append(starts[-1] + n)
        self.bounds = list(zip(starts[:-1], starts[1:]))
        self.m, self.v = np.zeros(starts[-1], dtype), np.zeros(starts[-1], dtype)
        self.views, self.states = [], []
        for p, (start, stop) in zip(params, self.bounds):
            s = state[p]
            self.states.append(s)
            s.setdefault("step", 0)  # (first, as the step of one parameter makes it)
            pair = []
            for key, flat in (("exp_avg", self.m), ("exp_avg_sq", self.v)):
                view = flat[start:stop].reshape(p.array.shape)
                if key in s:
                    view[...] = s[key].array
                s[key] = Tensor._make(view)
                pair.append(view)
            self.views.append(pair)

    def holds(self, group, states):
        """Whether ``group`` still has these parameters, whose state dicts (``states``) are
        still these, holding these views (``load_state_dict`` replaces them)."""
        params = group["params"]
        if group is not self.group or len(params) != len(self.params):
            return False
        for p, q, s, mine, (m, v) in zip(params, self.params, states, self.states, self.views):
            if p is not q or s is not mine or p.array.shape != m.shape or \
                    s.get("exp_avg") is None or s["exp_avg"].array is not m or \
                    s.get("exp_avg_sq") is None or s["exp_avg_sq"].array is not v:
                return False
        return True


class _AdamUpdate:
    """Adam's update of one parameter of a param group, ``update(optimizer, i, p, g,
    state)``, and the numbers of a step of the group: read from the group as Python floats,
    the bias corrections computed on the host in double precision (``numbers``)."""

    def __init__(self, group):
        self.lr, self.eps = float(group["lr"]), float(group["eps"])
        self.weight_decay = float(group["weight_decay"])
        self.beta1, self.beta2 = (float(b) for b in group["betas"])
        self.amsgrad, self.maximize = group["amsgrad"], group["maximize"]
        self.decoupled = group["decoupled_weight_decay"]
        self.flags = _flags(group)
        self.coupled, self.decoupled_on = self.flags[2:]
        self.writes = 2 if self.decoupled_on else 1  # in-place changes of each parameter

    def numbers(self, step):
        """The numbers of a step at step count ``step``, in ``_adam_param``'s order, with
        ``step_size = lr / (1 - beta1**step)``, ``bc2_sqrt = sqrt(1 - beta2**step)`` and
        AdamW's factor of p, ``decay = 1 - lr * weight_decay``."""
        return {"beta1": self.beta1, "beta2": self.beta2, "eps": self.eps,
                "weight_decay": self.weight_decay,
                "decay": 1.0 - self.lr * self.weight_decay,
                "step_size": self.lr / (1.0 - self.beta1 ** step),
                "bc2_sqrt": (1.0 - self.beta2 ** step) ** 0.5}

    def __call__(self, optimizer, i, p, g, state):
        _check_writable(p, "mul_" if self.decoupled_on else "add_")
        xp = backend.xp_of(p.array)
        numbers = per_step_numbers(xp, _adam_param_numbers, _adam_param_settings,
                                   optimizer, i, p)
        m, v = state["exp_avg"].array, state["exp_avg_sq"].array
        if not self.amsgrad:  # the moments and the update in one pass (one GPU kernel)
            on_arrays(_adam_param, p.array, g, m, v, self.maximize, self.coupled,
                      self.decoupled_on, *numbers.values())
            return
        n = numbers  # (Python floats: a step with amsgrad is replayed as a call)
        if self.maximize:
            g = -g
        if self.decoupled_on:
            p.array *= n["decay"]
        elif self.coupled:
            g = g + self.weight_decay * p.array
        beta1, beta2, eps = self.beta1, self.beta2, self.eps
        _lerp_(m, g, 1.0 - beta1)
        v *= beta2
        v += (1.0 - beta2) * g * g
        v = xp.maximum(state["max_exp_avg_sq"].array, v, out=state["max_exp_avg_sq"].array)
        denom = xp.sqrt(v)
        denom /= n["bc2_sqrt"]
        denom += eps
        update = -n["step_size"] * m  # torch's addcdiv_: p + (value * m) / denom
        update /= denom
        p.array += update


class AdamW(Adam):
    """AdamW (Loshchilov & Hutter, 2019): Adam whose weight decay shrinks the parameters
    directly, ``p = p * (1 - lr * weight_decay)``, instead of entering the gradient and
    its moments. PyTorch's ``torch.optim.AdamW``; see ``Adam`` for the rest of the update.

    Args: as ``Adam``, with ``weight_decay`` defaulting to 1e-2.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        for group in self.param_groups:  # as torch: an AdamW always decouples
            group["decoupled_weight_decay"] = True



def _lerp_(start, end, weight):
    """``start += weight * (end - start)`` in place, in the two forms torch's lerp_ uses
    (the second keeps the result exact at weight 1)."""
    if abs(weight) < 0.5:
        start += weight * (end - start)
    else:
        start[...] = end - (end - start) * (1.0 - weight)
