"""One progress display for every experiment's inner loop, in-process and from workers."""

from __future__ import annotations

from typing import ClassVar

import pytest

from fltheory.reproduce import ProgressEvent, discover, reproduce
from fltheory.reproduce import runner as runner_module
from fltheory.reproduce.progress import ProgressDisplay, reporting_progress

from ..experiments.fake_package import good, make_package

WITH_PROGRESS = good("{name}").replace(
    "def run(config, rng):\n    x = rng.standard_normal((config[\"reps\"], config[\"n\"]))",
    "def run(config, rng, progress):\n    for _ in progress(range(4), desc='inner'):\n        pass\n"
    "    x = rng.standard_normal((config[\"reps\"], config[\"n\"]))")


def test_reporting_progress_yields_items_and_reports_first_and_last():
    events: list[ProgressEvent] = []
    progress = reporting_progress("alpha", events.append)
    assert list(progress(iter([1, 2, 3]), desc="loop", total=3)) == [1, 2, 3]
    assert events[0] == ProgressEvent("alpha", "step", "loop", 0, 3)
    assert events[-1] == ProgressEvent("alpha", "step", "loop", 3, 3)
    events.clear()
    assert list(progress([5, 6])) == [5, 6]
    assert events[-1] == ProgressEvent("alpha", "step", "alpha", 2, 2)


class Recorder(ProgressDisplay):
    seen: ClassVar[list[ProgressEvent]] = []

    def __call__(self, event: ProgressEvent) -> None:
        Recorder.seen.append(ProgressEvent(*event))
        super().__call__(event)


@pytest.mark.parametrize("jobs", [1, 2])
def test_inner_progress_reaches_the_one_display(tmp_path, monkeypatch, jobs):
    monkeypatch.syspath_prepend(str(tmp_path))
    pkg = make_package(tmp_path, {n: WITH_PROGRESS.replace("{name}", n).replace('"{n}"', n)
                                  for n in ("alpha", "beta")})
    monkeypatch.setattr(runner_module, "ProgressDisplay", Recorder)
    Recorder.seen = []
    lines: list[str] = []
    outcomes = reproduce(discover(pkg), tmp_path / "o", jobs=jobs, echo=lines.append, show_progress=False)
    assert [o.action for o in outcomes] == ["computed", "computed"]
    for name in ("alpha", "beta"):
        mine = [e for e in Recorder.seen if e.experiment == name]
        assert mine[0].kind == "start" and mine[-1].kind == "end"
        assert ProgressEvent(name, "step", "inner", 4, 4) in mine
        assert f"{name}: started" in lines               # without bars, a line per started experiment


def test_every_bundled_experiment_takes_the_progress_callback():
    assert all(e.accepts_progress for e in discover())
