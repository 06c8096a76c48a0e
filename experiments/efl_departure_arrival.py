"""EFL with a client departure and a client arrival: trajectories with and without the learning-rate
restart EFL prescribes (sections 4.3 and 4.4).

Ma et al. (arXiv:2106.09433), section 4.3: when client a quits at round tau_0
the objective becomes F^ = sum_{k != a} p^k F_k (renormalised) and the
learning rate "needs to restart"; section 4.4: the same holds when a client
joins (the objective then includes its loss and the learning rate must be
increased).  Protocol: EFL (``fltheory.algorithms.EFL``, lambda = 0, exact
transmission, every present client completing E steps of deterministic local
GD) on a random quadratic federation, with ``participation.Schedule`` removing
client a at ``shift_round`` (departure run) or adding client b there (arrival
run; b absent before).  Learning rate eta_tau = eta_0 / (1 + tau / tau_d),
the O(1/tau) decay of Theorem 1, either continued through the shift
("no restart") or restarted at it (eta_0 / (1 + (tau - tau_0)/tau_d) for
tau >= tau_0).  The error after the shift is measured against the optimum of
the objective in force (``without_client(a).optimum()`` after a departure, the
whole federation's optimum after an arrival), exactly (no noise).  Checks
``restart-departure`` and ``restart-arrival``: ratio = ||x_T - w^*||^2 with the
restart / without it, at the last round T.  The objective shift
||w* - w^*||^2 itself is reported beside (Theorem 2 checks it, experiment
``objective_shift``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from fltheory.reproduce import Check, Progress, Theorem, silent_progress
from fltheory import plotting
from fltheory.algorithms import EFL
from fltheory.algorithms import run as run_rounds
from fltheory.participation import FullParticipation, Schedule

from ._efl_instances import PAPER as _PAPER
from ._efl_instances import instance_text, quadratic_instance, ratio_check

NAME = "efl_departure_arrival"
TITLE = "EFL after a client departure / arrival: learning-rate restart vs continued decay (sec. 4.3-4.4)"
THEOREMS = [
    Theorem("restart-departure", _PAPER,
    "sec. 4.3: after a departure the learning rate restarts (error to the "
            "new optimum with restart <= without)", "sec. 4.3"),
    Theorem("restart-arrival", _PAPER,
    "sec. 4.4: after an arrival the learning rate is increased (error to the "
            "new optimum with restart <= without)", "sec. 4.4"),
]
QUICK: dict[str, Any] = {
    "n_clients": 5, "dim": 4, "L": 4.0, "mu": 0.5, "heterogeneity": 1.0, "init_distance": 3.0,
    "local_steps": 2, "lr0_factor": 0.5, "decay_rounds": 5.0, "shift_round": 40, "rounds": 80,
}
FULL: dict[str, Any] = {**QUICK, "n_clients": 10, "dim": 10, "shift_round": 100, "rounds": 200}
EXPECTED_AXES = 2


@dataclass(frozen=True)
class DecaySchedule:
    """eta_tau / eta_0 = 1 / (1 + (tau - tau_s) / tau_d), tau_s = ``restart_at`` once tau >= it (else 0)."""

    decay_rounds: float
    restart_at: int | None = None

    def __call__(self, tau: int) -> float:
        start = self.restart_at if self.restart_at is not None and tau >= self.restart_at else 0
        return 1.0 / (1.0 + (tau - start) / self.decay_rounds)


def trajectory(fed: Any, cfg: dict[str, Any], x0: np.ndarray, schedule: Schedule, target: np.ndarray,
               restart: bool) -> np.ndarray:
    """||x_tau - target||^2, tau = 0..rounds, of EFL under ``schedule``."""
    eta0 = cfg["lr0_factor"] / (cfg["local_steps"] * float(fed.client_L.max()))
    lr = DecaySchedule(cfg["decay_rounds"], cfg["shift_round"] if restart else None)
    alg = EFL(lr=eta0, local_steps=cfg["local_steps"], lam=0.0, compression=None, lr_schedule=lr)
    xs = run_rounds(alg, fed, cfg["rounds"], x0=x0, participation=schedule).x
    return np.sum((xs - target) ** 2, axis=1)


def run(config: dict[str, Any], rng: np.random.Generator,
        progress: Progress = silent_progress) -> dict[str, Any]:
    seed, fed, x0 = quadratic_instance(config, rng)
    a = b = config["n_clients"] - 1
    t0 = config["shift_round"]
    out: dict[str, Any] = {"seed": seed, "N": config["n_clients"], "d": config["dim"], "x0": x0,
                           "shift_round": t0, "rounds": config["rounds"],
                           "local_steps": config["local_steps"]}
    cases = {"departure": (Schedule(FullParticipation(), departures={a: t0}), fed.without_client(a).optimum(),
                           fed.optimum()),
             "arrival": (Schedule(FullParticipation(), arrivals={b: t0}), fed.optimum(),
                         fed.without_client(b).optimum())}
    for case in progress(list(cases), desc=NAME):
        schedule, new_opt, old_opt = cases[case]
        out[case] = {"restart": trajectory(fed, config, x0, schedule, new_opt, True),
                     "no_restart": trajectory(fed, config, x0, schedule, new_opt, False),
                     "shift": float(np.sum((new_opt - old_opt) ** 2))}
    return out


def checks(results: dict[str, Any]) -> list[Check]:
    out = []
    inst = instance_text(results["seed"], results["N"], results["d"], results["local_steps"],
                         f"shift at round {results['shift_round']} of {results['rounds']}", "x0 recorded")
    for key, case in (("restart-departure", "departure"), ("restart-arrival", "arrival")):
        r = results[case]
        with_r, without = float(r["restart"][-1]), float(r["no_restart"][-1])
        at_shift = float(r["restart"][results["shift_round"]])
        text = (f"{case}: ||x_T - w^*||^2 = {with_r:.4g} with restart, {without:.4g} without (at the shift "
                f"{at_shift:.4g}; objective shift ||w* - w^*||^2 = {r['shift']:.4g})")
        if without <= 0:
            out.append(Check(key, "not checkable", None, f"{text}: no error left without restart; {inst}"))
            continue
        out.append(ratio_check(key, with_r / without, text, inst))
    return out


def macros(results: dict[str, Any]) -> dict[str, float]:
    return {f"{case}_{k}": float(results[case][k][-1]) for case in ("departure", "arrival")
            for k in ("restart", "no_restart")}


def plot(results: dict[str, Any]) -> Figure:
    fig, axes = plotting.figure(1, 2)
    for ax, case in zip(axes, ("departure", "arrival"), strict=True):
        r = results[case]
        t = np.arange(len(r["restart"]))
        ax.semilogy(t, np.maximum(r["no_restart"], 1e-30), color=plotting.OKABE_ITO[0],
        label="decay continued")
        ax.semilogy(t, np.maximum(r["restart"], 1e-30), color=plotting.OKABE_ITO[1], linestyle="--",
                    label="learning rate restarted")
        ax.axvline(results["shift_round"], color="0.4", linestyle=":", linewidth=1.0, label=f"client {case}")
        ax.set_xlabel("round tau")
        ax.set_ylabel(r"$\|x_\tau - \hat w^*\|^2$ (squared model units)")
        ax.set_title(f"EFL, client {case}")
        ax.legend(fontsize=6)
    return fig
