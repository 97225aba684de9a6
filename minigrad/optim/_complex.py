"""Complex parameters, as PyTorch's optimisers step them: their real and imaginary parts."""


def real_views(*arrays):
    """Each complex array of ``arrays`` as a real one over the same memory (its real and
    imaginary parts side by side), as PyTorch's optimisers step a complex parameter through
    ``torch.view_as_real``; real arrays and None as they are."""
    return [a.view(a.real.dtype) if a is not None and a.dtype.kind == "c" else a
            for a in arrays]
