"""Threaded local-step gradients of logistic clients: the size groups spread over
threads (``thread_shares``) cover every client exactly once, and the threaded
gradient equals the unthreaded one and ``client_grad`` bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fltheory.algorithms import FedAvg, run
from fltheory.errors import InvalidHyperparameterError
from fltheory.problems import LogisticFederation
from fltheory.problems import logistic as logistic_module
from fltheory.problems._logistic_buckets import Part, thread_shares
from fltheory.problems.synthetic import synthetic_fedprox

from .problem_refs import make_logistic


def _parts(sizes: list[list[int]], f: int = 3) -> tuple[list[Part], int]:
    """Groups of clients (given by their padded row counts) with client i's rows
    holding the value i, as the size-bucket plan would pass them."""
    parts, start = [], 0
    for group in sizes:
        k = max(group)
        m = len(group)
        ids = np.arange(start, start + m)
        A = np.broadcast_to(ids[:, None, None].astype(float), (m, k, f)).copy()
        parts.append(Part(ids[::-1].copy() if m % 2 else ids, A, np.zeros((m, k)), np.ones((m, k))))
        start += m
    return parts, start


@given(st.lists(st.lists(st.integers(1, 400), min_size=1, max_size=6), min_size=1, max_size=8),
       st.integers(1, 4))
def test_thread_shares_cover_every_client_once_and_balance(sizes, threads):
    parts, m = _parts(sizes)
    parts[0] = parts[0]._replace(pos=None) if len(parts) == 1 else parts[0]
    shares = thread_shares(parts, m, threads, work_per_row=100.0)
    assert 1 <= len(shares) <= threads
    seen = []
    for share in shares:
        for p in share:
            pos = np.arange(m) if p.pos is None else np.arange(m)[p.pos]
            assert pos.shape[0] == p.A.shape[0]
            np.testing.assert_array_equal(p.A[:, 0, 0], np.asarray(parts_client_ids(parts, m))[pos])
            seen.extend(pos.tolist())
    assert sorted(seen) == list(range(m))
    cost = [sum(p.A.shape[0] * p.A.shape[1] * 100.0 + 1.0e5 for p in s) for s in shares]
    splittable = any(p.A.shape[0] > 1 for s in shares for p in s)
    if len(shares) < threads:                      # an idle thread only when nothing can be cut
        assert not splittable
    elif splittable and max(cost) > 1.15 * sum(cost) / threads:
        # cuts are bounded (2 * threads); only then may the shares stay unbalanced
        assert sum(len(s) for s in shares) >= len(parts) + 1


def parts_client_ids(parts: list[Part], m: int) -> np.ndarray:
    """Client id held by position r of the caller's list (inverse of the parts' pos)."""
    ids = np.empty(m)
    for p in parts:
        pos = np.arange(m) if p.pos is None else np.arange(m)[p.pos]
        ids[pos] = p.A[:, 0, 0]
    return ids


def test_one_part_of_many_clients_is_cut_for_the_threads():
    parts, m = _parts([[50] * 8])
    parts = [parts[0]._replace(pos=None)]
    shares = thread_shares(parts, m, 2, work_per_row=1000.0)
    assert len(shares) == 2
    assert [s[0].pos for s in shares] in ([slice(0, 4), slice(4, 8)], [slice(4, 8), slice(0, 4)])


@pytest.mark.parametrize("kind", ["binary", "multinomial", "multinomial unequal sizes"])
@pytest.mark.parametrize("clients", [None, np.array([3, 1, 1, 0, 5, 2])])
@pytest.mark.parametrize("threads", [2, 3])
def test_threaded_bound_gradient_gives_the_bits_of_client_grad(monkeypatch, kind, clients, threads):
    monkeypatch.setattr(logistic_module, "_MIN_THREADED_FLOPS", 0.0)      # thread even tiny steps
    if kind == "multinomial unequal sizes":
        fed = synthetic_fedprox(1.0, 1.0, seed=2, reg=1e-3, n_devices=12, dim=5, n_classes=3).train
    else:
        fed = make_logistic(6, 6, 4, 30, n_classes=None if kind == "binary" else 3, reg=0.1)
    idx = np.arange(fed.n_clients) if clients is None else clients
    X = 0.5 * np.random.default_rng(8).standard_normal((idx.shape[0], fed.dim))
    want = fed.client_grad(X, idx)
    one = fed.with_threads(1).row_gradient(idx, None)
    many = fed.with_threads(threads).row_gradient(idx, None)
    np.testing.assert_array_equal(one(X), want)
    np.testing.assert_array_equal(many(X), want)
    out = np.full_like(X, np.nan)
    assert many(X, out) is out
    np.testing.assert_array_equal(out, want)


def test_fedavg_rounds_identical_for_any_thread_count():
    fed = synthetic_fedprox(1.0, 1.0, seed=0, reg=1e-3).train        # steps large enough to use the threads
    alg = FedAvg(lr=0.05, local_steps=4)
    xs = [run(alg, fed.with_threads(t), 2, metrics=()).x[-1] for t in (1, 2)]
    np.testing.assert_array_equal(xs[0], xs[1])


def test_with_threads_returns_a_copy_and_refuses_bad_counts():
    fed = make_logistic(4, 6, 3, 30, n_classes=None, reg=0.1)
    two = fed.with_threads(2)
    assert isinstance(two, LogisticFederation) and two._threads == 2
    assert fed.with_threads(1)._threads == 1 and fed._threads == LogisticFederation._threads
    for bad in (0, -1, 1.5, True, "2", None):
        with pytest.raises(InvalidHyperparameterError, match="threads"):
            fed.with_threads(bad)


@given(st.integers(0, 2**31 - 1), st.lists(st.integers(1, 40), min_size=1, max_size=9),
       st.sampled_from([None, 2, 3, 11]), st.integers(1, 3), st.booleans())
def test_bound_gradient_equals_client_grad_bits_for_any_sizes(monkeypatch_seed, rows, n_classes, threads, repeat):
    """Random client sizes (1-row clients included: their groups take the unfused
    path), any class count, threaded or not, repeated clients: row_gradient gives
    client_grad's bits."""
    rng = np.random.default_rng(monkeypatch_seed)
    feats = [rng.standard_normal((n, 3)) for n in rows]
    if n_classes is None:
        labs = [np.where(rng.random(n) < 0.5, -1.0, 1.0) for n in rows]
    else:
        labs = [rng.integers(0, n_classes, n) for n in rows]
    fed = LogisticFederation(feats, labs, reg=0.05, n_classes=n_classes)
    idx = np.arange(len(rows))
    if repeat:
        idx = rng.integers(0, len(rows), len(rows) + 2)
    X = rng.standard_normal((idx.shape[0], fed.dim))
    saved = logistic_module._MIN_THREADED_FLOPS
    logistic_module._MIN_THREADED_FLOPS = 0.0
    try:
        grad = fed.with_threads(threads).row_gradient(idx, None)
    finally:
        logistic_module._MIN_THREADED_FLOPS = saved
    want = fed.client_grad(X, idx)
    np.testing.assert_array_equal(grad(X), want)
    np.testing.assert_array_equal(grad(X), want)                # the reused logit buffer


def test_softmax_groups_gradient_equals_multi_grad_per_group():
    """One logit buffer for groups padded to 1, 2 and 7 rows gives each group's multi_grad bits."""
    from fltheory.problems import _logistic_oracles as lo
    rng = np.random.default_rng(3)
    C, f = 4, 5
    groups = []
    for m, k in ((3, 1), (2, 2), (4, 7)):
        rows = rng.integers(1, k + 1, m)
        A = rng.standard_normal((m, k, f)) * (np.arange(k)[None, :, None] < rows[:, None, None])
        y = rng.integers(0, C, (m, k))
        rw = (np.arange(k)[None, :] < rows[:, None]) / rows[:, None]
        groups.append((A, y, rw))
    X = 3.0 * rng.standard_normal((9, f * C))                      # the groups' clients stacked
    order = np.array([8, 0, 4, 2, 6, 1, 3, 5, 7])                  # group order -> the caller's rows
    fused = lo.SoftmaxGroupsGrad(groups, C, order, 9)
    out = np.full_like(X, np.nan)
    losses = np.full(9, np.nan)
    # buffers (logits, class maxima and sums, ridge term) reused across calls at other points and ridges,
    # with and without losses: nothing of one call may leak into the next
    for Xc, reg, with_losses in ((X, 0.1, True), (-0.5 * X, 0.0, False), (X[::-1].copy(), 2.0, True),
                                 (X, 0.1, True)):
        out[...] = np.nan
        fused(Xc, reg, out, losses if with_losses else None)
        for (A, y, rw), (a, b) in zip(groups, ((0, 3), (3, 5), (5, 9)), strict=True):
            np.testing.assert_array_equal(out[order[a:b]], lo.multi_grad(A, y, rw, Xc[order[a:b]], reg, C))
            if with_losses:
                np.testing.assert_array_equal(losses[order[a:b]], lo.multi_loss(A, y, rw, Xc[order[a:b]], reg, C))
    # too few points for the bound positions: a typed error, not a clipped gather repeating the last row
    from fltheory.errors import InvalidProblemError
    for bad in (X[:8], X[:, None, :], X[0]):
        with pytest.raises(InvalidProblemError, match=r"needs points of shape \(>= 9, 20\)"):
            fused(bad, 0.1, out)


def test_bound_gradient_is_cached_per_client_list_and_writes_any_out():
    fed = synthetic_fedprox(1.0, 1.0, seed=2, reg=1e-3, n_devices=12, dim=5, n_classes=3).train
    idx = np.arange(fed.n_clients)
    grad = fed.row_gradient(idx, None)
    assert fed.row_gradient(np.arange(fed.n_clients), None) is grad          # layout built once
    X = np.random.default_rng(1).standard_normal((fed.n_clients, fed.dim))
    want = fed.client_grad(X)
    strided = np.full((fed.n_clients, 2 * fed.dim), np.nan)[:, ::2]        # not C-contiguous
    assert grad(X, strided) is strided
    np.testing.assert_array_equal(strided, want)
    fed.reg = 0.5                                                          # a changed ridge: new binding
    np.testing.assert_array_equal(fed.row_gradient(idx, None)(X), fed.client_grad(X))
    assert not np.array_equal(fed.client_grad(X), want)


def test_federation_pickles_and_copies_after_binding_gradients():
    import copy
    import pickle
    fed = synthetic_fedprox(1.0, 1.0, seed=2, reg=1e-3, n_devices=12, dim=5, n_classes=3).train
    X = np.random.default_rng(1).standard_normal((fed.n_clients, fed.dim))
    want = fed.row_gradient(None, None)(X)
    for other in (pickle.loads(pickle.dumps(fed)), copy.deepcopy(fed), fed.with_threads(1)):
        np.testing.assert_array_equal(other.row_gradient(None, None)(X), want)


def test_one_bound_gradient_called_from_two_threads_at_once(monkeypatch):
    """The cached binding is shared: concurrent calls must not mix their buffers."""
    from concurrent.futures import ThreadPoolExecutor
    monkeypatch.setattr(logistic_module, "_MIN_THREADED_FLOPS", 0.0)
    fed = synthetic_fedprox(1.0, 1.0, seed=2, reg=1e-3, n_devices=12, dim=5, n_classes=3).train.with_threads(2)
    grad = fed.row_gradient(None, None)
    rng = np.random.default_rng(5)
    Xs = [rng.standard_normal((fed.n_clients, fed.dim)) for _ in range(2)]
    wants = [fed.client_grad(X) for X in Xs]

    def hammer(j: int) -> bool:
        return all(np.array_equal(grad(Xs[j]), wants[j]) for _ in range(200))

    import sys
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)                  # interleave the two callers as much as possible
    try:
        with ThreadPoolExecutor(2) as pool:
            assert all(pool.map(hammer, [0, 1]))
    finally:
        sys.setswitchinterval(switch)


@given(st.integers(0, 2**31 - 1), st.lists(st.integers(1, 40), min_size=1, max_size=9),
       st.sampled_from([2, 3, 11]), st.sampled_from([0.0, 0.05]))
def test_fused_loss_and_gradient_norm_give_the_default_bits_for_any_sizes(seed, rows, n_classes, reg):
    """loss_and_grad_norm2 of softmax clients (one logit buffer for all size groups,
    1-row groups unfused) equals Federation's default from loss() and grad()."""
    from fltheory.problems import Federation
    rng = np.random.default_rng(seed)
    feats = [rng.standard_normal((n, 3)) for n in rows]
    labs = [rng.integers(0, n_classes, n) for n in rows]
    fed = LogisticFederation(feats, labs, reg=reg, n_classes=n_classes)
    X = rng.standard_normal((2, fed.dim))
    got, want = fed.loss_and_grad_norm2(X), Federation.loss_and_grad_norm2(fed, X)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_thread_count_survives_removing_and_adding_clients():
    fed = make_logistic(4, 6, 3, 30, n_classes=3, reg=0.1).with_threads(2)
    assert fed.without_client(0)._threads == 2
    assert fed.with_client(make_logistic(5, 2, 3, 30, n_classes=3, reg=0.1))._threads == 2


@pytest.mark.parametrize("cap", [0, None])
def test_softmax_groups_transposed_copy_gives_the_view_bits(monkeypatch: pytest.MonkeyPatch, cap: int | None) -> None:
    """The logits read a contiguous copy of A^T while it fits ``_TRANSPOSED_BYTES`` (else the
    view of A): on the benchmark's Synthetic(1,1) shapes (f = 61, C = 10, groups of 56..800
    rows) both give every group's multi_grad bits."""
    from fltheory.problems import _logistic_oracles as lo
    if cap is not None:
        monkeypatch.setattr(lo, "_TRANSPOSED_BYTES", cap)
    fed = synthetic_fedprox(1.0, 1.0, seed=0, reg=1e-3).train
    C = fed.n_classes
    assert C is not None
    idx = np.arange(fed.n_clients)
    plan = fed._plan(idx)
    assert plan is not None and len(plan) > 1
    order = np.concatenate([b.pos for b in plan])
    fused = lo.SoftmaxGroupsGrad([(b.A, b.y, b.rw) for b in plan], C, order, fed.n_clients)
    first = [p[1] for p in fused.products]
    assert all(a.flags.c_contiguous for a in first) == (cap is None)
    X = 0.05 * np.random.default_rng(4).standard_normal((fed.n_clients, fed.dim))
    out = np.full_like(X, np.nan)
    fused(X, fed.reg, out)
    for b in plan:
        np.testing.assert_array_equal(out[b.pos], lo.multi_grad(b.A, b.y, b.rw, X[b.pos], fed.reg, C))
