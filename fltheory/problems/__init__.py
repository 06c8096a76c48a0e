"""Analytic federations with exact oracles, vectorized over clients.

Quadratic and logistic clients (docs/theory/problems.md), the random families
and FedProx's synthetic data that generate them, label partitions, and the
problem constants the bounds consume.
"""

from .base import Federation
from .constants import CurvatureBounds, ProblemConstants, problem_constants
from .generators import (SyntheticData, dirichlet_partition, lognormal_sizes, m_class_partition,
                         random_least_squares, random_quadratic, synthetic_fedprox)
from .logistic import LogisticFederation
from .quadratic import QuadraticFederation
from .structured import StructuredQuadraticFederation
from .structured_generators import random_structured_quadratic

__all__ = ["Federation", "QuadraticFederation", "LogisticFederation", "random_quadratic",
           "random_least_squares", "synthetic_fedprox", "SyntheticData", "dirichlet_partition",
           "m_class_partition", "lognormal_sizes", "ProblemConstants", "problem_constants",
           "CurvatureBounds", "StructuredQuadraticFederation", "random_structured_quadratic"]
