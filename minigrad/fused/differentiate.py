"""Second derivatives of a fused op (its composite, differentiated by the engine), and
what a fused op's jvp reads of its forward."""
from ..autograd import grad as gradients
from ..autograd.forward_ad import tangent_by  # noqa: F401  (the composite's tangent)
from ..autograd.grad_mode import enable_grad
from ..autograd.graph import TensorBase


def composite_grads(composite, inputs, grad, needs):
    """The gradients of ``composite(*inputs)`` weighted by ``grad``, for the inputs that
    ``needs`` marks, as a graph of their own (what a fused op's backward returns under
    ``create_graph``, so its second derivatives are the composite's)."""
    with enable_grad():
        # a view of each: a tensor passed twice gets each use's gradient apart
        views = [t.view(t.shape) if n else t for t, n in zip(inputs, needs)]
        out = composite(*views)
        wanted = [v for v, n in zip(views, needs) if n]
        found = iter(gradients(out, wanted, grad, create_graph=True, allow_unused=True))
    return tuple(next(found) if n else None for n in needs)


def saved_array(ctx, i):
    """Item ``i`` of what forward saved, as forward saved it (an array or an object),
    whether or not the op was recorded (jvp runs either way)."""
    if ctx.saved is not None:
        return ctx.saved[i].array
    item = ctx._to_save[i]
    return item.array if isinstance(item, TensorBase) else item
