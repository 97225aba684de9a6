"""Writing files: with errors that say which file, and atomically.

A write or a close on a full disk raises ``OSError: [Errno 28] No space left on device``
without a file name, so whoever reports it cannot tell the user which file failed. Every
writer of the library and its programs writes inside ``naming(path)``. Checkpoints are
written by ``write_atomic``: a temporary file beside the path, synced, then renamed over it,
so a crash mid-write leaves the previous file intact.
"""
import contextlib
import errno
import os
import re
import secrets

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None


@contextlib.contextmanager
def naming(path):
    """Run a block that writes the file ``path``: an OSError that names no file is raised
    again naming ``path`` (errors that name a file, or have no errno, pass unchanged)."""
    try:
        yield
    except OSError as e:
        if e.filename is not None or e.errno is None:
            raise
        raise OSError(e.errno, e.strerror, os.fspath(path)) from None


class MissingDirectoryError(FileNotFoundError, RuntimeError):
    """``save`` to a path whose folder does not exist: a FileNotFoundError, as Python's
    ``open`` raises, and a RuntimeError, as ``torch.save`` raises."""


class PathIsDirectoryError(IsADirectoryError, RuntimeError):
    """``save`` to a path that is a folder: an IsADirectoryError, as Python's ``open``
    raises, and a RuntimeError, as ``torch.save`` raises."""


def write_atomic(path, payload):
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
    left behind (a save killed by SIGKILL or a power cut): files named as ``write_atomic``
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
