"""Training the seed-003 MLP (64-200-100-10) on the scikit-learn 8x8 digits
with FedAvg: 10 clients with an IID split (each client's samples split
80/20 into train/test), minibatches of 32, 5 local steps at rate 0.2, full
participation.  Stated target: test accuracy >= 0.90 after 20 rounds (chance
is 0.10; the untrained network is below 0.30).  Measured on this seed: 0.939
after 20 rounds (0.897 after 5).  Also the 8x8 CNN of seed 002 Table 1
forward/backward on the same data (gradient shape and finiteness only; its
correctness is covered by the layer tests)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sklearn")

from fltheory.algorithms import FedAvg, run
from fltheory.nn import cnn, digits_federation, mlp

ROUNDS = 20
TARGET = 0.90


def test_fedavg_trains_the_seed_mlp_on_digits():
    rng = np.random.default_rng(0)
    fed = digits_federation(mlp(64, 10), 10, rng).with_minibatch(32)
    x0 = fed.init_params(np.random.default_rng(1))
    assert fed.accuracy(x0) < 0.3
    hist = run(FedAvg(lr=0.2, local_steps=5), fed, ROUNDS, seed=0, x0=x0)
    acc = fed.accuracy(hist.x[-1])
    assert acc >= TARGET, f"test accuracy {acc:.3f} after {ROUNDS} rounds, stated target {TARGET}"
    assert hist.loss[-1] < 0.5 * hist.loss[0]


def test_dirichlet_partition_is_label_skewed_and_cnn_runs():
    rng = np.random.default_rng(0)
    fed = digits_federation(cnn((1, 8, 8), 10, fc=32), 5, rng, partition="dirichlet", gamma=0.1)
    counts = [np.bincount(fed.client_data(i)[1], minlength=10) for i in range(5)]
    assert max(c.max() / c.sum() for c in counts) > 0.5        # gamma = 0.1: dominant labels
    x = fed.init_params(rng)
    g = fed.client_grad(np.tile(x, (5, 1)))
    assert g.shape == (5, fed.dim) and np.all(np.isfinite(g)) and np.any(g != 0)
