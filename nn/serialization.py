"""Checkpoints on disk: ``save(state_dict, path)`` and ``load(path, device="cpu")``.

The format is safetensors (https://github.com/huggingface/safetensors): an 8-byte header
length, a JSON header naming each tensor's dtype, shape and byte range, then the raw
little-endian bytes. We use it rather than pickle (what ``torch.save`` writes) because

- it is an open format that PyTorch, JAX and NumPy users already read
  (``safetensors.torch.load_file(path)`` gives a ``state_dict`` PyTorch can load), and
- loading it never runs code: a pickle from an untrusted source can, a safetensors file
  is only parsed.

A checkpoint is a flat ``{name: Tensor}`` dict with the dotted names of
``Module.state_dict()``. Nested dicts are refused rather than flattened, because
``{"a": {"b": t}}`` and ``{"a.b": t}`` would write the same file and ``load`` could not tell
which one to give back. safetensors lays tensors out by dtype and name, so the order of
the names is kept in the header's (text-only) metadata and ``load`` restores it.

``save`` is atomic: it writes a temporary file next to ``path``, syncs it to disk and
renames it over ``path``, so a crash mid-write leaves the previous checkpoint intact.

Anything that is not a tensor (a training step, hyper-parameters, a random generator's
state) can travel in the same file as ``metadata``: a flat dict of str -> str, which is
what the safetensors header allows (store structured values as JSON text).
``load(path, with_metadata=True)`` gives it back.
"""
import json
import os
from collections.abc import Mapping

import numpy as np

from minigrad import backend
from minigrad.files import (MissingDirectoryError, PathIsDirectoryError,  # noqa: F401
                            write_atomic)
from minigrad.serialization import _ORDER_KEY, _RESERVED, _safetensors_numpy, _saved_order
from minigrad.tensor import Tensor


def save(state_dict, path, metadata=None):
    """Write ``state_dict`` (a flat dict of name -> Tensor) to ``path`` in safetensors format,
    with ``metadata`` (an optional flat dict of str -> str) in the file's header."""
    st_numpy = _safetensors_numpy()
    arrays = _host_arrays(state_dict)
    header = {**_checked_metadata(metadata), _ORDER_KEY: json.dumps(list(arrays))}
    payload = st_numpy.save(arrays, metadata=header)
    write_atomic(os.fspath(path), payload)


def load(path, device="cpu", *, with_metadata=False):
    """The dict of name -> Tensor saved at ``path``, in the saved order, on ``device``; with
    ``with_metadata``, the pair (that dict, the metadata dict of str -> str given to
    ``save``, empty if none)."""
    st_numpy = _safetensors_numpy()
    device = backend.Device(device)
    with open(path, "rb") as f:  # FileNotFoundError and friends pass through as they are
        raw = f.read()
    try:
        arrays = st_numpy.load(raw)
    except KeyError as e:  # safetensors.numpy has no NumPy dtype for it (BF16, F8, ...)
        raise ValueError(f"{path}: not a valid safetensors checkpoint (dtype {e.args[0]} is "
                         "not supported by minigrad)") from e
    except Exception as e:  # SafetensorError: truncated, not safetensors, bad header
        raise ValueError(f"{path}: not a valid safetensors checkpoint ({e})") from e
    header_len = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + header_len])  # valid: safetensors has just parsed it
    metadata = header.pop(_RESERVED, None) or {}
    tensors = {name: Tensor(arrays[name], device=device)
               for name in _saved_order(header, metadata, arrays)}
    if with_metadata:
        return tensors, {k: v for k, v in metadata.items() if k != _ORDER_KEY}
    return tensors


# --- helpers --------------------------------------------------------------------------------

def _host_arrays(state_dict):
    """name -> contiguous host array, or a TypeError naming the first bad key or value."""
    if not isinstance(state_dict, Mapping):
        raise TypeError(f"save: expected a dict of name -> Tensor, got "
                        f"{type(state_dict).__name__}")
    arrays = {}
    for name, value in state_dict.items():
        if not isinstance(name, str):
            raise TypeError(f"save: keys must be str, got {name!r} of type {type(name).__name__}")
        if name == _RESERVED:
            raise ValueError(f"save: the key {_RESERVED!r} is reserved by the safetensors format")
        if isinstance(value, Mapping):
            raise TypeError(f"save: key {name!r} holds a nested {type(value).__name__}; "
                            "checkpoints are flat, so join the names with '.' first")
        if not isinstance(value, Tensor):
            raise TypeError(f"save: key {name!r} holds a {type(value).__name__}, "
                            "but checkpoints hold only Tensors")
        # safetensors copies raw memory, so a strided view (x.T) must be made contiguous
        # (np.ascontiguousarray would turn a 0-d array into a 1-d one)
        arrays[name] = np.asarray(value.numpy(), order="C")
    return arrays


def _checked_metadata(metadata):
    """``metadata`` as a dict of str -> str, or a TypeError naming the first bad entry."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise TypeError(f"save: metadata must be a dict of str -> str, got "
                        f"{type(metadata).__name__}")
    for key, value in metadata.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"save: metadata must map str to str (store other values as JSON "
                            f"text), got {key!r}: {type(value).__name__}")
        if key == _ORDER_KEY:
            raise ValueError(f"save: the metadata key {_ORDER_KEY!r} is reserved by minigrad")
    return dict(metadata)
