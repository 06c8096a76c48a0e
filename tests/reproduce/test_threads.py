"""Same bits whatever the BLAS thread count (fltheory/_threads.py).

Each seeded run is done in fresh interpreters with OPENBLAS_NUM_THREADS=1, =2
and unset (the library's default), on a d = 120 problem where a threaded BLAS
would split the reductions differently; the final iterates and the optimum
must be byte-identical.  A control run with the pin switched off
(FLTHEORY_BLAS_THREADS=keep) shows the instance is sensitive at all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r'''
import hashlib, json
import numpy as np
from fltheory import optim
from fltheory.algorithms import (EFL, FedAvg, FedCurv, FedCurvTE, FedDyn, FedElasticNet, FedOpt, FedProx,
                                 FedProxTE, Scaffold, run)
from fltheory.problems import random_quadratic

def digest(a):
    return hashlib.sha256(np.ascontiguousarray(np.asarray(a, dtype=np.float64)).tobytes()).hexdigest()

fed = random_quadratic(6, 120, L=1.0, mu=0.05, heterogeneity=1.0, seed=3)
algorithms = {
    "FedAvg": FedAvg(lr=0.3, local_steps=5),
    "FedProx": FedProx(lr=0.3, local_steps=5, mu=0.1),
    "FedProxTE": FedProxTE(beta=0.5, lr=0.3, local_steps=5, mu=0.1),
    "FedCurv": FedCurv(lr=0.3, local_steps=5, alpha=0.1),
    "FedCurvTE": FedCurvTE(beta=0.5, lr=0.3, local_steps=5, alpha=0.1),
    "FedOpt": FedOpt(client_optimizer=optim.adagrad(0.05), server_optimizer=optim.adam(0.1), local_steps=5),
    "Scaffold": Scaffold(lr=0.3, local_steps=5),
    "FedDyn": FedDyn(alpha=0.1, solver="gd", lr=0.3, local_steps=5),
    "FedElasticNet": FedElasticNet(base="fedavg", lambda1=1e-3, lambda2=0.1, solver="gd", lr=0.3,
                                   local_steps=5),
    "EFL": EFL(lr=0.3, local_steps=5, lam=0.1, q=0.5),
}
out = {"optimum": digest(fed.optimum()), "grad": digest(fed.client_grad(np.ones((6, 120))))}
for name, alg in algorithms.items():
    out[name] = digest(run(alg, fed, 15, seed=1).x)
print(json.dumps(out))
'''


def _digests(threads: str | None, keep: bool = False) -> dict[str, str]:
    unset = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "FLTHEORY_BLAS_THREADS")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    if threads is not None:
        env["OPENBLAS_NUM_THREADS"] = threads
    if keep:
        env["FLTHEORY_BLAS_THREADS"] = "keep"
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_algorithm_gives_identical_bits_at_one_two_and_default_blas_threads():
    one, two, default = _digests("1"), _digests("2"), _digests(None)
    assert len(one) == 12
    differing = {k for k in one if not (one[k] == two[k] == default[k])}
    assert not differing, f"bits depend on the BLAS thread count for {sorted(differing)}"


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="a threaded BLAS needs two cores to differ")
def test_the_instance_is_sensitive_without_the_pin():
    """Control: with the pin switched off, two threads change some bits (so the
    test above is not vacuous on this machine)."""
    one, two = _digests("1", keep=True), _digests("2", keep=True)
    assert any(one[k] != two[k] for k in one)
