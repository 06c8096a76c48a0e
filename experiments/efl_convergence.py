"""Monte Carlo E||w_{tau E} - w*||^2 of EFL against its Theorem 1 (seed 000, eq. 7).

Seed 000 (EFL, Ma et al.), section 4, Theorem 1: under Assumptions 1-5
(every F~_k L-smooth and mu-strongly convex, gradient noise E||g - grad||^2 <=
sigma_k^2, E||g||^2 <= G^2, aggregation weights p_tau^k <= theta p^k) and with
the decreasing step size

    eta_tau = 16 E / (mu ((tau + 1) E + gamma) E[sum_k p_tau^k s_tau^k]),

    E||w_{tau E} - w*||^2 <= C_tau / (tau E + gamma)^2 + H_tau J / (tau E + gamma).

The bound is ``fltheory.theory.bounds.efl_theorem1`` in both readings of
THEORY.md section 4 (``"corrected"``: J with D_k inside its sum, s_t^k in
B_t; ``"as_printed"``: the literal J with D outside and inverted units, s_t^K
read as E).

Protocol (THEORY.md section 5).  One random quadratic federation (every
client exactly L-smooth and mu-strongly convex, ``random_quadratic(...,
constants="clients")``) with Gaussian gradient noise of known per-client
variance sigma_k^2 (``with_gradient_noise``).  EFL (``fltheory.algorithms.EFL``)
with lambda = 0, so F~_k = F_k and D_k = F_k(w*) - F_k* is the convention of
the bounds module, runs with ``lr = 1`` and ``lr_schedule(tau) = eta_tau``
taken from the bound's own step sizes (``terms["eta"]``), i.e. exactly the
schedule of the theorem.  Variants (each a row of ``config["variants"]``):

* ``complete``: every client completes E steps, plain weights p^k;
* ``incomplete-plain`` / ``incomplete-adaptive``: s_k uniform on {1..E},
  weights p^k or the adaptive E p^k / s_k of section 4.2 (theta = E);
* ``inactive``: client k completes E steps or none (probability y_k, unequal
  across clients, so the ratio E[p s]/p^k differs and r_t = 1);
* ``sampled``: S of N clients drawn uniformly without replacement each round
  (``UniformSampling``), the others count as s_k = 0 (weight 0, weights not
  renormalised, as eq. 6 sums over all clients); P(s_k = E) = S/N;
* ``st-ef`` / ``st-ef-consistent``: complete clients, ST ternary top-k
  compression with error feedback both ways (Alg. 1-2), server copy as
  printed or with each residual counted once.  Theorem 1 is stated for EFL
  with its compression; its hypotheses say nothing about it;
* ``st-no-ef``: the same compression with error feedback switched off
  (``EFL(error_feedback=False)``: residuals discarded), the ablation that
  shows what the residual memory buys.

Constants come from the problem (``fed.constants``): mu = min_k mu_k,
L = max_k L_k, sigma_k^2 exact, D_k exact, theta = max p_tau^k / p^k over the
support of the step distribution, and G^2 = G2_max + max sigma_k^2 with
G2_max the exact maximum of max_k ||grad f_k||^2 over the ball around w* of
radius r = (largest distance of any server or client copy to w* in any
replicate) + 2 max_k ||w_k* - w*||.  For exact local gradient steps with
eta <= 1/L the local iterates stay within that radius (each step contracts
towards w_k*); with noise the radius is an empirical envelope, and
Assumption 4 only needs the expectation E||g||^2 <= G^2.

Sensitivity (a macro, not a check): the worst ratio when G^2 is taken at w*
alone, max_k ||grad f_k(w*)||^2 + max sigma_k^2 -- not an admissible constant
for the run, but it shows how much of the slack the choice of G^2 explains.

Statistics: M replicate runs (``config["replicates"]``), each with its own
recorded seed; per round the mean and a two-sided 95 % normal confidence
interval mean +- 1.96 s / sqrt(M).  The check's ratio is mean / bound (worst
round); a violation additionally reports whether the lower confidence limit
exceeds the bound.  EFL without error feedback is not run: the library's EFL
has no option to compress without error feedback (reported, not re-implemented).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from experiments._framework import Check, Theorem, progress
from fltheory import plotting
from fltheory.algorithms import EFL
from fltheory.algorithms import run as run_algorithm
from fltheory.errors import InvalidHyperparameterError
from fltheory.participation import FullParticipation, FullSteps, IncompleteSteps, UniformSampling
from fltheory.problems.generators import random_quadratic
from fltheory.theory.bounds import efl_step_moments, efl_theorem1_from_constants

NAME = "efl_convergence"
TITLE = "Monte Carlo E||w - w*||^2 of EFL vs Theorem 1 (eq. 7), incomplete/inactive clients, compression"
_PAPER = "seed 000 (EFL, Ma et al.)"
THEOREMS = [
    Theorem("t1-corrected", _PAPER, "Theorem 1, corrected reading (THEORY.md sec. 4)", "eq. 7"),
    Theorem("t1-as-printed", _PAPER, "Theorem 1, as printed (J with D outside its sum, s^K = E)", "eq. 7"),
]
VARIANTS: dict[str, dict[str, Any]] = {
    "complete": {"steps": "full", "weights": "plain", "compression": None, "server_update": "as_printed"},
    "incomplete-plain": {"steps": "incomplete", "weights": "plain", "compression": None,
                         "server_update": "as_printed"},
    "incomplete-adaptive": {"steps": "incomplete", "weights": "adaptive", "compression": None,
                            "server_update": "as_printed"},
    "inactive": {"steps": "inactive", "weights": "plain", "compression": None, "server_update": "as_printed"},
    "sampled": {"steps": "sampled", "weights": "plain", "compression": None, "server_update": "as_printed"},
    "st-ef": {"steps": "full", "weights": "plain", "compression": "st", "server_update": "as_printed"},
    "st-ef-consistent": {"steps": "full", "weights": "plain", "compression": "st",
                         "server_update": "consistent"},
    "st-no-ef": {"steps": "full", "weights": "plain", "compression": "st", "server_update": "as_printed",
                 "error_feedback": False},
}
QUICK: dict[str, Any] = {
    "n_clients": 4, "dim": 4, "L": 4.0, "mu": 1.0, "heterogeneity": 1.0,
    "sigma2": [0.5, 1.0, 1.5, 2.0],           # per-client gradient-noise variance
    "E": 3, "rounds": 12, "replicates": 40, "init_distance": 2.0,
    "inactive_prob": [0.0, 0.2, 0.4, 0.6],    # y_k of the "inactive" variant
    "q": 0.5,                                 # ST sparsity: k = floor(d q) entries
    "sampled": 2,                             # S clients per round in the "sampled" variant
    "variants": list(VARIANTS),
    "confidence_z": 1.96,                     # two-sided 95 % normal interval
}
FULL: dict[str, Any] = {**QUICK, "n_clients": 8, "dim": 10, "rounds": 60, "replicates": 400,
                        "sigma2": [0.5 + 0.25 * k for k in range(8)],
                        "inactive_prob": [0.1 * k for k in range(8)], "q": 0.3, "sampled": 3}
EXPECTED_AXES = 2


class _TableSteps:
    """Step distribution with a fixed per-client table P(s_k = j), j = 0..E:
    one call ``rng.random(m)``, inverse CDF per selected client."""

    def __init__(self, probs: np.ndarray) -> None:
        self.cdf = np.cumsum(probs, axis=1)
        self.cdf[:, -1] = 1.0

    def __call__(self, rng: np.random.Generator, t: int, E: np.ndarray, clients: np.ndarray) -> np.ndarray:
        u = rng.random(clients.shape[0])
        return (u[:, None] >= self.cdf[clients]).sum(axis=1).astype(np.int64)


class _Schedule:
    """lr_schedule(tau) = eta_tau of Theorem 1 (tau = completed rounds)."""

    def __init__(self, eta: np.ndarray) -> None:
        self.eta = np.asarray(eta, dtype=np.float64)

    def __call__(self, tau: int) -> float:
        return float(self.eta[min(tau, self.eta.shape[0] - 1)])


def _step_table(kind: str, N: int, E: int, inactive: np.ndarray, sample_share: float = 1.0) -> np.ndarray:
    """(N, E+1) table of P(s_k = j); ``sample_share`` = S/N for kind "sampled"."""
    probs = np.zeros((N, E + 1))
    if kind == "full":
        probs[:, E] = 1.0
    elif kind == "incomplete":
        probs[:, 1:] = 1.0 / E
    elif kind == "inactive":
        probs[:, 0], probs[:, E] = inactive, 1.0 - inactive
    elif kind == "sampled":
        probs[:, 0], probs[:, E] = 1.0 - sample_share, sample_share
    else:
        raise InvalidHyperparameterError(
            f"unknown step kind {kind!r}; expected full/incomplete/inactive/sampled")
    return probs


def _participation(kind: str, probs: np.ndarray, inactive: np.ndarray, S: int):
    if kind == "full":
        return None
    if kind == "sampled":
        return UniformSampling(S)
    if kind == "inactive":
        return IncompleteSteps(FullParticipation(), FullSteps(), inactive_prob=inactive)
    return IncompleteSteps(FullParticipation(), _TableSteps(probs))


def _variant(name: str, spec: dict[str, Any], fed: Any, cfg: dict[str, Any], x0: np.ndarray,
             seeds: np.ndarray) -> dict[str, Any]:
    N, E, T = fed.n_clients, cfg["E"], cfg["rounds"]
    inactive = np.asarray(cfg["inactive_prob"], dtype=np.float64)
    S = int(cfg["sampled"])
    if not 1 <= S <= N:
        raise InvalidHyperparameterError(f"sampled must be in [1, N = {N}], got {S}")
    probs = _step_table(spec["steps"], N, E, inactive, S / N)
    mom = efl_step_moments(fed.weights, probs, E, weighting=spec["weights"])
    theta = max(mom.max_ratio, 1.0)
    x_star = fed.optimum()
    init_dist2 = float(np.sum((x0 - x_star) ** 2))
    consts0 = fed.constants()
    # eta_tau does not depend on G^2: take the theorem's schedule before the runs.
    pre = efl_theorem1_from_constants(consts0, T, E=E, theta=theta, weights=fed.weights,
                                      init_dist2=init_dist2, G2=0.0, moments=mom)
    if pre.terms.get("eta") is None:
        raise InvalidHyperparameterError(f"{name}: Theorem 1 step size undefined: {pre}")
    eta = np.asarray(pre.terms["eta"])
    alg = EFL(lr=1.0, local_steps=E, lam=0.0, weights=spec["weights"], theta=theta,
              compression=spec["compression"], q=cfg["q"], server_update=spec["server_update"],
              error_feedback=spec.get("error_feedback", True), lr_schedule=_Schedule(eta))
    part = _participation(spec["steps"], probs, inactive, S)
    server = np.empty((seeds.shape[0], T + 1))
    client = np.empty((seeds.shape[0], T + 1))
    for j, s in enumerate(seeds):
        hist = run_algorithm(alg, fed, T, participation=part, seed=int(s), x0=x0)
        server[j] = hist.dist2
        xc = np.array([x0] + [e["client_model"] for e in hist.extra])
        client[j] = np.sum((xc - x_star) ** 2, axis=1)
    offsets = np.linalg.norm(fed.client_optima() - x_star, axis=1)
    radius = float(np.sqrt(max(server.max(), client.max()))) + 2.0 * float(offsets.max())
    consts = fed.constants(radius=radius)
    z, M = cfg["confidence_z"], seeds.shape[0]
    out: dict[str, Any] = {"spec": spec, "theta": theta, "eta": eta, "S": np.asarray(pre.terms["S"]),
                           "radius": radius, "G2": float(consts.G2_max + consts.sigma2_clients.max()),
                           "seeds": seeds}
    for label, series in (("server", server), ("client", client)):
        mean = series.mean(axis=0)
        half = z * series.std(axis=0, ddof=1) / np.sqrt(M)
        out[f"{label}_mean"], out[f"{label}_low"], out[f"{label}_high"] = mean, mean - half, mean + half
    for variant in ("corrected", "as_printed"):
        bound, unmet = [], []
        for tau in range(1, T + 1):
            res = efl_theorem1_from_constants(consts, tau, E=E, theta=theta, weights=fed.weights,
                                              init_dist2=init_dist2, moments=mom, variant=variant)
            bound.append(res.value)
            unmet.extend(f"{a.name} ({a.detail})" for a in res.violated)
        out[f"bound_{variant}"] = bound
        out[f"unmet_{variant}"] = sorted(set(unmet))
        if variant == "corrected" and res.value is not None:
            out["gamma"], out["J"], out["H_final"] = res.terms["gamma"], res.terms["J"], res.terms["H"]
    # Sensitivity (not a check): G^2 at w* alone, max_k ||grad f_k(w*)||^2 + max sigma_k^2, is no admissible
    # constant for the whole run but shows how much of the slack the choice of G^2 explains.
    at_opt = fed.constants(radius=0.0)
    out["G2_at_optimum"] = float(at_opt.G2_max + at_opt.sigma2_clients.max())
    out["bound_corrected_G2_at_optimum"] = [
        efl_theorem1_from_constants(at_opt, tau, E=E, theta=theta, weights=fed.weights, init_dist2=init_dist2,
                                    moments=mom).value for tau in range(1, T + 1)]
    return out


def run(config: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    """Build the instance, run every variant M times, evaluate both bound readings per round."""
    N, d = config["n_clients"], config["dim"]
    for key in ("sigma2", "inactive_prob"):
        if len(config[key]) != N:
            raise InvalidHyperparameterError(f"{key} needs {N} entries (one per client), got {config[key]}")
    fed_seed = int(rng.integers(0, 2**31 - 1))
    fed = random_quadratic(N, d, L=config["L"], mu=config["mu"], heterogeneity=config["heterogeneity"],
                           seed=fed_seed, constants="clients").with_gradient_noise(config["sigma2"])
    direction = rng.standard_normal(d)
    x0 = fed.optimum() + config["init_distance"] * direction / np.linalg.norm(direction)
    c = fed.constants()
    out: dict[str, Any] = {"fed_seed": fed_seed, "x0": x0, "x_star": fed.optimum(),
                           "mu": float(c.client_mu.min()), "L": float(c.client_L.max()),
                           "sigma2": list(config["sigma2"]), "D_k": c.D_k, "E": config["E"],
                           "rounds": config["rounds"], "replicates": config["replicates"],
                           "confidence_z": config["confidence_z"], "n_clients": N, "dim": d,
                           "variants": list(config["variants"]), "runs": {}}
    for name in progress(list(config["variants"]), desc=NAME):
        if name not in VARIANTS:
            raise InvalidHyperparameterError(f"unknown variant {name!r}; expected one of {list(VARIANTS)}")
        seeds = rng.integers(0, 2**31 - 1, size=config["replicates"])
        out["runs"][name] = _variant(name, VARIANTS[name], fed, config, x0, seeds)
    return out


def _ratios(r: dict[str, Any], variant: str, key: str = "server_mean") -> list[float | None]:
    """measured / bound per round tau = 1..T (None where the bound is undefined)."""
    return [None if b is None or b <= 0 else float(m) / b
            for m, b in zip(r[key][1:], r[f"bound_{variant}"])]


def checks(results: dict[str, Any]) -> list[Check]:
    """Per (reading, variant): worst mean/bound over rounds; violated if > 1 (with the CI)."""
    inst = (f"random_quadratic seed {results['fed_seed']}, N = {results['n_clients']}, d = {results['dim']}, "
            f"mu = {results['mu']:.4g}, L = {results['L']:.4g}, E = {results['E']}, "
            f"sigma_k^2 = {results['sigma2']}, M = {results['replicates']} replicates")
    out: list[Check] = []
    for key, variant in (("t1-corrected", "corrected"), ("t1-as-printed", "as_printed")):
        for name in results["variants"]:
            r = results["runs"][name]
            ratios = _ratios(r, variant)
            valid = [(i, x) for i, x in enumerate(ratios) if x is not None]
            if not valid:
                out.append(Check(key, "not checkable", None,
                                 f"{name}: bound undefined: {'; '.join(r[f'unmet_{variant}']) or 'no value'}"))
                continue
            i, worst = max(valid, key=lambda p: p[1])
            tau = i + 1
            b = r[f"bound_{variant}"][i]
            if worst > 1.0:
                low = r["server_low"][tau]
                sig = "significant (lower 95% limit above bound)" if low > b else "within the 95% CI"
                out.append(Check(key, "violated", worst,
                                 f"{name}, round {tau}: mean E||w-w*||^2 = {r['server_mean'][tau]:.6g} > bound "
                                 f"{b:.6g} ({sig}; CI [{low:.4g}, {r['server_high'][tau]:.4g}]); theta = "
                                 f"{r['theta']:.3g}, G^2 = {r['G2']:.4g} (radius {r['radius']:.4g}); {inst}"))
            else:
                out.append(Check(key, "holds", worst,
                                 f"{name}: worst round {tau} of {len(ratios)}, upper 95% limit / bound = "
                                 f"{r['server_high'][tau] / b:.3g}; theta = {r['theta']:.3g}, "
                                 f"G^2 = {r['G2']:.4g}"))
    return out


def macros(results: dict[str, Any]) -> dict[str, float]:
    """Worst mean/bound per variant and reading, and the final-round ratio."""
    out: dict[str, float] = {}
    for name in results["variants"]:
        stem = name.replace("-", "_")
        for variant in ("corrected", "as_printed"):
            vals = [x for x in _ratios(results["runs"][name], variant) if x is not None]
            if vals:
                out[f"{stem}_{variant}_worst_ratio"] = max(vals)
                out[f"{stem}_{variant}_final_ratio"] = vals[-1]
        r = results["runs"][name]
        sens = [float(mm) / b for mm, b in zip(r["server_mean"][1:], r["bound_corrected_G2_at_optimum"])
                if b is not None and b > 0]
        if sens:
            out[f"{stem}_worst_ratio_G2_at_optimum"] = max(sens)
    return out


def plot(results: dict[str, Any]):
    """Left: Monte Carlo mean with 95% bands and the corrected bound (dashed) per variant.
    Right: mean / bound per round, corrected (solid) and as printed (dotted)."""
    fig, (ax, axr) = plotting.figure(1, 2, height=3.4)
    rounds = np.arange(results["rounds"] + 1)
    for c, name in enumerate(results["variants"]):
        r = results["runs"][name]
        colour = plotting.OKABE_ITO[c % len(plotting.OKABE_ITO)]
        ax.plot(rounds, r["server_mean"], color=colour, linestyle="-", label=f"{name} (MC mean)")
        ax.fill_between(rounds, np.maximum(r["server_low"], 1e-300), r["server_high"], color=colour, alpha=0.2,
                        linewidth=0)
        bound = [np.nan if b is None else b for b in r["bound_corrected"]]
        ax.plot(rounds[1:], bound, color=colour, linestyle="--", linewidth=1.0)
        for variant, style in (("corrected", "-"), ("as_printed", ":")):
            y = [np.nan if x is None else x for x in _ratios(r, variant)]
            axr.plot(rounds[1:], y, color=colour, linestyle=style, marker="o" if style == "-" else None)
    ax.plot([], [], color="grey", linestyle="--", label="Theorem 1 bound (corrected)")
    ax.set_yscale("log")
    ax.set_xlabel(r"round $\tau$")
    ax.set_ylabel(r"$E\|w_{\tau E} - w^*\|^2$ (squared distance)")
    ax.set_title(f"EFL, M = {results['replicates']} seeds, 95% CI bands")
    plotting.ratio_axis(axr, label="MC mean / bound (dimensionless)")
    axr.plot([], [], color="grey", linestyle="-", marker="o", label="corrected reading")
    axr.plot([], [], color="grey", linestyle=":", label="as printed")
    axr.set_xlabel(r"round $\tau$")
    axr.set_title("tightness of eq. 7 per round")
    axr.legend(loc="best", fontsize=7)
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=4, fontsize=7)
    return fig
