"""Compression of transmitted updates and communication accounting.

Every compressor acts row-wise on an (m, d) array (one row per message; a
(d,) array is one message and keeps its shape) and is vectorised over rows.

* :func:`st` -- EFL's top-k ternary compression (EFL, Algorithm 2).
* :func:`top_k` -- keep the k largest magnitudes at full precision.
* :func:`threshold` -- FedElasticNet's epsilon-thresholding (FedElasticNet,
  section 3): zero every entry with |v| <= eps.
* :func:`ef_compress` -- error feedback (EFL, Algorithm 1): compress
  V + residual and keep what was not sent.
* :class:`Communication` and :func:`entropy` -- floats, non-zeros, bits and
  the Shannon entropy of the transmitted values (FedElasticNet, section 4).

Ties among equal magnitudes (rule ``ties="index"``, the default): the k
entries kept are the first k of the row in the order "larger |v| first, and
among equal |v| smaller index first" -- a deterministic rule that keeps
exactly k entries.  ``ties="keep_all"`` is Algorithm 2 of EFL as
printed: keep every entry with |v| >= the k-th largest magnitude (possibly
more than k).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ._validate import choice, finite_array, in_unit_interval, integer, positive, real_array
from .errors import InvalidHyperparameterError, InvalidProblemError

__all__ = ["st", "top_k", "threshold", "ef_compress", "entropy", "Communication",
           "top_k_mask"]

_TIES = ("index", "keep_all")
_KINDS = ("dense", "sparse", "ternary")


def _as_rows(V: Any, name: str) -> tuple[np.ndarray, bool]:
    arr = finite_array(name, V)
    if arr.ndim == 1:
        return arr[None, :], True
    if arr.ndim != 2:
        raise InvalidProblemError(f"{name} must be a (d,) or (m, d) array, got shape {arr.shape}")
    return arr, False


def top_k_mask(A: ArrayLike, k: int, ties: str = "index") -> np.ndarray:
    """Boolean mask of the k largest |A| per row (see module doc for ties).

    Vectorised: the k-th largest magnitude t of each row comes from
    ``np.partition``; entries with |a| > t are kept, and among |a| == t the
    first (k - #{|a| > t}) by index (``ties="index"``) or all of them
    (``ties="keep_all"``).

    Parameters
    ----------
    A : (m, d) or (d,) finite real array
    k : int
        Entries kept per row, an integer in [1, d].
    ties : {"index", "keep_all"}

    Returns
    -------
    Boolean array of A's shape.
    """
    rows, single = _as_rows(A, "top_k_mask: A")
    choice("top_k_mask: ties", ties, _TIES)
    if rows.size == 0:
        integer("top_k_mask: k", k, minimum=0)
        return np.zeros(rows.shape[1:] if single else rows.shape, dtype=bool)
    mask = _top_k_mask(rows, _k_of(rows.shape[1], k, "top_k_mask"), ties)
    return mask[0] if single else mask


def _top_k_mask(A: np.ndarray, k: int, ties: str) -> np.ndarray:
    """:func:`top_k_mask` for a checked (m, d) array and k in [1, d]."""
    m, d = A.shape
    if m == 0 or d == 0:
        return np.zeros(A.shape, dtype=bool)
    mag = np.abs(A)
    kth = np.partition(mag, d - k, axis=1)[:, d - k][:, None]
    above = mag > kth
    equal = mag == kth
    if ties == "keep_all":
        return above | equal
    need = k - above.sum(axis=1, keepdims=True)
    return above | (equal & (np.cumsum(equal, axis=1) <= need))


def _k_of(d: int, k: Any, where: str) -> int:
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer, float, np.floating)):
        raise InvalidHyperparameterError(f"{where}: k must be an integer, got {k!r}")
    if not np.isfinite(k):
        raise InvalidHyperparameterError(f"{where}: k must be a finite integer, got {k!r}")
    kk = int(k)
    if kk != k or kk < 1 or kk > d:
        raise InvalidHyperparameterError(f"{where}: k must be an integer in [1, d = {d}], got {k!r}")
    return kk


def st(V: ArrayLike, q: float, *, ties: str = "index") -> np.ndarray:
    r"""EFL's sparse ternary compression ST (EFL, Algorithm 2), per row.

    k = max(floor(d q), 1); keep the k largest |V_i| (``ties``, module doc);
    mu = (1/k) sum_{kept} |V_i|; return mu sign(V_i) on the kept set and 0
    elsewhere, so every row lies in {-mu, 0, mu}^d.

    Parameters
    ----------
    V : array, (m, d) or (d,)
        Rows to compress.
    q : float
        Sparsity in (0, 1].
    ties : {"index", "keep_all"}
        "index": exactly k kept, equal magnitudes broken by smaller index first,
        so mu is the mean |V| over the kept set.  "keep_all": Algorithm 2 as
        printed, mask = |V| >= (k-th largest |V|), possibly more than k entries,
        and mu still divides by k (as printed: mu = (1/k) sum |T^mask|).

    Returns
    -------
    ndarray, same shape as V
        Kept entries whose value is 0 stay 0 (sign 0).
    """
    q = in_unit_interval("st: q", q)
    ties = choice("st: ties", ties, _TIES)
    A, flat = _as_rows(V, "st: V")
    d = A.shape[1]
    k = max(math.floor(d * q), 1)
    if d == 0:
        return A.copy()[0] if flat else A.copy()
    mask = _top_k_mask(A, k, ties)
    mu = np.where(mask, np.abs(A), 0.0).sum(axis=1, keepdims=True) / k
    out = np.where(mask, mu * np.sign(A), 0.0)
    return out[0] if flat else out


def top_k(V: ArrayLike, k: int, *, ties: str = "index") -> np.ndarray:
    """Keep the k largest magnitudes of each row at full precision, zero the rest.

    Parameters
    ----------
    V : array, (m, d) or (d,)
    k : int
        In [1, d].
    ties : {"index", "keep_all"}
        As in :func:`st`.
    """
    ties = choice("top_k: ties", ties, _TIES)
    A, flat = _as_rows(V, "top_k: V")
    kk = _k_of(A.shape[1], k, "top_k")
    out = np.where(_top_k_mask(A, kk, ties), A, 0.0)
    return out[0] if flat else out


def threshold(V: ArrayLike, eps: float) -> np.ndarray:
    """FedElasticNet's thresholding (FedElasticNet, section 3): v -> 0 where |v| <= eps.

    Parameters
    ----------
    V : array, (m, d) or (d,)
    eps : float
        >= 0 (eps = 0 zeroes only exact zeros, i.e. changes nothing).
    """
    eps = positive("threshold: eps", eps, allow_zero=True)
    A = finite_array("threshold: V", V)
    return np.where(np.abs(A) <= eps, 0.0, A)


def ef_compress(V: ArrayLike, residual: ArrayLike, compressor: Callable[[np.ndarray], np.ndarray]
                ) -> tuple[np.ndarray, np.ndarray]:
    """Error feedback (EFL, Algorithm 1 and eq. 6): send C(V + R), keep the rest.

    total = V + residual; sent = compressor(total);
    new_residual = total - sent, so sent + new_residual = V + residual up to
    one rounding of the subtraction (exactly, for compressors that send entries
    unchanged or zero them: :func:`top_k`, :func:`threshold`).

    Parameters
    ----------
    V, residual : arrays of the same shape
    compressor : callable
        Maps an array to an array of the same shape, e.g.
        ``functools.partial(st, q=0.1)``.

    Returns
    -------
    (sent, new_residual)
    """
    A = finite_array("ef_compress: V", V)
    R = finite_array("ef_compress: residual", residual)
    if A.shape != R.shape:
        raise InvalidHyperparameterError(
            f"ef_compress: V has shape {A.shape} but residual has shape {R.shape}")
    if not callable(compressor):
        raise InvalidHyperparameterError(
            f"ef_compress: compressor must be a callable mapping an array to an array of the same shape, "
            f"got {compressor!r} ({type(compressor).__name__})")
    with np.errstate(over="ignore"):
        total = A + R
    if not np.all(np.isfinite(total)):
        raise InvalidProblemError("ef_compress: V + residual overflows float64 (entries beyond 1.8e308)")
    sent = finite_array("ef_compress: the compressor's output", compressor(total), error=InvalidProblemError)
    if sent.shape != total.shape:
        raise InvalidHyperparameterError(
            f"ef_compress: the compressor returned shape {sent.shape} for input shape {total.shape}")
    return sent, total - sent


def entropy(values: ArrayLike, bin_width: float = 0.01) -> float:
    """Shannon entropy, in bits per value, of ``values`` discretised at ``bin_width``.

    FedElasticNet, section 4: "the entropy of discretized values with the bin size
    of 0.01".  Bin of v: j = rint(v / bin_width), i.e. bins
    [(j - 1/2) w, (j + 1/2) w) centred on the multiples of w (0 has its own
    central bin).  H = -sum_j p_j log2 p_j with p_j the fraction of values in
    bin j, over all entries of ``values`` (flattened).  An empty input has
    entropy 0.
    """
    w = positive("entropy: bin_width", bin_width)
    return _entropy(finite_array("entropy: values", values).ravel(), w)


def _finite_span(arr: np.ndarray) -> tuple[float, float] | None:
    """(min, max) of a float array when every entry is finite, else None (two passes instead of
    an isfinite mask: NaN propagates through min and max, and +-inf shows in them)."""
    if arr.size == 0:
        return 0.0, 0.0
    lo, hi = float(arr.min()), float(arr.max())
    return (lo, hi) if math.isfinite(lo) and math.isfinite(hi) else None


def _entropy(arr: np.ndarray, w: float, span: tuple[float, float] | None = None) -> float:
    """:func:`entropy` of a validated flat float array ``arr`` at a validated ``w``; ``span``:
    (min, max) of ``arr`` when the caller has them.

    The bins rint(v / w) are counted with ``np.bincount`` after shifting by the smallest bin.
    v -> rint(v / w) is non-decreasing (w > 0; correctly rounded division and rint are
    monotone), so the smallest and largest bins are those of min(arr) and max(arr): no pass
    over the bins to find them or to check that they are finite."""
    if arr.size == 0:
        return 0.0
    lo_v, hi_v = span if span is not None else (float(arr.min()), float(arr.max()))
    q_lo, q_hi = lo_v / w, hi_v / w            # IEEE division of floats (inf on overflow), as numpy's
    if math.isfinite(q_lo) and math.isfinite(q_hi):
        # round() of a float rounds half to even exactly, as np.rint (its 0.0 for -0.0 shifts the
        # bins the same)
        lo, hi = float(round(q_lo)), float(round(q_hi))
    else:
        raise InvalidHyperparameterError(
            f"entropy: bin_width = {w!r} is too small for values up to {max(abs(lo_v), abs(hi_v)):.3g} "
            "(v / bin_width overflows float64)")
    if max(-lo, hi) < _MAGIC_LIMIT and hi - lo <= _MAX_BINCOUNT_SPAN:
        counts = _shifted_bin_counts(arr, w, lo, hi)
    else:
        bins = arr / w
        np.rint(bins, out=bins)
        counts = _bin_counts(bins, lo, hi)
    p = counts / arr.size
    h = -float((p * np.log2(p)).sum())
    return h if h > 0.0 else 0.0               # one bin: +0.0 (the sum is 0, negated -0.0)


# Integral floats in [2^52, 2^53) are spaced exactly 1 apart, so for |x| < 2^51 and an even
# integer C with C + x in that range, fl(x + C) is C + rint(x): the addition rounds to the
# nearest integer, ties to the even one (C even: C + n is even exactly when n is), which is
# numpy's rint.  The bits of such a float are bits(2^52) + its value - 2^52, an int64 read.
_MAGIC = 1.5 * 2.0 ** 52
_MAGIC_BITS = int(np.float64(_MAGIC).view(np.int64))
_MAGIC_LIMIT = 2.0 ** 50


def _shifted_bin_counts(arr: np.ndarray, w: float, lo: float, hi: float) -> np.ndarray:
    """Counts of the distinct bins rint(v / w) of the flat float array ``arr``, in increasing
    order of bin (zeros dropped): :func:`_bin_counts` of ``rint(arr / w)`` element for element.

    ``lo``, ``hi``: the smallest and largest bin, |lo|, |hi| < 2^50, hi - lo <= 2^22.  One
    division, one addition of the even integer C = 1.5 2^52 - lo' (lo' = lo rounded down to
    even), which rounds each quotient to its bin shifted by C (module comment at ``_MAGIC``),
    and one integer subtraction give the bins minus lo' as int64 for ``np.bincount``, where
    ``rint``, a float subtraction and a float-to-int conversion took a pass each."""
    lo_even = lo - (lo % 2.0)                         # exact: integral floats of magnitude < 2^50
    q = np.divide(arr, w)
    q += _MAGIC - lo_even
    shifted = q.view(np.int64)
    shifted -= _MAGIC_BITS
    counts = np.bincount(shifted, minlength=int(hi - lo_even) + 1)
    return counts[counts > 0]


# Widest span of bin indices counted with ``np.bincount`` (8 bytes per bin of the span);
# wider spans (rare: values far apart relative to the bin width) use ``np.unique``.
_MAX_BINCOUNT_SPAN = 1 << 22


def _bin_counts(bins: np.ndarray, lo: float | None = None, hi: float | None = None) -> np.ndarray:
    """Counts of the distinct values of ``bins`` (integral floats), in increasing
    order of value, without sorting.

    Equal to ``np.unique(bins, return_counts=True)[1]`` element for element
    (same counts, same order), so the entropy computed from it is the same to
    the bit: the bins are shifted to 0..span and counted with ``np.bincount``
    (one pass), and the zero counts are dropped.  -0.0 and 0.0 fall in one bin,
    as in ``np.unique``.  Spans wider than ``_MAX_BINCOUNT_SPAN`` bins fall back
    to ``np.unique`` (a sort).  ``lo``, ``hi``: the smallest and largest bin, given by a
    caller that knows them and lets ``bins`` be overwritten (shifted in place).
    """
    owned = lo is not None and hi is not None
    if lo is None or hi is None:
        lo, hi = float(bins.min()), float(bins.max())
    if not hi - lo <= _MAX_BINCOUNT_SPAN:            # also inf / nan spans (overflowed v / w)
        return np.unique(bins, return_counts=True)[1]
    shifted = np.subtract(bins, lo, out=bins if owned else None)
    counts = np.bincount(shifted.astype(np.int64), minlength=int(hi - lo) + 1)
    return counts[counts > 0]


def _nonzeros(A: np.ndarray) -> int:
    """Non-zero entries of A; a broadcast row (stride 0 along the rows, as
    ``np.broadcast_to(x, (m, d))``) is counted once and multiplied by m (the same count)."""
    if A.shape[0] > 1 and A.strides[0] == 0:
        return A.shape[0] * int(np.count_nonzero(A[0]))
    return int(np.count_nonzero(A))


def _message_cost(A: np.ndarray, kind: str) -> tuple[int, int, int]:
    """(floats, nonzeros, bits) of the rows of A sent as ``kind``."""
    m, d = A.shape
    nnz = _nonzeros(A)
    index_bits = math.ceil(math.log2(d)) if d > 1 else 0
    if kind == "dense":
        return m * d, nnz, 32 * m * d
    if kind == "sparse":
        return nnz, nnz, nnz * (32 + index_bits)
    return m, nnz, nnz * (1 + index_bits) + 32 * m          # ternary


@dataclass(frozen=True)
class Communication:
    """Communication of one or more rounds (uplink = clients to server).

    Fields
    ------
    floats_up, floats_down : int
        Real numbers transmitted: dense, every entry; sparse, the non-zero
        values; ternary, one magnitude mu per message.
    nonzeros_up, nonzeros_down : int
        Non-zero entries transmitted (FedElasticNet, section 4, Table 2).
    bits_up, bits_down : int
        Raw bits at 32 bits per real: dense 32 d per message; sparse
        nnz (32 + ceil(log2 d)) (value plus index); ternary
        nnz (1 + ceil(log2 d)) + 32 per message (sign bit plus index per
        non-zero, and mu).  ceil(log2 d) is 0 when d = 1.
    entropy_up : float
        Shannon entropy in bits per value of the uplink values (every entry,
        zeros included) discretised at bin width 0.01 (:func:`entropy`; FedElasticNet section 4).
        After ``+`` it is the entry-weighted mean of the
        per-round entropies.
    entries_up : int
        Number of uplink entries the entropy was computed over (m d).

    ``a + b`` adds the counts and combines the entropies as above;
    :attr:`entropy_bits_up` = entropy_up * entries_up is the total entropy
    (the lossless-coding lower bound, in bits).
    """

    floats_up: int = 0
    floats_down: int = 0
    nonzeros_up: int = 0
    nonzeros_down: int = 0
    bits_up: int = 0
    bits_down: int = 0
    entropy_up: float = 0.0
    entries_up: int = 0

    def __post_init__(self) -> None:
        for name in ("floats_up", "floats_down", "nonzeros_up", "nonzeros_down", "bits_up", "bits_down",
                     "entries_up"):
            integer(f"Communication: {name}", getattr(self, name), minimum=0, maximum=None)
        positive("Communication: entropy_up", self.entropy_up, allow_zero=True)

    @property
    def entropy_bits_up(self) -> float:
        return self.entropy_up * self.entries_up

    @classmethod
    def zero(cls) -> Communication:
        """No communication (the neutral element of ``+``)."""
        return cls()

    @classmethod
    def measure(cls, up: ArrayLike, down: ArrayLike, *, up_kind: str = "dense", down_kind: str = "dense",
                bin_width: float = 0.01) -> Communication:
        """Measure one round.

        Parameters
        ----------
        up : (m, d) array
            The messages sent by the m participating clients (m may be 0).
        down : (d,) or (m', d) array
            (d,): one broadcast message, counted once; (m', d): m' messages
            (pass ``np.broadcast_to(x, (m, d))`` to count one per recipient).
        up_kind, down_kind : {"dense", "sparse", "ternary"}
            How the messages are encoded (see the field docs).
        """
        if not (type(up_kind) is str and up_kind in _KINDS):     # the common case without a call
            up_kind = choice("Communication.measure: up_kind", up_kind, _KINDS)
        if not (type(down_kind) is str and down_kind in _KINDS):
            down_kind = choice("Communication.measure: down_kind", down_kind, _KINDS)
        # finite_array's checks without its float64 copy: a float64 array is read as it is, its
        # finiteness read from its min and max (which the entropy needs anyway)
        if type(up) is np.ndarray and up.dtype == np.float64:
            U = up
        else:
            U = real_array("Communication.measure: up", up, InvalidProblemError)
            if U.dtype != np.float64:
                U = finite_array("Communication.measure: up", U)
        span = _finite_span(U)
        if span is None:                       # a non-finite entry: finite_array names it
            finite_array("Communication.measure: up", U)
        if U.ndim != 2:
            raise InvalidHyperparameterError(
                f"Communication.measure: up must be an (m, d) array, got shape {U.shape}")
        D = np.asarray(down, dtype=np.float64)
        # one broadcast row is checked once; the check reads min and max (finite_array, which
        # copies, only names a non-finite entry)
        row = D[0] if D.ndim == 2 and D.shape[0] > 1 and D.strides[0] == 0 else D
        if _finite_span(row) is None:
            finite_array("Communication.measure: down", row)
        if D.ndim == 1:
            D = D[None, :]
        elif D.ndim != 2:
            raise InvalidHyperparameterError(
                f"Communication.measure: down must be (d,) or (m, d), got shape {D.shape}")
        fu, nu, bu = _message_cost(U, up_kind)
        fd, nd, bd = _message_cost(D, down_kind)
        w = (bin_width if type(bin_width) is float and 0.0 < bin_width < math.inf
             else positive("Communication.measure: bin_width", bin_width))
        return cls._checked(fu, fd, nu, nd, bu, bd, _entropy(U.ravel(), w, span), int(U.size))

    @classmethod
    def _checked(cls, *values: Any) -> Communication:
        """An instance from field values already known valid (integers >= 0 and a real
        entropy >= 0, in field order), without ``__post_init__``'s checks: ``measure``
        builds one per round, where the checks cost as much as the counts."""
        out = object.__new__(cls)
        out.__dict__.update(zip(_FIELDS, values, strict=True))
        return out

    def __add__(self, other: Communication) -> Communication:
        if not isinstance(other, Communication):
            return NotImplemented
        n = self.entries_up + other.entries_up
        ent = 0.0 if n == 0 else (self.entropy_up * self.entries_up
                                  + other.entropy_up * other.entries_up) / n
        values = {f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)}
        values["entropy_up"] = ent
        return Communication(**values)


_FIELDS = tuple(f.name for f in fields(Communication))


def _total(records: Iterable[Communication]) -> Communication:
    """``Communication.zero() + r_1 + r_2 + ...`` for Communication records, the same
    bits: counts summed as Python ints, and the entropy combined left to right by the
    rule of ``+`` (e <- (e n + e_k n_k) / (n + n_k), 0 while n = 0), without building
    an intermediate record per term."""
    fu = fd = nu = nd = bu = bd = entries = 0
    ent = 0.0
    for r in records:
        fu += r.floats_up
        fd += r.floats_down
        nu += r.nonzeros_up
        nd += r.nonzeros_down
        bu += r.bits_up
        bd += r.bits_down
        n = entries + r.entries_up
        ent = 0.0 if n == 0 else (ent * entries + r.entropy_up * r.entries_up) / n
        entries = n
    return Communication._checked(fu, fd, nu, nd, bu, bd, ent, entries)
