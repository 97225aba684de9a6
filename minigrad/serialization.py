"""``minigrad.save(obj, f)`` and ``minigrad.load(f)``: PyTorch's ``torch.save`` and
``torch.load`` for what they are mostly used for, on safetensors rather than pickle.

``obj`` may be a tensor, or dicts (``OrderedDict`` too), lists and tuples, nested, of
tensors, ``None``, bools, ints, floats (nan and inf too), strs, dtypes and devices: a
model's or an optimiser's ``state_dict``, or a training checkpoint such as
``{"model": ..., "optimizer": ..., "iter_num": 5, "config": {...}}``. Anything else (a
module, a function, a NumPy array) is refused with a TypeError naming where it is.

The file is a safetensors file (see ``nn/serialization.py``): the tensors' bytes, each
named by the first place it appears (``"model/fc.weight"``), and in the header's text
metadata a readable JSON index of the structure. Loading parses these and never runs code,
so ``weights_only`` changes nothing (``False`` is accepted, and loads the same values).

As with PyTorch:

- a tensor that appears twice (tied weights) is written once and loads back as one tensor;
  tensors that are views of one CPU array (``x`` and ``x.T``, or slices of one buffer)
  share one copy of that array and load back as views of one array (unless they show less
  than the array holds: then each is written on its own, and a few rows of a large array
  do not bring the whole array with them, as they do in PyTorch); on a GPU, views load as
  separate arrays;
- ``requires_grad`` is kept (a non-leaf loads as a leaf that requires grad), and an
  ``nn.Parameter`` loads back as one;
- each tensor loads onto the device it was saved from, unless ``map_location`` says
  otherwise: a device (``"cpu"``, ``"cuda:0"``), a dict from saved location to new one
  (``{"cuda:0": "cpu"}``), or a callable ``(tensor, location) -> tensor or None`` (it gets
  the loaded CPU tensor where PyTorch passes a storage; None keeps the saved location).

A path is written atomically (a temporary file renamed into place); a file object gets the
bytes at its position. A file that is not one of these (a PyTorch pickle, a truncated or
damaged file) raises ``CheckpointError`` (a RuntimeError and a ValueError) in one line
naming the file.
"""
import json
import math
import os
from collections import OrderedDict

import numpy as np

from . import backend
from .backend import Device, DeviceError
from .files import write_atomic
from .tensor import Tensor

FORMAT = "minigrad.save"  # the header metadata's "format"
VERSION = 1
_INDEX_KEY = "minigrad.index"  # the header metadata entry that holds the JSON index
# nn.Parameter, which nn (built on this module) hands over when it loads: a tensor of this
# class is saved with "parameter": true and loads back as one
parameter_class = None


class CheckpointError(RuntimeError, ValueError):
    """A file that ``load`` cannot read: not a minigrad checkpoint, truncated or damaged."""


# --- save ------------------------------------------------------------------------------------

def save(obj, f, pickle_module=None, pickle_protocol=None,
         _use_new_zipfile_serialization=True, _disable_byteorder_record=False):
    """Write ``obj`` to ``f`` (a path or a binary file object). The other arguments are
    accepted for PyTorch's signature and change nothing: nothing is pickled."""
    st_numpy = _safetensors_numpy()
    writer = _Writer()
    tree = writer.encode(obj, "")
    writer.finish()
    index = {"format": FORMAT, "version": VERSION, "tensors": writer.entries, "object": tree}
    metadata = {"format": FORMAT, _INDEX_KEY: json.dumps(index, allow_nan=False)}
    payload = st_numpy.save(writer.arrays, metadata=metadata)
    if hasattr(f, "write"):
        f.write(payload)
    else:
        write_atomic(os.fspath(f), payload)


class _Writer:
    """Turns an object into the JSON tree (``encode``), then the tensors into their index
    entries and the arrays to write (``finish``)."""

    def __init__(self):
        self.entries, self.arrays = [], {}  # tensor entries of the index; name -> host array
        self._tensors, self._wheres = [], []  # each tensor once, and where it first appears
        self._by_tensor = {}  # id(Tensor) -> its position

    def encode(self, x, where):
        if x is None or type(x) in (bool, int, str):
            return x
        if isinstance(x, Tensor):
            return {"tensor": self._tensor(x, where)}
        if isinstance(x, (bool, np.bool_)):
            return bool(x)
        if isinstance(x, Device):  # (a str: test it first)
            return {"device": str(x)}
        if isinstance(x, (int, np.integer)):
            return int(x)
        if isinstance(x, (float, np.floating)):
            x = float(x)
            return x if math.isfinite(x) else {"float": repr(x)}
        if isinstance(x, str):
            return str(x)
        if isinstance(x, np.dtype):
            return {"dtype": x.name}
        if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
            kind = "list" if isinstance(x, list) else "tuple"
            return {kind: [self.encode(v, f"{where}/{i}") for i, v in enumerate(x)]}
        if isinstance(x, dict):
            kind = "OrderedDict" if isinstance(x, OrderedDict) else "dict"
            return {kind: [[self._key(k, where), self.encode(v, f"{where}/{k}")]
                           for k, v in x.items()]}
        raise TypeError(f"save: cannot save a {type(x).__name__} (at {where or 'the top'}): "
                        "a checkpoint holds tensors, numbers, str, None, dtypes, devices and "
                        "dicts, lists and tuples of them")

    def _key(self, k, where):
        if k is None or isinstance(k, (bool, int, float, str, tuple, np.number)):
            return self.encode(k, f"{where}/<key>")
        raise TypeError(f"save: cannot save a dict key of type {type(k).__name__} "
                        f"(at {where or 'the top'})")

    def _tensor(self, t, where):
        """The position of ``t`` (the same for every place it appears)."""
        if id(t) not in self._by_tensor:
            self._by_tensor[id(t)] = len(self._tensors)
            self._tensors.append(t)
            self._wheres.append(where)
        return self._by_tensor[id(t)]

    def finish(self):
        """Fill ``entries`` and ``arrays``: a tensor's own bytes, or where two or more
        tensors are views of one CPU array, that array once and each of them as a view."""
        raws = [_raw(t) for t in self._tensors]
        roots = [_root(a) for a in raws]
        viewers, viewed = {}, {}  # id(root) -> how many tensors view it, their elements
        for a, root in zip(raws, roots):
            if root is not None:
                viewers[id(root)] = viewers.get(id(root), 0) + 1
                viewed[id(root)] = viewed.get(id(root), 0) + a.size
        root_names = {}
        for t, a, where, root in zip(self._tensors, raws, self._wheres, roots):
            entry = {"requires_grad": bool(t.requires_grad), "device": str(t.device)}
            if parameter_class is not None and isinstance(t, parameter_class):
                entry["parameter"] = True
            # a root is shared when it is not mostly bytes that no tensor here shows (a
            # few rows of a large array are written on their own, not with the array)
            if root is not None and viewers[id(root)] > 1 and viewed[id(root)] >= root.size:
                if id(root) not in root_names:
                    root_names[id(root)] = self._name(where)
                    self.arrays[root_names[id(root)]] = \
                        root if root.flags.c_contiguous else np.ravel(root, order="K")
                itemsize = root.itemsize
                entry.update(storage=root_names[id(root)], shape=list(a.shape),
                             offset=(a.ctypes.data - root.ctypes.data) // itemsize,
                             strides=[s // itemsize for s in a.strides])
            else:
                # safetensors copies raw memory, so a strided view must be made contiguous
                # (np.ascontiguousarray would turn a 0-d array into a 1-d one)
                entry["storage"] = self._name(where)
                self.arrays[entry["storage"]] = np.asarray(t.numpy(), order="C")
            self.entries.append(entry)

    def _name(self, where):
        """A readable, unused name for an array: the path where it first appears."""
        name = where.lstrip("/") or "tensor"
        if name == "__metadata__":  # safetensors' own header entry
            name = "_" + name
        unique, n = name, 1
        while unique in self.arrays:
            unique, n = f"{name}#{n}", n + 1
        return unique


def _raw(t):
    """The backend array (NumPy or CuPy) that holds ``t``'s values."""
    return t.array


def _root(a):
    """The array that owns ``a``'s memory (``a`` itself, or the base it views), when
    ``load`` can make ``a`` again as a view of it (same dtype, the root contiguous); None
    otherwise (a GPU array, or an odd view: it is written on its own)."""
    if type(a) is not np.ndarray:
        return None
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    if root.dtype != a.dtype or root.size == 0 or \
            not (root.flags.c_contiguous or root.flags.f_contiguous):
        return None
    offset = a.ctypes.data - root.ctypes.data
    if offset % a.itemsize or any(s % a.itemsize for s in a.strides):
        return None
    return root


# --- load ------------------------------------------------------------------------------------

def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None,
         **pickle_load_args):
    """The object saved in ``f`` (a path or a binary file object), its tensors placed as
    ``map_location`` says (see the module docstring). ``weights_only`` and ``mmap`` are
    accepted for PyTorch's signature, as are ``pickle_load_args``; nothing is ever
    unpickled."""
    if pickle_module is not None:
        raise TypeError("load: pickle_module is not supported: minigrad never unpickles")
    name = _file_name(f)
    if hasattr(f, "read"):
        raw = f.read()
    else:
        with open(f, "rb") as file:  # FileNotFoundError and friends pass through as they are
            raw = file.read()
    arrays, index = _parse(raw, name)
    try:
        tensors = [_array(entry, arrays) for entry in index["tensors"]]
        reader = _Reader(index["tensors"], tensors, map_location)
        return reader.decode(index["object"])
    except DeviceError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        raise CheckpointError(f"{name}: damaged minigrad checkpoint index "
                              f"({type(e).__name__}: {e})") from None


def _file_name(f):
    if hasattr(f, "read"):
        return repr(getattr(f, "name", None) or f"<{type(f).__name__}>")
    return repr(os.fspath(f))


def _parse(raw, name):
    """The arrays of safetensors bytes ``raw`` and the index in its metadata; a
    CheckpointError naming the file otherwise. A safetensors file without the index (one
    written by ``nn.save`` or another tool) loads as its flat dict of name -> tensor."""
    try:
        arrays = _safetensors_numpy().load(raw)
        header = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])
    except Exception as e:  # SafetensorError: truncated, not safetensors, a bad header
        # (only now: a safetensors file's first bytes, its header's length, can be anything)
        if raw[:4] == b"PK\x03\x04" or raw[:1] == b"\x80":  # a zip (torch.save) or a pickle
            raise CheckpointError(
                f"{name}: not a minigrad checkpoint: it looks like a PyTorch (pickle) file, "
                "which minigrad never unpickles; in PyTorch, save the state dict with "
                "safetensors.torch.save_file instead") from None
        message = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise CheckpointError(f"{name}: not a valid minigrad checkpoint ({message})") from None
    metadata = header.pop("__metadata__", None) or {}
    if _INDEX_KEY not in metadata:
        order = _saved_order(header, metadata, arrays)
        tensors = [{"storage": k, "requires_grad": False, "device": "cpu"} for k in order]
        tree = {"OrderedDict": [[k, {"tensor": i}] for i, k in enumerate(order)]}
        return arrays, {"tensors": tensors, "object": tree}
    try:
        index = json.loads(metadata[_INDEX_KEY])
    except ValueError:
        index = None
    if not isinstance(index, dict) or index.get("format") != FORMAT \
            or not isinstance(index.get("tensors"), list) or "object" not in index:
        raise CheckpointError(f"{name}: damaged minigrad checkpoint index")
    version = index.get("version", VERSION)
    if not isinstance(version, int) or version > VERSION:
        raise CheckpointError(f"{name}: written by a newer minigrad (format version "
                              f"{version!r}; this one reads {VERSION})")
    return arrays, index


def _array(entry, arrays):
    """The host array of one tensor entry: its own array, or a view of a shared buffer
    (checked to lie inside the buffer, since NumPy's ``as_strided`` does not check)."""
    buffer = arrays[entry["storage"]]
    if "strides" not in entry:
        return buffer if buffer.flags.writeable else buffer.copy()
    shape, strides, offset = entry["shape"], entry["strides"], int(entry["offset"])
    if len(shape) != len(strides) or any(int(s) < 0 for s in shape):
        raise ValueError(f"the view of {entry['storage']!r} has a bad shape or strides")
    if all(int(s) > 0 for s in shape):
        low = offset + sum(min(0, (n - 1) * s) for n, s in zip(shape, strides))
        high = offset + sum(max(0, (n - 1) * s) for n, s in zip(shape, strides))
        if low < 0 or high >= buffer.size:
            raise ValueError(f"the view of {entry['storage']!r} lies outside its buffer")
    if not buffer.flags.writeable:
        buffer = arrays[entry["storage"]] = buffer.copy()  # one copy, shared by its views
    itemsize, buffer = buffer.itemsize, buffer.reshape(-1)  # (C-contiguous: a view)
    return np.lib.stride_tricks.as_strided(
        buffer[offset:] if offset < buffer.size else buffer[:0], shape=tuple(shape),
        strides=tuple(int(s) * itemsize for s in strides))


class _Reader:
    """Turns the JSON tree back into the object, each tensor made once."""

    def __init__(self, entries, arrays, map_location):
        self.entries, self.arrays, self.map_location = entries, arrays, map_location
        self.tensors = {}  # position -> the loaded Tensor

    def decode(self, node):
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        ((kind, value),) = node.items()
        if kind == "tensor":
            return self._tensor(int(value))
        if kind == "list":
            return [self.decode(v) for v in value]
        if kind == "tuple":
            return tuple(self.decode(v) for v in value)
        if kind in ("dict", "OrderedDict"):
            pairs = ((self._key(k), self.decode(v)) for k, v in value)
            return OrderedDict(pairs) if kind == "OrderedDict" else dict(pairs)
        if kind == "float":
            return float(value)
        if kind == "dtype":
            return np.dtype(value)
        if kind == "device":
            return Device(value)
        raise ValueError(f"unknown entry {kind!r}")

    def _key(self, node):
        key = self.decode(node)
        return tuple(key) if isinstance(key, list) else key

    def _tensor(self, i):
        if i in self.tensors:
            return self.tensors[i]
        entry = self.entries[i]
        array = _placed(self.arrays[i], str(entry.get("device", "cpu")), self.map_location)
        t = Tensor._make(array)
        if entry.get("parameter"):
            t = parameter_class(t, requires_grad=bool(entry["requires_grad"]))
        elif entry.get("requires_grad"):
            t.requires_grad_(True)
        self.tensors[i] = t
        return t


def _placed(array, location, map_location):
    """``array`` (on the host) on the device that ``map_location`` gives for a tensor saved
    on ``location``."""
    if callable(map_location):
        moved = map_location(Tensor._make(array), location)
        if moved is not None:
            return _raw(moved) if isinstance(moved, Tensor) else _to(array, Device(moved))
        target = location
    elif isinstance(map_location, dict):
        target = map_location.get(location, location)
    else:
        target = location if map_location is None else map_location
    return _to(array, Device(target))


def _to(array, device):
    if device.type == "cuda" and not backend.cuda_is_available():
        raise DeviceError("load: attempting to place a tensor on a CUDA device, but "
                          "minigrad.cuda.is_available() is False; on a CPU-only machine use "
                          "load(f, map_location='cpu')")
    return backend.to_device(array, device)


# --- safetensors, shared with nn.save and nn.load ------------------------------------------

_ORDER_KEY = "minigrad.key_order"  # header metadata: the names in state-dict order
_RESERVED = "__metadata__"  # safetensors' own header entry, so no tensor may use the name


def _safetensors_numpy():
    try:
        import safetensors.numpy
    except ImportError as e:
        raise ImportError("saving and loading checkpoints needs the safetensors package: "
                          "`pip install safetensors`") from e
    return safetensors.numpy


def _saved_order(header, metadata, arrays):
    """The names in the order ``save`` was given them; for files written by other tools
    (no order in the metadata), the order of the tensors' bytes in the file (``header``:
    the file's tensor entries)."""
    try:
        names = json.loads(metadata.get(_ORDER_KEY, "null"))
    except ValueError:
        names = None
    if isinstance(names, list) and sorted(names) == sorted(arrays):
        return names
    return sorted(header, key=lambda name: header[name]["data_offsets"][0])
