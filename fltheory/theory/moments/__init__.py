"""Exact expectations of stochastic runs on quadratic clients (computed, never sampled).

* :func:`exact_moments` -- E[x_t], E||x_t - x*||^2, E[F(x_t)] - F* for any
  algorithm whose round is affine given its draws, read off the algorithm's
  own round (``engine``, ``conditional``);
* :func:`participation_support`, :func:`inclusion_probabilities` -- exact laws of
  the participation draw (``support``);
* :class:`AdditiveNoise`, :class:`MinibatchNoise` -- noise models (``noise``);
* :func:`fedavg_sampling_moments` -- the block-structured fast path for FedAvg
  under uniform / Bernoulli sampling (``fedavg_fast``);
* :func:`averaging_moments` -- FedAvg / EFL (lambda = 0) averaging rounds with
  independent per-client step laws or uniform sampling and a per-round rate
  (``averaging``);
* :func:`efl_elastic_moments`, :func:`elastic_anchor_laws` -- EFL with the Fisher-elastic
  term (lambda >= 0, no compression) and the law of its anchors (``efl_elastic``);
* :func:`scaffold_sampling_moments` -- SCAFFOLD (options I, II) under uniform sampling on
  per-client blocks, O(N^2 d^3) per round, and :func:`scaffold_rounds_to_accuracy` (exact
  expected rounds to E[F(x_t)] - F* <= eps) (``scaffold_fast``).

Bad input and limits.  Every public entry checks its arguments once, before any work, and
raises a typed error (:mod:`fltheory.errors`, also the matching built-in) naming the argument,
the value and what is expected; the per-round engines behind it do not check again.  A round
or step count above ``fltheory._validate.MAX_STEPS`` (10^7) is refused (each round is at least
one exact (d, d) moment update), as is any result or working array above 2 GiB (the message
states the memory it would take).  Moments that leave float64 range (a diverging step size over
many rounds) raise :class:`~fltheory.errors.OutOfRangeError` instead of returning inf or NaN.
"""

from .averaging import averaging_moments
from .efl_elastic import (
    AnchorLaw,
    ElasticState,
    efl_elastic_gradient_moments,
    efl_elastic_moments,
    elastic_anchor_laws,
)
from .conditional import ConditionalMap, conditional_round_map
from .engine import ExactMoments, StateComponent, exact_moments, refuse_non_affine
from .fedavg_fast import fedavg_client_maps, fedavg_sampling_moments
from .noise import AdditiveNoise, MinibatchNoise, noise_of
from .operator import MomentOperator, moment_operator
from .scaffold_fast import scaffold_rounds_to_accuracy, scaffold_sampling_moments
from .support import Outcome, inclusion_probabilities, participation_support

__all__ = [
           "AdditiveNoise",
           "AnchorLaw",
           "ConditionalMap",
           "ElasticState",
           "ExactMoments",
           "MinibatchNoise",
           "MomentOperator",
           "Outcome",
           "StateComponent",
           "averaging_moments",
           "efl_elastic_gradient_moments",
           "efl_elastic_moments",
           "elastic_anchor_laws",
           "conditional_round_map",
           "exact_moments",
           "fedavg_client_maps",
           "fedavg_sampling_moments",
           "inclusion_probabilities",
           "moment_operator",
           "noise_of",
           "participation_support",
           "scaffold_rounds_to_accuracy",
           "scaffold_sampling_moments",
           "refuse_non_affine",
]
