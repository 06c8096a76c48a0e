"""Analytic federations with exact oracles, vectorized over clients."""

from .base import Federation
from .quadratic import QuadraticFederation

__all__ = ["Federation", "QuadraticFederation"]
