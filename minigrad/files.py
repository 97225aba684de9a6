"""Writing files with errors that say which file: a write or a close on a full disk raises
``OSError: [Errno 28] No space left on device`` without a file name, so whoever reports it
cannot tell the user which file failed. Every writer of the library and its programs writes
inside ``naming(path)``."""
import contextlib
import os


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
