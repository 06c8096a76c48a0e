"""FedOpt one client at a time: client optimizer steps, the (optionally
preconditioner-corrected) pseudo-gradient, one server optimizer step.
"""

from __future__ import annotations

import numpy as np

from ..fedopt import FedOpt
from .common import aggregation, client_gradient, draw_members, per_client_value, register


@register(FedOpt)
def _fedopt_reference(alg, problem, rounds, participation, rng, x0):
    copt, sopt = alg.client_optimizer, alg.server_optimizer
    server = sopt.init(x0[None, :])
    N = problem.n_clients
    saved = {i: copt.init(x0[None, :].copy(), np.array([i])) for i in range(N)}
    xs = [x0.copy()]
    x = x0.copy()
    for t in range(rounds):
        members = draw_members(alg, problem, participation, rng, t)
        if not members:
            xs.append(x.copy())
            continue
        ids = [i for i, _ in members]
        ys = {i: x.copy() for i in ids}
        st = {i: (copt.init(x[None, :].copy(), np.array([i])) if alg.client_state == "restart"
                  else saved[i]) for i in ids}
        G = {i: 0.0 for i in ids}
        for k in range(max(s for _, s in members)):
            for i, s in members:
                if s > k:
                    g = client_gradient(problem, i, ys[i], rng)
                    u, st[i] = copt.update(g[None, :], st[i], ys[i][None, :])
                    scale = per_client_value(alg.client_lr_scale, i)
                    ys[i] = ys[i] + scale * u[0]
                    G[i] = G[i] + scale * np.asarray(copt.precond(st[i]))[0]
        w = aggregation(alg, problem, members)
        if alg.correction == "none":
            pseudo = -sum(w[i] * (ys[i] - x) for i in ids)
        else:
            sent, corr = {}, {}
            for i, s in members:
                Gi = np.asarray(G[i])
                if s == 0:               # no step: sends nothing, carries no correction
                    sent[i] = np.zeros_like(x)
                    corr[i] = np.zeros_like(np.asarray(copt.precond(st[i]))[0])
                elif Gi.ndim == 1:
                    sent[i], corr[i] = (ys[i] - x) / Gi, 1.0 / Gi
                else:
                    sent[i], corr[i] = np.linalg.solve(Gi, ys[i] - x), np.linalg.inv(Gi)
            total = sum(w[i] * sent[i] for i in ids)
            if alg.correction == "local":
                pseudo = -total
            else:
                A = sum(w[i] * corr[i] for i in ids)
                if A.ndim == 1:
                    pseudo = -np.array([total[j] / A[j] if A[j] > 0 else 0.0 for j in range(len(A))])
                else:
                    pseudo = -np.linalg.solve(A, total) if np.any(A) else np.zeros_like(x)
        u, server = sopt.update(pseudo[None, :], server, x[None, :])
        x = x + u[0]
        if alg.client_state == "persist":
            for i in ids:
                saved[i] = st[i]
        elif alg.client_state == "synchronise":
            fields: list[np.ndarray | None] = []
            names = type(st[ids[0]])._fields
            for f_idx, f0 in enumerate(st[ids[0]]):
                if names[f_idx] == "count":          # shared: the participants' mean step count
                    mean_count = sum(int(np.asarray(st[i][f_idx]).reshape(-1)[0]) for i in ids) / len(ids)
                    fields.append(np.full_like(np.asarray(f0), int(np.rint(mean_count))))
                elif np.issubdtype(np.asarray(f0).dtype, np.integer):
                    fields.append(None)
                else:
                    fields.append(np.asarray(sum(np.asarray(st[i][f_idx]) for i in ids) / len(ids)))
            for j in range(N):
                own = st[j] if j in st else saved[j]
                saved[j] = type(own)(*(np.asarray(f) if avg is None else avg.copy()
                                       for f, avg in zip(own, fields, strict=True)))
        xs.append(x.copy())
    return np.array(xs)
