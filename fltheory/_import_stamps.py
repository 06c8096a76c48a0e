"""Which source files this process has imported, and whether they changed on disk since.

``fltheory reproduce`` keys a stored result by the sha256 of the files of the
experiment's import closure (:mod:`fltheory.reproduce.keys`).  Comparing files
is not enough in a long-lived process (a notebook, ``reproduce(jobs=1)`` called
twice, a Dask worker): a module imported before its file was edited still runs
the old code, while the key hashes the new file, so a result of the old code
would be stored as fresh.  This module closes that gap, and the one of cached
bytecode that Python still loads after a same-second, same-length edit of its
source (Python checks a ``.pyc`` against the source's whole seconds and size).

On ``import fltheory`` a finder is put first on :data:`sys.meta_path`.  It finds
nothing itself: it asks the finders after it and, when the module found is a
``.py`` file, records the file's stamp (modification time in nanoseconds and
size) at that moment, i.e. when the import system reads the file.  Modules
already imported when the finder is installed (``fltheory`` itself and
anything imported before it) are stamped at installation.
:func:`changed_since_import` then names the modules whose file no longer has the
stamp of its import.  A stamp change means the file may hold other code than
the process runs; a file rewritten with the same bytes (``touch``) also counts
as changed: the check errs towards refusing, never towards storing.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from collections.abc import Iterable, Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType

__all__ = ["changed_since_import", "install", "record"]

#: module name -> (source path, (st_mtime_ns, st_size) when the module's file was found)
_STAMPS: dict[str, tuple[str, tuple[int, int]]] = {}
_LOCK = threading.Lock()


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def record(name: str, path: str | os.PathLike[str]) -> None:
    """Stamp the source file ``path`` of module ``name`` now: for a module loaded without the
    import system's finders (``spec_from_file_location`` + ``exec_module``); call it before the
    module's code is executed, so that a later edit is seen as a change."""
    _record(name, os.fspath(path))


def _record(name: str, path: str | None) -> None:
    if not path or not path.endswith(".py"):
        return
    stamp = _stamp(path)
    if stamp is not None:
        with _LOCK:
            _STAMPS[name] = (path, stamp)


def _ask(finder: object, fullname: str, path: Sequence[str] | None,
         target: ModuleType | None) -> ModuleSpec | None:
    """What ``finder`` answers for ``fullname``, as the import system would ask it: through
    ``find_spec``, or, before Python 3.12, through a legacy finder's ``find_module``."""
    find = getattr(finder, "find_spec", None)
    if find is not None:
        spec: ModuleSpec | None = find(fullname, path, target)
        return spec
    find_module = getattr(finder, "find_module", None)
    if find_module is None or sys.version_info >= (3, 12):     # 3.12 ignores find_module
        return None
    loader = find_module(fullname, path)
    if loader is None:
        return None
    return importlib.util.spec_from_loader(fullname, loader)


class _StampingFinder(MetaPathFinder):
    """Delegates to the finders after it on ``sys.meta_path`` and stamps the source file found."""

    def __init__(self) -> None:
        self._active = threading.local()

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if getattr(self._active, "on", False):          # a finder below imports something: no recursion
            return None
        self._active.on = True
        try:
            spec = None
            for finder in list(sys.meta_path):
                if finder is self:
                    continue
                spec = _ask(finder, fullname, path, target)
                if spec is not None:
                    break
        finally:
            self._active.on = False
        if spec is not None and spec.has_location:
            _record(fullname, spec.origin)
        return spec


_FINDER: list[_StampingFinder] = []


def install() -> None:
    """Put the stamping finder first on ``sys.meta_path`` (once per process) and stamp the
    modules imported so far."""
    with _LOCK:
        if _FINDER and _FINDER[0] in sys.meta_path:
            return
        finder = _StampingFinder()
        _FINDER[:] = [finder]
    for name, module in list(sys.modules.items()):
        if name not in _STAMPS:
            _record(name, getattr(module, "__file__", None))
    sys.meta_path.insert(0, finder)


def changed_since_import(names: Iterable[str]) -> list[str]:
    """The names among ``names`` of modules this process has imported whose source file changed
    (another stamp, or gone) since it was read.  Modules not imported, or not stamped (imported
    through a finder placed before ours, or not from a ``.py`` file), are not reported.  A module
    imported before ``fltheory`` is stamped when ``fltheory`` is imported, so an edit made
    between the two goes unseen."""
    changed = []
    for name in names:
        entry = _STAMPS.get(name)
        if entry is None or name not in sys.modules:
            continue
        path, stamp = entry
        if getattr(sys.modules[name], "__file__", None) != path:
            continue                                    # replaced by a module from elsewhere: not ours
        if _stamp(path) != stamp or _stale_bytecode(path, stamp):
            changed.append(name)
    return sorted(changed)


def _stale_bytecode(path: str, stamp: tuple[int, int]) -> bool:
    """True when the cached bytecode of ``path`` passes the import system's check against the
    source (the same modification second and size in its header, so it was what ran) but was
    written before the source's last modification: an edit within the same second that kept
    the file's length leaves bytecode of the old code that Python still loads, while the key
    hashes the new file.  Hash-based ``.pyc`` files are checked by content and never reported."""
    try:
        cached = importlib.util.cache_from_source(path)
        with open(cached, "rb") as handle:
            header = handle.read(16)
        written = os.stat(cached).st_mtime_ns
    except (OSError, NotImplementedError, ValueError):
        return False                                    # no bytecode: the source itself was compiled
    if len(header) < 16 or header[:4] != importlib.util.MAGIC_NUMBER:
        return False
    if int.from_bytes(header[4:8], "little") != 0:      # hash-based: validated by content (or unchecked)
        return False
    mtime, size = int.from_bytes(header[8:12], "little"), int.from_bytes(header[12:16], "little")
    used = mtime == (stamp[0] // 1_000_000_000) & 0xFFFFFFFF and size == stamp[1] & 0xFFFFFFFF
    return used and written < stamp[0]
