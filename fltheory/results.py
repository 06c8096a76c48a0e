"""Run records with provenance; atomic JSON (+ NPZ) save and load.

A saved result is one JSON document::

    {"format": "fltheory-results/1",
     "record": {... RunRecord ...},
     "data":   {... numbers, strings, lists, small arrays inline ...},
     "arrays_file": "NAME.<digest>.npz" | null}

Storage rule for arrays
-----------------------
numpy arrays with at most ``inline_limit`` elements (default 10 000) are
written *inline* as nested JSON lists, so the JSON alone is readable and
diffable; they load back as plain lists (wrap with ``np.asarray``).  Larger
arrays go to an NPZ file next to the JSON, named ``<stem>.<digest>.npz`` where
``digest`` is a hash of its content; the JSON holds ``{"$npz": key}`` in their
place and they load back as ``numpy.ndarray`` with dtype and shape preserved.

Atomicity
---------
Every file is written to a temporary file in the same directory, flushed,
``fsync``-ed and moved over the target with ``os.replace``.  The NPZ (if any)
is written first under its content-addressed name, then the JSON that points
to it; NPZ files of the same stem that the new JSON no longer references are
removed last.  A crash at any point leaves either the old pair or the new
pair readable, never a torn file.

Honesty
-------
Saved numbers must be finite: NaN or +-inf anywhere (a float, a numpy scalar,
an array element) raises :class:`~fltheory.errors.DivergenceError` naming the
path of the offending value.  Use ``None`` for "not defined".
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import hashlib
import io
import json
import math
import os
import platform
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping
from importlib import metadata
from pathlib import Path
from typing import IO, Any

import numpy as np

from .errors import DivergenceError, InvalidProblemError

__all__ = [
    "RunRecord",
    "package_versions",
    "git_commit",
    "to_jsonable",
    "atomic_write",
    "save_json",
    "load_json",
    "save_results",
    "load_results",
    "FORMAT",
    "TRACKED_PACKAGES",
]

FORMAT = "fltheory-results/1"
TRACKED_PACKAGES: tuple[str, ...] = ("numpy", "scipy", "sympy", "cvxpy", "matplotlib", "fltheory")
_PACKAGE_ROOT = Path(__file__).resolve().parent


# --------------------------------------------------------------------------- provenance

def package_versions(packages: tuple[str, ...] = TRACKED_PACKAGES) -> dict[str, str]:
    """Installed versions, read from package metadata (nothing is imported).

    ``fltheory`` itself reports ``fltheory.__version__`` so that a source
    checkout that is not pip-installed still has a version.  A package that is
    not installed reports ``"not installed"``.
    """
    out: dict[str, str] = {}
    for name in packages:
        if name == "fltheory":
            from . import __version__
            out[name] = __version__
            continue
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def git_commit(path: str | os.PathLike[str] | None = None) -> tuple[str, bool | None]:
    """``(commit, dirty)`` of the git working tree containing ``path``.

    ``path`` defaults to the fltheory source directory.  Never fails: without
    git, outside a repository or on any error the result is ``("unknown", None)``.
    ``dirty`` is True when tracked files differ from the commit.
    """
    cwd = Path(path) if path is not None else _PACKAGE_ROOT
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True,
                              text=True, timeout=10, check=False)
        if head.returncode != 0:
            return "unknown", None
        commit = head.stdout.strip()
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                cwd=cwd, capture_output=True, text=True, timeout=20, check=False)
        dirty = bool(status.stdout.strip()) if status.returncode == 0 else None
        return (commit or "unknown"), dirty
    except (OSError, subprocess.SubprocessError, ValueError):
        return "unknown", None


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """Provenance of one computed result.

    Attributes
    ----------
    config : dict
        The (JSON-able) configuration the result was computed from.
    seed : int | None
        The seed the random generator was derived from.
    versions : dict[str, str]
        Versions of numpy, scipy, sympy, cvxpy, matplotlib and fltheory.
    python : str
        ``platform.python_version()``.
    git_commit : str
        Commit of the working tree holding fltheory, or ``"unknown"``.
    git_dirty : bool | None
        Whether tracked files differed from that commit (None if unknown).
    timestamp : str
        UTC time of capture, ISO 8601 (``2026-01-31T12:00:00+00:00``).
    """

    config: dict[str, Any]
    seed: int | None
    versions: dict[str, str]
    python: str
    git_commit: str
    git_dirty: bool | None
    timestamp: str

    @classmethod
    def capture(cls, config: Mapping[str, Any], seed: int | None = None) -> RunRecord:
        """Record ``config`` and ``seed`` with the current environment."""
        commit, dirty = git_commit()
        return cls(config=to_jsonable(dict(config), where="config"),
                   seed=None if seed is None else int(seed),
                   versions=package_versions(), python=platform.python_version(),
                   git_commit=commit, git_dirty=dirty,
                   timestamp=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))

    def __getitem__(self, key: str) -> Any:
        """``record[key]``: the entry ``key`` of ``config``, else the field ``key``
        (so ``history.record["algorithm"]`` and ``history.record["seed"]`` read as before)."""
        if key in self.config:
            return self.config[key]
        if key in {f.name for f in dataclasses.fields(self)}:
            return getattr(self, key)
        raise KeyError(key)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict of every field."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunRecord:
        """Inverse of :meth:`to_dict`; missing or unknown fields raise InvalidProblemError."""
        names = {f.name for f in dataclasses.fields(cls)}
        missing = names - set(data)
        extra = set(data) - names
        if missing or extra:
            raise InvalidProblemError(
                f"RunRecord fields must be exactly {sorted(names)}; missing {sorted(missing)}, "
                f"unexpected {sorted(extra)}")
        return cls(**{k: data[k] for k in names})


# --------------------------------------------------------------------------- JSON conversion

def to_jsonable(obj: Any, *, where: str = "value",
                array_hook: Callable[[np.ndarray, str], Any] | None = None) -> Any:
    """Convert ``obj`` to plain JSON types, refusing non-finite numbers.

    numpy scalars become Python scalars, numpy arrays nested lists (or whatever
    ``array_hook(array, where)`` returns, if given), tuples lists; dict keys
    must be strings.  NaN/inf raise :class:`DivergenceError` naming ``where``
    (e.g. ``results['curve'][3]``); unsupported types raise
    :class:`InvalidProblemError`.
    """
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        value = float(obj)
        if not math.isfinite(value):
            raise DivergenceError(
                f"{where} is {value!r}; saved results must be finite numbers "
                f"(use None for 'not defined')")
        return value
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in "biuf":
            raise InvalidProblemError(
                f"{where} is an array of dtype {obj.dtype}; only bool, integer and real "
                f"arrays can be saved")
        if obj.dtype.kind == "f" and not np.all(np.isfinite(obj)):
            bad = tuple(int(i) for i in np.argwhere(~np.isfinite(obj))[0])
            raise DivergenceError(
                f"{where}{list(bad)} is {obj[bad]!r}; saved results must be finite numbers")
        if array_hook is not None:
            return array_hook(obj, where)
        return obj.tolist()
    if isinstance(obj, Mapping):
        out: dict[str, Any] = {}
        for key, value in obj.items():
            if not isinstance(key, str):
                raise InvalidProblemError(
                    f"{where} has a key {key!r} of type {type(key).__name__}; JSON keys must be str")
            out[key] = to_jsonable(value, where=f"{where}[{key!r}]", array_hook=array_hook)
        return out
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v, where=f"{where}[{i}]", array_hook=array_hook)
                for i, v in enumerate(obj)]
    raise InvalidProblemError(
        f"{where} has type {type(obj).__name__}, which cannot be saved as JSON "
        f"(expected None, bool, int, float, str, list, tuple, dict or a numeric numpy array)")


# --------------------------------------------------------------------------- atomic files

@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], mode: str = "w") -> Iterator[IO[Any]]:
    """Open a temporary file next to ``path``; on normal exit fsync it and
    ``os.replace`` it onto ``path``.  If the body raises, the temporary file is
    removed and ``path`` is untouched.  ``mode`` is ``"w"`` (text, UTF-8) or ``"wb"``."""
    if mode not in ("w", "wb"):
        raise InvalidProblemError(f"atomic_write mode must be 'w' or 'wb', got {mode!r}")
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        opened: IO[Any] = os.fdopen(fd, "w", encoding="utf-8") if mode == "w" else os.fdopen(fd, "wb")
        with opened as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(target.parent)


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _dumps(obj: Any) -> str:
    """Indented JSON with every list of scalars on one line (readable, diffable)."""
    return _format(obj, 0) + "\n"


def _format(obj: Any, depth: int) -> str:
    pad, inner = " " * depth, " " * (depth + 1)
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = [f"{inner}{json.dumps(k)}: {_format(v, depth + 1)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list) and any(isinstance(v, (dict, list)) for v in obj):
        return "[\n" + ",\n".join(inner + _format(v, depth + 1) for v in obj) + "\n" + pad + "]"
    return json.dumps(obj, allow_nan=False)


def save_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Atomically write ``to_jsonable(obj)`` as indented JSON (no NaN allowed)."""
    text = _dumps(to_jsonable(obj, where=Path(path).name))
    with atomic_write(path, "w") as handle:
        handle.write(text)


def load_json(path: str | os.PathLike[str]) -> Any:
    """Read a JSON file written by :func:`save_json`; NaN/Infinity tokens are rejected."""
    def _reject(token: str) -> float:
        raise InvalidProblemError(f"{path} contains the non-finite JSON token {token}")
    with open(path, encoding="utf-8") as handle:
        return json.load(handle, parse_constant=_reject)


# --------------------------------------------------------------------------- results with arrays

def save_results(path: str | os.PathLike[str], data: Mapping[str, Any], record: RunRecord,
                 *, inline_limit: int = 10_000, extra: Mapping[str, Any] | None = None) -> Path:
    """Atomically save ``data`` with its provenance ``record`` at ``path`` (a .json file).

    Arrays with more than ``inline_limit`` elements go to a content-addressed
    NPZ file beside the JSON (see module docstring); ``extra`` adds further
    top-level JSON entries (e.g. checks and macros).  Returns the JSON path.
    """
    target = Path(path)
    if target.suffix != ".json":
        raise InvalidProblemError(f"results path must end in .json, got {str(target)!r}")
    if isinstance(inline_limit, bool) or not isinstance(inline_limit, int) or inline_limit < 0:
        raise InvalidProblemError(f"inline_limit must be an int >= 0, got {inline_limit!r}")
    large: dict[str, np.ndarray] = {}

    def hook(arr: np.ndarray, where: str) -> Any:
        if arr.size <= inline_limit:
            return arr.tolist()
        key = f"a{len(large)}"
        large[key] = arr
        return {"$npz": key}

    _reject_reserved(data, "data")
    body = to_jsonable(dict(data), where="data", array_hook=hook)
    doc: dict[str, Any] = {"format": FORMAT, "record": record.to_dict(), "data": body,
                           "arrays_file": None}
    if extra:
        for key, value in extra.items():
            if key in doc:
                raise InvalidProblemError(f"extra key {key!r} clashes with a reserved key {sorted(doc)}")
            doc[key] = to_jsonable(value, where=key)
    if large:
        buffer = io.BytesIO()
        np.savez(buffer, **large)  # type: ignore[arg-type]  # keys are a0, a1, ...: never allow_pickle
        payload = buffer.getvalue()
        npz_name = f"{target.stem}.{hashlib.sha256(payload).hexdigest()[:16]}.npz"
        with atomic_write(target.parent / npz_name, "wb") as handle:
            handle.write(payload)
        doc["arrays_file"] = npz_name
    text = _dumps(doc)
    with atomic_write(target, "w") as handle:
        handle.write(text)
    for old in target.parent.glob(f"{target.stem}.*.npz"):
        if old.name != doc["arrays_file"]:
            with contextlib.suppress(FileNotFoundError):
                old.unlink()
    return target


def _reject_reserved(obj: Any, where: str) -> None:
    if isinstance(obj, Mapping):
        if "$npz" in obj:
            raise InvalidProblemError(f"{where} uses the reserved key '$npz' (marks NPZ-stored arrays)")
        for key, value in obj.items():
            _reject_reserved(value, f"{where}[{key!r}]")
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            _reject_reserved(value, f"{where}[{i}]")


def load_results(path: str | os.PathLike[str]) -> tuple[dict[str, Any], RunRecord, dict[str, Any]]:
    """Load what :func:`save_results` wrote: ``(data, record, extra)``.

    NPZ-stored arrays come back as ``numpy.ndarray``; inline arrays as lists.
    """
    target = Path(path)
    doc = load_json(target)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise InvalidProblemError(
            f"{target} is not an fltheory results file (expected format {FORMAT!r}, "
            f"got {doc.get('format') if isinstance(doc, dict) else type(doc).__name__!r})")
    arrays: dict[str, np.ndarray] = {}
    if doc.get("arrays_file"):
        with np.load(target.parent / doc["arrays_file"], allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}

    def restore(obj: Any) -> Any:
        if isinstance(obj, dict):
            if set(obj) == {"$npz"}:
                return arrays[obj["$npz"]]
            return {k: restore(v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [restore(v) for v in obj]
        return obj

    data = restore(doc["data"])
    record = RunRecord.from_dict(doc["record"])
    extra = {k: v for k, v in doc.items() if k not in ("format", "record", "data", "arrays_file")}
    return data, record, extra
