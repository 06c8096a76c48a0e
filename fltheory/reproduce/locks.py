"""Per-experiment locks, so reproduce processes sharing a directory compute
each experiment once.

A lock is ``fcntl.flock`` on ``DIR/.NAME.lock``; the kernel releases it when
the holder dies (even by ``kill -9``), so a crash never leaves a stuck lock.
The file is removed on release; a process that opened the old file before it
was removed notices (the path no longer names the inode it locked) and
retries on the new file, so two holders are impossible.  Over NFS, Linux maps
``flock`` to POSIX byte-range locks, which NFS serves.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import time
from collections.abc import Iterator
from pathlib import Path

from fltheory.errors import InvalidProblemError

from . import _arguments as arg

__all__ = ["exclusive", "lock_path"]


def lock_path(directory: Path, stem: str) -> Path:
    """``directory/.STEM.lock`` (``directory`` a path, ``stem`` a non-empty str without "/";
    InvalidProblemError otherwise)."""
    stem = arg.text("stem", stem)
    if "/" in stem or "\0" in stem:
        raise InvalidProblemError(f"stem must be a file-name stem (no '/' or NUL), got {stem!r}")
    return arg.path("directory", directory) / f".{stem}.lock"


def exclusive(directory: Path, stem: str, *, poll: float = 0.05) -> contextlib.AbstractContextManager[bool]:
    """Hold the lock of ``stem`` in ``directory`` (``with exclusive(d, s) as waited:``).  Yields
    ``waited``: True when another process held it first (its result may now be fresh).  The
    arguments are checked at the call: ``poll`` (seconds between retries) must be a finite
    number in (0, 60]."""
    path = lock_path(directory, stem)
    if (isinstance(poll, bool) or not isinstance(poll, (int, float)) or not math.isfinite(poll)
            or not 0 < poll <= 60):
        raise InvalidProblemError(f"poll must be a number of seconds in (0, 60], got {arg.short(poll)}")
    return _exclusive(path, float(poll))


@contextlib.contextmanager
def _exclusive(path: Path, poll: float) -> Iterator[bool]:
    waited = False
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                waited = True
                fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                same = os.fstat(fd).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
            if not same:            # the holder removed the file while we waited: lock the new one
                os.close(fd)
                fd = -1
                time.sleep(poll)
                continue
            try:
                yield waited
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            return
        finally:
            if fd >= 0:
                os.close(fd)
