"""FedCurv (and FedCurv-TE, FedCL) one client at a time: Fisher-weighted
penalties towards the other clients' last models (or a proxy Fisher).
"""

from __future__ import annotations

import numpy as np

from ..fedcurv import FedCurv, proxy_fisher
from .common import aggregation, draw_members, local_models, register, solve_one, te_push, te_value


@register(FedCurv)
def _fedcurv_reference(alg, problem, rounds, participation, rng, x0):
    te = alg.target
    beta = None if te is None else float(te.beta)
    ghat, gcount = np.zeros_like(x0), 0                 # ensemble of global models
    lhat: dict[int, np.ndarray] = {}                    # per-client ensembles (of="local")
    lcount: dict[int, int] = {}
    W: dict[int, np.ndarray] = {}                       # last local model / Fisher per client
    I: dict[int, np.ndarray] = {}
    xs = [x0.copy()]
    x = x0.copy()
    for t in range(rounds):
        members = draw_members(alg, problem, participation, rng, t)
        if members:
            ids = [i for i, _ in members]
            # penalty gradient of client s: 2 alpha sum_j I_j * (y - c_j)
            if alg.fisher == "proxy":
                Ip = proxy_fisher(alg.proxy, x)
                c = x if (te is None or gcount == 0) else te_value(beta, ghat, gcount)
                terms = {s: [(Ip, c)] for s in ids}
            else:
                def centre(j):
                    if te is None:
                        return W[j]
                    if te.of == "local":
                        return te_value(beta, lhat[j], lcount[j]) if lcount.get(j, 0) > 0 else W[j]
                    return te_value(beta, ghat, gcount) if gcount > 0 else W[j]
                terms = {s: [(I[j], centre(j)) for j in ids if j != s and j in W] for s in ids}

            def penalty(s, y):
                out = np.zeros_like(y)
                for Ij, cj in terms[s]:
                    out += 2.0 * alg.alpha * Ij * (y - cj)
                return out

            def solve(i, x=x):
                D = sum((2.0 * alg.alpha * Ij for Ij, _ in terms[i]), np.zeros_like(x))
                b = sum((2.0 * alg.alpha * Ij * cj for Ij, cj in terms[i]), np.zeros_like(x))
                return solve_one(problem, i, D, b, x)

            ys = local_models(problem, members, x, rng, alg.lr, exact=alg.solver == "exact", solve=solve,
                              direction=lambda i, y, g: g + penalty(i, y))
            w = aggregation(alg, problem, members)
            x = x + alg.server_lr * sum(w[i] * (ys[i] - x) for i in ids)
            if alg.fisher == "client":
                for i in ids:
                    W[i] = ys[i].copy()
                    I[i] = problem.fisher_diag(ys[i][None, :], np.array([i]))[0]
                    if te is not None and te.of == "local":
                        lhat[i], lcount[i] = te_push(beta, lhat.get(i, np.zeros_like(x)),
                                                      lcount.get(i, 0), ys[i])
        if te is not None and te.of == "global":
            ghat, gcount = te_push(beta, ghat, gcount, x)
        xs.append(x.copy())
    return np.array(xs)
