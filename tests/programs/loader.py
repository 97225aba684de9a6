"""Runs a public PyTorch program's source, kept unchanged in a file beside this one, with
``torch`` bound to PyTorch or to minigrad: ``load("mingpt_model.py", minigrad)`` executes the
file in a new module in which ``import torch``, ``import torch.nn as nn``, ``from
torch.nn import functional as F``, ``from torch.utils.data.dataloader import DataLoader``
and the like import minigrad's modules of the same names (PyTorch's with ``torch``). The
program's imports of its own package (``from mingpt.utils import CfgNode``) are given in
``siblings``: the name imported and the module (loaded the same way) that it stands for.

A script that runs as it is loaded (a tutorial) can be given the names it would have made
from data left out (``given``), and be paused once (``pause``: the start of a line and a
function of the module, called after that line has run, to copy weights in, say)."""
import builtins
import sys
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent


def load(filename, lib, siblings=None, name=None, given=None, pause=None):
    """The module made by executing ``HERE / filename`` with ``torch`` as ``lib`` (the
    ``torch`` or the ``minigrad`` module)."""
    path = HERE / filename
    module = types.ModuleType(name or f"{lib.__name__}_{path.stem}")
    module.__file__ = str(path)
    scope = dict(builtins.__dict__, __import__=_importer(lib, siblings or {}))
    module.__dict__["__builtins__"] = scope
    module.__dict__.update(given or {})
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    parts = [lines]
    if pause is not None:
        at = next(i for i, line in enumerate(lines) if line.startswith(pause[0])) + 1
        parts = [lines[:at], ["\n"] * at + lines[at:]]  # (the line numbers kept)
    # (a dataclass looks its module up in sys.modules while the class is made)
    sys.modules[module.__name__] = module
    try:
        for i, part in enumerate(parts):
            if i:
                pause[1](module)
            exec(compile("".join(part), str(path), "exec"), module.__dict__)
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
    """Loads ``source``'s (a PyTorch module's, or a PyTorch state dict) state dict into
    ``target``, a module of ``lib`` (minigrad) on ``device``, so that both programs start
    from the same weights."""
    state = source if isinstance(source, dict) else source.state_dict()
    state = in_minigrads_names(state, set(target.state_dict()))
    state = {k: lib.tensor(v.detach().cpu().numpy(), device=device) for k, v in state.items()}
    target.load_state_dict(state)


def in_minigrads_names(state, names):
    """PyTorch's state dict with the keys of its attention and transformer layers in
    minigrad's names where ``names`` (the target's keys) has those instead: minigrad's
    MultiheadAttention keeps q_proj, k_proj and v_proj apart (PyTorch packs them into
    in_proj_weight and in_proj_bias), its transformer layers name their feed-forward block
    ffn and a decoder layer's cross attention cross_attn."""
    out = {}
    for name, value in state.items():
        if name in names:
            out[name] = value
            continue
        renamed = name.replace("multihead_attn.", "cross_attn.")
        renamed = renamed.replace("linear1.", "ffn.linear1.").replace("linear2.", "ffn.linear2.")
        if renamed.endswith(("in_proj_weight", "in_proj_bias")):
            prefix, kind = renamed.rsplit(".", 1)[0], renamed.rsplit("_", 1)[-1]
            for part, piece in zip("qkv", value.chunk(3)):
                out[f"{prefix}.{part}_proj.{kind}"] = piece
        else:
            out[renamed] = value
    return out
