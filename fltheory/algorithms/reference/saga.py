"""SAGA (Defazio, Bach and Lacoste-Julien, NeurIPS 2014, arXiv:1407.0202, Section 2) as a plain loop.

For F = (1/N) sum_i f_i and a table of stored gradients g_i = f_i'(phi_i), one
step with sampled index j is

    x_{k+1} = x_k - gamma (f_j'(x_k) - g_j + (1/N) sum_i g_i),   then g_j <- f_j'(x_k)

(the paper's phi_j <- x_k; without the proximal operator).  SCAFFOLD-v1
(Section 5) states that SCAFFOLD with one sampled client per round (S = 1), one
local step (K = 1) and global rate eta_g = 1 is SAGA: the client controls c_i
play the stored gradients and c their mean.  The test oracle of that claim;
exact gradients only (the client oracle without noise).

Checked against the sources (review): the step above, the old table's mean and
the table write after the step are SAGA's Section 2 update with phi_j <- x_k
(Defazio et al. 2014).  The SCAFFOLD-v1 paragraph sits in the client-sampling
section, whose control update is option II (eq. 10); its displayed equations are
lost in our text, so the following is derived here, not quoted: with K = 1,
y_j = x - eta_l (g_j(x) - c_j + c), so option II's c_j - c + (x - y_j) / eta_l
and option I's g_j(x) coincide (exact gradients); eta_g = 1 and S = 1 give
x <- y_j; and c <- c + (c_j^+ - c_j) / N keeps c = (1/N) sum_i c_i whenever the
run starts with that invariant.  Hence SCAFFOLD = SAGA with table c_i, for any
initial table with c its mean: SCAFFOLD's usual zero controls are SAGA with a
zero table (not SAGA's own start), and SAGA's start phi_i = x_0 is SCAFFOLD with
c_i = f_i'(x_0), c their mean.  Both are tested, for options I and II.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from ...problems.base import Federation

__all__ = ["saga_iterates"]


def saga_iterates(problem: Federation, x0: ArrayLike, lr: float, indices: Sequence[int],
                  table0: ArrayLike | None = None) -> np.ndarray:
    """Iterates x_0..x_K of SAGA on the clients' functions, sampling ``indices[k]`` at step k.

    ``table0`` is the initial table of stored gradients (N, d); None stores the
    gradients at x0 (f_i'(phi_i) with phi_i = x0, the paper's initialisation).
    """
    x = np.array(x0, dtype=np.float64)
    N = problem.n_clients

    def grad(i: int, y: np.ndarray) -> np.ndarray:
        return problem.client_grad(y[None, :], np.array([i]))[0]

    table = [grad(i, x) for i in range(N)] if table0 is None else [np.array(r, dtype=np.float64)
                                                                     for r in np.asarray(table0)]
    xs = [x.copy()]
    for j in indices:
        mean = sum(table) / N
        g = grad(int(j), x)
        x = x - lr * (g - table[int(j)] + mean)
        table[int(j)] = g
        xs.append(x.copy())
    return np.array(xs)
