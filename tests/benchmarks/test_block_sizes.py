"""benchmarks/block_sizes.py: its candidates are the block partitions they name, the
constants are restored after each, and every candidate gives the same models."""

from __future__ import annotations

import pytest

from fltheory.algorithms.local import blocking

from ._load import benchmark


def test_candidates_cut_the_batch_as_named_and_restore_the_policy(monkeypatch):
    bs = benchmark("block_sizes")
    monkeypatch.setattr(blocking, "_THREADS", [2])
    fed = bs.quadratic_problem(40, 30)                    # 288 KB of Hessians
    data = 40 * fed.client_data_bytes()
    monkeypatch.setattr(blocking, "_SPLIT_BYTES", data // 2)   # the policy splits this batch
    saved = blocking._BLOCK_BYTES, blocking._SPLIT_BYTES
    counts = {}
    for name, (bb, sb) in bs.policies(data).items():
        with bs.blocks_of(bb, sb):
            counts[name] = len(blocking.row_blocks(fed, 40, 30))
        assert (blocking._BLOCK_BYTES, blocking._SPLIT_BYTES) == saved
    assert counts == {"policy": 2, "8 MB": 1, "one block": 1, "2 blocks": 2}
    with pytest.raises(RuntimeError), bs.blocks_of(1, 1):
        raise RuntimeError("restored even so")
    assert (blocking._BLOCK_BYTES, blocking._SPLIT_BYTES) == saved


def test_every_candidate_gives_the_same_models(capsys):
    bs = benchmark("block_sizes")
    bs.measure(24, 6, trials=2, trial_seconds=1e-4)
    lines = [line for line in capsys.readouterr().out.splitlines() if "same models" in line]
    assert len(lines) == 2 and all(line.endswith("same models: True") for line in lines)
