"""Server optimizers of FedOpt under their usual names.

The server holds one row (m = 1) and receives the pseudo-gradient
g = -sum_i p_i Delta_i (Delta_i = y_i - x); it applies x <- x + u with
(u, state) = update(g[None, :], state).  With this sign convention:

* ``fedavg(lr)`` = :func:`sgd`: x + lr sum p_i Delta_i; lr = 1 is FedAvg.
* ``fedavgm(lr, beta)`` = heavy-ball :func:`momentum` on g (FedAvgM).
* ``fedadagrad``, ``fedadam``, ``fedyogi``: Reddi et al. 2021 ("Adaptive
  Federated Optimization"), Algorithm 2, with Delta_t = -g:

      m_t = b1 m_{t-1} + (1 - b1) Delta_t
      FedAdagrad: v_t = v_{t-1} + Delta_t^2
      FedAdam:    v_t = b2 v_{t-1} + (1 - b2) Delta_t^2
      FedYogi:    v_t = v_{t-1} - (1 - b2) Delta_t^2 sign(v_{t-1} - Delta_t^2)
      x_{t+1} = x_t + lr m_t / (sqrt(v_t) + tau)

  with v_{-1} = tau^2 (Algorithm 2 asks v_{-1} >= tau^2) and the adaptivity
  constant tau in the role of eps.  Algorithm 2 has no bias correction, so
  ``bias_correction`` defaults to False; when switched on, the moments are
  divided by (1 - b^t) with t the optimizer's own step counter
  (docs/theory/index.md#algorithms), never the round number.
"""

from __future__ import annotations

from .._validate import positive
from .adaptive import adaptive
from .base import Optimizer, rebuildable
from .first_order import momentum, sgd

__all__ = ["fedavg", "fedavgm", "fedadagrad", "fedadam", "fedyogi"]


@rebuildable
def fedavg(lr: float = 1.0) -> Optimizer:
    """Server SGD on the pseudo-gradient; lr = 1 reproduces FedAvg."""
    return sgd(lr)


@rebuildable
def fedavgm(lr: float = 1.0, beta: float = 0.9) -> Optimizer:
    """FedAvgM: heavy-ball momentum b <- beta b + g, x <- x - lr b."""
    return momentum(lr, beta, nesterov=False)


@rebuildable
def fedadagrad(lr: float, tau: float = 1e-3, b1: float = 0.0,
               bias_correction: bool = False) -> Optimizer:
    """FedAdagrad (Reddi et al. 2021, Algorithm 2): v_t = v_{t-1} + Delta_t^2.

    Parameters
    ----------
    lr : float
        Server learning rate eta > 0.
    tau : float
        Adaptivity constant > 0; also sets v_{-1} = tau^2 (default 1e-3).
    b1 : float
        First-moment decay in [0, 1).  Algorithm 2 writes the momentum m_t for
        all three methods; the default 0 gives plain server AdaGrad on
        m_t = Delta_t.
    bias_correction : bool
        Divide m_t by (1 - b1^t) (default False, as in Algorithm 2).
    """
    tau = positive("tau (the eps of the update)", tau)
    return adaptive("adagrad", lr, b1, 0.0, tau, tau * tau, bias_correction,
                    f"fedadagrad(lr={lr}, tau={tau}, b1={b1})")


@rebuildable
def fedadam(lr: float, b1: float = 0.9, b2: float = 0.99, tau: float = 1e-3,
            bias_correction: bool = False) -> Optimizer:
    """FedAdam (Reddi et al. 2021, Algorithm 2); defaults b1 = 0.9, b2 = 0.99,
    tau = 1e-3, v_{-1} = tau^2, no bias correction (see module doc)."""
    tau = positive("tau (the eps of the update)", tau)
    return adaptive("adam", lr, b1, b2, tau, tau * tau, bias_correction,
                    f"fedadam(lr={lr}, b1={b1}, b2={b2}, tau={tau}, bias_correction={bias_correction})")


@rebuildable
def fedyogi(lr: float, b1: float = 0.9, b2: float = 0.99, tau: float = 1e-3,
            bias_correction: bool = False) -> Optimizer:
    """FedYogi (Reddi et al. 2021, Algorithm 2); defaults as :func:`fedadam`."""
    tau = positive("tau (the eps of the update)", tau)
    return adaptive("yogi", lr, b1, b2, tau, tau * tau, bias_correction,
                    f"fedyogi(lr={lr}, b1={b1}, b2={b2}, tau={tau}, bias_correction={bias_correction})")
