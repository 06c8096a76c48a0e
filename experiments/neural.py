"""Every algorithm on small neural networks, and the stationarity of local correction.

Two parts, on the numpy networks of :mod:`fltheory.nn` (exact backward
passes, full-batch client gradients):

**(a) Accuracy against rounds.**  FedAvg, FedProx, FedCurv, FedOpt with client
AdaGrad (restarted every round, server SGD rate 1, no correction), SCAFFOLD
(option II), FedDyn (gradient-step local solver), FedElasticNet (on FedProx,
FedElasticNet Alg. 1) and EFL (EFL, ST compression with error feedback) train
the 2-hidden-layer MLP of FedElasticNet and the CNN of BetterObjects Table 1, both in
miniature (:func:`fltheory.nn.mlp`, :func:`fltheory.nn.cnn`; widths in the
config), on the scikit-learn 8x8 digits with a Dirichlet label skew
q ~ Dir(gamma p) over clients (BetterObjects section 4.1.1, eq. 4;
:func:`fltheory.problems.dirichlet_partition`).  scikit-learn is an optional
extra (``pip install 'fltheory[data]'``): without it the experiment stops with
the install command (no synthetic stand-in); ``results["data_provenance"]``
records the package and its version, ``results["partition_seed"]`` the seed
of the Dirichlet partition.
Full participation, the same local rate and local steps for every algorithm;
the algorithm-specific coefficients are in the config (not tuned per run).
Check ``"learns"`` (accuracy reached), per model: the best final test error
over the algorithms is below that of the majority-class predictor; ratio =
that error / the majority error.  The detail states how many algorithms beat
the majority class and which ones ended with a higher training loss than
they started with (the QUICK budget is a smoke test: a few rounds on 240
samples, too short for every algorithm to learn); ``macros`` give every
final accuracy and training-loss ratio F(x_T)/F(x_0).

**(b) Stationarity of local correction** (LocalAdaptivity, section 5 and Appendix F,
Theorem 3, eqs. 96-100: with the corrected changes of eq. 97 and the server
update of eq. 98, FedOpt with an adaptive client optimizer converges to a
stationary point of F, "there is no non-vanishing solution bias", whereas
uncorrected local adaptivity has a biased fixed point, section 4, eq. 8).
Theorem 3's hypotheses are met by construction: client AdaGrad restarted
every round with initial accumulator v0 > 0, so every preconditioner is
bounded, ||P|| <= 1/sqrt(v0) (Assumption 4); the same client rate and the
same local steps for every client; full-batch gradients; a *tanh* MLP with
weight decay ``reg`` (smooth, Assumption 3; a ReLU network is not
differentiable at its kinks; the decay makes F coercive so stationary points
exist).  For every client rate eta in ``stat_lrs``, three runs from one
initial point: no correction, local correction and joint correction, each
with server SGD at rate ``stat_server_lr[c] * eta_max / eta`` (the same
first-order step for every eta: local correction turns a client change into
-eta grad f_i to first order; a server rate changes the iteration, not the
fixed points of T).  ||grad F(x_t)||^2 is exact (all data); the *residual* of
a run is its smallest value over the last ``window`` rounds (the level it
settles at).

Why a sweep over eta: with a fixed eta the corrected fixed point is
stationary only up to O(eta) (docs/theory/fixed-points.md, "corrected fixed point ->
x* at rate O(eta)"; LocalAdaptivity's eq. 99 lets the client rate shrink with the
horizon T), so the corrected runs also level off, at a residual ~ eta^2; the
uncorrected fixed point keeps a bias as eta -> 0 (LocalAdaptivity eq. 8).

Checks (b): ``"local-correction-stationary"`` / ``"joint-correction-stationary"``:
ratio = residual with the correction / residual without, at the smallest
rate (<= 1: the corrected run ends closer to stationarity).
``"bias-vanishes"``: ratio = (residual(eta_min) / residual(eta_max)) with
correction (the worse of local and joint) / the same quotient without
correction (<= 1: the corrected residual shrinks faster with eta); the
fitted exponents p of residual ~ eta^p are in the detail and the macros.
LocalAdaptivity's rate (eq. 100) has constants the text extraction lost, so no
absolute threshold is claimed.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from fltheory.reproduce import Check, Progress, Theorem, silent_progress
from fltheory import optim, plotting
from fltheory.algorithms import (
    EFL,
    FedAvg,
    FedCurv,
    FedDyn,
    FedElasticNet,
    FedOpt,
    FedProx,
    Scaffold,
)
from fltheory.algorithms import run as run_algorithm
from fltheory.errors import DivergenceError
from fltheory.nn import (
    Dense,
    NeuralFederation,
    Sequential,
    SoftmaxCrossEntropy,
    Tanh,
    cnn,
    load_image_dataset,
    mlp,
    split_clients,
)
from fltheory.problems import dirichlet_partition

NAME = "neural"
TITLE = "All algorithms on a small MLP and CNN (Dirichlet digits); local AdaGrad with correction reaches stationarity"
THEOREMS = [
    Theorem("learns", "FedElasticNet sec. 4 (MLP) / BetterObjects sec. 4 (CNN) / LocalAdaptivity sec. 6",
            "accuracy reached: the best final test error is below the majority-class predictor's",
            "Table 1 (BetterObjects)"),
    Theorem("local-correction-stationary", "LocalAdaptivity (Wang et al., local adaptivity)",
            "Theorem 3 (App. F): local correction reaches a stationary point of F (no non-vanishing bias), "
            "so it ends closer to stationarity than uncorrected client AdaGrad (sec. 4, eq. 8)", "eqs. 97-100"),
    Theorem("joint-correction-stationary", "LocalAdaptivity (Wang et al., local adaptivity)",
            "sec. 5: global (joint) correction keeps the corrected, stationary fixed point", "sec. 5"),
    Theorem("bias-vanishes", "LocalAdaptivity (Wang et al.) + docs/theory/fixed-points.md",
            "the corrected residual vanishes as the client rate eta -> 0 (O(eta) bias), the uncorrected "
            "does not (non-vanishing bias, eq. 8): it shrinks faster with eta than the uncorrected one",
            "eq. 8, eqs. 97-100"),
]
ALGORITHMS = ("FedAvg", "FedProx", "FedCurv", "FedOpt-AdaGrad", "SCAFFOLD", "FedDyn", "FedElasticNet", "EFL")
MODELS = ("MLP", "CNN")
CORRECTIONS = ("none", "local", "joint")
QUICK: dict[str, Any] = {
    "n_samples": 240, "n_clients": 4, "gamma": 0.5, "test_fraction": 0.2,
    "mlp_hidden": [16, 8], "cnn_channels": [2, 4], "cnn_kernel": 3, "cnn_fc": 16,
    "rounds": {"MLP": 40, "CNN": 10}, "local_steps": 5, "lr": {"MLP": 0.2, "CNN": 0.2},
    "prox_mu": 0.01, "curv_alpha": 0.01, "adagrad_lr": 0.05, "adagrad_v0": 0.01, "feddyn_alpha": 0.01,
    "enet_lambda1": 1e-4, "enet_lambda2": 0.01, "efl_lam": 0.01, "efl_q": 0.25,
    "stat_hidden": [16], "stat_samples": 240, "stat_reg": 0.05, "stat_rounds": 200, "stat_local_steps": 5,
    "stat_lrs": [0.02, 0.01, 0.005], "stat_v0": 0.01,
    "stat_server_lr": {"none": 1.0, "local": 25.0, "joint": 0.5}, "window": 10,
}
FULL: dict[str, Any] = {
    **QUICK,
    "n_samples": 1000, "n_clients": 10,
    "mlp_hidden": [64, 32], "cnn_channels": [4, 8], "cnn_kernel": 3, "cnn_fc": 32,
    "rounds": {"MLP": 60, "CNN": 25},
    "stat_hidden": [32], "stat_samples": 600, "stat_rounds": 400, "window": 20,
    "stat_lrs": [0.02, 0.01, 0.005, 0.0025],
}
EXPECTED_AXES = 4
# The digits come from scikit-learn (a typed error names the install command when it is
# missing): its version decides the data, so it enters the cache key.
DATA_PACKAGES = ("scikit-learn",)


# --------------------------------------------------------------------------- data

def _data(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """n samples (8x8 images in [0, 1], labels 0..9) of the scikit-learn digits
    and their provenance; without scikit-learn MissingDataPackageError names
    the install command (there is no synthetic stand-in)."""
    ds = load_image_dataset("digits")
    images, labels = ds.images, ds.labels
    if n < labels.shape[0]:
        keep = rng.choice(labels.shape[0], size=n, replace=False)
        images, labels = images[keep], labels[keep]
    return images, labels, ds.provenance()


def _split(images: np.ndarray, labels: np.ndarray, parts: list[np.ndarray], test_fraction: float,
           rng: np.random.Generator) -> tuple[list, list, list, list]:
    """Per-client train/test split of (n, 8, 8) images (``split_clients``)."""
    return split_clients(images, labels, parts, test_fraction, rng)


def _federation(model: Any, split: tuple[list, list, list, list], reg: float) -> NeuralFederation:
    """The split data shaped for ``model``: (64,) for an MLP, (1, 8, 8) for a CNN."""
    shape = tuple(model.input_shape)
    tu, tt, su, st = split
    fit = (lambda u: u.reshape(u.shape[0], 64)) if shape == (64,) else (lambda u: u[:, None])
    return NeuralFederation(model, SoftmaxCrossEntropy(), [fit(u) for u in tu], tt,
                            test_inputs=[fit(u) for u in su], test_targets=st, reg=reg)


def _algorithms(cfg: dict[str, Any], model: str) -> dict[str, Any]:
    """The eight algorithms with the local rate of ``model`` (config ``lr``)."""
    lr, E = cfg["lr"][model], cfg["local_steps"]
    return {
        "FedAvg": FedAvg(lr=lr, local_steps=E),
        "FedProx": FedProx(lr=lr, local_steps=E, mu=cfg["prox_mu"]),
        "FedCurv": FedCurv(lr=lr, local_steps=E, alpha=cfg["curv_alpha"]),
        "FedOpt-AdaGrad": FedOpt(client_optimizer=optim.adagrad(cfg["adagrad_lr"],
                                                                initial_accumulator=cfg["adagrad_v0"]),
                                 server_optimizer=optim.sgd(1.0), local_steps=E),
        "SCAFFOLD": Scaffold(lr=lr, local_steps=E, option="II"),
        "FedDyn": FedDyn(alpha=cfg["feddyn_alpha"], solver="gd", lr=lr, local_steps=E),
        "FedElasticNet": FedElasticNet(base="fedprox", lambda1=cfg["enet_lambda1"],
                                       lambda2=cfg["enet_lambda2"], solver="gd", lr=lr, local_steps=E),
        "EFL": EFL(lr=lr, local_steps=E, lam=cfg["efl_lam"], compression="st", q=cfg["efl_q"]),
    }


def _smooth_mlp(hidden: list[int]) -> Sequential:
    """Dense-tanh-...-Dense (Glorot init): an MLP whose loss is twice
    differentiable, so Theorem 3's smoothness hypothesis (Assumption 3) holds on
    bounded sets (a ReLU network is not differentiable at the kinks)."""
    layers: list[Any] = []
    for h in hidden:
        layers += [Dense(int(h), init="glorot"), Tanh()]
    return Sequential(layers + [Dense(10, init="glorot")], (64,))


def _divergence_round(message: str) -> int:
    """The round t of run()'s message "<name> diverged in round t: ..."."""
    match = re.search(r"diverged in round (\d+)", message)
    if match is None:
        raise DivergenceError(message)
    return int(match.group(1))


def _models(cfg: dict[str, Any]) -> dict[str, Any]:
    return {"MLP": mlp(64, 10, hidden=tuple(cfg["mlp_hidden"])),
            "CNN": cnn((1, 8, 8), 10, channels=tuple(cfg["cnn_channels"]), kernel=cfg["cnn_kernel"],
                       fc=cfg["cnn_fc"])}


# --------------------------------------------------------------------------- protocol

def run(config: dict[str, Any], rng: np.random.Generator,
        progress: Progress = silent_progress) -> dict[str, Any]:
    """(a) test accuracy per round for every (model, algorithm); (b) ||grad F||^2
    per round for client AdaGrad without / with local / with joint correction."""
    images, labels, provenance = _data(config["n_samples"], rng)
    partition_seed = int(rng.integers(2**63 - 1))
    parts = dirichlet_partition(labels, config["n_clients"], config["gamma"],
                                np.random.default_rng(partition_seed))
    out: dict[str, Any] = {"dataset": "sklearn digits 8x8", "data_provenance": provenance,
                           "partition_seed": partition_seed, "n_samples": int(labels.shape[0]),
                           "n_clients": config["n_clients"], "gamma": config["gamma"],
                           "client_label_counts": [np.bincount(labels[p], minlength=10).tolist() for p in parts],
                           "algorithms": list(ALGORITHMS), "models": list(MODELS),
                           "rounds": dict(config["rounds"]), "lr": dict(config["lr"]), "acc": {},
                           "train_loss": {}, "dims": {}, "majority_error": {}}
    algs = {m: _algorithms(config, m) for m in MODELS}
    models = _models(config)
    tasks = [(m, a) for m in MODELS for a in ALGORITHMS]
    split = _split(images, labels, parts, config["test_fraction"], rng)
    test_labels = np.concatenate(split[3])
    majority_error = float(1.0 - np.bincount(test_labels, minlength=10).max() / test_labels.size)
    feds, x0s = {}, {}
    for m in MODELS:
        feds[m] = _federation(models[m], split, 0.0)
        x0s[m] = feds[m].init_params(rng)
        out["dims"][m] = int(feds[m].dim)
        out["majority_error"][m] = majority_error
        out["acc"][m] = {}
        out["train_loss"][m] = {}
    out["diverged"] = {m: {} for m in MODELS}
    for m, a in progress(tasks, desc=NAME):
        try:
            hist = run_algorithm(algs[m][a], feds[m], config["rounds"][m], x0=x0s[m], seed=0)
        except DivergenceError as exc:
            # keep the rounds before the divergence (rerun with a stopping callback) and say where
            t_bad = _divergence_round(str(exc))
            out["diverged"][m][a] = {"round": t_bad, "error": str(exc)}
            hist = run_algorithm(algs[m][a], feds[m], t_bad - 1, x0=x0s[m], seed=0)
        out["acc"][m][a] = [feds[m].accuracy(x) for x in hist.x]
        out["train_loss"][m][a] = hist.loss
    # (b) stationarity of local / joint correction
    stat_images, stat_labels = images, labels
    if config["stat_samples"] < labels.shape[0]:
        keep = rng.choice(labels.shape[0], size=config["stat_samples"], replace=False)
        stat_images, stat_labels = images[keep], labels[keep]
    stat_parts = dirichlet_partition(stat_labels, config["n_clients"], config["gamma"], rng)
    fed = _federation(_smooth_mlp(config["stat_hidden"]),
                      _split(stat_images, stat_labels, stat_parts, config["test_fraction"], rng),
                      config["stat_reg"])
    x0 = fed.init_params(rng)
    lrs = [float(v) for v in config["stat_lrs"]]
    base = {k: float(v) for k, v in config["stat_server_lr"].items()}
    out["stat"] = {"dim": int(fed.dim), "reg": config["stat_reg"], "rounds": config["stat_rounds"],
                   "local_steps": config["stat_local_steps"], "client_lrs": lrs, "v0": config["stat_v0"],
                   "server_lr": base, "window": config["window"],
                   "grad_norm2": {c: [] for c in CORRECTIONS}, "acc": {c: [] for c in CORRECTIONS}}
    for eta in lrs:
        client = optim.adagrad(eta, initial_accumulator=config["stat_v0"])
        for corr in CORRECTIONS:
            # server rate scaled by lrs[0] / eta: the same first-order step for every eta
            # (a server rate moves the iteration, not the fixed points of T)
            server = optim.sgd(base[corr] * lrs[0] / eta)
            alg = FedOpt(client_optimizer=client, server_optimizer=server,
                         local_steps=config["stat_local_steps"], correction=corr)
            hist = run_algorithm(alg, fed, config["stat_rounds"], x0=x0, seed=0)
            out["stat"]["grad_norm2"][corr].append(hist.grad_norm2)
            out["stat"]["acc"][corr].append(fed.accuracy(hist.x[-1]))
    return out


def _residuals(stat: dict[str, Any], corr: str) -> list[float]:
    """Per client rate: min ||grad F||^2 over the last ``window`` rounds."""
    return [float(np.min(np.asarray(g)[-stat["window"]:])) for g in stat["grad_norm2"][corr]]


def _exponent(lrs: list[float], values: list[float]) -> float:
    """Least-squares slope p of log(value) against log(eta)."""
    return float(np.polyfit(np.log(lrs), np.log(values), 1)[0])


def checks(results: dict[str, Any]) -> list[Check]:
    """learns: best final test error / majority error per model; stationarity:
    residual with correction / without at the smallest rate; bias-vanishes:
    residual shrinkage over the rates, corrected / uncorrected."""
    out: list[Check] = []
    diverged = [(m, a, d) for m in results["models"] for a, d in results["diverged"][m].items()]
    for m, a, d in diverged:
        out.append(Check("learns", "not checkable", None,
                         f"{a} on the {m} diverged in round {d['round']} at local rate {results['lr'][m]} "
                         f"(a rate shared by all algorithms, too large for this one): {d['error']}"))
    setting = (f"data {results['dataset']}, {results['n_samples']} samples, {results['n_clients']} clients, "
               f"Dir({results['gamma']}), rounds {results['rounds']}, local rates {results['lr']}")
    for m in results["models"]:
        best_a = max((a for a in results["algorithms"] if a not in results["diverged"][m]),
                     key=lambda a: results["acc"][m][a][-1])
        r = (1.0 - results["acc"][m][best_a][-1]) / results["majority_error"][m]
        n_beat = sum((1.0 - results["acc"][m][a][-1]) < results["majority_error"][m]
                     for a in results["algorithms"] if a not in results["diverged"][m])
        rose = [f"{a} ({results['train_loss'][m][a][0]:.3g} -> {results['train_loss'][m][a][-1]:.3g})"
                for a in results["algorithms"] if a not in results["diverged"][m]
                and results["train_loss"][m][a][-1] > results["train_loss"][m][a][0]]
        out.append(Check("learns", "holds" if r <= 1.0 else "violated", r,
                         f"{m}: best final test error ({best_a}, accuracy {results['acc'][m][best_a][-1]:.3f}) "
                         f"/ majority-class error {results['majority_error'][m]:.3f} = {r:.3f}; {n_beat} of "
                         f"{len(results['algorithms'])} algorithms beat the majority class; training loss "
                         f"rose for: {', '.join(rose) if rose else 'none'}; {setting}"))
    stat = results["stat"]
    lrs = stat["client_lrs"]
    res = {c: _residuals(stat, c) for c in CORRECTIONS}
    setting = (f"tanh MLP d = {stat['dim']}, reg {stat['reg']}, client AdaGrad v0 {stat['v0']} "
               f"(||P|| <= {1 / np.sqrt(stat['v0']):.3g}), {stat['local_steps']} local steps for every client, "
               f"{stat['rounds']} rounds, residual = min ||grad F||^2 over the last {stat['window']} rounds")
    for corr, key in (("local", "local-correction-stationary"), ("joint", "joint-correction-stationary")):
        ratio = res[corr][-1] / res["none"][-1]
        detail = (f"at client rate {lrs[-1]}: residual with {corr} correction {res[corr][-1]:.4g}, without "
                  f"{res['none'][-1]:.4g}; residuals over rates {lrs}: {corr} "
                  f"{[float(f'{v:.4g}') for v in res[corr]]}, none {[float(f'{v:.4g}') for v in res['none']]}; "
                  f"{setting}")
        out.append(Check(key, "holds" if ratio <= 1.0 else "violated", ratio, detail))
    shrink = {c: res[c][-1] / res[c][0] for c in CORRECTIONS}
    ratio = max(shrink["local"], shrink["joint"]) / shrink["none"]
    detail = (f"rate {lrs[0]} -> {lrs[-1]} divides the residual by {1 / shrink['local']:.3g} (local), "
              f"{1 / shrink['joint']:.3g} (joint), {1 / shrink['none']:.3g} (none); fitted exponents p in "
              f"residual ~ eta^p: local {_exponent(lrs, res['local']):.2f}, joint "
              f"{_exponent(lrs, res['joint']):.2f}, none {_exponent(lrs, res['none']):.2f} (first-order "
              f"prediction 2 with correction); {setting}")
    out.append(Check("bias-vanishes", "holds" if ratio <= 1.0 else "violated", ratio, detail))
    return out


def macros(results: dict[str, Any]) -> dict[str, float]:
    """Final test accuracy and training-loss ratio per (model, algorithm);
    residuals at the largest / smallest client rate and their exponent in eta
    per correction."""
    out: dict[str, float] = {}
    for m in results["models"]:
        for a in results["algorithms"]:
            key = a.lower().replace("-", "_")
            if a in results["diverged"][m]:
                out[f"diverged_round_{m.lower()}_{key}"] = float(results["diverged"][m][a]["round"])
            else:
                loss = results["train_loss"][m][a]
                out[f"acc_{m.lower()}_{key}"] = float(results["acc"][m][a][-1])
                out[f"loss_ratio_{m.lower()}_{key}"] = float(loss[-1] / loss[0])
    stat = results["stat"]
    for corr in CORRECTIONS:
        res = _residuals(stat, corr)
        out[f"residual_smallest_rate_{corr}"] = res[-1]
        out[f"residual_largest_rate_{corr}"] = res[0]
        out[f"residual_exponent_{corr}"] = _exponent(stat["client_lrs"], res)
    return out


def plot(results: dict[str, Any]) -> Figure:
    """(a), (b): test accuracy against rounds for every algorithm, MLP and CNN,
    with the majority-class accuracy; (c) ||grad F||^2 against rounds for
    client AdaGrad without / with local / with joint correction at the largest
    and smallest client rate; (d) the residuals against the client rate with
    an eta^2 reference."""
    fig, axes = plotting.figure(2, 2, height=6.4)
    for ax, m in zip(axes[:2], results["models"]):
        for c, a in enumerate(results["algorithms"]):
            acc = results["acc"][m][a]
            ax.plot(np.arange(len(acc)), acc, color=plotting.OKABE_ITO[c % 8],
                    linestyle=plotting.LINESTYLES[c], label=a)
        ax.axhline(1.0 - results["majority_error"][m], color="grey", linestyle=":", linewidth=1.0,
                   label="majority class")
        ax.set_xlabel("communication round t")
        ax.set_ylabel("test accuracy (fraction)")
        ax.set_title(f"{m} (d = {results['dims'][m]}), {results['dataset'].split(' (')[0]}", fontsize=8)
        ax.set_ylim(0.0, 1.0)
        if results["diverged"][m]:
            ax.text(0.02, 0.97, "diverged: " + ", ".join(f"{a} (round {d['round']})"
                                                     for a, d in results["diverged"][m].items()),
                    transform=ax.transAxes, fontsize=6.5, va="top")
    handles, labels_ = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels_, loc="outside upper center", ncol=5, fontsize=7)
    stat = results["stat"]
    lrs = stat["client_lrs"]
    names = {"none": "no correction", "local": "local correction", "joint": "joint correction"}
    ax = axes[2]
    for c, corr in enumerate(CORRECTIONS):
        for k in (0, len(lrs) - 1):
            g = stat["grad_norm2"][corr][k]
            ax.plot(np.arange(len(g)), g, color=plotting.OKABE_ITO[c], linestyle="-" if k == 0 else "--",
                    label=f"{names[corr]}, $\\eta$ = {lrs[k]:g}")
    ax.axvspan(stat["rounds"] - stat["window"] + 1, stat["rounds"], color="grey", alpha=0.15,
               label="residual window")
    ax.set_yscale("log")
    ax.set_xlabel("communication round t")
    ax.set_ylabel(r"$\|\nabla F(x_t)\|^2$ (full batch)")
    ax.set_title(f"client AdaGrad, {stat['local_steps']} steps, tanh MLP d = {stat['dim']}", fontsize=8)
    ax.legend(fontsize=5.5)
    ax = axes[3]
    for c, corr in enumerate(CORRECTIONS):
        ax.plot(lrs, _residuals(stat, corr), color=plotting.OKABE_ITO[c], marker="o", label=names[corr])
    ref = _residuals(stat, "local")[0] * (np.asarray(lrs) / lrs[0]) ** 2
    ax.plot(lrs, ref, color="black", linestyle=":", label=r"$\propto \eta^2$ (O($\eta$) bias)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(lrs, [f"{v:g}" for v in lrs], minor=False)
    ax.set_xticks([], minor=True)
    ax.set_xlabel(r"client AdaGrad rate $\eta$")
    ax.set_ylabel(r"residual $\min_{\mathrm{late}\ t} \|\nabla F(x_t)\|^2$")
    ax.set_title("bias vs client rate (server rate x 1/eta)", fontsize=8)
    ax.legend(fontsize=6.5)
    return fig
