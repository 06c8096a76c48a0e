"""The search's files: a checkpoint of one Parquet part per completed task, the
final table, the worst instance as JSON and a pytest snippet.

Resumability: a task's rows are written to ``parts/<task>.parquet.tmp`` and
renamed to ``parts/<task>.parquet`` (an atomic rename on POSIX), so after a kill
at any moment each task's rows are either all present or absent; a rerun
evaluates only the absent tasks.  ``search.json`` keeps the configuration; a
rerun with another configuration in the same directory is refused.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import InvalidHyperparameterError, ResultsFileError

__all__ = ["CheckpointStore", "read_table"]


def _pa() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError as exc:    # pragma: no cover - only without the extra
        raise InvalidHyperparameterError("writing the search table needs pyarrow: "
                                         "pip install 'fltheory[search]'") from exc
    return pyarrow


def _atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _rows_table(pa: Any, rows: list[dict[str, Any]]) -> Any:
    """A table of ``rows`` with every column any row has (in order of first appearance; a row
    without it gets null): ``Table.from_pylist`` alone takes the columns of the first row, so
    a part whose first row was invalid lost the hypothesis and tag columns of the others."""
    columns = list(dict.fromkeys(k for r in rows for k in r))
    return pa.Table.from_pylist([{k: r.get(k) for k in columns} for r in rows])


class CheckpointStore:
    """Parts of a search under ``out`` (see the module docstring)."""

    def __init__(self, out: str | os.PathLike[str], config: Mapping[str, Any]) -> None:
        self.out = Path(out)
        self.parts = self.out / "parts"
        self.config = dict(config)

    def open(self) -> None:
        """Create the directory, or check that an existing one holds the same search."""
        self.parts.mkdir(parents=True, exist_ok=True)
        meta = self.out / "search.json"
        if meta.exists():
            old = json.loads(meta.read_text())
            if old != json.loads(json.dumps(self.config)):
                diff = sorted(k for k in set(old) | set(self.config) if old.get(k) != self.config.get(k))
                raise InvalidHyperparameterError(
                    f"out={str(self.out)!r} holds a different search (differs in {diff}); "
                    "use another directory or the same settings to resume")
        else:
            _atomic_write_text(meta, json.dumps(self.config, indent=1, sort_keys=True))

    def done(self) -> set[str]:
        return {p.name[:-len(".parquet")] for p in self.parts.glob("*.parquet")}

    def write(self, task_id: str, rows: list[dict[str, Any]]) -> None:
        pa = _pa()
        table = _rows_table(pa, rows) if rows else pa.table({"index": pa.array([], pa.int64())})
        tmp = self.parts / f"{task_id}.parquet.tmp"
        pa.parquet.write_table(table, tmp)
        os.replace(tmp, self.parts / f"{task_id}.parquet")

    def read(self, task_ids: list[str] | None = None) -> list[dict[str, Any]]:
        """Rows of the given (default: all) completed tasks, sorted by index."""
        pa = _pa()
        ids = sorted(self.done()) if task_ids is None else task_ids
        rows: list[dict[str, Any]] = []
        for tid in ids:
            rows.extend(r for r in pa.parquet.read_table(self.parts / f"{tid}.parquet").to_pylist()
                        if r.get("phase") is not None)
        rows.sort(key=lambda r: r["index"])
        return rows

    def write_table(self, rows: list[dict[str, Any]]) -> Path:
        """``results.parquet``: every row, one per evaluated instance, by index."""
        pa = _pa()
        table = _rows_table(pa, rows)
        path = self.out / "results.parquet"
        tmp = path.with_name(path.name + ".tmp")
        pa.parquet.write_table(table, tmp)
        os.replace(tmp, path)
        return path

    def write_json(self, name: str, doc: Mapping[str, Any]) -> Path:
        path = self.out / name
        _atomic_write_text(path, json.dumps(doc, indent=1, sort_keys=True, default=float))
        return path

    def write_text(self, name: str, text: str) -> Path:
        path = self.out / name
        _atomic_write_text(path, text)
        return path


def read_table(out: str | os.PathLike[str]) -> Any:
    """The ``results.parquet`` of a finished search as a pyarrow Table.  ``out`` is a path
    (InvalidHyperparameterError otherwise); a missing or unreadable table raises ResultsFileError
    naming the file."""
    if not isinstance(out, (str, os.PathLike)):
        raise InvalidHyperparameterError(
            f"read_table: out must be a directory path, got {out!r:.60} ({type(out).__name__})")
    pa = _pa()
    path = Path(out) / "results.parquet"
    try:
        return pa.parquet.read_table(path)
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise ResultsFileError(f"{path}: cannot read the search table ({type(exc).__name__}: {exc})") from None
