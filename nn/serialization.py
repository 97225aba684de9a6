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
import errno
import json
import os
import re
import secrets
from collections.abc import Mapping

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

import numpy as np

from minigrad import backend
from minigrad.tensor import Tensor

_ORDER_KEY = "minigrad.key_order"  # header metadata: the names in state-dict order
_RESERVED = "__metadata__"  # safetensors' own header entry, so no tensor may use the name


def save(state_dict, path, metadata=None):
    """Write ``state_dict`` (a flat dict of name -> Tensor) to ``path`` in safetensors format,
    with ``metadata`` (an optional flat dict of str -> str) in the file's header."""
    st_numpy = _safetensors_numpy()
    arrays = _host_arrays(state_dict)
    header = {**_checked_metadata(metadata), _ORDER_KEY: json.dumps(list(arrays))}
    payload = st_numpy.save(arrays, metadata=header)
    _write_atomic(os.fspath(path), payload)


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

def _safetensors_numpy():
    try:
        import safetensors.numpy
    except ImportError as e:
        raise ImportError("nn.save / nn.load need the safetensors package: "
                          "`pip install safetensors`") from e
    return safetensors.numpy


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


class MissingDirectoryError(FileNotFoundError, RuntimeError):
    """``save`` to a path whose folder does not exist: a FileNotFoundError, as Python's
    ``open`` raises, and a RuntimeError, as ``torch.save`` raises."""


class PathIsDirectoryError(IsADirectoryError, RuntimeError):
    """``save`` to a path that is a folder: an IsADirectoryError, as Python's ``open``
    raises, and a RuntimeError, as ``torch.save`` raises."""


def _write_atomic(path, payload):
    """Write ``payload`` to a temporary file beside ``path``, fsync it, then rename it onto
    ``path``: readers see the old file or the new one, never half of one. An error of the
    write (a full disk, a file over the size limit, a read-only folder) is raised as the
    OSError it is, naming ``path`` (the temporary file is removed, ``path`` untouched)."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        problem = "is not a directory" if os.path.exists(directory) else "does not exist"
        raise MissingDirectoryError(errno.ENOENT, f"save: the parent directory {directory!r} "
                                    f"{problem}", path)
    if os.path.isdir(path):
        raise PathIsDirectoryError(errno.EISDIR, "save: the path is a directory, not a file",
                                   path)
    name = os.path.basename(path)
    _remove_stale_temporaries(directory, name)
    tmp = os.path.join(directory, f".{name}.{secrets.token_hex(_TMP_HEX // 2)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(tmp, flags, 0o666)  # 0o666 less the umask, as open() would create it
        try:
            _lock(fd)  # held until closed: a save in progress, not a stale temporary
            _write_all(fd, payload)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException as e:  # KeyboardInterrupt too: never leave a temporary file behind
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError) and e.errno is not None:
            raise OSError(e.errno, e.strerror, path) from None  # the file, not the temporary
        raise
    _fsync_directory(directory)


_TMP_HEX = 12  # the hex digits of a temporary file's name: .<name>.<hex>.tmp


def _lock(fd):
    """An exclusive lock on the open temporary file ``fd`` (POSIX; the system drops it when
    the process ends, however it ends)."""
    if fcntl is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # a file system without locks: its temporaries are never removed
            pass


def _remove_stale_temporaries(directory, name):
    """Remove the temporary files of earlier saves of ``name`` in ``directory`` that were
    left behind (a save killed by SIGKILL or a power cut): files named as ``_write_atomic``
    names them, ``.<name>.<12 hex digits>.tmp``, that no process holds locked (a save in
    progress holds its own). Nothing else is touched; without ``fcntl`` (Windows) nothing."""
    if fcntl is None:
        return
    pattern = re.compile(rf"\.{re.escape(name)}\.[0-9a-f]{{{_TMP_HEX}}}\.tmp")
    try:
        candidates = [n for n in os.listdir(directory) if pattern.fullmatch(n)]
    except OSError:
        return
    for candidate in candidates:
        stale = os.path.join(directory, candidate)
        try:
            fd = os.open(stale, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # refused while a save writes it
            if os.path.isfile(stale):
                os.unlink(stale)
        except OSError:
            pass
        finally:
            os.close(fd)


def _write_all(fd, payload):
    view = memoryview(payload)
    while view:  # os.write may write less than asked
        view = view[os.write(fd, view):]


def _fsync_directory(directory):
    """Make the rename itself durable (POSIX only; Windows cannot open a directory)."""
    if os.name != "posix":
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
