"""A deliberately slow target (5 ms per evaluation) for the kill -9 test; run as
``python -m tests.search._slow_target OUT`` from the repository root."""

import sys
import time

from fltheory.search import SearchTarget, search
from fltheory.search.targets import efl_eq11_join, objective_shift_space


def slow_eq11(point, seed):
    time.sleep(0.005)
    return efl_eq11_join(point, seed)


SLOW = SearchTarget("slow_eq11", slow_eq11, objective_shift_space("join"), "EFL eq. (11), slowed down")
ARGS = dict(budget=400, seed=5, batch_size=8, n_starts=2, progress=False)

if __name__ == "__main__":
    search(SLOW, out=sys.argv[1], **ARGS)
