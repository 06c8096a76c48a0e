"""experiments/objective_shift.py held to an independent computation, and the
EFL eq. (11) counterexample it finds kept as a strict xfail (a finding).

The reference here works on the raw quadratic data (H_i, e_i, p_i) only:
x* = (sum p_i H_i)^{-1} sum p_i e_i before and after the shift,
D^_a = 1/2 (w^* - x_a*)^T H_a (w^* - x_a*) with x_a* = H_a^{-1} e_a,
L = max_k lambda_max(H_k), mu = min(lambda_min(Hbar_before), lambda_min(Hbar_after)),
bound = 8 L share^2 D^_a / mu^2 with share = n_a/n (depart) or n_a/(n + n_a) (join)
(seed 000, Theorem 2, eq. 10-11).
"""

from __future__ import annotations

import numpy as np
import pytest

from experiments import objective_shift as exp

SEEDS = range(5)


def _optimum(H: np.ndarray, e: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, float]:
    p = n / n.sum()
    Hbar = np.einsum("i,ijk->jk", p, H)
    return np.linalg.solve(Hbar, p @ e), float(np.linalg.eigvalsh(Hbar)[0])


def reference(family: str, kind: str, share: float, seed: int) -> dict[str, float]:
    cfg = exp.QUICK
    rows = np.array(exp._rows(kind, share, cfg["n_clients"], cfg["n_total"], cfg["dim"]))
    fed = exp._federation(family, rows.tolist(), cfg, seed)
    H, e = fed.H, fed.e
    w_with, mu_with = _optimum(H, e, rows)
    w_without, mu_without = _optimum(H[1:], e[1:], rows[1:])
    w_old, w_new = (w_with, w_without) if kind == "depart" else (w_without, w_with)
    x_a = np.linalg.solve(H[0], e[0])
    D_hat = 0.5 * (w_new - x_a) @ H[0] @ (w_new - x_a)
    L = float(np.max(np.linalg.eigvalsh(H)[:, -1]))
    mu = min(mu_with, mu_without)
    share_used = rows[0] / rows.sum()          # n_a/n (depart) = n_a/(n+n_a) (join)
    return {"exact": float(np.sum((w_old - w_new) ** 2)), "mu": mu, "L": L,
            "bound": 8.0 * L * share_used ** 2 * D_hat / mu ** 2}


@pytest.mark.parametrize("family", ["quadratic", "least_squares"])
@pytest.mark.parametrize("kind, share", [("depart", 0.1), ("depart", 0.8), ("join", 0.5), ("join", 8.0)])
def test_experiment_matches_independent_closed_form(family, kind, share):
    got = exp._measure(family, kind, share, exp.QUICK, seed=3)
    ref = reference(family, kind, share, seed=3)
    assert got["exact"] == pytest.approx(ref["exact"], rel=1e-8)
    assert got["bound"] == pytest.approx(ref["bound"], rel=1e-8)
    assert got["ratio"] == pytest.approx(ref["exact"] / ref["bound"], rel=1e-8)


def test_counterexample_instances_meet_the_hypotheses():
    for seed in SEEDS:
        ref = reference("least_squares", "join", 8.0, seed)
        assert ref["mu"] > 0 and ref["L"] >= ref["mu"]        # mu-strongly convex, L-smooth
        assert np.isfinite(ref["bound"]) and ref["bound"] > 0


@pytest.mark.xfail(strict=True, reason=(
    "FINDING: EFL Theorem 2 eq. (11) as printed (D^_a at the new optimum) fails when the arriving "
    "client holds more data than the rest (n_a/n = 8, least squares, d = 3, 4 other clients): "
    "the exact shift exceeds the bound by about an order of magnitude; the derived bound "
    "(D_a at the old optimum) holds"))
def test_eq11_as_printed_holds_when_the_newcomer_is_large():
    for seed in SEEDS:
        ref = reference("least_squares", "join", 8.0, seed)
        assert ref["exact"] <= ref["bound"], f"seed {seed}: exact {ref['exact']:.6g} > bound {ref['bound']:.6g}"


def test_derived_join_bound_holds_on_the_same_instances():
    for seed in SEEDS:
        got = exp._measure("least_squares", "join", 8.0, exp.QUICK, seed)
        assert got["ratio_derived"] <= 1.0
