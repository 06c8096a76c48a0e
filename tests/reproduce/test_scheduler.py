"""``reproduce(..., scheduler=ADDR)`` / ``fltheory reproduce --scheduler ADDR``:
experiments run as tasks on a real Dask cluster (a 2-worker
``distributed.LocalCluster``) and give the same numbers as in-process runs."""

from __future__ import annotations

import json
import time

import pytest

from fltheory.reproduce import discover, reproduce
from fltheory.search import task_runner

distributed = pytest.importorskip("distributed")

NAME = "efl_table1"          # closed-form, about a second


def _doc(directory, name):
    return json.loads((directory / f"{name}.json").read_text())


def test_cluster_run_equals_in_process_run(tmp_path):
    exp = [e for e in discover() if e.name == NAME]
    local = reproduce(exp, tmp_path / "local", show_progress=False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        remote = reproduce(exp, tmp_path / "cluster", show_progress=False,
                           run_remote=task_runner(cluster.scheduler_address))
    assert [o.action for o in local] == [o.action for o in remote] == ["computed"], (local, remote)
    a, b = _doc(tmp_path / "local", NAME), _doc(tmp_path / "cluster", NAME)
    assert a["data"] == b["data"] and a["macros"] == b["macros"] and a["checks"] == b["checks"]
    assert a["key"] == b["key"]


def test_unreachable_scheduler_is_a_clear_error_and_writes_nothing(tmp_path):
    exp = [e for e in discover() if e.name == NAME]
    start = time.perf_counter()
    with pytest.raises(ConnectionError, match=r"127\.0\.0\.1:9"):
        reproduce(exp, tmp_path / "out", show_progress=False,
                  run_remote=task_runner("tcp://127.0.0.1:9", timeout=2.0))
    assert time.perf_counter() - start < 30
    assert not any(p.suffix in (".json", ".png", ".pdf") for p in (tmp_path / "out").rglob("*"))
