"""nn: layers, losses and functional ops built on minigrad Tensors (see the [nn] issue)."""
