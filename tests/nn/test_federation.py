"""NeuralFederation against mathematics.

* A linear network (one Dense(1) layer) with the MSE loss and weight decay *is* a ridge least-squares
  federation: f_i(w, b) = 1/(2 n_i) ||[U_i 1] (w, b) - t_i||^2 + (reg/2)||(w, b)||^2.  Its loss,
  gradient, Hessian, empirical Fisher and minibatch oracle (same RNG
  convention) must equal QuadraticFederation.from_least_squares on the rows
  [U_i 1].
* A nonlinear network: gradients against central differences of the loss,
  batched rows against one-client-at-a-time calls, Hessian-vector products
  against second differences of the loss.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fltheory.errors import InvalidProblemError
from fltheory.nn import (MSE, Dense, NeuralFederation, Sequential, SoftmaxCrossEntropy, Tanh, mlp,
                         synthetic_next_char, char_lstm)
from fltheory.nn.federation import HESS_MAX_DIM
from fltheory.problems import QuadraticFederation

from .test_layers_fd import central_diff

SIZES = [5, 3, 7]


def linear_pair(seed: int = 0):
    rng = np.random.default_rng(seed)
    sizes = [5, 4, 7]          # >= 4 rows each: H_i = A_i^T A_i / n_i positive definite
    U = [rng.standard_normal((n, 3)) for n in sizes]
    t = [rng.standard_normal(n) for n in sizes]
    nf = NeuralFederation(Sequential([Dense(1)], (3,)), MSE(), U, t, reg=0.1)
    qf = QuadraticFederation.from_least_squares([np.hstack([u, np.ones((u.shape[0], 1))]) for u in U], t,
                                                ridge=0.1)
    return nf, qf


def test_linear_network_is_the_least_squares_federation():
    nf, qf = linear_pair()
    rng = np.random.default_rng(1)
    X = rng.standard_normal((3, 4))
    np.testing.assert_allclose(nf.client_loss(X), qf.client_loss(X), rtol=1e-12)
    np.testing.assert_allclose(nf.client_grad(X), qf.client_grad(X), rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(nf.fisher_diag(X), qf.empirical_fisher_diag(X), rtol=1e-11)
    np.testing.assert_allclose(nf.client_hess(X), qf.client_hess(X), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(nf.weights, qf.weights)
    x = X[0]
    np.testing.assert_allclose(nf.hvp(x, X[1]), qf.hess() @ X[1], rtol=1e-6, atol=1e-8)
    # minibatch oracle: identical draws u = rng.random((m, b)), j = floor(u n_i)
    idx = np.array([2, 0])
    g1 = nf.with_minibatch(4).stochastic_grad(X[:2], idx, np.random.default_rng(7))
    g2 = qf.with_minibatch(4).stochastic_grad(X[:2], idx, np.random.default_rng(7))
    np.testing.assert_allclose(g1, g2, rtol=1e-11, atol=1e-13)


def tanh_fed(seed: int = 0, test: bool = True):
    rng = np.random.default_rng(seed)
    U = [rng.standard_normal((n, 3)) for n in SIZES]
    y = [rng.integers(0, 3, size=n) for n in SIZES]
    kw = {}
    if test:
        kw = dict(test_inputs=[rng.standard_normal((2, 3)) for _ in SIZES],
                  test_targets=[rng.integers(0, 3, size=2) for _ in SIZES])
    net = Sequential([Dense(4), Tanh(), Dense(3)], (3,))
    return NeuralFederation(net, SoftmaxCrossEntropy(), U, y, **kw), rng


def test_gradients_match_finite_differences_and_rows_are_independent():
    fed, rng = tanh_fed()
    X = np.stack([fed.init_params(rng) for _ in range(3)])
    G = fed.client_grad(X)
    np.testing.assert_allclose(G, central_diff(lambda Z: fed.client_loss(Z).sum(), X.copy()),
                               rtol=1e-6, atol=1e-8)
    # one client at a time, any order, repeated clients
    order = np.array([2, 0, 2, 1])
    Xo = np.stack([X[0], X[1], X[2], X[0]])
    Go = fed.client_grad(Xo, order)
    for r, i in enumerate(order):
        np.testing.assert_allclose(Go[r], fed.client_grad(Xo[r][None], [i])[0], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(fed.client_loss(Xo[r][None], [i]), fed.client_loss(Xo, order)[r])
    # global objective: F = sum p_i f_i with p_i = n_i / n
    np.testing.assert_allclose(fed.weights, np.array(SIZES) / sum(SIZES))
    x = X[0]
    np.testing.assert_allclose(fed.grad(x), central_diff(lambda z: fed.loss(z), x.copy()), rtol=1e-6, atol=1e-8)


def test_per_sample_gradients_sum_and_fisher():
    fed, rng = tanh_fed()
    X = np.stack([fed.init_params(rng) for _ in range(3)])
    P = fed.per_sample_grads(X)
    n = np.array(SIZES)
    assert P.shape == (3, max(SIZES), fed.dim)
    for i, k in enumerate(SIZES):
        assert np.all(P[i, k:] == 0.0)        # padding rows carry nothing
    np.testing.assert_allclose(P.sum(axis=1) / n[:, None], fed.client_grad(X), rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose((P ** 2).sum(axis=1) / n[:, None], fed.fisher_diag(X), rtol=1e-10, atol=1e-14)


def test_minibatch_follows_the_base_class_convention():
    fed, rng = tanh_fed()
    X = np.stack([fed.init_params(rng) for _ in range(2)])
    idx = np.array([1, 2])
    b = 5
    g = fed.with_minibatch(b).stochastic_grad(X, idx, np.random.default_rng(3))
    u = np.random.default_rng(3).random((2, b))
    P = fed.per_sample_grads(X, idx)
    for r, i in enumerate(idx):
        j = np.floor(u[r] * SIZES[i]).astype(int)      # rows drawn with replacement
        np.testing.assert_allclose(g[r], P[r, j].mean(axis=0), rtol=1e-10, atol=1e-13)


def test_hvp_against_second_differences_of_the_loss():
    fed, rng = tanh_fed()
    x, v = fed.init_params(rng), rng.standard_normal(fed.dim)
    hv = fed.hvp(x, v)
    h = 1e-4          # second difference: error O(h^2 |f''''|) + O(1e-16 / h^2)
    second = (fed.loss(x + h * v) - 2 * fed.loss(x) + fed.loss(x - h * v)) / h ** 2
    assert abs(v @ hv - second) <= 1e-5 * max(1.0, abs(second))
    H = fed.hess(x)
    np.testing.assert_allclose(H, H.T, atol=1e-12)
    np.testing.assert_allclose(H @ v, hv, rtol=1e-6, atol=1e-7)


def test_accuracy_counts_argmax_hits():
    fed, rng = tanh_fed()
    x = fed.init_params(rng)
    hits, total = 0, 0
    for i in range(3):                     # one client at a time, unpadded data
        u, t = fed.client_data(i, "test")
        hits += int(np.sum(fed.model.predict(x[None], u[None])[0].argmax(-1) == t))
        total += t.shape[0]
    assert fed.accuracy(x) == pytest.approx(hits / total)
    u, t = fed.client_data(1, "train")
    assert fed.accuracy(x, clients=[1], data="train") == pytest.approx(
        np.mean(fed.model.predict(x[None], u[None])[0].argmax(-1) == t))
    with pytest.raises(InvalidProblemError):
        fed.client_data(3)


def test_shifting_clients():
    fed, rng = tanh_fed()
    X = np.stack([fed.init_params(rng) for _ in range(3)])
    small = fed.without_client(1)
    assert small.n_clients == 2
    np.testing.assert_allclose(small.weights, np.array([5, 7]) / 12)
    np.testing.assert_allclose(small.client_grad(X[[0, 2]]), fed.client_grad(X[[0, 2]], [0, 2]))
    back = small.with_client(fed.without_client(0).without_client(1))
    np.testing.assert_allclose(back.client_loss(X[[0, 2, 1]]), fed.client_loss(X[[0, 2, 1]], [0, 2, 1]))


def test_char_lstm_federation_gradient():
    rng = np.random.default_rng(4)
    U, y = synthetic_next_char(2, rng, vocab=3, seq_len=3, n_samples=[4, 2])
    fed = NeuralFederation(char_lstm(3, 3, hidden=2), SoftmaxCrossEntropy(), U, y)
    X = np.stack([fed.init_params(rng) for _ in range(2)])
    np.testing.assert_allclose(fed.client_grad(X), central_diff(lambda Z: fed.client_loss(Z).sum(), X.copy()),
                               rtol=1e-6, atol=1e-8)


def test_synthetic_next_char_follows_the_chain():
    """With heterogeneity 0 every client samples the shared chain P_0: the
    empirical transition frequencies of two clients agree (4000 paths each)."""
    rng = np.random.default_rng(8)
    U, y = synthetic_next_char(2, rng, vocab=3, seq_len=1, n_samples=4000, heterogeneity=0.0)
    freq = [np.stack([np.bincount(y[i][U[i][:, 0].argmax(-1) == a], minlength=3) for a in range(3)])
            for i in range(2)]
    freq = [f / f.sum(axis=1, keepdims=True) for f in freq]
    assert np.abs(freq[0] - freq[1]).max() < 0.08       # ~1300 paths per row: std ~0.014 per entry


def test_errors():
    fed, rng = tanh_fed(test=False)
    with pytest.raises(InvalidProblemError, match="non-convex"):
        fed.optimum()
    with pytest.raises(InvalidProblemError):
        fed.client_optima()
    with pytest.raises(InvalidProblemError, match="test data"):
        fed.accuracy(fed.init_params(rng))
    with pytest.raises(InvalidProblemError):
        fed.client_grad(np.zeros((2, fed.dim)))           # 3 clients listed, 2 rows
    big = NeuralFederation(mlp(HESS_MAX_DIM, 2, hidden=()), SoftmaxCrossEntropy(),
                           [np.zeros((2, HESS_MAX_DIM))], [np.array([0, 1])])
    with pytest.raises(InvalidProblemError, match="client_hvp"):
        big.client_hess(np.zeros(big.dim))
    net = Sequential([Dense(2)], (3,))
    with pytest.raises(InvalidProblemError, match="labels"):
        NeuralFederation(net, SoftmaxCrossEntropy(), [np.zeros((2, 3))], [np.array([0, 2])])
    with pytest.raises(InvalidProblemError, match="no samples"):
        NeuralFederation(net, SoftmaxCrossEntropy(), [np.zeros((0, 3))], [np.zeros(0, dtype=int)])
    with pytest.raises(InvalidProblemError, match="non-finite"):
        NeuralFederation(net, SoftmaxCrossEntropy(), [np.full((2, 3), np.nan)], [np.array([0, 1])])
    with pytest.raises(InvalidProblemError, match="classification"):
        NeuralFederation(net, MSE(), [np.zeros((2, 3))], [np.zeros((2, 2))]).accuracy(np.zeros(net.dim))


def test_synthetic_fedprox_federation_carries_the_generator_data():
    from fltheory.nn import synthetic_fedprox_federation
    from fltheory.problems.synthetic import synthetic_fedprox
    kw = dict(seed=4, n_devices=3, dim=5, n_classes=3)
    fed = synthetic_fedprox_federation(mlp(5, 3, hidden=(4,)), 0.5, 0.5, **kw)
    data = synthetic_fedprox(0.5, 0.5, **kw)
    assert fed.n_clients == 3
    np.testing.assert_array_equal(fed.n_samples, [x.shape[0] for x in data.X_train])
    for i in range(3):
        u, t = fed.client_data(i)
        np.testing.assert_array_equal(u, data.X_train[i])
        np.testing.assert_array_equal(t, data.y_train[i])
    x = fed.init_params(np.random.default_rng(0))
    assert np.isfinite(fed.loss(x)) and np.isfinite(fed.test_loss(x)) and 0 <= fed.accuracy(x) <= 1
    with pytest.raises(InvalidProblemError, match="inputs"):
        synthetic_fedprox_federation(mlp(6, 3, hidden=(4,)), 0.5, 0.5, **kw)


def test_weight_decay_enters_loss_and_gradient_but_not_the_fisher():
    fed, rng = tanh_fed(test=False)
    data = [fed.client_data(i) for i in range(fed.n_clients)]
    reg = NeuralFederation(fed.model, fed.loss_fn, [d[0] for d in data], [d[1] for d in data], reg=0.5)
    X = np.stack([fed.init_params(rng) for _ in range(3)])
    np.testing.assert_allclose(reg.client_loss(X) - fed.client_loss(X), 0.25 * (X ** 2).sum(1), rtol=1e-12)
    np.testing.assert_allclose(reg.client_grad(X) - fed.client_grad(X), 0.5 * X, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(reg.fisher_diag(X), fed.fisher_diag(X), rtol=1e-12)


@given(st.lists(st.integers(0, 2), min_size=1, max_size=5), st.integers(0, 2**31 - 1))
def test_batched_rows_equal_single_client_calls(order, seed):
    """Any list of clients (repeats, any order), each row at its own point:
    the batched oracles equal one-client calls (Hypothesis-drawn lists)."""
    fed, _ = tanh_fed(test=False)
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((len(order), fed.dim))
    G, L, F = fed.client_grad(X, order), fed.client_loss(X, order), fed.fisher_diag(X, order)
    for r, i in enumerate(order):
        np.testing.assert_allclose(G[r], fed.client_grad(X[r], [i])[0], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(L[r], fed.client_loss(X[r], [i])[0], rtol=1e-13)
        np.testing.assert_allclose(F[r], fed.fisher_diag(X[r], [i])[0], rtol=1e-12, atol=1e-16)


def test_iid_partition_and_split_clients():
    from fltheory.nn import iid_partition, split_clients
    rng = np.random.default_rng(9)
    parts = iid_partition(23, 4, rng)
    allidx = np.concatenate(parts)
    np.testing.assert_array_equal(np.sort(allidx), np.arange(23))          # disjoint cover
    assert max(p.size for p in parts) - min(p.size for p in parts) <= 1
    u, y = np.arange(23.0)[:, None], np.arange(23)
    tu, tt, su, st_ = split_clients(u, y, parts, 0.2, rng)
    for p, a, b, c, d in zip(parts, tu, tt, su, st_):
        assert c.shape[0] == max(1, round(0.2 * p.size)) and a.shape[0] + c.shape[0] == p.size
        np.testing.assert_array_equal(np.sort(np.concatenate([b, d])), p)  # labels follow their inputs
        np.testing.assert_array_equal(a[:, 0], b)
    with pytest.raises(InvalidProblemError):
        split_clients(u, y, [np.array([0])], 0.2, rng)


@pytest.mark.parametrize("conv", [False, True])
def test_pooled_loss_and_grad_norm2_equals_loss_and_grad(monkeypatch, conv):
    """The pooled, chunked F and ||grad F||^2 equal sum_i p_i f_i and ||sum_i p_i grad f_i||^2 from the
    per-client oracles: unequal client sizes (padding skipped), explicit weights, weight decay, chunks
    that cut across clients; the cache follows a change of clients."""
    import fltheory.nn.federation as federation
    from fltheory.nn import cnn

    monkeypatch.setattr(federation, "POOLED_CHUNK", 4)
    rng = np.random.default_rng(3)
    sizes = [5, 2, 9]
    if conv:
        model = cnn((1, 6, 6), 3, channels=(2, 3), kernel=3, fc=5)
        U = [rng.standard_normal((n, 1, 6, 6)) for n in sizes]
    else:
        model = Sequential([Dense(6), Tanh(), Dense(3)], (4,))
        U = [rng.standard_normal((n, 4)) for n in sizes]
    t = [rng.integers(0, 3, n) for n in sizes]
    fed = NeuralFederation(model, SoftmaxCrossEntropy(), U, t, weights=[0.5, 0.2, 0.3], reg=0.05)
    X = np.stack([fed.init_params(rng) for _ in range(3)])
    for f in (fed, fed.with_minibatch(2), fed.without_client(0)):
        loss, g2 = f.loss_and_grad_norm2(X)
        want_loss = np.array([f.loss(x) for x in X])
        want_g2 = np.array([np.sum(f.grad(x) ** 2) for x in X])
        np.testing.assert_allclose(loss, want_loss, rtol=1e-13)
        np.testing.assert_allclose(g2, want_g2, rtol=1e-12)


def test_pooled_cache_follows_the_weights_even_when_an_id_is_reused_or_the_array_changes_in_place():
    """loss_and_grad_norm2 caches the pooled per-sample weights p_i / n_i.  A cache keyed by id(weights)
    is stale when a new weights array gets the id of a collected one (CPython reuses addresses at once)
    and when the array is changed in place (same id, same object); both must give the new F."""
    rng = np.random.default_rng(5)
    sizes = [3, 6, 4]
    U = [rng.standard_normal((n, 4)) for n in sizes]
    t = [rng.integers(0, 3, n) for n in sizes]
    fed = NeuralFederation(Sequential([Dense(5), Tanh(), Dense(3)], (4,)), SoftmaxCrossEntropy(), U, t,
                           weights=[0.2, 0.5, 0.3])
    X = np.stack([fed.init_params(rng) for _ in range(2)])

    def assert_matches_the_per_client_oracles() -> None:
        loss, g2 = fed.loss_and_grad_norm2(X)
        np.testing.assert_allclose(loss, [fed.loss(x) for x in X], rtol=1e-13)
        np.testing.assert_allclose(g2, [np.sum(fed.grad(x) ** 2) for x in X], rtol=1e-12)

    assert_matches_the_per_client_oracles()
    # a new array, allocated (if the allocator obliges) at the address of the one it replaces
    old_id = id(fed.weights)
    fed.weights = None          # type: ignore[assignment]
    kept = []
    for _ in range(200):
        candidate = np.array([0.6, 0.1, 0.3])
        if id(candidate) == old_id:
            break
        kept.append(candidate)
    fed.weights = candidate
    assert_matches_the_per_client_oracles()
    # the same array changed in place
    fed.weights[:] = [0.1, 0.1, 0.8]
    assert_matches_the_per_client_oracles()
