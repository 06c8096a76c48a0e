"""What ``fltheory list`` says about one experiment in one mode."""

from __future__ import annotations

import dataclasses
import os

from . import _arguments as arg
from .keys import key_changes, result_key
from .protocol import Experiment
from .runner import results_directory
from .store import read_stored
from .summary import overall_status

__all__ = ["ModeStatus", "experiment_status"]


@dataclasses.dataclass(frozen=True)
class ModeStatus:
    """``status`` (holds / violated / not checkable / not run / failed / unreadable),
    ``why_stale`` (empty when fresh), ``seconds`` of the last computation (None if unknown)."""

    mode: str
    status: str
    why_stale: tuple[str, ...] = ()
    seconds: float | None = None

    def text(self) -> str:
        stale = f" (stale: {'; '.join(self.why_stale)})" if self.why_stale else ""
        took = f", {self.seconds:.1f} s" if self.seconds is not None else ""
        return f"{self.mode}: {self.status}{stale}{took}"


def experiment_status(out: str | os.PathLike[str], experiment: Experiment, mode: str = "quick",
                      seed: int = 0) -> ModeStatus:
    """The last result of ``experiment`` in ``mode`` under ``out``; never raises
    on a bad results file (it is reported as unreadable, hence stale); bad arguments raise
    InvalidProblemError (``out`` a path, ``experiment`` an Experiment, ``mode`` in MODES,
    ``seed`` an int in [0, 2**63))."""
    experiment = arg.experiment("experiment", experiment)
    mode = arg.mode(mode)
    seed = arg.seed(seed)
    directory = results_directory(arg.path("out", out), mode, seed)
    name = experiment.name
    stored = read_stored(directory, name)
    if (directory / f"{name}.error.log").exists():
        return ModeStatus(mode, f"failed (see {directory / (name + '.error.log')})")
    if stored.problem:
        return ModeStatus(mode, "unreadable result", (stored.problem,))
    if stored.doc is None:
        return ModeStatus(mode, "not run")
    doc = stored.doc
    why = key_changes(doc["key"], result_key(experiment, mode, seed))
    missing = [s for s in ("pdf", "png") if not (directory / f"{name}.{s}").exists()]
    if missing:
        why = [*why, f"figure file(s) {', '.join(missing)} missing"]
    seconds = doc.get("timing", {}).get("seconds")
    return ModeStatus(mode, overall_status(doc["checks"]), tuple(why),
                      None if seconds is None else float(seconds))
