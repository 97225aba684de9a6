"""Runs a public PyTorch program's source, kept unchanged in a file beside this one, with
``torch`` bound to PyTorch or to minigrad: ``load("mingpt_model.py", minigrad)`` executes the
file in a new module in which ``import torch``, ``import torch.nn as nn``, ``from
torch.nn import functional as F``, ``from torch.utils.data.dataloader import DataLoader``
and the like import minigrad's modules of the same names (PyTorch's with ``torch``). The
program's imports of its own package (``from mingpt.utils import CfgNode``) are given in
``siblings``: the name imported and the module (loaded the same way) that it stands for."""
import builtins
import sys
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent


def load(filename, lib, siblings=None, name=None):
    """The module made by executing ``HERE / filename`` with ``torch`` as ``lib`` (the
    ``torch`` or the ``minigrad`` module)."""
    path = HERE / filename
    module = types.ModuleType(name or f"{lib.__name__}_{path.stem}")
    module.__file__ = str(path)
    scope = dict(builtins.__dict__, __import__=_importer(lib, siblings or {}))
    module.__dict__["__builtins__"] = scope
    # (a dataclass looks its module up in sys.modules while the class is made)
    sys.modules[module.__name__] = module
    try:
        exec(compile(path.read_text(), str(path), "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
    return module


def _importer(lib, siblings):
    real = builtins.__import__

    def import_(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and name in siblings:
            return siblings[name]
        if level == 0 and (name == "torch" or name.startswith("torch.")) and \
                lib.__name__ != "torch":
            full = lib.__name__ + name[len("torch"):]
            real(full, globals, locals, fromlist, level)
            return sys.modules[full] if fromlist else lib
        return real(name, globals, locals, fromlist, level)
    return import_


def copy_weights(source, target, lib, device="cpu"):
    """Loads ``source``'s (a PyTorch module's) state dict into ``target``, a module of
    ``lib`` (minigrad) on ``device``, so that both programs start from the same weights."""
    state = {k: lib.tensor(v.detach().cpu().numpy(), device=device)
             for k, v in source.state_dict().items()}
    target.load_state_dict(state)
