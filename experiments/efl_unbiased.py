"""Is EFL "unbiased" under incomplete local work?  Exact expectation of one aggregation (EFL).

Ma et al. (arXiv:2106.09433) call EFL "an unbiased algorithm" and, in section
4.2, give incomplete clients the adaptive weight p_tau^k = E p^k / s_tau^k.
Here the expectation of one server update over the clients' random numbers of
completed steps s_k (independent, uniform on {1, ..., E}) is computed *exactly*
and compared with the update of full local work (every s_k = E, weight p^k).
By linearity E[sum_k w_k(s_k) Delta_k(s_k)] = sum_s P(s) A(s) with A(s) the
aggregate when every client completes s steps, so the library's EFL round is
run once per s (``FixedSteps``) from the same model (lambda = 0, exact
transmission, deterministic local GD at rate eta).  For quadratic clients
Delta_k(s) = -(I - (I - eta H_k)^s)(x - x_k*) = -s eta H_k (x - x_k*) + O(eta^2),
so with adaptive weights (E p^k / s) Delta_k(s) = -E eta p^k H_k (x - x_k*) +
O(eta^2): the expected update equals full work's to first order and the
relative bias is O(eta); with plain weights p^k the expected update is scaled
by E[s]/E, a relative bias that does not vanish.  Checks, over a sweep of
eta: ``unbiased-first-order`` (adaptive weights: relative bias ~ c eta, ratio
= |fitted slope of log bias on log eta - 1| / ``slope_tol``) and
``plain-weights-biased`` (the paper's reason for the adaptive weights: plain
weights keep a relative bias -> |1 - E[s]/E| as eta -> 0; ratio = measured /
(E - E[s])/E at the smallest eta, within ``slope_tol``, reported as holding
when it matches).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure

from fltheory.reproduce import Check, Progress, Theorem, silent_progress
from fltheory import plotting
from fltheory.algorithms import EFL
from fltheory.participation import FixedSteps, FullParticipation, IncompleteSteps

from ._efl_instances import PAPER as _PAPER
from ._efl_instances import instance_text, quadratic_instance, ratio_check

NAME = "efl_unbiased"
TITLE = "EFL's expected update under incomplete local work vs full work (exact, adaptive and plain weights)"
THEOREMS = [
    Theorem("unbiased-first-order", _PAPER,
    "abstract / sec. 4.2: with p_tau^k = E p^k / s_tau^k the expected "
            "update equals full local work's (relative bias O(eta), exact expectation)", "sec. 4.2"),
    Theorem("plain-weights-biased", _PAPER,
    "sec. 4.2 (why adaptive weights): plain weights p^k keep a relative "
            "bias 1 - E[s]/E as eta -> 0", "sec. 4.2"),
]
QUICK: dict[str, Any] = {
    "n_clients": 4, "dim": 3, "L": 4.0, "mu": 0.5, "heterogeneity": 1.0, "init_distance": 2.0,
    "local_steps": 4, "lr_factors": [0.1, 0.03, 0.01, 0.003, 0.001], "slope_tol": 0.1,
}
FULL: dict[str, Any] = {**QUICK, "n_clients": 10, "dim": 8, "local_steps": 8,
                        "lr_factors": [0.1, 0.03, 0.01, 0.003, 0.001, 0.0003]}
EXPECTED_AXES = 1


def aggregate(fed: Any, x: np.ndarray, eta: float, E: int, s: int, weights: str) -> np.ndarray:
    """The server update x_1 - x_0 of one EFL round from x when every client completes s of E steps."""
    alg = EFL(lr=eta, local_steps=E, lam=0.0, compression=None, weights=weights,
              theta=float(E) if weights == "adaptive" else None)
    part = IncompleteSteps(FullParticipation(), FixedSteps(np.full(fed.n_clients, s)))
    rng = np.random.default_rng(0)                    # nothing is drawn: fixed steps, exact gradients
    state = alg.init(fed, x, rng)
    new, _ = alg.round(state, fed, part, rng)
    return new.x - x


def relative_bias(fed: Any, x: np.ndarray, eta: float, E: int, weights: str) -> float:
    """||E_s[A] - A_full|| / ||A_full||, s uniform on {1, ..., E} for every client."""
    full = aggregate(fed, x, eta, E, E, "plain")
    expected = np.mean([aggregate(fed, x, eta, E, s, weights) for s in range(1, E + 1)], axis=0)
    return float(np.linalg.norm(expected - full) / np.linalg.norm(full))


def run(config: dict[str, Any], rng: np.random.Generator,
        progress: Progress = silent_progress) -> dict[str, Any]:
    seed, fed, x = quadratic_instance(config, rng)
    E = config["local_steps"]
    etas = [f / float(fed.client_L.max()) for f in config["lr_factors"]]
    bias: dict[str, list[float]] = {"adaptive": [], "plain": []}
    for eta in progress(etas, desc=NAME):
        for w in bias:
            bias[w].append(relative_bias(fed, x, eta, E, w))
    return {"seed": seed, "N": config["n_clients"], "d": config["dim"], "E": E, "x": x, "eta": etas,
            "bias_adaptive": bias["adaptive"], "bias_plain": bias["plain"], "slope_tol": config["slope_tol"],
            "plain_limit": (E - (E + 1) / 2) / E}


def slope(eta: list[float], values: list[float]) -> float:
    """Least-squares slope of log(values) on log(eta)."""
    return float(np.polyfit(np.log(eta), np.log(values), 1)[0])


def checks(results: dict[str, Any]) -> list[Check]:
    inst = instance_text(results["seed"], results["N"], results["d"], results["E"], "s uniform on 1..E",
                         "x recorded")
    tol = results["slope_tol"]
    ad = results["bias_adaptive"]
    sl = slope(results["eta"], ad)
    dev = abs(sl - 1.0) / tol
    text = (f"adaptive weights: relative bias {[float(f'{b:.3g}') for b in ad]} over eta = "
            f"{[float(f'{e:.3g}') for e in results['eta']]}, log-log slope {sl:.4f} (1 +- {tol}: O(eta), "
            f"unbiased to first order only)")
    out = [ratio_check("unbiased-first-order", dev, text, inst)]
    pl = results["bias_plain"]
    ratio = pl[-1] / results["plain_limit"]
    dev = abs(ratio - 1.0) / tol
    text = (f"plain weights: relative bias {[float(f'{b:.3g}') for b in pl]}, at the smallest eta "
            f"{pl[-1]:.4g} vs the predicted limit 1 - E[s]/E = {results['plain_limit']:.4g}")
    out.append(ratio_check("plain-weights-biased", dev, text, inst))
    return out


def macros(results: dict[str, Any]) -> dict[str, float]:
    return {"bias_adaptive_largest_eta": float(results["bias_adaptive"][0]),
            "bias_adaptive_smallest_eta": float(results["bias_adaptive"][-1]),
            "bias_plain_smallest_eta": float(results["bias_plain"][-1]),
            "slope_adaptive": slope(results["eta"], results["bias_adaptive"])}


def plot(results: dict[str, Any]) -> Figure:
    fig, (ax,) = plotting.figure(1, 1)
    eta = np.asarray(results["eta"])
    ax.loglog(eta, results["bias_adaptive"], marker="o", color=plotting.OKABE_ITO[0],
              label=r"adaptive $p^k_\tau = E p^k / s$")
    ax.loglog(eta, results["bias_plain"], marker="s", color=plotting.OKABE_ITO[1], label=r"plain $p^k$")
    ax.axhline(results["plain_limit"], color="0.4", linestyle=":", linewidth=1.0, label="1 - E[s]/E")
    ax.set_xlabel(r"client rate $\eta$")
    ax.set_ylabel(r"$\|E[A] - A_{full}\| / \|A_{full}\|$ (ratio)")
    ax.set_title("EFL expected update vs full work")
    ax.legend(fontsize=6)
    return fig
