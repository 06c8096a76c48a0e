"""Optimizers built by the factories of fltheory.optim pickle as their call (``Recipe``);
hand-built or changed ones refuse to, and every optimizer copies as itself."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from fltheory import optim
from fltheory.algorithms import FedOpt
from fltheory.optim.base import Optimizer

FACTORIES = [
    lambda: optim.sgd(0.1), lambda: optim.momentum(0.1, 0.5, nesterov=True), lambda: optim.adagrad(0.2, eps=1e-6),
    lambda: optim.adam(0.1, b1=0.8), lambda: optim.yogi(0.05), lambda: optim.fedadam(0.1, tau=1e-2),
    lambda: optim.fedavgm(1.0, 0.7), lambda: optim.preconditioned(0.1, np.diag([1.0, 2.0, 3.0]), per_client=False),
    lambda: optim.chain(optim.sgd(0.1), optim.momentum(0.2)),
]


@pytest.mark.parametrize("make", FACTORIES)
def test_factory_optimizers_pickle_as_their_call_and_step_alike(make):
    opt = make()
    back = pickle.loads(pickle.dumps(opt))
    assert opt.picklable and back.picklable and back.name == opt.name
    rng = np.random.default_rng(0)
    Y, G = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    s1, s2 = opt.init(Y), back.init(Y)
    for _ in range(3):
        u1, s1 = opt.update(G, s1, Y)
        u2, s2 = back.update(G, s2, Y)
        np.testing.assert_array_equal(u1, u2)


def test_hand_built_or_changed_optimizers_do_not_pickle_but_copy_as_themselves():
    base = optim.adagrad(0.1)
    hand = Optimizer(base.init, base.update, base.precond, "by hand", base.fused)
    changed = base._replace(fused=optim.adam(0.1).fused)      # the recipe would rebuild plain adagrad
    for opt in (hand, changed):
        assert not opt.picklable
        with pytest.raises(pickle.PicklingError, match=r"not what a factory of fltheory\.optim built"):
            pickle.dumps(opt)
        assert copy.copy(opt) is opt and copy.deepcopy(opt) is opt
    alg = FedOpt(client_optimizer=hand, server_optimizer=optim.sgd(1.0), local_steps=2)
    assert copy.deepcopy(alg).client_optimizer is hand
    assert hash(base) == hash(base) and base == base
