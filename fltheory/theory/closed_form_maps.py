"""Linear parts of affine round maps written down from the clients' Hessians.

On quadratic clients (constant Hessians H_i, exact gradients, full
participation) one local gradient step is y <- S_i y + const with
S_i = I - eta_i H_i, so ``s_i`` steps from y = x end at
y_i = S_i^{s_i} x + const.  For two algorithms the linear part M of the round
map S -> M S + c (``theory.affine``) is then a short formula in the S_i, and
forming or applying it costs far less than probing it with rounds:

FedAvg (state x; McMahan et al.'s averaging with server rate eta_g and
aggregation weights w_i, as restated in docs/theory/index.md#algorithms)::

    M = (1 - eta_g) I + eta_g sum_i w_i S_i^{s_i}

formed densely by binary powering of every S_i (about log2(s_i) batched
d x d products per client, the squarings as symmetric rank-k updates P P^T; the
last factor of each power is merged into one product whose inner dimension runs
over the clients, since ``sum_i A_i B_i = [A_1 ... A_m] [B_1; ...; B_m]`` and
every power of the symmetric S_i is symmetric: for even s_i a symmetric update
too).  M is symmetric (``FedAvg.linear_part_is_symmetric``) and is symmetrised
after forming.

SCAFFOLD (state [x, c, c_1..c_N]; SCAFFOLD-v1, Algorithm 1 with uniform
averaging, option I or II).  With u_i = c - c_i the local steps
y <- y - eta_i (H_i y - e_i + u_i) give y_i - x = -(A_i x + R_i u_i) + const with

    R_i = eta_i sum_{k < s_i} S_i^k,     A_i = I - S_i^{s_i} = R_i H_i,

so for a direction (x, c, c_i) the linear part is, with Delta_i = A_i x + R_i u_i,

    c_i^+ = c_i - c + Delta_i / (s_i eta_i)   (option II)   or   H_i x   (option I),
    x^+   = x - (eta_g / N) sum_i Delta_i,
    c^+   = c + (1/N) sum_i (c_i^+ - c_i).

:class:`ClosedFormBlock` applies it to a block of vectors with a few batched
(d x d) x (d x b) products instead of s_i local steps per vector, which lets
the matrix-free Krylov method (``theory.matrix_free``) use wide blocks at any
model dimension: its basis is then streamed once per block, not once per
vector.

Nothing here is trusted on its own: ``theory.affine.affine_round_map`` compares
the formula with the algorithm's own rounds (at random points, to the affinity
tolerance) before using it, and falls back to probing when they differ (a
subclass with another round, a federation whose Hessian hook is not its
gradient's Jacobian).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from .._validate import instance, integer
from ..algorithms import FedAvg, Scaffold
from ..algorithms.base import Algorithm, aggregation_weights, resolve_per_client
from ..errors import InvalidHyperparameterError, InvalidProblemError
from ..problems.base import Federation
from .block_products import BlockProduct
from .round_maps import StateLayout

__all__ = ["ClosedFormBlock", "closed_form_block", "closed_form_linear_part", "fedavg_linear_part"]

#: Bytes of client matrices held at once while forming FedAvg's M (three chunk buffers per worker).
CHUNK_BYTES = 1 << 28
#: Threads forming FedAvg's M (chunks of clients in parallel).
WORKERS = min(2, os.cpu_count() or 1)
#: Largest model dimension for SCAFFOLD's closed-form block product: forming R_i and A_i costs
#: about 2 s_i N d^3 flops, a round 2 s_i N d^2, and a Krylov run about 100 rounds.
SCAFFOLD_MAX_DIM = 100
#: Largest memory of SCAFFOLD's per-client matrices (four (N, d, d) arrays while forming them).
SCAFFOLD_MAX_BYTES = 1 << 30
#: Vectors per closed-form block product: the Krylov space of ``theory.matrix_free`` starts from
#: max(2, block size) columns; wider blocks need more vectors in all (SCAFFOLD N = 10,000, d = 20:
#: 168 vectors with 8 columns against 54 with 2), and at this size the basis, not the products, costs.
BLOCK_COLUMNS = 2


def _check_entry(name: str, algorithm: Any, problem: Any, layout: Any = None) -> None:
    """Typed errors for arguments of the wrong kind at a public entry (isinstance checks only:
    these entries run inside the exact-theory routines, once per map)."""
    instance(f"{name}: algorithm", algorithm, Algorithm, "an fltheory Algorithm instance",
             InvalidHyperparameterError)
    instance(f"{name}: problem", problem, Federation, "a Federation instance")
    if layout is not None:
        instance(f"{name}: layout", layout, StateLayout, "a StateLayout (theory.round_maps.state_layout)")


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of dtype {value.dtype} and shape {value.shape}"
    text = repr(value)
    return f"{text if len(text) <= 60 else text[:57] + '...'} ({type(value).__name__})"


def _layout_size(layout: StateLayout) -> int:
    return sum(int(np.prod(s, dtype=np.int64)) for s in layout.shapes)


def _has_exact_hessians(problem: Federation) -> bool:
    return bool(getattr(problem, "has_constant_hessians", False)) and not problem.is_stochastic


def _dense_clients(problem: Federation) -> bool:
    """Client data of at least a quarter of a dense d x d Hessian (``Federation.client_data_bytes``):
    a product with M then costs about as much as with the dense matrices, and writing the
    matrices down loses nothing.  Structured clients (diagonal plus rank r, 8 d (r + 2)
    bytes) have cheap products: the Krylov route suits them better."""
    d = problem.dim
    return problem.client_data_bytes() * 4 >= 8 * d * d


def _steps_and_rates(algorithm: FedAvg | Scaffold, problem: Federation) -> tuple[np.ndarray, np.ndarray]:
    N = problem.n_clients
    rates = np.broadcast_to(np.asarray(resolve_per_client("lr", algorithm.lr, N),
                                       dtype=np.float64), (N,))
    steps = np.broadcast_to(np.asarray(algorithm.nominal_steps(problem), dtype=np.int64), (N,))
    return rates, steps


def _step_matrices(problem: Federation, clients: np.ndarray, rates: np.ndarray) -> np.ndarray:
    """S_i = I - eta_i H_i for the listed clients, (m, d, d) (the Hessians through the
    federation's ``client_hess`` hook; constant on quadratic clients)."""
    d = problem.dim
    S = np.array(problem.client_hess(np.zeros((clients.shape[0], d)), clients), dtype=np.float64)
    S *= -rates[:, None, None]
    S[:, np.arange(d), np.arange(d)] += 1.0
    return S


def _square(P: np.ndarray) -> np.ndarray:
    """P_i^2 for symmetric P_i (m, d, d), written P_i P_i^T: numpy's matmul then calls a symmetric
    rank-k update (BLAS syrk), half the flops of a general product, and the result is exactly
    symmetric."""
    return np.matmul(P, P.transpose(0, 2, 1))


def _symmetric_power(S: np.ndarray, k: int) -> np.ndarray:
    """S_i^k for symmetric S_i (m, d, d), k >= 1, by binary powering (squarings by :func:`_square`)."""
    bits = bin(k)[2:][::-1]                 # lowest bit first
    acc: np.ndarray | None = None
    base = S
    for j, bit in enumerate(bits):
        if bit == "1":
            acc = base if acc is None else np.matmul(acc, base)
        if j < len(bits) - 1:
            base = _square(base)
    assert acc is not None                  # the highest bit of k >= 1 is 1
    return acc


def _weighted_power_sum(S: np.ndarray, w: np.ndarray, e: int) -> np.ndarray:
    """sum_i w_i S_i^e for symmetric S_i (m, d, d), e >= 1, and weights w_i >= 0.

    Every power of a symmetric S_i is symmetric, and the sum over the clients is one product
    with inner dimension m d (``sum_i A_i^T B_i = [A_1; ...; A_m]^T [B_1; ...; B_m]``):

    * e even, P_i = S_i^(e/2):  sum_i (sqrt(w_i) P_i)^T (sqrt(w_i) P_i), a symmetric rank-(m d)
      update (about m d^3 flops instead of 2 m d^3);
    * e odd > 1, P_i = S_i^(e-1):  [w_1 P_1; ...]^T [S_1; ...], a general product;

    with P_i by binary powering whose squarings are symmetric updates (e = 5: about 4 m d^3
    flops, against 6 m d^3 with general products)."""
    m, d, _ = S.shape
    if e == 1:
        return np.einsum("i,ijk->jk", w, S)
    if e % 2 == 0:
        P = _symmetric_power(S, e // 2)
        scaled = P * np.sqrt(w)[:, None, None]
        A = scaled.reshape(m * d, d)
        return A.T @ A
    P = _symmetric_power(S, e - 1)
    return (P * w[:, None, None]).reshape(m * d, d).T @ S.reshape(m * d, d)


def fedavg_linear_part(algorithm: FedAvg, problem: Federation) -> np.ndarray:
    """M = (1 - eta_g) I + eta_g sum_i w_i (I - eta_i H_i)^{s_i} (module docstring), symmetrised.

    Clients are processed in chunks of at most ``CHUNK_BYTES / 2`` of matrices,
    grouped by their number of local steps s_i, by ``WORKERS`` threads (numpy releases the
    GIL in its products; BLAS stays at the library's one thread per call, and the chunks'
    sums are added in a fixed order, so the bits do not depend on the scheduling); memory
    is about three chunks per worker plus M.

    Raises InvalidHyperparameterError (``algorithm`` not a FedAvg) and InvalidProblemError
    (``problem`` not a Federation, or a federation without constant exact Hessians)."""
    instance("fedavg_linear_part: algorithm", algorithm, FedAvg, "a FedAvg instance", InvalidHyperparameterError)
    instance("fedavg_linear_part: problem", problem, Federation, "a Federation instance")
    if not _has_exact_hessians(problem):
        raise InvalidProblemError(
            f"fedavg_linear_part: problem must have constant exact Hessians (a deterministic quadratic "
            f"federation), got {type(problem).__name__}")
    N, d = problem.n_clients, problem.dim
    rates, steps = _steps_and_rates(algorithm, problem)
    w = aggregation_weights(problem, np.arange(N), algorithm.aggregation)
    workers = min(WORKERS, N)
    chunk = max(1, CHUNK_BYTES // (3 * 8 * d * d * 2))    # independent of WORKERS: the same chunks and bits
    jobs = [(group[start:start + chunk], int(e)) for e in np.unique(steps)
            for group in (np.flatnonzero(steps == e),) for start in range(0, group.shape[0], chunk)]

    def part(job: tuple[np.ndarray, int]) -> np.ndarray:
        idx, e = job
        return _weighted_power_sum(_step_matrices(problem, idx, rates[idx]), w[idx], e)

    if workers > 1 and len(jobs) > 1:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fltheory-closed-form") as pool:
            parts = list(pool.map(part, jobs))
    else:
        parts = [part(job) for job in jobs]
    total = np.zeros((d, d))
    for p in parts:                    # in chunk order: the same bits whatever the scheduling
        total += p
    M = algorithm.server_lr * total
    M[np.arange(d), np.arange(d)] += 1.0 - algorithm.server_lr
    return 0.5 * (M + M.T)


def closed_form_linear_part(algorithm: Algorithm, problem: Federation, layout: StateLayout
                            ) -> tuple[np.ndarray, str] | None:
    """(dense M, description) when a closed form of the whole linear part is known for this
    algorithm, problem and state layout (FedAvg on exact quadratic clients whose data is
    dense, see ``_dense_clients``), else None.
    Unverified: ``theory.affine.affine_round_map`` checks it against rounds.
    Arguments of the wrong kind raise InvalidHyperparameterError / InvalidProblemError."""
    _check_entry("closed_form_linear_part", algorithm, problem, layout)
    if not (isinstance(algorithm, FedAvg) and _has_exact_hessians(problem) and _dense_clients(problem)
            and layout.paths == ("x",)):
        return None
    return (fedavg_linear_part(algorithm, problem),
            "closed form (1 - eta_g) I + eta_g sum_i w_i (I - eta_i H_i)^s_i, binary powering")


class ClosedFormBlock(BlockProduct):
    """M V for V (n, q), q <= ``copies``, by a closed-form product (no rounds).

    Stands in for the lifted-federation :class:`BlockProduct` of ``theory.matrix_free``;
    ``rounds`` stays 0 (no round is run), ``products`` counts the block products."""

    def __init__(self, apply: Callable[[np.ndarray], np.ndarray], n: int, copies: int,
                 frozen: np.ndarray, description: str) -> None:
        self._apply = apply
        self.n = n
        self.copies = copies
        self.frozen = frozen
        self.rounds = 0
        self.products = 0
        self.description = description

    def __call__(self, V: np.ndarray) -> np.ndarray:
        V = np.where(self.frozen[:, None], 0.0, np.asarray(V, dtype=np.float64))
        if V.shape[1] > self.copies:
            raise ValueError(f"block of {V.shape[1]} columns exceeds the {self.copies} copies")
        self.products += 1
        return self._apply(V)


def _scaffold_apply(algorithm: Scaffold, problem: Federation, layout: StateLayout
                    ) -> Callable[[np.ndarray], np.ndarray]:
    """The linear part of a full-participation SCAFFOLD round as a block product (module docstring)."""
    N, d = problem.n_clients, problem.dim
    rates, steps = _steps_and_rates(algorithm, problem)
    S = _step_matrices(problem, np.arange(N), rates)
    power = np.broadcast_to(np.eye(d), (N, d, d)).copy()       # S_i^k
    R = np.zeros((N, d, d))                                     # sum_{k < s_i} S_i^k
    for k in range(int(steps.max())):
        active = steps > k
        if active.all():                                        # no masked copies in the common case
            R += power
            power = np.matmul(S, power)
        else:
            R[active] += power[active]
            power[active] = np.matmul(S[active], power[active])
    R *= rates[:, None, None]
    A = np.broadcast_to(np.eye(d), (N, d, d)) - power          # I - S_i^{s_i}
    H = (np.array(problem.client_hess(np.zeros((N, d)), np.arange(N)), dtype=np.float64)
         if algorithm.option == "I" else None)
    inv_se = 1.0 / (steps * rates)
    eta_g = float(algorithm.server_lr)
    xs, cs, cis = (layout.slices[p] for p in ("x", "c", "c_clients"))

    def apply(V: np.ndarray) -> np.ndarray:
        b = V.shape[1]
        X, Cg = V[xs], V[cs]
        Ci = V[cis].reshape(N, d, b)
        U = Cg[None] - Ci                                       # c - c_i
        Delta = (A.reshape(N * d, d) @ X).reshape(N, d, b) + np.matmul(R, U)
        if H is None:
            Ci_new = Delta * inv_se[:, None, None] - U
        else:
            Ci_new = (H.reshape(N * d, d) @ X).reshape(N, d, b)
        out = np.empty_like(V)
        out[xs] = X - (eta_g / N) * Delta.sum(axis=0)
        out[cs] = Cg + (Ci_new - Ci).sum(axis=0) / N
        out[cis] = Ci_new.reshape(N * d, b)
        return out

    return apply


def closed_form_block(algorithm: Algorithm, problem: Federation, layout: StateLayout, frozen: np.ndarray,
                      copies: int = BLOCK_COLUMNS) -> ClosedFormBlock | None:
    """A closed-form block product of the linear part, or None when none is known
    (SCAFFOLD on exact quadratic clients with d <= ``SCAFFOLD_MAX_DIM`` and its
    per-client matrices within ``SCAFFOLD_MAX_BYTES``).  Unverified: the caller
    compares it with rounds.  ``frozen`` is a boolean (n,) mask of the state vector (n from
    ``layout``), ``copies`` an integer >= 1; arguments of the wrong kind or shape raise
    InvalidHyperparameterError / InvalidProblemError."""
    _check_entry("closed_form_block", algorithm, problem, layout)
    n = _layout_size(layout)
    if not (isinstance(frozen, np.ndarray) and frozen.dtype == np.bool_ and frozen.shape == (n,)):
        raise InvalidProblemError(
            f"closed_form_block: frozen must be a boolean numpy array of shape ({n},) (the state size of "
            f"layout), got {_describe(frozen)}")
    copies = integer("closed_form_block: copies", copies, minimum=1)
    if not _has_exact_hessians(problem):
        return None
    held = 4 * 8 * problem.n_clients * problem.dim ** 2          # S_i, S_i^k, R_i, A_i
    if (isinstance(algorithm, Scaffold) and problem.dim <= SCAFFOLD_MAX_DIM and held <= SCAFFOLD_MAX_BYTES
            and layout.paths == ("x", "c", "c_clients")):
        return ClosedFormBlock(_scaffold_apply(algorithm, problem, layout), n, copies, frozen,
                               "closed-form SCAFFOLD block products (R_i, A_i from the Hessians)")
    return None
