"""Chunks of clients for the generators and constructors that work on a few clients at a time."""

from __future__ import annotations

#: A chunk holds at most this fraction of the whole stack (1/16): for a small federation a
#: fixed-size chunk and its few temporaries would otherwise be a large share of its memory.
PIECES = 16


def client_slices(n: int, bytes_per_client: int, chunk_bytes: int) -> list[slice]:
    """Consecutive slices covering clients 0..n-1, each holding about min(``chunk_bytes``,
    1/:data:`PIECES` of all n clients) of per-client arrays of ``bytes_per_client`` bytes,
    and at least one client."""
    size = max(bytes_per_client, 1)
    per = max(1, min(chunk_bytes, n * size // PIECES) // size)
    return [slice(a, min(a + per, n)) for a in range(0, n, per)]
