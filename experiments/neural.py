"""Every algorithm on small neural networks, and the stationarity of local correction.

Two parts, on the numpy networks of :mod:`fltheory.nn` (exact backward
passes, full-batch client gradients):

**(a) Accuracy against rounds.**  FedAvg, FedProx, FedCurv, FedOpt with client
AdaGrad (restarted every round, server SGD rate 1, no correction), SCAFFOLD
(option II), FedDyn (gradient-step local solver), FedElasticNet (on FedProx,
seed 003 Alg. 1) and EFL (seed 000, ST compression with error feedback) train
the 2-hidden-layer MLP of seed 003 and the CNN of seed 002 Table 1, both in
miniature (:func:`fltheory.nn.mlp`, :func:`fltheory.nn.cnn`; widths in the
config), on the scikit-learn 8x8 digits with a Dirichlet label skew
q ~ Dir(gamma p) over clients (seed 002 section 4.1.1, eq. 4;
:func:`fltheory.problems.dirichlet_partition`).  scikit-learn is an optional
extra: without it the data are a seeded synthetic image task (10 random
smooth 8x8 class prototypes plus Gaussian pixel noise, see
:func:`_synthetic_images`); ``results["dataset"]`` says which was used.
Full participation, the same local rate and local steps for every algorithm;
the algorithm-specific coefficients are in the config (not tuned per run).
Check ``"learns"`` (accuracy reached), per model: the best final test error
over the algorithms is below that of the majority-class predictor; ratio =
that error / the majority error.  The detail states how many algorithms beat
the majority class and which ones ended with a higher training loss than
they started with (the QUICK budget is a smoke test: a few rounds on 240
samples, too short for every algorithm to learn); ``macros`` give every
final accuracy and training-loss ratio F(x_T)/F(x_0).

**(b) Stationarity of local correction** (seed 001, section 5 and Appendix F,
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
exist).  Three runs from one initial point: no correction (server SGD rate
1), local correction (server SGD with rate ``server_lr_local``: local
correction rescales the change to -eta grad F to first order, the server rate
restores the step) and joint correction (server SGD rate 1).
||grad F(x_t)||^2 is exact (all data).

Checks (b): ``"local-correction-stationary"`` and
``"joint-correction-stationary"``: ratio = smallest ||grad F||^2 of the last
``window`` rounds with the correction / the same for the uncorrected run
(<= 1: the corrected run ends closer to stationarity); the detail and the
macros state by how many orders of magnitude each run's ||grad F||^2 fell.
Seed 001's rate (eq. 100) has constants the text extraction lost, so no
absolute threshold is claimed.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import numpy as np

from experiments._framework import Check, Theorem, progress
from fltheory import optim, plotting
from fltheory.algorithms import (EFL, FedAvg, FedCurv, FedDyn, FedElasticNet, FedOpt, FedProx,
                                 Scaffold)
from fltheory.algorithms import run as run_algorithm
from fltheory.errors import DivergenceError
from fltheory.nn import (Dense, NeuralFederation, Sequential, SoftmaxCrossEntropy, Tanh, cnn, mlp,
                         split_clients)
from fltheory.problems import dirichlet_partition

NAME = "neural"
TITLE = "All algorithms on a small MLP and CNN (Dirichlet digits); local AdaGrad with correction reaches stationarity"
THEOREMS = [
    Theorem("learns", "seed 003 sec. 4 (MLP) / seed 002 sec. 4 (CNN) / seed 001 sec. 6",
            "accuracy reached: the best final test error is below the majority-class predictor's",
            "Table 1 (seed 002)"),
    Theorem("local-correction-stationary", "seed 001 (Wang et al., local adaptivity)",
            "Theorem 3 (App. F): local correction reaches a stationary point of F (no non-vanishing bias), "
            "so it ends closer to stationarity than uncorrected client AdaGrad (sec. 4, eq. 8)", "eqs. 97-100"),
    Theorem("joint-correction-stationary", "seed 001 (Wang et al., local adaptivity)",
            "sec. 5: global (joint) correction keeps the corrected, stationary fixed point", "sec. 5"),
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
    "stat_hidden": [16], "stat_samples": 240, "stat_reg": 0.05, "stat_rounds": 60, "stat_local_steps": 5,
    "stat_lr": 0.01, "stat_v0": 0.01, "server_lr_local": 50.0, "window": 5,
}
FULL: dict[str, Any] = {
    **QUICK,
    "n_samples": 1000, "n_clients": 10,
    "mlp_hidden": [64, 32], "cnn_channels": [4, 8], "cnn_kernel": 3, "cnn_fc": 32,
    "rounds": {"MLP": 60, "CNN": 25},
    "stat_hidden": [32], "stat_samples": 600, "stat_rounds": 400, "window": 20,
}
EXPECTED_AXES = 3


# --------------------------------------------------------------------------- data

def _synthetic_images(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Fallback when scikit-learn is missing: 10 class prototypes, each a 8x8
    image of a random field smoothed by a 3x3 box filter and rescaled to
    [0, 1]; a sample is its class prototype plus N(0, 0.25^2) pixel noise,
    clipped to [0, 1] (pixel range, as the digits); labels uniform."""
    raw = rng.random((10, 10, 10))
    proto = sum(raw[:, i:i + 8, j:j + 8] for i in range(3) for j in range(3)) / 9.0
    proto = (proto - proto.min(axis=(1, 2), keepdims=True)) / np.ptp(proto, axis=(1, 2), keepdims=True)
    labels = rng.integers(0, 10, size=n)
    images = np.clip(proto[labels] + 0.25 * rng.standard_normal((n, 8, 8)), 0.0, 1.0)
    return images, labels


def _bundled_digits() -> tuple[np.ndarray, np.ndarray] | None:
    """The scikit-learn digits read straight from the package's bundled
    ``datasets/data/digits.csv.gz`` (64 pixels 0..16 then the label per row),
    without importing scikit-learn (its import alone can take seconds);
    pixels / 16 as :func:`fltheory.nn.load_digits`.  None when not found."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(spec.submodule_search_locations[0]) / "datasets" / "data" / "digits.csv.gz"
    if not path.is_file():
        return None
    raw = np.loadtxt(path, delimiter=",")
    return raw[:, :-1].reshape(-1, 8, 8) / 16.0, raw[:, -1].astype(np.int64)


def _data(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, str]:
    """n samples (8x8 images in [0, 1], labels 0..9) from the digits or the fallback."""
    found = _bundled_digits()
    if found is not None:
        images, labels = found
        name = "sklearn digits 8x8"
    else:
        try:
            from fltheory.nn import load_digits
            images, labels = load_digits()
            name = "sklearn digits 8x8"
        except ImportError:
            images, labels = _synthetic_images(max(n, 2000), rng)
            name = "synthetic 8x8 prototypes (scikit-learn missing)"
    if n < labels.shape[0]:
        keep = rng.choice(labels.shape[0], size=n, replace=False)
        images, labels = images[keep], labels[keep]
    return images, labels, name


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

def run(config: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    """(a) test accuracy per round for every (model, algorithm); (b) ||grad F||^2
    per round for client AdaGrad without / with local / with joint correction."""
    images, labels, dataset = _data(config["n_samples"], rng)
    parts = dirichlet_partition(labels, config["n_clients"], config["gamma"], rng)
    out: dict[str, Any] = {"dataset": dataset, "n_samples": int(labels.shape[0]),
                           "n_clients": config["n_clients"], "gamma": config["gamma"],
                           "client_label_counts": [np.bincount(labels[p], minlength=10).tolist() for p in parts],
                           "algorithms": list(ALGORITHMS), "models": list(MODELS),
                           "rounds": dict(config["rounds"]), "lr": dict(config["lr"]), "acc": {}, "train_loss": {}, "dims": {}, "majority_error": {}}
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
    client = optim.adagrad(config["stat_lr"], initial_accumulator=config["stat_v0"])
    server_lr = {"none": 1.0, "local": config["server_lr_local"], "joint": 1.0}
    out["stat"] = {"dim": int(fed.dim), "reg": config["stat_reg"], "rounds": config["stat_rounds"],
                   "local_steps": config["stat_local_steps"], "client_lr": config["stat_lr"],
                   "v0": config["stat_v0"], "server_lr": server_lr,
                   "window": config["window"], "grad_norm2": {}, "acc": {}}
    for corr in CORRECTIONS:
        alg = FedOpt(client_optimizer=client, server_optimizer=optim.sgd(server_lr[corr]),
                     local_steps=config["stat_local_steps"], correction=corr)
        hist = run_algorithm(alg, fed, config["stat_rounds"], x0=x0, seed=0)
        out["stat"]["grad_norm2"][corr] = hist.grad_norm2
        out["stat"]["acc"][corr] = fed.accuracy(hist.x[-1])
    return out


def checks(results: dict[str, Any]) -> list[Check]:
    """learns: best final test error / majority error per model; stationarity:
    smallest late ||grad F||^2 with correction / without."""
    out: list[Check] = []
    worst, where = -1.0, ""
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
    w = stat["window"]
    g_none = np.asarray(stat["grad_norm2"]["none"])
    for corr, key in (("local", "local-correction-stationary"), ("joint", "joint-correction-stationary")):
        g = np.asarray(stat["grad_norm2"][corr])
        best, ref = float(g[-w:].min()), float(g_none[-w:].min())
        ratio = best / ref
        detail = (f"min ||grad F||^2 over the last {w} of {stat['rounds']} rounds: {corr} correction {best:.4g} "
                  f"(fell {np.log10(g[0] / best):.2f} orders of magnitude from {g[0]:.4g}), no correction "
                  f"{ref:.4g} ({np.log10(g_none[0] / ref):.2f} orders); tanh MLP d = {stat['dim']}, reg "
                  f"{stat['reg']}, AdaGrad lr {stat['client_lr']}, v0 {stat['v0']} (||P|| <= "
                  f"{1 / np.sqrt(stat['v0']):.3g}), {stat['local_steps']} local steps for every client, server lr "
                  f"{stat['server_lr'][corr]}")
        out.append(Check(key, "holds" if ratio <= 1.0 else "violated", ratio, detail))
    return out


def macros(results: dict[str, Any]) -> dict[str, float]:
    """Final test accuracy per (model, algorithm); final ||grad F||^2 and its
    reduction factor per correction."""
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
        g = np.asarray(stat["grad_norm2"][corr])
        out[f"grad_norm2_final_{corr}"] = float(g[-1])
        out[f"grad_norm2_reduction_{corr}"] = float(g[-1] / g[0])
        out[f"orders_fallen_{corr}"] = float(np.log10(g[0] / g[-stat["window"]:].min()))
    return out


def plot(results: dict[str, Any]):
    """(a), (b): test accuracy against rounds for every algorithm, MLP and CNN,
    with the majority-class accuracy; (c) ||grad F||^2 against rounds for
    client AdaGrad without / with local / with joint correction."""
    fig, axes = plotting.figure(1, 3, height=3.6)
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
    fig.legend(handles, labels_, loc="outside lower center", ncol=5, fontsize=7)
    ax = axes[2]
    stat = results["stat"]
    labels = {"none": "no correction", "local": f"local corr. (server lr {stat['server_lr']['local']:g})",
              "joint": "joint correction"}
    for c, corr in enumerate(CORRECTIONS):
        g = stat["grad_norm2"][corr]
        ax.plot(np.arange(len(g)), g, color=plotting.OKABE_ITO[c], linestyle=plotting.LINESTYLES[c],
                label=labels[corr])
    ax.axvspan(stat["rounds"] - stat["window"] + 1, stat["rounds"], color="grey", alpha=0.15,
               label="verdict window")
    ax.set_yscale("log")
    ax.set_xlabel("communication round t")
    ax.set_ylabel(r"$\|\nabla F(x_t)\|^2$ (full batch)")
    ax.set_title(f"client AdaGrad, {stat['local_steps']} steps, tanh MLP d = {stat['dim']}", fontsize=8)
    ax.legend(fontsize=6.5)
    return fig
