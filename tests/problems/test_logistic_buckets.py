"""Size-bucketed logistic oracles (heterogeneous client sizes) against the fully
padded batched evaluation (for softmax: the scipy softmax/logsumexp/one-hot
formulas the oracles used before) and per-sample loops; the bucket cuts against
brute force."""

from __future__ import annotations

import itertools
from unittest import mock

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from scipy.special import logsumexp, softmax

from fltheory.problems import LogisticFederation
from fltheory.problems import _logistic_buckets as lb
from fltheory.problems import _logistic_oracles as lo
from fltheory.problems._logistic_buckets import optimal_cuts

from .problem_refs import ref_binary, ref_multi


def _unequal(seed: int, n_clients: int, n_feat: int, n_classes: int | None) -> LogisticFederation:
    """Sizes spread over two orders of magnitude (1 .. ~300 rows), heavy-tailed."""
    rng = np.random.default_rng(seed)
    rows = np.maximum(1, np.exp(rng.uniform(0.0, 5.7, n_clients)).astype(int))
    feats = [rng.standard_normal((int(n), n_feat)) for n in rows]
    if n_classes is None:
        labs = [np.where(rng.random(int(n)) < 0.5, -1.0, 1.0) for n in rows]
    else:
        labs = [rng.integers(0, n_classes, int(n)) for n in rows]
    return LogisticFederation(feats, labs, reg=0.05, n_classes=n_classes)


# group overheads (flops) from "every distinct size its own group" to the default
OVERHEADS = st.sampled_from([0.0, 200.0, 2000.0, lb._GROUP_OVERHEAD_FLOPS])


@given(st.integers(0, 2**31 - 1), st.integers(2, 12), st.sampled_from([None, 2, 4]),
       st.integers(1, 20), OVERHEADS)
def test_bucketed_loss_and_grad_equal_padded_evaluation(seed, n_clients, n_classes, m, overhead):
    with mock.patch.object(lb, "_GROUP_OVERHEAD_FLOPS", overhead):
        _check_against_padded(seed, n_clients, n_classes, m)


def _padded_multi(A, y, rw, X, reg, C):
    """The fully padded softmax loss and gradient with scipy's softmax/logsumexp and a
    one-hot matrix (the pre-bucketing implementation, kept here as the reference)."""
    m, n, f = A.shape
    Z = np.matmul(A, X.reshape(m, f, C))
    picked = np.take_along_axis(Z, y[:, :, None], axis=2)[:, :, 0]
    loss = np.einsum("mn,mn->m", rw, logsumexp(Z, axis=2) - picked) + 0.5 * reg * np.einsum("md,md->m", X, X)
    R = softmax(Z, axis=2) - (y[:, :, None] == np.arange(C))
    grad = np.matmul(np.swapaxes(A, 1, 2), rw[:, :, None] * R).reshape(m, f * C) + reg * X
    return loss, grad


def _check_against_padded(seed, n_clients, n_classes, m):
    fed = _unequal(seed, n_clients, 3, n_classes)
    rng = np.random.default_rng(seed + 1)
    clients = rng.integers(0, n_clients, m)                 # any order, repeats
    X = rng.standard_normal((m, fed.dim))
    A, y, rw = fed._A[clients], fed._y[clients], fed._rw[clients]
    if n_classes is None:
        l0, g0 = lo.binary_loss(A, y, rw, X, fed.reg), lo.binary_grad(A, y, rw, X, fed.reg)
    else:
        l0, g0 = _padded_multi(A, y, rw, X, fed.reg, n_classes)
    for _ in range(2):                                       # fresh plan, then the cached one
        np.testing.assert_allclose(fed.client_loss(X, clients), l0, rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(fed.client_grad(X, clients), g0, rtol=1e-13,
                                   atol=1e-13 * np.abs(g0).max())
    # Fisher diagonals: true (Hessian diagonal without ridge) and empirical (per-sample
    # data gradients squared), against the padded per-sample arrays
    G = fed.per_sample_grads(X, clients) - fed.reg * X[:, None, :] * fed.sample_mask(clients)[:, :, None]
    emp = np.einsum("mn,mnd->md", rw, G * G)
    np.testing.assert_allclose(fed.empirical_fisher_diag(X, clients), emp, rtol=1e-12,
                               atol=1e-14 * max(1.0, np.abs(emp).max()))
    H = fed.client_hess(X, clients)
    true = np.diagonal(H, axis1=1, axis2=2) - fed.reg
    np.testing.assert_allclose(fed.fisher_diag(X, clients), true, rtol=1e-11,
                               atol=1e-13 * max(1.0, np.abs(true).max()))
    # all clients in storage order, too
    Xa = rng.standard_normal((n_clients, fed.dim))
    ga = (lo.binary_grad(fed._A, fed._y, fed._rw, Xa, fed.reg) if n_classes is None
          else _padded_multi(fed._A, fed._y, fed._rw, Xa, fed.reg, n_classes)[1])
    np.testing.assert_allclose(fed.client_grad(Xa), ga, rtol=1e-13, atol=1e-13 * np.abs(ga).max())


def test_bucketed_oracles_match_per_sample_loops_and_really_bucket(monkeypatch):
    monkeypatch.setattr(lb, "_GROUP_OVERHEAD_FLOPS", 100.0)
    fed = _unequal(3, 9, 2, 3)
    clients = np.array([8, 0, 0, 5, 2, 7, 1, 3, 4, 6, 8])
    plan = fed._plan(clients)
    assert plan is not None and len(plan) >= 2               # sizes differ enough to split
    covered = np.sort(np.concatenate([b.pos for b in plan]))
    np.testing.assert_array_equal(covered, np.arange(clients.size))
    X = np.random.default_rng(0).standard_normal((clients.size, fed.dim))
    loss, grad = fed.client_loss(X, clients), fed.client_grad(X, clients)
    for r, i in enumerate(clients):
        l, g, _ = ref_multi(fed.features[i], fed.labels[i], X[r], fed.reg, 3)
        np.testing.assert_allclose(loss[r], l, rtol=1e-12)
        np.testing.assert_allclose(grad[r], g, rtol=1e-11, atol=1e-13)
    fb = _unequal(4, 9, 2, None)
    X = np.random.default_rng(1).standard_normal((clients.size, fb.dim))
    gb = fb.client_grad(X, clients)
    for r, i in enumerate(clients):
        np.testing.assert_allclose(gb[r], ref_binary(fb.features[i], fb.labels[i], X[r], fb.reg)[1],
                                   rtol=1e-11, atol=1e-13)


@given(st.lists(st.integers(1, 60), min_size=1, max_size=8), st.sampled_from([0.0, 5.0, 40.0]))
def test_optimal_cuts_minimise_the_padded_cost(sizes, penalty):
    s = np.sort(np.array(sizes))
    m = s.size
    cost = lambda cuts: sum((b - a) * s[b - 1] + penalty for a, b in cuts)
    cuts = optimal_cuts(s, penalty)
    assert cuts[0][0] == 0 and cuts[-1][1] == m
    assert all(c[1] == d[0] for c, d in itertools.pairwise(cuts))
    brute = min(cost(list(zip((0,) + inner, inner + (m,))))
                for r in range(m) for inner in itertools.combinations(range(1, m), r))
    assert abs(cost(cuts) - brute) <= 1e-9 * max(1.0, brute)


@given(st.lists(st.integers(1, 1000), min_size=1, max_size=60), st.integers(2, 6),
       st.sampled_from([0.0, 30.0]))
def test_capped_cuts_partition_and_never_cost_more_than_one_group(sizes, cap, penalty):
    s = np.sort(np.array(sizes))
    cuts = optimal_cuts(s, penalty, max_candidates=cap)
    assert cuts[0][0] == 0 and cuts[-1][1] == s.size
    assert all(a < b for a, b in cuts) and all(c[1] == d[0] for c, d in itertools.pairwise(cuts))
    assert len(cuts) <= cap + 1
    cost = sum((b - a) * s[b - 1] + penalty for a, b in cuts)
    assert cost <= s.size * s[-1] + penalty + 1e-9
