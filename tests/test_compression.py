"""ST, top-k, thresholding, error feedback, entropy and communication accounting."""

import functools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st_
from hypothesis.extra import numpy as hnp

from fltheory import compression as C
from fltheory.errors import InvalidHyperparameterError, InvalidProblemError

rows = hnp.arrays(np.float64, st_.tuples(st_.integers(1, 4), st_.integers(1, 12)),
                  elements=st_.floats(-5, 5, allow_nan=False, width=64))
# values drawn from a small set so ties are frequent
tied_rows = hnp.arrays(np.float64, st_.tuples(st_.integers(1, 4), st_.integers(1, 12)),
                       elements=st_.sampled_from([-2.0, -1.0, 0.0, 1.0, 2.0]))


def _st_reference(row, q, ties):
    """Readable Algorithm 2 of seed 000 for one row."""
    d = len(row)
    k = max(math.floor(d * q), 1)
    order = sorted(range(d), key=lambda i: (-abs(row[i]), i))     # larger first, then index
    if ties == "index":
        kept = set(order[:k])
    else:
        e = abs(row[order[k - 1]])
        kept = {i for i in range(d) if abs(row[i]) >= e}
    mu = sum(abs(row[i]) for i in kept) / k
    return np.array([mu * np.sign(row[i]) if i in kept else 0.0 for i in range(d)]), kept


@given(st_.one_of(rows, tied_rows), st_.floats(0.01, 1.0), st_.sampled_from(["index", "keep_all"]))
def test_st_matches_readable_algorithm(V, q, ties):
    out = C.st(V, q, ties=ties)
    assert out.shape == V.shape
    for i in range(V.shape[0]):
        ref, kept = _st_reference(list(V[i]), q, ties)
        np.testing.assert_allclose(out[i], ref, rtol=1e-13, atol=1e-300)


@given(tied_rows, st_.floats(0.01, 1.0))
def test_st_index_ties_keeps_exactly_k_ternary(V, q):
    d = V.shape[1]
    k = max(math.floor(d * q), 1)
    mask = C.top_k_mask(V, k)
    assert np.all(mask.sum(axis=1) == k)
    out = C.st(V, q)
    for i in range(V.shape[0]):
        vals = np.unique(np.abs(out[i][out[i] != 0]))
        assert vals.size <= 1                              # ternary {-mu, 0, mu}
        assert np.count_nonzero(out[i]) == np.count_nonzero(V[i][mask[i]])


def test_st_tie_rule_explicit_example():
    V = np.array([[1.0, -3.0, 3.0, 3.0, 0.5]])         # d = 5, q = 0.4 -> k = 2
    out = C.st(V, 0.4)
    np.testing.assert_allclose(out, [[0.0, -3.0, 3.0, 0.0, 0.0]], rtol=0)   # indices 1, 2 kept
    out_all = C.st(V, 0.4, ties="keep_all")                 # three kept, mu = 9/2 as printed
    np.testing.assert_allclose(out_all, [[0.0, -4.5, 4.5, 4.5, 0.0]], rtol=1e-15)
    np.testing.assert_allclose(C.st(V[0], 0.01), [0.0, -3.0, 0.0, 0.0, 0.0], rtol=0)  # k = max(0, 1)


def test_top_k_and_threshold():
    V = np.array([[0.1, -0.5, 0.3, -0.3], [2.0, 0.0, -2.0, 1.0]])
    np.testing.assert_allclose(C.top_k(V, 2), [[0.0, -0.5, 0.3, 0.0], [2.0, 0.0, -2.0, 0.0]], rtol=0)
    np.testing.assert_allclose(C.top_k(V, 2, ties="keep_all"),
                               [[0.0, -0.5, 0.3, -0.3], [2.0, 0.0, -2.0, 0.0]], rtol=0)
    np.testing.assert_allclose(C.threshold(V, 0.3), [[0.0, -0.5, 0.0, 0.0], [2.0, 0.0, -2.0, 1.0]], rtol=0)
    np.testing.assert_allclose(C.threshold(V, 0.0), V, rtol=0)


@given(rows, rows, st_.sampled_from(["st", "top_k", "threshold"]))
def test_error_feedback_conservation(V, R, name):
    R = np.resize(R, V.shape)
    comp = {"st": functools.partial(C.st, q=0.3), "top_k": functools.partial(C.top_k, k=1),
            "threshold": functools.partial(C.threshold, eps=1.0)}[name]
    sent, res = C.ef_compress(V, R, comp)
    total = V + R
    scale = max(1.0, float(np.max(np.abs(total))), float(np.max(np.abs(sent))))
    np.testing.assert_allclose(sent + res, total, rtol=0, atol=4 * np.finfo(float).eps * scale)
    np.testing.assert_allclose(sent, comp(total), rtol=0, atol=0)
    if name != "st":                           # entries sent unchanged or zeroed: exact split
        assert np.all((res == 0) | (sent == 0))


def test_error_feedback_residual_accumulates_unsent_mass():
    """Repeatedly sending the same V with top-1 eventually sends every coordinate."""
    V = np.array([[1.0, 0.6, 0.3]])
    R = np.zeros_like(V)
    total_sent = np.zeros_like(V)
    for _ in range(30):
        s, R = C.ef_compress(V, R, functools.partial(C.top_k, k=1))
        total_sent += s
    np.testing.assert_allclose(total_sent + R, 30 * V, rtol=1e-13)
    assert np.all(total_sent > 0)


def test_entropy_closed_forms():
    w = 0.01
    vals = np.repeat(np.arange(8) * w, 50)                 # uniform over 8 bins
    assert C.entropy(vals, w) == pytest.approx(3.0, abs=1e-12)
    assert C.entropy(np.zeros(10)) == pytest.approx(0.0, abs=1e-15)
    p = np.array([0.5, 0.25, 0.25])                         # 1.5 bits
    vals = np.concatenate([np.full(200, -0.02), np.full(100, 0.0), np.full(100, 0.03)])
    assert C.entropy(vals) == pytest.approx(-(p * np.log2(p)).sum(), abs=1e-12)
    assert C.entropy(np.array([])) == pytest.approx(0.0, abs=1e-15)


def test_entropy_of_one_bin_is_plus_zero():
    """All values in one bin: entropy +0.0, not -0.0 (the negated zero sum; a record printed
    "-0.0" bits per value before)."""
    for vals in (np.zeros(10), np.full(7, 0.5), np.array([0.001, -0.002, 0.004])):
        h = C.entropy(vals)
        assert h == 0.0 and not np.signbit(h), vals
    rec = C.Communication.measure(np.full((3, 2), 0.25), np.zeros(2))
    assert rec.entropy_up == 0.0 and not np.signbit(rec.entropy_up)


def test_entropy_of_discretised_gaussian():
    """H(discretised N(0, s^2)) ~ h + log2(1/w), h = 1/2 log2(2 pi e s^2), when w << s.
    Plug-in entropy of n samples: bias ~ -(bins-1)/(2 n ln 2), sd ~ sqrt(Var(log2 p)/n);
    with s = 0.1 (about 100 occupied bins) and n = 200000 both are < 0.005 bits."""
    rng = np.random.default_rng(0)
    s, w, n = 0.1, 0.01, 200_000
    h = 0.5 * np.log2(2 * np.pi * np.e * s * s)
    est = C.entropy(rng.normal(0, s, size=n), w)
    assert est == pytest.approx(h + np.log2(1 / w), abs=0.02)


def test_communication_measure_and_add():
    d = 8
    up = np.zeros((3, d))
    up[0, :2] = [0.5, -0.5]
    up[2, 3] = 0.5
    down = np.arange(d, dtype=float)
    c = C.Communication.measure(up, down, up_kind="ternary", down_kind="dense")
    assert (c.floats_up, c.nonzeros_up, c.bits_up) == (3, 3, 3 * (1 + 3) + 3 * 32)
    assert (c.floats_down, c.nonzeros_down, c.bits_down) == (d, d - 1, 32 * d)
    s = C.Communication.measure(up, np.broadcast_to(down, (3, d)), up_kind="sparse", down_kind="sparse")
    assert (s.floats_up, s.bits_up) == (3, 3 * (32 + 3))
    assert (s.floats_down, s.nonzeros_down, s.bits_down) == (3 * (d - 1), 3 * (d - 1), 3 * (d - 1) * 35)
    # entropy of 24 values: 21 zeros, two 0.5s, one -0.5
    p = np.array([21, 2, 1]) / 24
    assert c.entropy_up == pytest.approx(-(p * np.log2(p)).sum(), abs=1e-12)
    dense = C.Communication.measure(np.ones((2, d)), down)
    tot = c + dense + C.Communication.zero()
    assert tot.bits_up == c.bits_up + 32 * 2 * d and tot.entries_up == 24 + 16
    assert tot.entropy_up == pytest.approx(c.entropy_up * 24 / 40, abs=1e-12)
    assert tot.entropy_bits_up == pytest.approx(c.entropy_bits_up, abs=1e-12)
    empty = C.Communication.measure(np.zeros((0, d)), down)
    assert empty.bits_up == 0 and empty.entropy_up == pytest.approx(0.0, abs=1e-15)


@pytest.mark.parametrize("call", [
    lambda: C.st(np.ones((2, 3)), 0.0),
    lambda: C.st(np.ones((2, 3)), 1.5),
    lambda: C.st(np.ones((2, 3)), 0.5, ties="random"),
    lambda: C.top_k(np.ones((2, 3)), 0),
    lambda: C.top_k(np.ones((2, 3)), 4),
    lambda: C.top_k(np.ones((2, 3)), 1.5),
    lambda: C.threshold(np.ones(3), -0.1),
    lambda: C.entropy(np.ones(3), 0.0),
    lambda: C.ef_compress(np.ones((2, 3)), np.ones((3, 2)), lambda a: a),
    lambda: C.Communication.measure(np.ones((2, 3)), np.ones(3), up_kind="zip"),
])
def test_invalid_hyperparameters(call):
    with pytest.raises(InvalidHyperparameterError):
        call()


def test_non_finite_input_rejected():
    with pytest.raises(InvalidProblemError):
        C.st(np.array([[1.0, np.nan]]), 0.5)


def _entropy_by_sort(values: np.ndarray, w: float = 0.01) -> float:
    """The previous definition of ``entropy``: counts from np.unique (a sort)."""
    arr = np.asarray(values, dtype=np.float64).ravel()
    if arr.size == 0:
        return 0.0
    _, counts = np.unique(np.rint(arr / w), return_counts=True)
    p = counts / arr.size
    return float(max(-(p * np.log2(p)).sum(), 0.0))


@pytest.mark.parametrize("case", range(12))
def test_entropy_counts_without_sort_are_bit_identical_to_the_sorted_counts(case):
    """Counting the quantised integers (bincount) gives the same counts in the same
    order as np.unique, hence the same float, to the bit: checked on Gaussian updates,
    sparse/ternary messages, -0.0, huge spans (np.unique fallback) and overflowed bins."""
    rng = np.random.default_rng(case)
    w = [0.01, 0.5, 1e-9][case % 3]
    kinds = [
        rng.normal(0, 1, (50, 40)),
        rng.normal(0, 1e-3, 777),
        np.where(rng.random((30, 30)) < 0.9, 0.0, rng.choice([-0.37, 0.37], (30, 30))),
        np.array([-0.0, 0.0, -0.004, 0.004, 0.005, -0.005, 0.015, 1.0]),
        np.concatenate([rng.normal(0, 1, 100), [1e12, -1e12]]),          # span > bincount limit
        np.array([1e300, -1e300, 1e300, 3.0]),                           # v / w may overflow to +-inf
    ]
    v = kinds[case % len(kinds)]
    with np.errstate(over="ignore"):
        overflows = not np.all(np.isfinite(np.rint(v.ravel() / w)))
    if overflows:                    # v / w beyond float64: a typed error, never a made-up entropy
        with pytest.raises(InvalidHyperparameterError, match="bin_width"):
            C.entropy(v, w)
    else:
        assert C.entropy(v, w) == _entropy_by_sort(v, w)
    with np.errstate(over="ignore"):
        assert C._bin_counts(np.rint(v.ravel() / w)).tolist() == \
        np.unique(np.rint(v.ravel() / w), return_counts=True)[1].tolist()


def test_entropy_refuses_a_bin_width_whose_quotients_overflow():
    with pytest.raises(InvalidHyperparameterError, match="bin_width"):
        C.entropy(np.array([-1e300, -1e300]), 1e-10)


def test_measure_counts_a_broadcast_downlink_row_once_with_the_same_result():
    """A broadcast model (stride-0 rows) is checked and counted from one row: the
    record equals the one of the materialised (m, d) array, field by field."""
    rng = np.random.default_rng(3)
    x = np.where(rng.random(17) < 0.3, 0.0, rng.normal(size=17))
    U = rng.normal(0, 0.05, (9, 17))
    for kind in ("dense", "sparse", "ternary"):
        lazy = C.Communication.measure(U, np.broadcast_to(x, (9, 17)), down_kind=kind)
        eager = C.Communication.measure(U, np.tile(x, (9, 1)), down_kind=kind)
        assert lazy == eager
        assert lazy.nonzeros_down == 9 * np.count_nonzero(x)
    assert C.Communication.measure(U, x).entropy_up == C.entropy(U)
    bad = x.copy()
    bad[4] = np.nan
    with pytest.raises(InvalidProblemError, match="down"):
        C.Communication.measure(U, np.broadcast_to(bad, (9, 17)))
    with pytest.raises(InvalidHyperparameterError, match="bin_width"):
        C.Communication.measure(U, x, bin_width=0.0)


def test_top_k_mask_public_checks_and_shapes():
    A = np.array([[3.0, -1.0, 2.0], [0.0, 5.0, -5.0]])
    np.testing.assert_array_equal(C.top_k_mask(A, 2), [[True, False, True], [False, True, True]])
    np.testing.assert_array_equal(C.top_k_mask(A[0], 1), [True, False, False])     # a (d,) row keeps its shape
    assert C.top_k_mask(np.zeros((0, 3)), 1).shape == (0, 3)
    for bad, match in [(float("nan"), "non-finite"), (2.0, "shape"), ("abc", "numeric"), (np.ones((2, 2, 2)), "shape"),
                       (np.array([[1.0, np.nan]]), "non-finite"), (np.ones((2, 2), dtype=complex), "numeric")]:
        with pytest.raises((InvalidProblemError, InvalidHyperparameterError), match=match):
            C.top_k_mask(bad, 1)
    for k in (0, 4, 1.5, float("nan"), "2", True):
        with pytest.raises(InvalidHyperparameterError, match="k must be"):
            C.top_k_mask(A, k)
    with pytest.raises(InvalidHyperparameterError, match="ties must be one of"):
        C.top_k_mask(A, 1, ties="random")


def test_ef_compress_checks_the_compressor():
    V, R = np.ones((2, 3)), np.zeros((2, 3))
    with pytest.raises(InvalidHyperparameterError, match="compressor must be a callable"):
        C.ef_compress(V, R, 1.0)
    with pytest.raises(InvalidProblemError, match="compressor's output contains a non-finite value"):
        C.ef_compress(V, R, lambda a: np.full_like(a, np.nan))
    with pytest.raises(InvalidProblemError, match="numeric"):
        C.ef_compress(V, R, lambda a: a.astype(complex))
    with pytest.raises(InvalidProblemError, match="overflows"):
        C.ef_compress(np.full((1, 2), 1e308), np.full((1, 2), 1e308), lambda a: a)


@pytest.mark.parametrize("case", range(6))
def test_measure_reads_a_float64_uplink_in_place_with_the_entropy_of_its_values(case):
    """measure() no longer copies a float64 uplink: the array is left unchanged, the entropy is
    entropy() of the same values to the bit (the sort-based definition), and a NaN or inf in it
    is still refused naming its index."""
    rng = np.random.default_rng(case)
    U = rng.normal(0, [1e-3, 1.0, 30.0][case % 3], (20, 9))
    U[0, :3] = [-0.0, 0.005, -0.005]
    before = U.copy()
    comm = C.Communication.measure(U, np.zeros(9))
    np.testing.assert_array_equal(U, before)
    assert comm.entropy_up == C.entropy(U) == _entropy_by_sort(U, 0.01)
    bad = U.copy()
    bad[case, case] = [np.nan, np.inf, -np.inf][case % 3]
    with pytest.raises(InvalidProblemError, match=rf"non-finite value .* at index \({case}, {case}\)"):
        C.Communication.measure(bad, np.zeros(9))


@pytest.mark.parametrize("case", range(8))
def test_shifted_integer_bins_equal_rint_of_the_quotients_at_ties_signed_zeros_and_the_range_edges(case):
    """The bins rint(v / w) read as integers from v / w + C (C an even integer near 1.5 2^52)
    are rint's, ties to even included: at exact half-integers (both parities), one ulp either
    side of them, -0.0 and 0.0, bins near +-2^50 (the fast path's limit) and beyond it (the
    float path); the counts equal np.unique's element for element, the entropy the sort's."""
    rng = np.random.default_rng(100 + case)
    w = [0.01, 0.25, 1.0, 3e-7][case % 4]
    halves = (rng.integers(-60, 60, 400) + 0.5) * w
    offset = [0.0, 0.0, 2.0 ** 49 - 3, -(2.0 ** 50) + 5, 2.0 ** 50 + 7, -3.0, 1.0, 2.0 ** 51][case]
    v = np.concatenate([
        halves, np.nextafter(halves, np.inf), np.nextafter(halves, -np.inf), [-0.0, 0.0, -0.0],
        rng.normal(0, 5 * w, 300)]) + offset * w
    q = v / w
    expected = np.unique(np.rint(q), return_counts=True)[1]
    lo, hi = float(np.rint(q.min())), float(np.rint(q.max()))
    if max(-lo, hi) < C._MAGIC_LIMIT:
        assert C._shifted_bin_counts(v, w, lo, hi).tolist() == expected.tolist()
    assert C.entropy(v, w) == _entropy_by_sort(v, w)


def test_shifted_bins_round_half_to_even_as_rint_does():
    """Exact ties at both parities and on both sides of zero: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2,
    -0.5 -> -0, -1.5 -> -2, -2.5 -> -2 (numpy's rint), counted per bin."""
    v = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, -3.5])
    # rint: 0, 2, 2, -0, -2, -2, 4, -4 -> bins -4: 1, -2: 2, 0: 2, 2: 2, 4: 1
    assert C._shifted_bin_counts(v, 1.0, -4.0, 4.0).tolist() == [1, 2, 2, 2, 1]
    assert np.unique(np.rint(v), return_counts=True)[1].tolist() == [1, 2, 2, 2, 1]


def test_total_of_records_equals_the_left_to_right_sum_bit_for_bit():
    """History.total_communication sums the records without a record per term: the same
    counts and the same entropy bits as Communication.zero() + c_1 + c_2 + ..."""
    from fltheory.algorithms.history import History
    rng = np.random.default_rng(5)
    records = [C.Communication.measure(rng.normal(0, s, (m, 7)), rng.normal(size=7), up_kind=kind)
               for s, m, kind in zip(rng.uniform(1e-3, 3, 40), rng.integers(0, 6, 40),
                                     ["dense", "sparse", "ternary"] * 14, strict=False)]
    records.insert(3, C.Communication.zero())
    expected = C.Communication.zero()
    for r in records:
        expected = expected + r
    got = C._total(records)
    assert got == expected
    assert got.entropy_up.hex() == expected.entropy_up.hex()
    assert C._total([]) == C.Communication.zero()
    hist = History(x=np.zeros((len(records) + 1, 7)), loss=None, loss_gap=None, dist2=None, grad_norm2=None,
                   clients=[], steps=[], communication=records, extra=[], state=None, record=None)  # type: ignore[arg-type]
    assert hist.total_communication() == expected


def test_measure_builds_a_record_equal_to_the_checked_constructor():
    """measure() skips the field checks of the constructor for values it computed: the
    record equals (==, field types) the one the checked constructor builds from its fields."""
    rng = np.random.default_rng(2)
    comm = C.Communication.measure(rng.normal(0, 0.1, (6, 5)), rng.normal(size=5), up_kind="sparse")
    rebuilt = C.Communication(**{f: getattr(comm, f) for f in C._FIELDS})
    assert comm == rebuilt
    assert [type(getattr(comm, f)) for f in C._FIELDS] == [int] * 6 + [float, int]
    with pytest.raises(InvalidProblemError, match="down"):
        C.Communication.measure(np.zeros((2, 3)), np.array([[0.0, np.inf, 1.0], [0.0, 0.0, 0.0]]))
