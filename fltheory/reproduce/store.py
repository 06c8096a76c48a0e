"""Where results live, and reading them back defensively.

Layout under the output root ``OUT`` (default ``figures/``)::

    OUT/NAME.{pdf,png,json}, OUT/SUMMARY.md, OUT/macros.tex          quick mode
    OUT/full/NAME.{pdf,png,json}, OUT/full/SUMMARY.md, .../macros.tex  full mode
    OUT/custom/NAME-<mode>-<digest>/...                                with --set / --config

so quick and full results never share a file, and a run with overrides can
never be mistaken for the default one.  :func:`read_stored` never raises on a
bad file: it returns the problem as text, so one malformed JSON makes only
its own experiment stale.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import json
import math
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fltheory.errors import InvalidProblemError, OutputDirectoryError, ResultsFileError
from fltheory.results import FORMAT, load_json

from . import _arguments as arg
from ._arguments import MODES
from .protocol import STATUSES

__all__ = [
    "MODES",
    "StoredResult",
    "ensure_writable",
    "is_disk_error",
    "override_digest",
    "read_stored",
    "remove_stale_temporaries",
    "result_dir",
    "validate_document",
]



def override_digest(overrides: Mapping[str, Any]) -> str:
    """12 hex digits identifying a set of overrides (a mapping with str keys of JSON values)."""
    overrides = arg.mapping("overrides", overrides)
    try:
        text = json.dumps(dict(overrides), sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidProblemError(f"overrides must hold JSON values (finite numbers, str, lists, dicts), "
                                  f"got {arg.short(overrides)}: {exc}") from None
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def result_dir(out: str | os.PathLike[str], mode: str, name: str | None = None,
               overrides: Mapping[str, Any] | None = None) -> Path:
    """The directory of results of ``mode`` (and of ``name`` with ``overrides``)."""
    root = arg.path("out", out)
    mode = arg.mode(mode)
    overrides = arg.mapping("overrides", overrides, optional=True)
    if name is not None:
        name = arg.text("name", name)
    if overrides:
        if not name:
            raise InvalidProblemError("a run with overrides needs the experiment name for its directory "
                                      "(name must be a non-empty str), got name=None")
        return root / "custom" / f"{name}-{mode}-{override_digest(overrides)}"
    return root if mode == "quick" else root / "full"


@dataclasses.dataclass(frozen=True)
class StoredResult:
    """``doc`` (None when absent or unusable) and ``problem`` (why it is unusable)."""

    path: Path
    doc: dict[str, Any] | None
    problem: str = ""

    @property
    def exists(self) -> bool:
        return self.doc is not None


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def validate_document(path: Path, doc: Any) -> dict[str, Any]:
    """Check the fields the framework reads; raise ResultsFileError naming the
    file and the first bad field.  ``path`` (named in the messages) must be a path."""
    path = arg.path("path", path)

    def bad(field: str, expected: str, got: Any) -> ResultsFileError:
        return ResultsFileError(f"{path}: field {field!r} must be {expected}, got {got!r:.80}")
    if not isinstance(doc, dict):
        raise bad("(document)", "a JSON object", type(doc).__name__)
    if doc.get("format") != FORMAT:
        raise bad("format", repr(FORMAT), doc.get("format"))
    for field in ("data", "record", "key", "experiment", "macros"):
        if not isinstance(doc.get(field), dict):
            raise bad(field, "an object", doc.get(field))
    checks = doc.get("checks")
    if not isinstance(checks, list):
        raise bad("checks", "a list", checks)
    for i, c in enumerate(checks):
        if not isinstance(c, dict):
            raise bad(f"checks[{i}]", "an object", c)
        if not isinstance(c.get("theorem"), str):
            raise bad(f"checks[{i}].theorem", "a str", c.get("theorem"))
        if c.get("status") not in STATUSES:
            raise bad(f"checks[{i}].status", f"one of {STATUSES}", c.get("status"))
        if c.get("ratio") is not None and not _is_number(c.get("ratio")):
            raise bad(f"checks[{i}].ratio", "a finite number or null", c.get("ratio"))
        if not isinstance(c.get("detail", ""), str):
            raise bad(f"checks[{i}].detail", "a str", c.get("detail"))
    for k, v in doc["macros"].items():
        if not _is_number(v):
            raise bad(f"macros.{k}", "a finite number", v)
    timing = doc.get("timing", {})
    if not isinstance(timing, dict) or not _is_number(timing.get("seconds", 0.0)):
        raise bad("timing.seconds", "a finite number", timing)
    return doc


def read_stored(directory: str | os.PathLike[str], name: str) -> StoredResult:
    """The stored result of ``name`` in ``directory``; never raises on a bad file (the problem
    is returned as text), only on bad arguments (InvalidProblemError)."""
    path = arg.path("directory", directory) / f"{arg.text('name', name)}.json"
    if not path.exists():
        return StoredResult(path, None)
    try:
        return StoredResult(path, validate_document(path, load_json(path)))
    except ResultsFileError as exc:
        return StoredResult(path, None, str(exc))


def remove_stale_temporaries(directory: Path, stem: str) -> list[Path]:
    """Remove the temporary files ``.STEM.*.tmp`` an interrupted run left in
    ``directory`` (call it while holding the lock of ``stem``)."""
    directory = arg.path("directory", directory)
    stem = arg.text("stem", stem)
    removed = []
    for tmp in directory.glob(f".{stem}.*.tmp"):
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
            removed.append(tmp)
    return removed


def is_disk_error(exc: BaseException) -> bool:
    """An OSError that says the disk cannot take writes (full, read-only, no permission, quota).
    ``exc`` must be an exception (anything else raises InvalidProblemError)."""
    if not isinstance(exc, BaseException):
        raise InvalidProblemError(f"exc must be an exception, got {arg.short(exc)} ({type(exc).__name__})")
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EROFS, errno.EACCES,
                                                      errno.EPERM, errno.EDQUOT)


def ensure_writable(directory: Path) -> None:
    """Create ``directory`` if needed and prove a file can be written in it;
    raise :class:`~fltheory.errors.OutputDirectoryError` naming it otherwise."""
    directory = arg.path("directory", directory)
    try:
        if directory.exists() and not directory.is_dir():
            raise OutputDirectoryError(errno.ENOTDIR, f"output directory {directory} exists and is not a "
                                       f"directory; pass --out DIR naming a directory")
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".write-probe.{uuid.uuid4().hex}.tmp"
        with open(probe, "wb") as handle:
            handle.write(b"\0" * 4096)
            handle.flush()
            os.fsync(handle.fileno())
        probe.unlink()
    except OutputDirectoryError:
        raise
    except OSError as exc:
        with contextlib.suppress(OSError, UnboundLocalError):
            probe.unlink()
        raise OutputDirectoryError(exc.errno, f"cannot write to {directory}: "
                                   f"{exc.strerror or exc}") from exc
