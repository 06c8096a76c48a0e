"""client_slices: consecutive slices covering every client once, about chunk_bytes each
but at most a sixteenth of all clients' bytes (at least one client)."""

from __future__ import annotations

import pytest

from fltheory.problems._chunking import client_slices


@pytest.mark.parametrize(("n", "per_client", "chunk", "sizes"),
                         [(100, 8, 24, [3] * 33 + [1]), (5, 100, 1, [1] * 5), (64, 8, 1 << 40, [4] * 16),
                          (10, 8, 1 << 40, [1] * 10), (70, 0, 16, [4] * 17 + [2]), (0, 8, 64, [])])
def test_slices_are_consecutive_and_of_the_chunk_size(n, per_client, chunk, sizes):
    slices = client_slices(n, per_client, chunk)
    assert [s.stop - s.start for s in slices] == sizes
    assert [i for s in slices for i in range(s.start, s.stop)] == list(range(n))
