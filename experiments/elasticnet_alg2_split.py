"""FedElasticNet Algorithm 2 (with SCAFFOLD): model-change and control-change non-zeros apart (FedElasticNet).

FedElasticNet (FedElasticNet, ICLR 2023 submission), section 3.2: the l1 term
lambda_1 sign(theta - theta^{t-1}) of eq. 7 "sparsifies the local update
Delta_k = theta_k^t - theta^{t-1}; hence, reduces the communication cost", and
section 4 / Table 2: Algorithm 2 transmits fewer non-zeros than SCAFFOLD.
Algorithm 2 sends two vectors per client, the eps-thresholded model change
Delta_k and the control change Delta c_k = c_k^t - c_k^{t-1}, which the
algorithm never thresholds.  Pooling both in one fraction (as the
``elasticnet_communication`` experiment's uplink total does) mixes a
quantity the l1 term acts on with one it does not, so here they are counted
apart:

* control non-zeros: nnz(c_k^t - c_k^{t-1}) over the participants, read off
  two consecutive states (a run callback; ``ScaffoldState.c_clients``);
* model non-zeros: the round's uplink non-zeros (``RoundInfo.communication``,
  which measures the stacked message [Delta_k, Delta c_k]) minus the control
  non-zeros;

each over its own m d entries per round.  Two checks: ``alg2-model-sparsity``
(section 3.2: every lambda_1 > 0 of the sweep sends at most the model-change
non-zero fraction of lambda_1 = 0) and ``alg2-uplink-sparsity`` (Table 2: the
same for the pooled uplink fraction), each with ratio = worst fraction over
lambda_1 > 0 / fraction at lambda_1 = 0.  The instance is the
``elasticnet_communication`` one (random quadratic, ``constants="clients"``,
uniform weights, full participation) with this experiment's own seed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure

from fltheory.references import cite
from fltheory.reproduce import Check, Progress, Theorem, silent_progress
from fltheory import plotting
from fltheory.algorithms import FedElasticNet
from fltheory.algorithms import run as run_algorithm
from ._instances import final_gap, random_quadratic_instance

NAME = "elasticnet_alg2_split"
TITLE = "FedElasticNet Alg. 2: model-change vs control-change non-zeros against lambda_1"
_PAPER = cite("FedElasticNet")
THEOREMS = [
    Theorem("alg2-model-sparsity", _PAPER, "sec. 3.2: the l1 term sparsifies the transmitted model change "
            "Delta_k of Algorithm 2 (every lambda_1 > 0 vs lambda_1 = 0, same eps)", "eq. 7"),
    Theorem("alg2-uplink-sparsity", _PAPER, "sec. 4 / Table 2: Algorithm 2 transmits fewer non-zeros than "
            "SCAFFOLD (model + control changes pooled)", ""),
]
QUICK: dict[str, Any] = {
    "n_clients": 5, "dim": 12, "L": 1.0, "mu": 0.1, "heterogeneity": 1.0, "init_distance": 2.0,
    "rounds": 15, "lambda2": 1.0, "eps": 1e-3, "lr": 0.1, "local_steps": 10,
    "lambda1": [0.0, 0.003, 0.01, 0.03, 0.1, 0.3],
}
FULL: dict[str, Any] = {**QUICK, "n_clients": 20, "dim": 60, "rounds": 100,
                        "lambda1": [0.0, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0]}
EXPECTED_AXES = 1


def alg2_split(fed: Any, x0: np.ndarray, lambda1: float, cfg: dict[str, Any]) -> dict[str, float]:
    """Non-zero fractions of Algorithm 2's model changes, control changes and both, over ``rounds``.

    Control non-zeros come from consecutive states (c_k^t - c_k^{t-1} of the
    participants), model non-zeros are the round's uplink non-zeros minus them."""
    alg = FedElasticNet(base="scaffold", lambda1=lambda1, lambda2=cfg["lambda2"], eps=cfg["eps"],
                        lr=cfg["lr"], local_steps=cfg["local_steps"])
    d = fed.dim
    prev = {"c": np.zeros((fed.n_clients, d))}          # scaffold_init: every control starts at 0
    count = {"control": 0, "total": 0, "entries": 0}

    def callback(t: int, state: Any, info: Any) -> None:
        k = np.asarray(info.clients)
        count["control"] += int(np.count_nonzero(state.c_clients[k] - prev["c"][k]))
        count["total"] += int(info.communication.nonzeros_up)
        count["entries"] += k.size * d
        prev["c"] = state.c_clients.copy()

    hist = run_algorithm(alg, fed, cfg["rounds"], x0=x0, callback=callback)
    e = count["entries"]
    return {"model": (count["total"] - count["control"]) / e, "control": count["control"] / e,
            "uplink": count["total"] / (2 * e), "final_gap": final_gap(hist)}


def run(config: dict[str, Any], rng: np.random.Generator,
        progress: Progress = silent_progress) -> dict[str, Any]:
    seed, fed, x0 = random_quadratic_instance(config, rng)
    rows: dict[str, list[float]] = {"model": [], "control": [], "uplink": [], "final_gap": []}
    for lam1 in progress(config["lambda1"], desc=NAME):
        split = alg2_split(fed, x0, lam1, config)
        for key in rows:
            rows[key].append(split[key])
    return {"seed": seed, "N": config["n_clients"], "d": config["dim"], "rounds": config["rounds"],
            "eps": config["eps"], "lambda2": config["lambda2"], "lambda1": list(config["lambda1"]),
            "x0": x0, **rows}


def _sparsity_check(key: str, what: str, fractions: list[float], results: dict[str, Any]) -> Check:
    nz = np.asarray(fractions, dtype=float)
    lam = results["lambda1"]
    inst = (f"random_quadratic seed {results['seed']}, m = {results['N']}, d = {results['d']}, eps = "
            f"{results['eps']}, lambda_2 = {results['lambda2']}, {results['rounds']} rounds")
    if nz[0] <= 0:
        return Check(key, "not checkable", None, f"{what}: no non-zero at lambda_1 = 0; {inst}")
    j = 1 + int(np.argmax(nz[1:]))
    ratio = float(nz[j] / nz[0])
    text = (f"{what}: non-zero fraction {nz[0]:.4g} at lambda_1 = 0, worst {nz[j]:.4g} at lambda_1 = "
            f"{lam[j]} "
            f"(all {[round(float(v), 4) for v in nz]} over lambda_1 = {lam}); control changes "
            f"{[round(float(v), 4) for v in results['control']]}; {inst}")
    return Check(key, "holds" if ratio <= 1 else "violated", ratio, text)


def checks(results: dict[str, Any]) -> list[Check]:
    return [_sparsity_check("alg2-model-sparsity", "model changes Delta_k", results["model"], results),
            _sparsity_check("alg2-uplink-sparsity", "model + control changes", results["uplink"], results)]


def macros(results: dict[str, Any]) -> dict[str, float]:
    return {"model_fraction_lambda0": float(results["model"][0]),
            "model_fraction_lambdamax": float(results["model"][-1]),
            "control_fraction_lambda0": float(results["control"][0]),
            "control_fraction_lambdamax": float(results["control"][-1]),
            "uplink_fraction_lambda0": float(results["uplink"][0]),
            "uplink_fraction_lambdamax": float(results["uplink"][-1])}


def plot(results: dict[str, Any]) -> Figure:
    fig, (ax,) = plotting.figure(1, 1)
    lam = results["lambda1"]
    xpos = np.arange(len(lam))
    for c, (key, label) in enumerate((("model", r"model changes $\Delta_k$ (thresholded)"),
                                      ("control", r"control changes $\Delta c_k$ (sent dense)"),
                                      ("uplink", "both, pooled"))):
        ax.plot(xpos, results[key], marker="o", color=plotting.OKABE_ITO[c], label=label)
    ax.set_xticks(xpos, [f"{v:g}" for v in lam])
    ax.set_xlabel(r"$\lambda_1$")
    ax.set_ylabel("non-zero fraction of sent entries")
    ax.set_ylim(0, 1.05)
    ax.set_title("FedElasticNet Alg. 2 (SCAFFOLD)")
    ax.legend(fontsize=6)
    return fig
