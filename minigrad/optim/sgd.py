"""SGD: stochastic gradient descent with momentum, Nesterov momentum and weight decay."""
from .. import backend
from ..autograd import no_grad
from ..tensor import Tensor
from .optimizer import Optimizer, add_scaled_to, check_implementation
from ..compile.recorder import replayed_as_call


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

    @replayed_as_call  # mg.compile replays the whole call
    @no_grad()
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            self._check_step(group)
            lr, momentum = float(group["lr"]), float(group["momentum"])
            dampening, weight_decay = float(group["dampening"]), float(group["weight_decay"])
            maximize, nesterov = group["maximize"], group["nesterov"]
            for p in group["params"]:
                grad = p._grad
                if grad is None:
                    continue
                with backend.device_context(p.array):
                    g = grad.array
                    if maximize:
                        g = -g
                    if weight_decay != 0:  # g.add(p, alpha=weight_decay)
                        g = _scaled_sum(g, p.array, weight_decay)
                    if momentum != 0:
                        g = self._momentum(self.state[p], g, momentum, dampening, nesterov)
                    add_scaled_to(p, g, -lr)  # p.add_(g, alpha=-lr)
        return loss

    _may_be_none = ("momentum_buffer",)  # PyTorch saves one before the first step so

    def _state_keys(self, group):
        return ("momentum_buffer",) if group["momentum"] != 0 else ()

    @staticmethod
    def _momentum(state, g, momentum, dampening, nesterov):
        """Update the momentum buffer in place; return the direction to step along."""
        buf = state.get("momentum_buffer")
        if buf is None:
            buf = state["momentum_buffer"] = Tensor(g.copy())  # torch: grad.clone()
        else:
            buf.array *= momentum  # buf.mul_(momentum).add_(g, alpha=1 - dampening)
            backend.add_scaled(buf.array, buf.array, g, 1.0 - dampening)
        return _scaled_sum(g, buf.array, momentum) if nesterov else buf.array


def _scaled_sum(x, y, alpha):
    """x + alpha * y in a new array, rounded as PyTorch's ``add(alpha=)`` (once, in float32:
    see ``backend.add_scaled``)."""
    return backend.add_scaled(backend.xp_of(x).empty_like(x), x, y, alpha)
