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
from collections.abc import Callable, Iterator, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import IO, Any, cast

import numpy as np

from .errors import DivergenceError, InvalidProblemError, ResultsFileError

__all__ = [
    "FORMAT",
    "TRACKED_PACKAGES",
    "RunRecord",
    "atomic_write",
    "git_commit",
    "load_json",
    "load_results",
    "package_versions",
    "save_json",
    "save_results",
    "to_jsonable",
]

FORMAT = "fltheory-results/1"
TRACKED_PACKAGES: tuple[str, ...] = ("numpy", "scipy", "sympy", "cvxpy", "matplotlib", "fltheory")
_PACKAGE_ROOT = Path(__file__).resolve().parent


# --------------------------------------------------------------------------- arguments

def path_argument(name: str, value: Any) -> Path:
    """``value`` as a :class:`~pathlib.Path`: a non-empty ``str`` or ``os.PathLike`` of text without
    NUL characters.  Anything else (an int, which ``open`` would take for a file descriptor, bytes,
    a float, an array, ...) raises :class:`~fltheory.errors.InvalidProblemError` naming ``name``."""
    if isinstance(value, (str, os.PathLike)):
        text = os.fspath(value)
        if isinstance(text, str) and text and "\0" not in text:
            return Path(text)
    raise InvalidProblemError(f"{name} must be a file-system path (a non-empty str or os.PathLike, no NUL "
                              f"character), got {_short(value)} ({type(value).__name__})")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# --------------------------------------------------------------------------- provenance

def package_versions(packages: tuple[str, ...] = TRACKED_PACKAGES) -> dict[str, str]:
    """Installed versions, read from package metadata (nothing is imported).

    ``fltheory`` itself reports ``fltheory.__version__`` so that a source
    checkout that is not pip-installed still has a version.  A package that is
    not installed reports ``"not installed"``.  ``packages`` must be a tuple or list of
    non-empty distribution names (str); anything else raises InvalidProblemError.
    """
    if not isinstance(packages, (tuple, list)) or not all(isinstance(p, str) and p.strip() for p in packages):
        raise InvalidProblemError(f"packages must be a tuple of non-empty distribution names (str), "
                                  f"got {_short(packages)}")
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


def git_commit(path: str | os.PathLike[str] | None = None,
               exclude: Sequence[str | os.PathLike[str]] = ()) -> tuple[str, bool | None]:
    """``(commit, dirty)`` of the git working tree containing ``path``.

    ``path`` defaults to the fltheory source directory.  Never fails: without
    git, outside a repository or on any error the result is ``("unknown", None)``.
    ``dirty`` is True when tracked files differ from the commit, not counting
    files under the directories ``exclude`` (e.g. the output directory of the
    run being recorded, whose own writes must not make it look dirty).  Arguments that are not
    paths (``path`` not a path or None, ``exclude`` not a sequence of paths) raise
    InvalidProblemError: "never fails" is about git, not about the arguments.
    """
    cwd = path_argument("path", path) if path is not None else _PACKAGE_ROOT
    if isinstance(exclude, (str, os.PathLike)) or not isinstance(exclude, (tuple, list)):
        raise InvalidProblemError(f"exclude must be a tuple or list of paths, got {_short(exclude)}")
    exclude = [path_argument(f"exclude[{i}]", e) for i, e in enumerate(exclude)]
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True,
                              text=True, timeout=10, check=False)
        if head.returncode != 0:
            return "unknown", None
        commit = head.stdout.strip()
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=cwd, capture_output=True,
                             text=True, timeout=10, check=False).stdout.strip()
        inside = [Path(e).resolve() for e in exclude]
        if top:     # a path outside the work tree is not part of its status anyway (and git refuses it)
            inside = [e for e in inside if e.is_relative_to(Path(top).resolve())]
        excluded = [f":(exclude){e}" for e in inside]
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no",
                                 "--", ".", *excluded] if excluded else
                                ["git", "status", "--porcelain", "--untracked-files=no"],
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
    overrides : dict
        Configuration entries changed from the declared default (``{}``: none).
    data_source : dict
        Which data the numbers come from (e.g. a data package and its version).
    wall_seconds : float | None
        Wall-clock seconds of the computation (None if not measured).
    """

    config: dict[str, Any]
    seed: int | None
    versions: dict[str, str]
    python: str
    git_commit: str
    git_dirty: bool | None
    timestamp: str
    overrides: dict[str, Any] = dataclasses.field(default_factory=dict)
    data_source: dict[str, Any] = dataclasses.field(default_factory=dict)
    wall_seconds: float | None = None

    @classmethod
    def capture(cls, config: Mapping[str, Any], seed: int | None = None, *,
                versions: Mapping[str, str] | None = None,
                overrides: Mapping[str, Any] | None = None,
                data_source: Mapping[str, Any] | None = None,
                wall_seconds: float | None = None,
                exclude_from_dirty: Sequence[str | os.PathLike[str]] = ()) -> RunRecord:
        """Record ``config`` and ``seed`` with the current environment.
        ``versions`` adds to (and overrides) :func:`package_versions`;
        ``exclude_from_dirty`` is passed to :func:`git_commit` as ``exclude``."""
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
            raise InvalidProblemError(f"seed must be an int or None, got {seed!r}")
        if wall_seconds is not None and (isinstance(wall_seconds, bool) or not isinstance(
                wall_seconds, (int, float)) or not math.isfinite(wall_seconds) or wall_seconds < 0):
            raise InvalidProblemError(
                f"wall_seconds must be a finite number >= 0 or None, got {wall_seconds!r}")
        commit, dirty = git_commit(exclude=exclude_from_dirty)
        return cls(config=to_jsonable(dict(config), where="config"),
                   seed=None if seed is None else int(seed),
                   versions={**package_versions(), **dict(versions or {})},
                   python=platform.python_version(),
                   git_commit=commit, git_dirty=dirty,
                   timestamp=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                   overrides=to_jsonable(dict(overrides or {}), where="overrides"),
                   data_source=to_jsonable(dict(data_source or {}), where="data_source"),
                   wall_seconds=None if wall_seconds is None else round(float(wall_seconds), 3))

    def __getitem__(self, key: str) -> Any:
        """``record[key]``: the entry ``key`` of ``config``, else the field ``key``
        (so ``history.record["algorithm"]`` and ``history.record["seed"]`` read as before)."""
        if key in self.config:
            return self.config[key]
        if key in {f.name for f in dataclasses.fields(self)}:
            return getattr(self, key)
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        """``key in record``: an entry of ``config`` or a field name."""
        return key in self.config or key in {f.name for f in dataclasses.fields(self)}

    def get(self, key: str, default: Any = None) -> Any:
        """``record[key]`` when present, else ``default`` (as ``dict.get``)."""
        return self[key] if key in self else default

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict of every field."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunRecord:
        """Inverse of :meth:`to_dict`.  Missing required or unknown fields, or a
        field of the wrong type, raise InvalidProblemError naming the field;
        ``overrides``, ``data_source`` and ``wall_seconds`` (added later) may be absent."""
        if not isinstance(data, Mapping):
            raise InvalidProblemError(f"a RunRecord must be a mapping, got {type(data).__name__}")
        fields = dataclasses.fields(cls)
        names = {f.name for f in fields}
        required = {f.name for f in fields if f.default is dataclasses.MISSING
                    and f.default_factory is dataclasses.MISSING}
        missing = required - set(data)
        extra = set(data) - names
        if missing or extra:
            raise InvalidProblemError(
                f"RunRecord fields must be {sorted(names)} (all but overrides, data_source, wall_seconds "
                f"required); missing {sorted(missing)}, unexpected {sorted(extra)}")
        for name, ok, expected in _RECORD_FIELD_TYPES:
            if name in data and not ok(data[name]):
                raise InvalidProblemError(
                    f"RunRecord field {name!r} must be {expected}, got {data[name]!r:.100}")
        return cls(**{k: data[k] for k in names if k in data})


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_str_dict(v: Any) -> bool:
    return isinstance(v, dict) and all(isinstance(k, str) for k in v)


_RECORD_FIELD_TYPES: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
    ("config", _is_str_dict, "a dict with str keys"),
    ("seed", lambda v: v is None or _is_int(v), "an int or null"),
    ("versions", lambda v: _is_str_dict(v) and all(isinstance(x, str) for x in v.values()),
     "a dict of str versions"),
    ("python", lambda v: isinstance(v, str), "a str"),
    ("git_commit", lambda v: isinstance(v, str), "a str"),
    ("git_dirty", lambda v: v is None or isinstance(v, bool), "a bool or null"),
    ("timestamp", lambda v: isinstance(v, str), "a str"),
    ("overrides", _is_str_dict, "a dict with str keys"),
    ("data_source", _is_str_dict, "a dict with str keys"),
    ("wall_seconds", lambda v: v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)
                                             and math.isfinite(v) and v >= 0), "a number >= 0 or null"),
)


# --------------------------------------------------------------------------- JSON conversion

def to_jsonable(obj: Any, *, where: str = "value",
                array_hook: Callable[[np.ndarray, str], Any] | None = None) -> Any:
    """Convert ``obj`` to plain JSON types, refusing non-finite numbers.

    numpy scalars become Python scalars, numpy arrays nested lists (or whatever
    ``array_hook(array, where)`` returns, if given), tuples lists; dict keys
    must be strings.  NaN/inf raise :class:`DivergenceError` naming ``where``
    (e.g. ``results['curve'][3]``); unsupported types raise
    :class:`InvalidProblemError`.  ``obj`` may thus be any object: the result is plain JSON
    or a typed error, never a raw one (a container nested deeper than Python's recursion
    limit, e.g. one that contains itself, raises InvalidProblemError too).
    ``where`` must be a str and ``array_hook`` a callable or None.
    """
    if not isinstance(where, str):
        raise InvalidProblemError(f"where must be a str (the name of the value in messages), got {_short(where)}")
    if array_hook is not None and not callable(array_hook):
        raise InvalidProblemError(f"array_hook must be a callable (array, where) -> JSON or None, "
                                  f"got {_short(array_hook)}")
    try:
        return _jsonable(obj, where, array_hook)
    except RecursionError:
        raise InvalidProblemError(f"{where} is nested too deeply (or contains itself) to be saved as JSON") from None


def _jsonable(obj: Any, where: str, array_hook: Callable[[np.ndarray, str], Any] | None) -> Any:
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
            out[key] = _jsonable(value, f"{where}[{key!r}]", array_hook)
        return out
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v, f"{where}[{i}]", array_hook) for i, v in enumerate(obj)]
    raise InvalidProblemError(
        f"{where} has type {type(obj).__name__}, which cannot be saved as JSON "
        f"(expected None, bool, int, float, str, list, tuple, dict or a numeric numpy array)")


# --------------------------------------------------------------------------- atomic files

def atomic_write(path: str | os.PathLike[str], mode: str = "w") -> contextlib.AbstractContextManager[IO[Any]]:
    """Open a temporary file next to ``path``; on normal exit fsync it and
    ``os.replace`` it onto ``path``.  If the body raises, the temporary file is
    removed and ``path`` is untouched.  ``mode`` is ``"w"`` (text, UTF-8) or ``"wb"``.
    The arguments are checked when the function is called (before ``with``): a ``path``
    that is not a path, or a bad ``mode``, raises InvalidProblemError."""
    target = path_argument("path", path)
    if not isinstance(mode, str) or mode not in ("w", "wb"):
        raise InvalidProblemError(f"atomic_write mode must be 'w' or 'wb', got {_short(mode)}")
    return _atomic_write(target, mode)


@contextlib.contextmanager
def _atomic_write(target: Path, mode: str) -> Iterator[IO[Any]]:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, 0o666 & ~_current_umask())     # the usual mode (mkstemp makes 0600)
        handle: IO[Any]
        with (os.fdopen(fd, "w", encoding="utf-8") if mode == "w" else os.fdopen(fd, "wb")) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(target.parent)


def _current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


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
    """Atomically write ``to_jsonable(obj)`` as indented JSON (no NaN allowed).

    ``obj`` may be anything :func:`to_jsonable` converts (None, bool, int, finite float, str,
    lists/tuples, dicts with str keys, numeric numpy arrays and scalars); anything else raises
    InvalidProblemError and a non-finite number DivergenceError, before any file is touched."""
    target = path_argument("path", path)
    text = _dumps(to_jsonable(obj, where=target.name))
    with atomic_write(path, "w") as handle:
        handle.write(text)


def load_json(path: str | os.PathLike[str]) -> Any:
    """Read a JSON file written by :func:`save_json`.

    A missing, unreadable, empty, truncated or non-UTF-8 file, or one holding
    the non-finite tokens NaN/Infinity, raises
    :class:`~fltheory.errors.ResultsFileError` naming the file and the problem.
    """
    def _reject(token: str) -> float:
        raise ResultsFileError(f"{path}: contains the non-finite JSON token {token}")
    path = path_argument("path", path)
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle, parse_constant=_reject)
    except FileNotFoundError as exc:
        raise ResultsFileError(f"{path}: no such file") from exc
    except IsADirectoryError as exc:
        raise ResultsFileError(f"{path}: is a directory, expected a JSON file") from exc
    except UnicodeDecodeError as exc:
        raise ResultsFileError(f"{path}: not UTF-8 text (byte {exc.start}); expected JSON") from exc
    except json.JSONDecodeError as exc:
        raise ResultsFileError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}, "
                               f"column {exc.colno})") from exc
    except OSError as exc:
        raise ResultsFileError(f"{path}: cannot be read ({exc.strerror or exc})") from exc


# --------------------------------------------------------------------------- results with arrays

def save_results(path: str | os.PathLike[str], data: Mapping[str, Any], record: RunRecord,
                 *, inline_limit: int = 10_000, extra: Mapping[str, Any] | None = None) -> Path:
    """Atomically save ``data`` with its provenance ``record`` at ``path`` (a .json file).

    Arrays with more than ``inline_limit`` elements go to a content-addressed
    NPZ file beside the JSON (see module docstring); ``extra`` adds further
    top-level JSON entries (e.g. checks and macros).  Returns the JSON path.
    """
    target = path_argument("path", path)
    if target.suffix != ".json":
        raise InvalidProblemError(f"results path must end in .json, got {str(target)!r}")
    if isinstance(inline_limit, bool) or not isinstance(inline_limit, int) or inline_limit < 0:
        raise InvalidProblemError(f"inline_limit must be an int >= 0, got {inline_limit!r}")
    if not isinstance(data, Mapping):
        raise InvalidProblemError(f"data must be a mapping with str keys, got {_short(data)}")
    if not isinstance(record, RunRecord):
        raise InvalidProblemError(f"record must be a RunRecord (e.g. RunRecord.capture(config, seed)), "
                                  f"got {_short(record)}")
    if extra is not None and not isinstance(extra, Mapping):
        raise InvalidProblemError(f"extra must be a mapping with str keys or None, got {_short(extra)}")
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
        np.savez(buffer, **cast(dict[str, Any], large))
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


def _load_arrays(target: Path, name: Any) -> dict[str, np.ndarray]:
    """The arrays of the NPZ file ``name`` beside ``target`` ({} for None)."""
    if name is None:
        return {}
    if not isinstance(name, str) or not name:
        raise ResultsFileError(f"{target}: field 'arrays_file' must be a file name or null, got {name!r:.80}")
    directory = target.parent.resolve()
    npz_path = (target.parent / name).resolve()
    if Path(name).name != name or npz_path.parent != directory:
        raise ResultsFileError(f"{target}: field 'arrays_file' {name!r} leaves the results directory "
                               f"{directory}; only a file name beside the JSON is allowed")
    try:
        with np.load(npz_path, allow_pickle=False) as npz:
            return {k: npz[k] for k in npz.files}
    except FileNotFoundError as exc:
        raise ResultsFileError(f"{target}: field 'arrays_file': {npz_path} does not exist") from exc
    except (OSError, ValueError, EOFError) as exc:
        raise ResultsFileError(f"{target}: field 'arrays_file': {npz_path} is not a readable NPZ "
                               f"file ({exc})") from exc


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
    Every problem (missing or unreadable file, wrong format, a missing or
    malformed field, an arrays file that is missing, unreadable or named by a
    path leaving the results file's directory) raises
    :class:`~fltheory.errors.ResultsFileError` naming the file and the field.
    """
    target = path_argument("path", path)
    doc = load_json(target)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ResultsFileError(
            f"{target}: field 'format': not an fltheory results file (expected {FORMAT!r}, "
            f"got {doc.get('format') if isinstance(doc, dict) else type(doc).__name__!r})")
    for field in ("record", "data"):
        if not isinstance(doc.get(field), dict):
            raise ResultsFileError(f"{target}: field {field!r} must be an object, got {doc.get(field)!r:.80}")
    arrays = _load_arrays(target, doc.get("arrays_file"))

    def restore(obj: Any, where: str) -> Any:
        if isinstance(obj, dict):
            if set(obj) == {"$npz"}:
                if obj["$npz"] not in arrays:
                    raise ResultsFileError(f"{target}: field {where!r} refers to array {obj['$npz']!r}, "
                                           f"which the arrays file does not hold")
                return arrays[obj["$npz"]]
            return {k: restore(v, f"{where}.{k}") for k, v in obj.items()}
        if isinstance(obj, list):
            return [restore(v, f"{where}[{i}]") for i, v in enumerate(obj)]
        return obj

    data = restore(doc["data"], "data")
    try:
        record = RunRecord.from_dict(doc["record"])
    except InvalidProblemError as exc:
        raise ResultsFileError(f"{target}: field 'record': {exc}") from exc
    extra = {k: v for k, v in doc.items() if k not in ("format", "record", "data", "arrays_file")}
    return data, record, extra
