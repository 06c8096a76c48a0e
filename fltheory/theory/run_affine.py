"""``run_affine``: the fast path of a deterministic run on quadratic clients.

When the round map is affine (``fltheory.theory.affine``; full participation,
exact gradients, linear local updates), R rounds are R matrix-vector products

    S_{t+1} = M S_t + c,    x_t = S_t[x_slice],

after a one-off recovery of (M, c) that costs dim(S) + 7 ordinary rounds.
The History has the fields of :func:`fltheory.algorithms.run` and the same
server models, losses, gaps, distances and gradient norms up to rounding
(tests hold them to 1e-10).  What differs, by construction:

* rounds before the state layout settles (``warmup``: FedCurv's first round)
  are run ordinarily and recorded as ``run`` records them;
* communication (``communication="copy"``, the default): every later round's
  ``clients``, ``steps``, ``communication`` and ``extra`` are those of the
  ordinary round at the recovery state (round ``warmup + 1``), and
  ``record["communication"]`` says so ("per-round constant copy of round
  warmup + 1").  Under full participation clients, steps and the float/bit
  counts of dense messages (the only kind an affine round sends: sparsifying
  compressors are not linear) are the same every round, so those are exact;
  the value-dependent fields of ``Communication`` (non-zero counts, entropy of
  the transmitted values) are *not* recomputed and generally differ from
  ``run``'s.  With ``communication="recompute"`` each round's record is
  measured by one ordinary round from the affine iterate S_t (the transmitted
  Delta_i = O_i(x) - x, control-variate changes, ... are computed by the
  algorithm itself), exactly as ``run`` records it, at the cost of one
  ordinary round per round (the matvec is then not what limits speed);
  ``record["communication"]`` = "recomputed each round";
* F(x_t) and ||grad F(x_t)||^2 are evaluated for all rounds at once by the
  federation hook ``loss_and_grad_norm2`` (quadratic clients: from
  sum p_i H_i, sum p_i e_i and sum p_i c_i; one batched evaluation per round
  by default);
* there is no ``callback`` (no per-round state objects are built); the final
  state is rebuilt from S_R, its integer counters advanced by their per-round
  increments;
* ``record["method"] = "affine"`` and ``record["recovery_seconds"]``.

Divergence: the first round with a non-finite model, loss or gradient norm
raises DivergenceError naming it, as ``run`` does.

Importing ``fltheory.theory`` registers this runner as ``run(..., method="affine")``
(``fltheory.algorithms.register_run_method``): algorithms never import theory.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..algorithms import Algorithm, History, check_run_arguments, check_run_options, known_optimum, run_record
from ..errors import (
    DivergenceError,
    InvalidHyperparameterError,
    InvalidProblemError,
    NonFinitePointError,
    OutOfRangeError,
)
from ..participation import Participation
from ..problems import Federation
from .._validate import choice
from . import _checks
from .affine import AffineRoundMap, affine_round_map
from .matrix_free import MatrixFreeAffineMap
from .round_maps import check_deterministic_setting, counters_of, set_counters

__all__ = ["run_affine"]


def run_affine(algorithm: Algorithm, problem: Federation, rounds: int, *, x0: ArrayLike | None = None,
               participation: Participation | None = None, seed: int = 0,
               rtol: float = 1e-9, amap: AffineRoundMap | None = None,
               communication: str = "copy") -> History:
    """Deterministic run through the recovered affine round map (module docstring).

    Parameters
    ----------
    algorithm : Algorithm
    problem : Federation
        Exact oracle; the round map must be affine (NotAffineError otherwise).
    rounds : int >= 0
    x0 : array (d,), optional
        Initial server model (zeros by default).
    participation : None or FullParticipation
        Accepted for signature compatibility with ``run``; anything else raises
        NotAffineError.
    seed : int
        Recorded only: the run is deterministic and draws nothing.
    rtol : float
        Affinity tolerance passed to ``affine_round_map``.
    amap : AffineRoundMap, optional
        A map recovered before for the same algorithm, problem and x0 (skips
        the recovery).
    communication : {"copy", "recompute"}
        How the per-round RoundInfo (communication, clients, steps, extra) of
        the affine rounds is obtained (module docstring): a copy of the
        recovery round's (fast; non-zeros and entropy not recomputed) or one
        ordinary round per round from the affine iterate (exact, as slow as
        ``run``).  ``record["communication"]`` names the choice.

    Returns
    -------
    History
    """
    check_run_options(participation, seed, None, None)
    x0 = check_run_arguments(algorithm, problem, rounds, x0)
    rtol = _checks.tolerance("rtol", rtol)
    if amap is not None:
        if not isinstance(amap, (AffineRoundMap, MatrixFreeAffineMap)):
            raise InvalidHyperparameterError(
                f"amap must be an AffineRoundMap (from affine_round_map(..., matrix_free=False)) or None, "
                f"got {repr(amap)[:80]} ({type(amap).__name__})")
        if repr(amap.round_map.algorithm) != repr(algorithm) or amap.round_map.problem is not problem:
            raise InvalidHyperparameterError(
                f"amap was recovered for {amap.algorithm} on {amap.round_map.problem!r}, not for the "
                f"algorithm {algorithm.name} and problem {problem!r} given")
    communication = choice("communication", communication, ("copy", "recompute"))
    check_deterministic_setting(problem, participation)
    start = time.perf_counter()
    if amap is None:
        amap = affine_round_map(algorithm, problem, x0=x0, rtol=rtol, matrix_free=False)  # needs M
    elif not np.array_equal(np.asarray(amap.round_map.initial.x, dtype=np.float64), x0):
        raise InvalidHyperparameterError("amap was recovered from a different x0 than the one given")
    if not hasattr(amap, "M"):
        raise InvalidHyperparameterError(
            f"run_affine iterates S -> M S + c and needs the dense map; got a {type(amap).__name__} "
            "(recover it with affine_round_map(..., matrix_free=False))")
    recovery = time.perf_counter() - start
    rm = amap.round_map
    R = int(rounds)

    # ordinary warm-up rounds (state layout not yet that of the map)
    state = rm.initial
    xs = [x0.copy()]
    clients: list[np.ndarray] = []
    steps: list[np.ndarray] = []
    comms: list[Any] = []
    extras: list[Any] = []
    for _ in range(min(amap.warmup, R)):
        state, info = rm.step(state)
        xs.append(np.array(state.x, dtype=np.float64))
        clients.append(info.clients)
        steps.append(info.steps)
        comms.append(info.communication)
        extras.append(info.extra)
    n_affine = R - min(amap.warmup, R)
    bad_state_round: int | None = None      # first non-finite state ("recompute" only)
    X = np.empty((R + 1, problem.dim))
    X[: len(xs)] = xs
    if n_affine:
        S = amap.to_vector(state)
        M, c, xs_slice = amap.M, amap.c, amap.x_slice
        base = len(xs)
        if communication == "copy":
            with np.errstate(over="ignore", invalid="ignore"):
                for t in range(n_affine):        # one (n, n) matvec per round
                    S = M @ S + c
                    X[base + t] = S[xs_slice]
            info = amap.info
            if info is None:
                raise InvalidProblemError(
                    "the affine map carries no round record to copy; use communication='recompute'")
            clients += [info.clients] * n_affine
            steps += [info.steps] * n_affine
            comms += [info.communication] * n_affine
            extras += [info.extra] * n_affine
        else:
            for t in range(n_affine):            # the round's record from S_t, then the matvec
                if bad_state_round is None and not np.all(np.isfinite(S)):
                    bad_state_round = base + t - 1   # S_t is the state after that round
                if bad_state_round is None:
                    _, info = rm.step(amap.to_state(S))
                    clients.append(info.clients)
                    steps.append(info.steps)
                    comms.append(info.communication)
                    extras.append(info.extra)
                with np.errstate(over="ignore", invalid="ignore"):
                    S = M @ S + c
                X[base + t] = S[xs_slice]
        counters = counters_of(state)
        final = set_counters(amap.to_state(S), {
            p: counters[p] + n_affine * amap.counter_step.get(p, 0) for p in counters})
    else:
        final = state

    finite_rows = np.all(np.isfinite(X), axis=1)
    with np.errstate(over="ignore", invalid="ignore"):
        try:
            if finite_rows.all():
                loss, g2 = problem.loss_and_grad_norm2(X)
            else:                      # the hook refuses non-finite rows: those rows diverged
                loss, g2 = np.full(X.shape[0], np.inf), np.full(X.shape[0], np.inf)
                loss[finite_rows], g2[finite_rows] = problem.loss_and_grad_norm2(X[finite_rows])
        except (NonFinitePointError, OutOfRangeError):     # an oracle refused a diverged row
            loss = g2 = np.full(X.shape[0], np.inf)
    bad = ~(np.all(np.isfinite(X), axis=1) & np.isfinite(loss) & np.isfinite(g2))
    if np.any(bad):
        t = int(np.argmax(bad))
        raise DivergenceError(
            f"{algorithm.name} diverged in round {t}: the server model, F(x) or ||grad F||^2 "
            "is non-finite (affine fast path)")
    if bad_state_round is not None:
        raise DivergenceError(
            f"{algorithm.name} diverged in round {bad_state_round}: its state (beyond the server "
            "model) is non-finite (affine fast path)")
    x_star, f_star = known_optimum(problem)
    copy_round = min(amap.warmup, R) + 1
    record = run_record(
        algorithm, problem, rounds=R, completed_rounds=R, seed=int(seed), participation=None,
        seconds=time.perf_counter() - start, method="affine",
        communication=("recomputed each round" if communication == "recompute" or n_affine == 0
                       else f"per-round constant copy of round {copy_round} (rounds {copy_round}..{R}; "
                            "non-zeros and entropy not recomputed)"),
        state_dim=amap.dim, recovery_seconds=recovery)
    return History(
        x=X, loss=loss, loss_gap=None if f_star is None else loss - f_star,
        dist2=None if x_star is None else np.sum((X - x_star) ** 2, axis=1),
        grad_norm2=g2, clients=clients, steps=steps, communication=comms, extra=extras,
        state=final, record=record)
