"""random_quadratic builds its Hessians chunk by chunk: the same bits as from the whole
stack, the same generator state afterwards, and memory peaking at about its final size."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import fltheory.problems.generators as generators
from fltheory.errors import InvalidProblemError
from fltheory.problems import QuadraticFederation, random_quadratic


def _arrays(fed: QuadraticFederation) -> tuple[np.ndarray, ...]:
    return fed.H, fed.e, fed.offsets, fed.weights


def _build(constants: str, kappa: float, rng: np.random.Generator) -> QuadraticFederation:
    return random_quadratic(23, 7, L=2.0 * kappa, mu=2.0, heterogeneity=0.8, seed=rng, constants=constants,
                            weights=np.arange(1.0, 24.0))


@pytest.mark.parametrize(("constants", "kappa"), [("clients", 5.0), ("global", 5.0), ("global", 1e13)])
def test_chunk_size_changes_no_bit_and_no_later_draw(monkeypatch, constants, kappa):
    """One client per chunk and every client in one chunk give identical federations and
    leave the generator in the same state (kappa = 1e13 takes the balanced split, which
    redraws the client Hessians from a copy of the generator)."""
    results = []
    for chunk_bytes in (1, 1 << 40):
        monkeypatch.setattr(generators, "_CHUNK_BYTES", chunk_bytes)
        rng = np.random.default_rng(11)
        fed = _build(constants, kappa, rng)
        results.append((_arrays(fed), rng.standard_normal(3)))
    (a, after_a), (b, after_b) = results
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert np.array_equal(after_a, after_b)


def test_balanced_split_is_taken_and_exact_at_high_condition(monkeypatch):
    """The kappa = 1e13 case above really goes through the balanced split, whose global
    Hessian is S = sum p_i H_i with extremes mu and L (to float64 rounding of L)."""
    calls = []
    original = generators._balanced_split
    monkeypatch.setattr(generators, "_balanced_split", lambda *a: calls.append(1) or original(*a))
    fed = _build("global", 1e13, np.random.default_rng(11))
    assert calls
    lam = np.linalg.eigvalsh(np.einsum("i,ijk->jk", fed.weights, fed.H))
    assert lam[-1] == pytest.approx(2e13, rel=1e-12)
    assert abs(lam[0] - 2.0) <= 1e-15 * 2e13 * 10


def _traced_peak(build):
    """(result of ``build()``, peak bytes traced by tracemalloc while it ran)."""
    tracemalloc.start()
    try:
        out = build()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return out, peak


def _peak_over_final(**kwargs) -> float:
    fed, peak = _traced_peak(lambda: random_quadratic(**kwargs))
    return peak / sum(a.nbytes for a in _arrays(fed))


def _structured_peak_over_final(*args, **kwargs) -> float:
    from fltheory.problems import random_structured_quadratic
    fed, peak = _traced_peak(lambda: random_structured_quadratic(*args, **kwargs))
    return peak / sum(v.nbytes for v in (fed.diag, fed.e, fed._V, fed.offsets, fed.weights))


@pytest.mark.parametrize(("constants", "kappa"), [("clients", 8.0), ("global", 8.0), ("global", 1e13)])
def test_construction_peaks_below_one_and_a_half_times_the_federation(constants, kappa):
    """At N = 400, d = 50 (8 MB of Hessians) the generator used to peak at 4-7x its result."""
    ratio = _peak_over_final(n_clients=400, dim=50, L=2.0 * kappa, mu=2.0, heterogeneity=1.0, seed=0,
                             constants=constants)
    assert ratio <= 1.5


def test_owned_hessians_are_checked_for_finiteness_without_a_copy():
    H = np.stack([np.eye(3)] * 5)
    assert QuadraticFederation._adopt(H, np.zeros((5, 3))).H is H
    H[3, 1, 2] = np.nan
    with pytest.raises(InvalidProblemError, match=r"H contains a non-finite value nan at index \(3, 1, 2\)"):
        QuadraticFederation._adopt(H, np.zeros((5, 3)))


def test_adopted_federation_equals_the_public_construction():
    base = random_quadratic(9, 4, L=3.0, mu=1.0, heterogeneity=0.5, seed=2)
    rng = np.random.default_rng(0)
    H = base.H + 1e-13 * rng.standard_normal(base.H.shape)        # asymmetric within tolerance
    public = QuadraticFederation(H, base.e, weights=np.arange(1.0, 10.0), offsets=base.offsets)
    adopted = QuadraticFederation._adopt(H.copy(), base.e.copy(), weights=np.arange(1.0, 10.0), offsets=base.offsets)
    assert all(np.array_equal(x, y) for x, y in zip(_arrays(public), _arrays(adopted)))


@pytest.mark.parametrize("constants", ["global", "clients"])
@pytest.mark.parametrize(("N", "d", "r"), [(23, 7, 3), (6, 40, 5), (9, 5, 0)])
def test_structured_chunk_size_changes_no_bit_and_no_later_draw(monkeypatch, constants, N, d, r):
    """random_structured_quadratic draws and scales its factors chunk by chunk (the global
    scale redraws them from a copy of the generator): one client per chunk and one chunk
    for all give identical federations and the same generator state afterwards."""
    from fltheory.problems import random_structured_quadratic, structured_generators

    results = []
    for chunk_bytes in (1, 1 << 40):
        monkeypatch.setattr(structured_generators, "_CHUNK_BYTES", chunk_bytes)
        rng = np.random.default_rng(3)
        fed = random_structured_quadratic(N, d, rank=r, L=9.0, mu=1.0, heterogeneity=0.6, seed=rng,
                                          constants=constants, weights=np.arange(1.0, N + 1))
        results.append(((fed.diag, fed.e, fed.factors, fed.offsets), rng.standard_normal(3)))
    (a, after_a), (b, after_b) = results
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert np.array_equal(after_a, after_b)


@pytest.mark.parametrize("constants", ["global", "clients"])
def test_structured_construction_peaks_below_one_and_a_half_times_the_federation(constants):
    """N = 200, d = 1000, r = 8 (16 MB): the generator used to peak at 4x (global) and 3.2x."""
    assert _structured_peak_over_final(200, 1000, rank=8, L=8.0, mu=1.0, heterogeneity=1.0, seed=0,
                                       constants=constants) <= 1.5


def test_least_squares_construction_peaks_below_one_and_a_half_times_the_federation():
    """random_least_squares draws its rows straight into the federation's padded storage
    (it used to hold a list of the rows, a checked copy and the padded array: 2.9x)."""
    from fltheory.problems import random_least_squares

    fed, peak = _traced_peak(lambda: random_least_squares(100, 50, rows=200, seed=0, heterogeneity=1.0, noise=0.1))
    final = sum(v.nbytes for v in (fed.H, fed.e, fed.offsets, fed.weights, fed._A, fed._b, fed._rows))
    assert peak <= 1.5 * final


def test_least_squares_rows_are_the_draws_of_per_client_arrays():
    """The rows of client i are the numbers of rng.standard_normal((n_i, d)) drawn client
    after client, then the noise of b client after client (the documented order)."""
    from fltheory.problems import random_least_squares

    rows = [3, 5, 2]
    fed = random_least_squares(3, 2, rows=rows, seed=7, heterogeneity=0.5, noise=0.3, ridge=0.1)
    rng = np.random.default_rng(7)
    rng.standard_normal(2)
    rng.standard_normal((3, 2))                       # w0 and the directions v_i
    A = [rng.standard_normal((k, 2)) for k in rows]
    for i, a in enumerate(A):
        assert np.array_equal(fed._A[i, :rows[i]], a)
        assert not fed._A[i, rows[i]:].any()


@pytest.mark.parametrize(("N", "d"), [(20000, 2), (50000, 4)])
def test_construction_of_many_small_clients_peaks_below_one_and_a_half(N, d):
    """Many clients in a small dimension: the (N, d) temporaries of the optima and the fixed
    256 KB chunks used to be a large share of the federation (2.07x at N = 20000, d = 2)."""
    ratio = _peak_over_final(n_clients=N, dim=d, L=16.0, mu=2.0, heterogeneity=1.0, seed=0, constants="clients")
    assert ratio <= 1.5


def test_diagonal_structured_construction_peaks_below_one_and_a_half_times_the_federation():
    """Rank 0, N = 1000, d = 2000 (32 MB): the optima's (N, d) temporaries (Gaussians, H_i g_i,
    solves, linear terms) used to peak at 1.67x; one (N, d) array is now held besides D."""
    assert _structured_peak_over_final(1000, 2000, rank=0, L=8.0, mu=1.0, heterogeneity=1.0, seed=0) <= 1.2


def test_few_large_clients_global_construction_holds_few_dimension_squared_temporaries():
    """N = 3, d = 300: the result is 3 d x d matrices, so every d x d temporary is a third of it.
    The global construction used to hold S, Q_s, Hbar, the previous M and the eigenvectors at once
    (4.0x); it now holds besides H at most S^{1/2} and numpy's QR of one client (about 3.1 d x d
    arrays), or S^{1/2} with the eigenvectors of Hbar, their scaled copy and the product (4): 2.37x."""
    ratio = _peak_over_final(n_clients=3, dim=300, L=16.0, mu=2.0, heterogeneity=1.0, seed=0, constants="global")
    assert ratio <= 2.45
