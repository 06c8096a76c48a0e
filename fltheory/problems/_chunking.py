"""Chunks of clients for the generators and constructors that work on a few clients at a time."""

from __future__ import annotations


def client_slices(n: int, bytes_per_client: int, chunk_bytes: int) -> list[slice]:
    """Consecutive slices covering clients 0..n-1, each holding about ``chunk_bytes`` of
    per-client arrays of ``bytes_per_client`` bytes (at least one client per slice)."""
    per = max(1, chunk_bytes // max(bytes_per_client, 1))
    return [slice(a, min(a + per, n)) for a in range(0, n, per)]
