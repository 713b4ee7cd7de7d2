"""chefs.cnn torch parts: builder properties, warm start, evidence, chain plumbing, data, storage."""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from chefs import DAG, ICP  # noqa: E402
from chefs.cnn import ShapeRule, network_edges, reachable_mask  # noqa: E402
from chefs.cnn.builder import build_network, init_arrays, param_nodes  # noqa: E402
from chefs.cnn.chain import ChainConfig, bare_graph, init_state, mh_step, run_chains, sample  # noqa: E402
from chefs.cnn.data import Dataset, load_data  # noqa: E402
from chefs.cnn.store import read_run, write_run  # noqa: E402
from chefs.cnn.train import Evaluator, TrainConfig  # noqa: E402

from .stats import Z  # noqa: E402

torch.set_num_threads(1)


def g(theta, edges):
    n = len(theta)
    obs = [True, True] + [False] * (n - 2)
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    return DAG(theta, obs, e[:, 0], e[:, 1], obs)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1), gamma=st.floats(0.5, 4.0), phi=st.floats(0.5, 5.0),
       side=st.sampled_from([5, 8]), channels=st.sampled_from([1, 2]))
def test_built_module_runs_and_only_reachable_nodes_have_parameters(seed, gamma, phi, side, channels):
    rng = np.random.default_rng(seed)
    dag = ICP(1.0, gamma, phi).sample(rng, 2, observed_order=[1.0, 0.0], max_nodes=40)
    rule = ShapeRule(n_bins=5, base_channels=2)
    net = build_network(dag, (channels, side, side), 3, rule, rng=rng)
    x = torch.as_tensor(rng.random((2, channels, side, side)), dtype=torch.float32)
    out = net(x)
    assert out.shape == (2, 3) and torch.all(torch.isfinite(out))
    mask = reachable_mask(dag)
    reach_theta = set(dag.theta[mask].tolist())
    edge_keys = {(float(dag.theta[p]), float(dag.theta[c])) for p, c in network_edges(dag)}
    named_edges = set()
    for name in net.names:
        nodes = param_nodes(name)
        assert set(nodes) <= reach_theta, name
        if len(nodes) == 2:
            named_edges.add(nodes)
    assert named_edges == edge_keys  # one parameter tensor per network edge, no other
    biases = {param_nodes(n)[0] for n in net.names if n.startswith("bias|")}
    assert biases == reach_theta - {1.0}  # every reachable node but X has a bias
    if net.names:
        out.sum().backward()  # differentiable
        assert all(p.grad is not None for p in net.params)


def test_bare_and_empty_graphs():
    rng = np.random.default_rng(0)
    net = build_network(bare_graph(True), (1, 8, 8), 3, rng=rng)
    assert net(torch.zeros(4, 1, 8, 8)).shape == (4, 3)
    assert sorted(n.split("|")[0] for n in net.names) == ["bias", "head"]
    empty = build_network(bare_graph(False), (1, 8, 8), 3, rng=rng)
    assert empty.names == []  # Y is not reachable: no parameter, uniform output
    torch.testing.assert_close(empty(torch.zeros(2, 1, 8, 8)), torch.zeros(2, 3))
    with pytest.raises(ValueError, match="shape"):
        net(torch.zeros(4, 1, 7, 8))
    with pytest.raises(ValueError):
        build_network(bare_graph(True), (1, 8), 3)
    with pytest.raises(ValueError):
        build_network(bare_graph(True), (1, 8, 8), 1)


def test_warm_start_copies_kept_edges_and_adding_an_edge_keeps_the_function():
    rng = np.random.default_rng(1)
    old = g([1.0, 0.0, 0.7, 0.3], [[0, 2], [2, 3], [3, 1]])
    net_old = build_network(old, (1, 8, 8), 3, rng=rng)
    w = net_old.arrays()
    new = g([1.0, 0.0, 0.7, 0.3], [[0, 2], [2, 3], [3, 1], [0, 3], [2, 1]])
    init = init_arrays(build_network(new, (1, 8, 8), 3).plan, rng, keep=w, new_edge_init="preserve")
    for name, arr in w.items():
        np.testing.assert_array_equal(init[name], arr)
    assert not np.any(init["conv|1.0|0.3"]) and not np.any(init["head|0.7|0.0"])
    net_new = build_network(new, (1, 8, 8), 3, init=init)
    x = torch.rand(5, 1, 8, 8)
    torch.testing.assert_close(net_new(x), net_old(x))
    rnd = init_arrays(net_new.plan, rng, keep=w, new_edge_init="random")
    assert np.any(rnd["conv|1.0|0.3"])


@pytest.fixture(scope="module")
def digits():
    return load_data("digits", seed=0, max_train=120)


def test_evidence_is_fixed_and_matches_cross_entropy(digits):
    ev = Evaluator(digits, TrainConfig(steps=5, warm_steps=2, batch_size=20, evidence_size=50), ShapeRule(),
                   evidence_rng=np.random.default_rng(0))
    res = ev.fit(bare_graph(), np.random.default_rng(0))
    net = ev.build(bare_graph(), init=res.weights)
    assert ev.log_evidence(net) == pytest.approx(res.log_evidence)
    x = torch.as_tensor(digits.x_train[ev.evidence_index])
    y = torch.as_tensor(digits.y_train[ev.evidence_index])
    ce = torch.nn.functional.cross_entropy(net(x), y, reduction="sum").item()
    assert res.log_evidence == pytest.approx(-ce, rel=1e-4)
    assert res.steps == 5 and not res.warm
    warm = ev.fit(bare_graph(), np.random.default_rng(1), warm=res.weights)
    assert warm.steps == 2 and warm.warm


class _Fit:
    def __init__(self, value=0.0):
        self.calls = 0
        self.value = value

    def __call__(self, dag, rng, warm):
        self.calls += 1
        self.warm = warm

        class R:
            pass

        r = R()
        r.log_evidence, r.weights, r.steps = self.value, {"w": np.full(1, float(self.calls))}, 3
        return r


def test_driver_always_accept_and_always_reject():
    prior = ICP(1.0, 2.0, 1.0)
    rng = np.random.default_rng(0)
    fit = _Fit()
    state = init_state(bare_graph(), prior, fit, rng)
    grow = g([1.0, 0.0, 0.5], [[0, 2], [2, 1]])

    def accept(r, d):
        return grow, math.inf

    def reject(r, d):
        return grow, -math.inf

    s2, info = mh_step(rng, state, accept, fit, prior, 1, 1)
    assert info.accepted and info.trained and s2.dag == grow and s2.net_id == 1 and fit.calls == 2
    s3, info = mh_step(rng, state, reject, fit, prior, 1, 1)
    assert not info.accepted and not info.trained and s3 is state and fit.calls == 2
    # a change outside the forward network is scored without training
    same_net = g([1.0, 0.0, 0.5], [[0, 1], [2, 1]])
    s4, info = mh_step(rng, state, lambda r, d: (same_net, 0.0), fit, prior, 1, 1)
    assert info.accepted and not info.trained and s4.net_id == state.net_id and fit.calls == 2
    flip = lambda r, d: (grow if d.num_nodes == 2 else bare_graph(), math.inf)  # noqa: E731
    states = list(sample(rng, state, flip, fit, prior, 3))
    assert [s.net_id for s, _ in states] == [1, 3, 5] and fit.calls == 5
    assert [s.dag.num_nodes for s, _ in states] == [3, 2, 3]
    # refresh: the current network is trained too (a second fit) and kept with a new id
    s5, info = mh_step(rng, state, lambda r, d: (grow, -50.0), fit, prior, 1, 1, refresh=True)
    assert not info.accepted and info.trained and fit.calls == 7 and s5.net_id == 1 and info.train_steps == 6
    assert fit.warm is state.weights  # the proposal starts from the pre-refresh weights
    assert s5.weights["w"][0] == 6.0  # the refreshed current weights are kept


def test_chain_end_to_end_serial_is_reproducible(digits, tmp_path):
    cfg = ChainConfig(samples=3, train=TrainConfig(steps=20, warm_steps=5, batch_size=30))
    a = run_chains(digits, cfg, 2, seed=7, executor="serial")
    b = run_chains(digits, cfg, 2, seed=7, executor="serial")
    for ra, rb in zip(a, b):
        assert [r["theta"] for r in ra.records] == [r["theta"] for r in rb.records]
        assert [r["log_evidence"] for r in ra.records] == [r["log_evidence"] for r in rb.records]
    path = write_run(tmp_path / "run", a, {"chain": cfg.to_dict()}, digits.y_test)
    with pytest.raises(FileExistsError):
        write_run(tmp_path / "run", a, {}, digits.y_test)
    write_run(tmp_path / "run", a, {"chain": cfg.to_dict()}, digits.y_test, force=True)
    run = read_run(path)
    assert len(run["records"]) == 6 and run["config"]["complete"]
    rec = run["records"][0]
    DAG.from_dict(rec)  # each line is a valid DAG JSON
    for k in ("accuracy", "num_nodes", "avg_degree", "width", "depth", "theta_mean", "log_evidence"):
        assert k in rec
    with np.load(path / "weights.npz", allow_pickle=False) as z:
        assert any(k.startswith("c0/n") and "/head|" in k for k in z.files)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "keep.txt").write_text("x")
    with pytest.raises(ValueError, match="does not look like a run"):
        write_run(tmp_path / "other", a, {}, digits.y_test, force=True)


def test_npz_data_and_bad_input(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(40, 6, 6)).astype(np.uint8)
    y = np.repeat([5, 7], 20)
    np.savez(tmp_path / "d.npz", X=x, y=y)
    d = load_data(str(tmp_path / "d.npz"), seed=1, test_fraction=0.25)
    assert isinstance(d, Dataset) and d.input_shape == (1, 6, 6) and d.classes == (5, 7)
    assert d.x_train.max() <= 1.0 and set(np.unique(d.y_train)) == {0, 1} and d.y_test.size == 10
    np.savez(tmp_path / "c.npz", X=rng.random((30, 3, 4, 4)), y=np.arange(30) % 3)
    assert load_data(str(tmp_path / "c.npz"), classes="2,0").classes == (2, 0)
    np.savez(tmp_path / "bad.npz", X=x)
    with pytest.raises(ValueError, match="'y'"):
        load_data(str(tmp_path / "bad.npz"))
    with pytest.raises(ValueError, match="mnist123"):
        load_data("nonsense")
    (tmp_path / "text.npz").write_text("not an archive\n")
    with pytest.raises(ValueError, match="not a NumPy .npz archive"):  # not numpy's allow_pickle advice
        load_data(str(tmp_path / "text.npz"))
    with open(tmp_path / "one.npz", "wb") as fh:
        np.save(fh, x)
    with pytest.raises(ValueError, match="single array"):
        load_data(str(tmp_path / "one.npz"))
    with pytest.raises(ValueError, match="do not occur"):
        load_data(str(tmp_path / "d.npz"), classes=(5, 9))
    with pytest.raises(ValueError):
        TrainConfig(lr=-1)
    with pytest.raises(ValueError):
        ChainConfig(init="random")
    with pytest.raises(ValueError):
        ChainConfig(max_seconds=0)


def test_birth_warm_start_preserves_the_function():
    """A node born on an edge starts as identity -> old weights (exact within one shape bin)."""
    rng = np.random.default_rng(2)
    old = g([1.0, 0.0, 0.9, 0.5], [[0, 2], [2, 3], [3, 1], [2, 1]])
    net_old = build_network(old, (1, 8, 8), 3, rng=rng)
    x = torch.rand(6, 1, 8, 8)
    ref = net_old(x)
    w = net_old.arrays()
    # births within a bin: X -> a (j at 0.95, bin 0), a -> Y (j at 0.85, bin 0), a -> b (j at 0.45, b's bin)
    cases = [([1.0, 0.0, 0.9, 0.5, 0.95], [[0, 4], [4, 2], [2, 3], [3, 1], [2, 1]], True),
             ([1.0, 0.0, 0.9, 0.5, 0.85], [[0, 2], [2, 3], [3, 1], [2, 4], [4, 1]], True),
             ([1.0, 0.0, 0.9, 0.5, 0.55], [[0, 2], [2, 4], [4, 3], [3, 1], [2, 1]], True),
             ([1.0, 0.0, 0.9, 0.5, 0.3], [[0, 2], [2, 3], [3, 4], [4, 1], [2, 1]], False)]
    for theta, edges, exact in cases:
        new = g(theta, edges)
        net = build_network(new, (1, 8, 8), 3, rng=rng, init=w, new_edge_init="preserve")
        out = net(x)
        if exact:
            torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
        rnd = build_network(new, (1, 8, 8), 3, rng=rng, init=w, new_edge_init="random")(x)
        assert (out - ref).abs().mean() <= (rnd - ref).abs().mean()


def test_chain_time_budget_keeps_what_was_recorded(digits):
    from chefs.cnn.chain import run_chain

    cfg = ChainConfig(samples=50, max_seconds=1e-6, train=TrainConfig(steps=5, warm_steps=2, batch_size=30))
    res = run_chain(0, digits, cfg, seed=1)
    assert len(res.records) == 1 and len(res.infos) == 1


def test_chains_on_a_dask_cluster_match_serial(digits):
    distributed = pytest.importorskip("distributed")
    cfg = ChainConfig(samples=2, train=TrainConfig(steps=10, warm_steps=3, batch_size=30))
    ref = run_chains(digits, cfg, 2, seed=5, executor="serial")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) as cl:
        got = run_chains(digits, cfg, 2, seed=5, scheduler=cl.scheduler_address)
    for ra, rb in zip(ref, got):
        assert [r["theta"] for r in ra.records] == [r["theta"] for r in rb.records]


def _same_records(a, b):
    keys = ("theta", "edges", "iteration", "net_id", "log_evidence", "log_prior", "accuracy", "move", "accepted")
    assert [[r[k] for k in keys] for r in a] == [[r[k] for k in keys] for r in b]


def test_killed_chain_resumes_to_the_uninterrupted_chain(digits, tmp_path):
    """A chain stopped after 3 of 6 iterations (as a kill leaves it: committed progress plus torn
    uncommitted writes) and continued from its checkpoint equals the chain run in one go, bit for bit."""
    from chefs.cnn.chain import run_chain
    from chefs.cnn.store import ChainCheckpoint

    torch.use_deterministic_algorithms(True)
    try:
        cfg = ChainConfig(samples=6, train=TrainConfig(steps=20, warm_steps=6, batch_size=30))
        ref = run_chain(0, digits, cfg, seed=11, evidence_seed=1)
        ck = tmp_path / "c0"
        calls = []
        part = run_chain(0, digits, cfg, seed=11, evidence_seed=1, checkpoint=ck,
                         should_stop=lambda: calls.append(1) or len(calls) >= 3)
        assert len(part.infos) == 3
        # what a kill during iteration 4 leaves behind: half-written lines, a temporary file
        with open(ck / "infos.jsonl", "a") as fh:
            fh.write('{"iteration":4,"move":"ed')
        with open(ck / "samples.jsonl", "a") as fh:
            fh.write('{"theta":[1.0,0.0],"observed":[true,true],"edges":[[0,1]],"chain":0}\n')
        (ck / "state_4.npz.tmp").write_bytes(b"torn")
        saved = ChainCheckpoint(ck).load()
        assert saved["iteration"] == 3 and len(saved["records"]) == 3 and len(saved["infos"]) == 3
        assert saved["rng_state"] == part.rng_state
        res = run_chain(0, digits, cfg, seed=11, evidence_seed=1, checkpoint=ck)
    finally:
        torch.use_deterministic_algorithms(False)
    _same_records(ref.records, res.records)
    assert res.rng_state == ref.rng_state
    assert (res.train_steps, res.fits, res.warm_fits) == (ref.train_steps, ref.fits, ref.warm_fits)
    assert [i["accepted"] for i in res.infos] == [i["accepted"] for i in ref.infos]
    assert [i["log_accept"] for i in res.infos] == [i["log_accept"] for i in ref.infos]  # -inf survives
    for nid, net in ref.networks.items():
        for name, w in net["weights"].items():
            np.testing.assert_array_equal(res.networks[nid]["weights"][name], w)
    # a finished chain resumed again does nothing more
    again = run_chain(0, digits, cfg, seed=11, evidence_seed=1, checkpoint=ck)
    assert len(again.infos) == 6 and again.train_steps == ref.train_steps


def test_cuda_requested_without_gpu_is_a_clear_error(digits, monkeypatch):
    from chefs.cnn.train import check_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="no GPU"):
        check_device("cuda")
    with pytest.raises(ValueError, match="no GPU"):
        Evaluator(digits, TrainConfig(device="cuda"), ShapeRule())
    with pytest.raises(ValueError, match="device"):
        check_device("tpu")
    with pytest.raises(ValueError):
        TrainConfig(device="gpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(ValueError, match="cuda:3"):
        check_device("cuda:3")
    assert check_device("cpu") == "cpu"


# ------------------------------------ the MH step's target, with evidence
# Four graphs with distinct forward networks; a symmetric uniform proposal whose
# log-ratio carries made-up log prior weights A; a deterministic "training" that
# returns made-up log evidences EV. The chain's target is then exactly
# pi_j ~ exp(A_j + EV_j).
_NETS = [bare_graph(), g([1.0, 0.0, 0.5], [[0, 2], [2, 1]]), g([1.0, 0.0, 0.5], [[0, 2], [2, 1], [0, 1]]),
         g([1.0, 0.0, 0.3], [[0, 2], [2, 1]])]
_A = np.array([0.0, -0.7, 0.4, -1.2])
_EV = np.array([-3.0, -1.5, -2.6, -0.4])


def _mh_visits(iterations=20000, refresh=False, plant=0):
    from chefs.cnn.network import network_key

    keys = [network_key(d) for d in _NETS]
    assert len(set(keys)) == len(keys)

    def fit(dag, rng, warm):
        class R:
            pass

        r = R()
        r.log_evidence, r.weights, r.steps = float(_EV[keys.index(network_key(dag))]), {}, 1
        return r

    def propose(rng, dag):
        j = keys.index(network_key(dag))
        k = (j + 1 + int(rng.integers(3))) % 4
        return _NETS[k], float(_A[k] - _A[j])

    rng = np.random.default_rng(6)
    prior = ICP(1.0, 2.0, 1.0)
    state = init_state(_NETS[0], prior, fit, rng)
    if not plant:
        return np.array([keys.index(st.network_key)
                         for st, _ in sample(rng, state, propose, fit, prior, iterations, refresh=refresh)])
    visits = []  # the same chain, step by step, through the planted mh_step
    for it in range(iterations):
        state, _ = mh_step(rng, state, propose, fit, prior, it + 1, 1, refresh, plant=plant)
        visits.append(keys.index(state.network_key))
    return np.array(visits)


def _visit_z(visits, batches=40):
    p = np.exp(_A + _EV - np.logaddexp.reduce(_A + _EV))
    n = visits.size // batches * batches
    zs = []
    for j in range(4):
        x = (visits[:n] == j).astype(float)
        se = x.reshape(batches, -1).mean(axis=1).std(ddof=1) / math.sqrt(batches)
        zs.append((x.mean() - p[j]) / se)
    return np.array(zs)


@pytest.mark.parametrize("refresh", [False, True])
def test_mh_step_samples_prior_times_evidence(refresh):
    """Visit frequencies of 20,000 steps against exp(A + EV), batch-means errors.
    The fit here is deterministic, so ``refresh=True`` re-fits the current network to
    the same evidence: that case checks that the refresh path keeps the chain's
    bookkeeping (state, evidence, visits) right, not how a noisy evidence estimate
    changes the target."""
    z = _visit_z(_mh_visits(refresh=refresh))
    assert np.max(np.abs(z)) < Z, z


def test_mh_step_negative_control_current_evidence_dropped():
    z = _visit_z(_mh_visits(plant=1))
    assert np.max(np.abs(z)) > Z, z


@pytest.mark.parametrize("max_train", [3, 5, 31, 200])
def test_max_train_is_a_stratified_subset_of_the_training_split(max_train):
    """--max-train keeps every class in proportion (a plain prefix of the shuffled
    training set gave digits with max_train=5 the class counts [0, 0, 5])."""
    from chefs.cnn.data import load_data

    full = load_data("digits", seed=4)
    sub = load_data("digits", seed=4, max_train=max_train)
    counts = np.bincount(sub.y_train, minlength=3)
    share = np.bincount(full.y_train, minlength=3) * max_train / full.y_train.size
    assert counts.sum() == max_train and counts.min() >= 1
    assert np.all(np.abs(counts - share) < 1 + 1e-9)
    np.testing.assert_array_equal(sub.x_test, full.x_test)  # the test split is untouched
    rows = {r.tobytes() for r in full.x_train}
    assert all(r.tobytes() in rows for r in sub.x_train)


def test_interrupt_stops_the_worker_processes(digits, tmp_path):
    """Ctrl-C (here: KeyboardInterrupt from the progress callback once chain 0 is
    done) stops the pool's worker processes at once instead of waiting for the
    chains still queued or running (a hang once seen at shutdown): with one
    worker, chain 2 never starts (before, the pool's shutdown ran it to the end)."""
    import multiprocessing as mp
    import time

    from chefs.cnn.chain import ChainConfig, run_chains
    from chefs.cnn.train import TrainConfig

    cfg = ChainConfig(samples=2, train=TrainConfig(steps=5, warm_steps=2, batch_size=30))

    def interrupt(result):
        raise KeyboardInterrupt

    (tmp_path / "chains").mkdir()
    with pytest.raises(KeyboardInterrupt):
        run_chains(digits, cfg, 3, seed=1, executor="process", workers=1, on_done=interrupt, run_dir=tmp_path)
    deadline = time.perf_counter() + 10
    while mp.active_children() and time.perf_counter() < deadline:
        time.sleep(0.1)
    assert not mp.active_children()
    assert (tmp_path / "chains" / "c0").exists() and not (tmp_path / "chains" / "c2").exists()


def test_interrupt_stops_thread_chains_after_their_iteration(digits, tmp_path):
    """Threads cannot be killed: on Ctrl-C (here a KeyboardInterrupt raised in the
    main process by a SIGINT 3 s in) run_chains writes run_dir/STOP, the running chains return
    after their current iteration, and only then does the interrupt propagate, so
    nothing writes to the run after the command ends. The STOP file is gone."""
    import os
    import signal
    import threading
    import time

    from chefs.cnn.chain import ChainConfig, run_chains
    from chefs.cnn.store import chain_progress
    from chefs.cnn.train import TrainConfig

    cfg = ChainConfig(samples=10**5, train=TrainConfig(steps=5, warm_steps=2, batch_size=30))
    (tmp_path / "chains").mkdir()
    # Python's own Ctrl-C handler, whatever this process inherited: a job started in the background by a
    # non-interactive shell starts with SIGINT ignored, and then no KeyboardInterrupt would ever come
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(3.0, lambda: os.kill(os.getpid(), signal.SIGINT))  # what Ctrl-C sends
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_chains(digits, cfg, 2, seed=1, executor="thread", workers=2, run_dir=tmp_path)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    progress = chain_progress(tmp_path)
    assert set(progress) == {0, 1} and all(0 < it < 10**5 for it in progress.values())
    time.sleep(1.0)
    assert chain_progress(tmp_path) == progress  # no thread went on writing
    assert not (tmp_path / "STOP").exists()


def test_stratified_quota_is_proportional():
    """Largest remainders: every class within one image of its share (when no
    class needs the at-least-one rule), exact total, 1 <= quota <= size."""
    from chefs.cnn.data import _stratified_quota

    rng = np.random.default_rng(0)
    for _ in range(3000):
        sizes = rng.integers(1, 40, size=int(rng.integers(2, 8)))
        total = int(rng.integers(sizes.size, sizes.sum() + 1))
        q = np.array(_stratified_quota(sizes, total))
        share = sizes * total / sizes.sum()
        assert q.sum() == total and q.min() >= 1 and np.all(q <= sizes)
        if share.min() >= 1:
            assert np.all(np.abs(q - share) < 1), (sizes, total, q)
    assert _stratified_quota([10, 8, 11, 5, 15, 2], 25) == [5, 4, 5, 3, 7, 1]  # the old rule gave the last class 2
