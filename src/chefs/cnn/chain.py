"""Metropolis-Hastings over CNN architectures (section 4.2 of 002).

One step: a structure proposal ``proposal(rng, dag) -> (new, log_ratio)``
(:mod:`chefs.cnn.proposals`), then, when the forward network changed, training
of the proposal's network started from the current state's weights (warm
start), then acceptance with probability

    min(1, exp(log_ratio + log_evidence(new) - log_evidence(old)))

with the point estimate of eq. 21 on one fixed evidence set. A proposal that
leaves the forward network unchanged (it only touches nodes that X does not
reach) keeps the current weights and evidence: the evidence is a function of
the network. Layers, as in STYLE.md: :func:`init_state` builds the state,
:func:`mh_step` is the kernel, :func:`sample` the generator driver,
:func:`run_chain` / :func:`run_chains` the top level (chains in parallel
through a ``concurrent.futures`` executor).
"""

from __future__ import annotations

import math
import os
import time
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from ..graph import DAG
from ..priors.icp import ICP
from .data import Dataset
from .network import architecture_stats, network_key
from .proposals import default_proposal
from .shapes import ShapeRule

__all__ = [
    "ChainConfig", "ChainState", "StepInfo", "ChainResult",
    "bare_graph", "init_state", "mh_step", "sample", "run_chain", "run_chains",
]


def bare_graph(edge: bool = True) -> DAG:
    """The bare input-to-output graph: X (theta=1), Y (theta=0) and, if ``edge``, X -> Y."""
    p, c = ([0], [1]) if edge else ([], [])
    return DAG([1.0, 0.0], [True, True], p, c, [True, True])


@dataclass(frozen=True)
class ChainConfig:
    """Settings of one architecture chain.

    Parameters
    ----------
    alpha, gamma, phi : float
        ICP hyperparameters (paper: 1, 20, 5).
    n_bins, base_channels, channel_rule :
        The :class:`ShapeRule` (paper: 5 bins, 4 channels).
    samples : int
        Recorded iterations per chain (after burn-in, every ``thin``-th).
    burn_in, thin : int
    init : {"bare", "empty", "prior"}
        Start at X -> Y (default, as the paper's chains), at X, Y without
        edges, or at a draw from the ICP prior (expensive with gamma = 20).
    toggle_weight : float
        With ``proposal="toggle"``: probability of an edge toggle (else a node birth/death).
    proposal : {"rjmcmc", "toggle"}
        "rjmcmc" (default): the ICP's reversible-jump moves (edge flips,
        birth/death of singleton orphans, order moves, depth moves) through
        :class:`chefs.mcmc.proposal.RJMCMCProposal`; "toggle": the edge-toggle
        and node-on-edge birth/death proposals of :mod:`chefs.cnn.proposals`.
    refresh : bool
        When a proposal is trained (``train.warm_steps`` from the current
        weights), also train the current network the same number of steps
        from its own weights and use its refreshed evidence in the ratio, so
        both sides of the comparison have had the same training (default
        True; doubles the training cost of a step, see
        ``docs/derivations-cnn.md``). The refreshed weights are kept.
    max_seconds : float or None
        Wall-time budget of one chain: it stops after the first step that
        ends past it, keeping the samples recorded so far.
    train : TrainConfig
    """

    alpha: float = 1.0
    gamma: float = 20.0
    phi: float = 5.0
    n_bins: int = 5
    base_channels: int = 4
    channel_rule: str = "product"
    samples: int = 10
    burn_in: int = 0
    thin: int = 1
    init: str = "bare"
    toggle_weight: float = 0.5
    proposal: str = "rjmcmc"
    refresh: bool = True
    max_seconds: float | None = None
    train: "object" = None  # TrainConfig; None -> TrainConfig()

    def __post_init__(self):
        from .train import TrainConfig

        if self.train is None:
            object.__setattr__(self, "train", TrainConfig())
        elif isinstance(self.train, dict):
            object.__setattr__(self, "train", TrainConfig(**self.train))
        elif not isinstance(self.train, TrainConfig):
            raise ValueError(f"train must be a TrainConfig, got {type(self.train).__name__}")
        ICP(self.alpha, self.gamma, self.phi)
        self.shape_rule()
        for name in ("samples", "thin"):
            v = getattr(self, name)
            if isinstance(v, bool) or int(v) != v or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if isinstance(self.burn_in, bool) or int(self.burn_in) != self.burn_in or self.burn_in < 0:
            raise ValueError(f"burn_in must be a non-negative integer, got {self.burn_in!r}")
        if self.init not in ("bare", "empty", "prior"):
            raise ValueError(f"init must be 'bare', 'empty' or 'prior', got {self.init!r}")
        if self.max_seconds is not None and not float(self.max_seconds) > 0:
            raise ValueError(f"max_seconds must be a positive number or None, got {self.max_seconds!r}")
        if not 0.0 < float(self.toggle_weight) < 1.0:
            raise ValueError(f"toggle_weight must lie strictly between 0 and 1, got {self.toggle_weight}")
        if self.proposal not in ("rjmcmc", "toggle"):
            raise ValueError(f"proposal must be 'rjmcmc' or 'toggle', got {self.proposal!r}")

    def icp(self) -> ICP:
        return ICP(self.alpha, self.gamma, self.phi)

    def shape_rule(self) -> ShapeRule:
        return ShapeRule(self.n_bins, self.base_channels, self.channel_rule)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["train"] = self.train.to_dict()
        return d


@dataclass(frozen=True)
class ChainState:
    """What the next step needs: the graph, its network's identity, weights and scores."""

    dag: DAG
    network_key: tuple
    log_prior: float
    log_evidence: float
    weights: dict = field(repr=False)
    net_id: int = 0


@dataclass(frozen=True)
class StepInfo:
    """Diagnostics of one MH step (kept apart from the state)."""

    iteration: int
    move: str
    log_ratio: float
    log_evidence_proposal: float
    log_accept: float
    accepted: bool
    trained: bool
    train_steps: int
    seconds: float


@dataclass
class ChainResult:
    """Output of one chain: recorded samples, networks and costs."""

    chain: int
    records: list
    networks: dict          # net_id -> {"weights": {...}, "test_proba": array}
    infos: list             # every StepInfo as a dict
    rng_state: dict
    wall_seconds: float
    train_steps: int
    fits: int
    warm_fits: int


FitFn = Callable[[DAG, np.random.Generator, "dict | None"], object]


def init_state(dag: DAG, prior: ICP, fit: FitFn, rng: np.random.Generator) -> ChainState:
    """Train ``dag`` from scratch and wrap it as the initial chain state (log prior:
    eq. 9 of 002, corrected; log evidence: eq. 21; docs/derivations-cnn.md section 4)."""
    res = fit(dag, rng, None)
    return ChainState(dag, network_key(dag), prior.log_prob(dag), float(res.log_evidence), res.weights, 0)


def mh_step(rng: np.random.Generator, state: ChainState, proposal, fit: FitFn, prior: ICP,
            iteration: int = 0, next_id: int = 1, refresh: bool = False,
            plant: int = 0) -> tuple[ChainState, StepInfo]:
    """One Metropolis-Hastings step over structures (eqs. 14-16 and 21 of 002).

    Parameters
    ----------
    rng : numpy.random.Generator
        Used by the proposal, the training and the acceptance draw, in that order.
    state : ChainState
    proposal : callable ``(rng, dag) -> (new_dag, log_ratio)``
    fit : callable ``(dag, rng, warm_weights) -> result`` with ``log_evidence``,
        ``weights``, ``steps``; called with the current weights (warm start).
    prior : ICP
        Only used to store the new state's log prior.
    next_id : int
        First unused network id (ids only need to be unique within a chain).
    refresh : bool
        Before training a proposal, train the current network ``fit(dag, rng,
        weights)`` too and compare with its refreshed evidence (kept, with a
        new network id, whatever the outcome).
    plant : int
        Tests only: 1 leaves the current network's evidence out of the
        acceptance ratio.
    """
    t0 = time.perf_counter()
    new, log_ratio = proposal(rng, state.dag)
    move = str(getattr(proposal, "last_name", getattr(proposal, "name", type(proposal).__name__)))
    log_ratio = float(log_ratio)
    if math.isnan(log_ratio) or log_ratio == -math.inf:
        info = StepInfo(iteration, move, log_ratio, math.nan, -math.inf, False, False, 0,
                        time.perf_counter() - t0)
        return state, info
    key = network_key(new)
    trained, steps = False, 0
    if key == state.network_key:
        lev, weights, net_id = state.log_evidence, state.weights, state.net_id
    else:
        start = state.weights  # both sides start from the same weights (no double training)
        if refresh:
            cur = fit(state.dag, rng, start)
            state = ChainState(state.dag, state.network_key, state.log_prior, float(cur.log_evidence),
                               cur.weights, next_id)
            next_id += 1
            steps += int(cur.steps)
        res = fit(new, rng, start)
        lev, weights, net_id = float(res.log_evidence), res.weights, next_id
        trained, steps = True, steps + int(res.steps)
    log_accept = log_ratio + lev - (0.0 if plant == 1 else state.log_evidence)
    if math.isnan(log_accept):
        log_accept = -math.inf
    accepted = bool(log_accept >= 0 or math.log(rng.random()) < log_accept)
    if accepted:
        state = ChainState(new, key, prior.log_prob(new), lev, weights, net_id)
    info = StepInfo(iteration, move, log_ratio, lev, log_accept, accepted, trained, steps,
                    time.perf_counter() - t0)
    return state, info


def sample(rng: np.random.Generator, state: ChainState, proposal, fit: FitFn, prior: ICP,
           iterations: int, refresh: bool = False, start: int = 0,
           next_id: int | None = None) -> Iterator[tuple[ChainState, StepInfo]]:
    """Generator of ``(state, info)`` after each MH step ``start + 1, ..., iterations``
    (the Metropolis-Hastings step of docs/derivations-cnn.md section 5).

    ``start`` and ``next_id`` continue a chain stopped after iteration
    ``start`` (a resume); by default ``next_id = state.net_id + 1``.
    """
    next_id = state.net_id + 1 if next_id is None else int(next_id)
    for it in range(int(start) + 1, int(iterations) + 1):
        state, info = mh_step(rng, state, proposal, fit, prior, it, next_id, refresh)
        next_id += 2  # at most two new networks per step (refreshed current, proposal)
        yield state, info


def _initial_graph(config: ChainConfig, rng) -> DAG:
    if config.init == "bare":
        return bare_graph(True)
    if config.init == "empty":
        return bare_graph(False)
    return config.icp().sample(rng, 2, observed_order=[1.0, 0.0])


def run_chain(chain: int, data: Dataset, config: ChainConfig, seed, evidence_seed=None,
              proposal=None, progress: Callable[[str], None] | None = None,
              checkpoint=None, should_stop: Callable[[], bool] | None = None) -> ChainResult:
    """Run one chain and collect its records (top-level API; runs in a worker): the
    architecture sampler of 002 section 4.2 (docs/derivations-cnn.md sections 5-7).

    Parameters
    ----------
    chain : int
        Chain index (stored in the records).
    data : Dataset
    config : ChainConfig
    seed : int or numpy.random.SeedSequence
        Seeds the chain's ``numpy.random.Generator`` (proposals, weights,
        minibatches, acceptance).
    evidence_seed : int or SeedSequence, optional
        Seeds the choice of the fixed evidence subset (shared by all chains).
    proposal : callable, optional
        Default :func:`chefs.cnn.proposals.default_proposal`.
    checkpoint : str or Path, optional
        Directory of this chain's progress (:class:`chefs.cnn.store.ChainCheckpoint`).
        If it holds a committed state, the chain continues from it (graph,
        weights, evidence, network ids, cost counters, records, and the
        generator state, so the continuation draws the same numbers as an
        uninterrupted run); otherwise it starts afresh. Progress is committed
        after every iteration. ``config.samples`` may exceed the stored run's:
        the chain then runs on to the new total.
    should_stop : callable, optional
        Checked after every iteration; True stops the chain (progress kept).
    """
    from .store import ChainCheckpoint
    from .train import Evaluator

    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    ev_rng = np.random.default_rng(evidence_seed if evidence_seed is not None else 0)
    prior = config.icp()
    ev = Evaluator(data, config.train, config.shape_rule(), evidence_rng=ev_rng)
    if proposal is None:
        if config.proposal == "rjmcmc":
            from ..mcmc.proposal import RJMCMCProposal

            proposal = RJMCMCProposal(prior)
        else:
            proposal = default_proposal(prior, config.toggle_weight)
    counters = {"steps": 0, "fits": 0, "warm": 0}

    def fit(dag, r, warm):
        res = ev.fit(dag, r, warm)
        counters["steps"] += res.steps
        counters["fits"] += 1
        counters["warm"] += int(res.warm)
        return res

    ck = ChainCheckpoint(checkpoint) if checkpoint is not None else None
    saved = ck.load() if ck is not None else None
    if saved is None:
        state = init_state(_initial_graph(config, rng), prior, fit, rng)
        start, next_id, wall_before = 0, state.net_id + 1, 0.0
        networks: dict = {}
        records: list = []
        infos: list = []
        if ck is not None:
            ck.commit(0, state, next_id, rng.bit_generator.state, counters, 0, 0, time.perf_counter() - t0)
    else:
        rng.bit_generator.state = saved["rng_state"]
        dag = DAG.from_dict(saved["dag"])
        state = ChainState(dag, network_key(dag), saved["log_prior"], saved["log_evidence"],
                           saved["weights"], int(saved["net_id"]))
        start, next_id, wall_before = int(saved["iteration"]), int(saved["next_id"]), saved["wall_seconds"]
        counters.update(saved["counters"])
        networks, records, infos = saved["networks"], saved["records"], saved["infos"]
        if start > config.burn_in + config.samples * config.thin:
            raise ValueError(f"chain {chain} has already run {start} iterations, more than the "
                             f"{config.burn_in + config.samples * config.thin} asked for")

    def record(it, st, info):
        if st.net_id not in networks:
            net = ev.build(st.dag, init=st.weights)
            networks[st.net_id] = {"weights": st.weights, "test_proba": ev.test_proba(net)}
            if ck is not None:
                ck.save_network(st.net_id, st.weights, networks[st.net_id]["test_proba"])
        proba = networks[st.net_id]["test_proba"]
        rec = st.dag.to_dict()
        rec.update({
            "chain": chain, "iteration": it, "net_id": st.net_id,
            "accuracy": float(np.mean(proba.argmax(1) == data.y_test)),
            "log_evidence": st.log_evidence, "log_prior": st.log_prior,
            "move": info.move if info else "init", "accepted": bool(info.accepted) if info else True,
        })
        rec.update(architecture_stats(st.dag))
        records.append(rec)
        if ck is not None:
            ck.append_record(rec)

    total = config.burn_in + config.samples * config.thin
    it = start
    for st, info in sample(rng, state, proposal, fit, prior, total, config.refresh, start, next_id):
        next_id += 2
        d = asdict(info)
        infos.append(d)
        if ck is not None:
            ck.append_info(d)
        it = info.iteration
        if it > config.burn_in and (it - config.burn_in) % config.thin == 0:
            record(it, st, info)
        if ck is not None:
            ck.commit(it, st, next_id, rng.bit_generator.state, counters, len(records), len(infos),
                      wall_before + time.perf_counter() - t0)
        if progress is not None:
            progress(f"chain {chain} it {it}/{total} {info.move} acc={info.accepted} "
                     f"logev={st.log_evidence:.1f} nodes={st.dag.num_nodes}")
        if config.max_seconds is not None and time.perf_counter() - t0 > config.max_seconds:
            break
        if should_stop is not None and should_stop():
            break
    return ChainResult(chain, records, networks, infos, rng.bit_generator.state,
                       wall_before + time.perf_counter() - t0, counters["steps"], counters["fits"],
                       counters["warm"])


def _ignore_sigint() -> None:
    """Process-pool initializer: Ctrl-C reaches the main process only."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _orphaned(ppid: int) -> Callable[[], bool]:
    """True once the process that started this worker is gone (killed): stop, progress is committed."""
    return lambda: os.getppid() != ppid


STOP_FILE = "STOP"  # in a run directory: chains on threads or a Dask cluster stop after their current iteration


def _worker(args):
    chain, data, config, seed, evidence_seed, checkpoint, parent, stop_file = args
    orphaned = _orphaned(parent) if parent is not None and parent != os.getpid() else None
    checks = [f for f in (orphaned, (lambda: os.path.exists(stop_file)) if stop_file else None) if f is not None]
    stop = (lambda: any(f() for f in checks)) if checks else None
    res = run_chain(chain, data, config, seed, evidence_seed, checkpoint=checkpoint, should_stop=stop)
    if orphaned is not None and orphaned():
        os._exit(1)  # nobody to send the result to (the pool's queues would block forever); progress is committed
    return res


def run_chains(data: Dataset, config: ChainConfig, chains: int, seed: int, executor: str = "process",
               workers: int | None = None, on_done: Callable[[ChainResult], None] | None = None,
               scheduler: str | None = None, run_dir=None) -> list:
    """Run ``chains`` independent chains, in parallel through ``concurrent.futures``
    (002 section 4.2 runs 15; seeds: docs/derivations-cnn.md section 9).

    Seeds: ``SeedSequence(seed).spawn(1 + chains)``; child 0 picks the fixed
    evidence subset (the same for every chain), child ``1 + c`` drives chain
    ``c``. ``executor`` is ``"process"`` (default; spawn start method, safe
    with torch and CUDA), ``"thread"`` or ``"serial"``. Results come back
    ordered by chain. ``scheduler`` (a Dask scheduler address) runs the chains
    on that cluster through the same executor interface (``make_executor`` of
    :mod:`chefs.mcmc.run`), whatever ``executor`` says.

    ``run_dir``: chain ``c`` checkpoints into ``run_dir/chains/c<c>`` after
    every iteration and continues from there if it holds progress (see
    :func:`run_chain`; a resume). With a Dask scheduler the directory must be
    on a file system the workers share. A worker process whose parent dies
    stops after its current iteration. On Ctrl-C worker processes are
    terminated; chains on threads or a Dask cluster stop after their current
    iteration (through a ``STOP`` file in ``run_dir``), and the call returns
    once they have.
    """
    if isinstance(chains, bool) or int(chains) != chains or chains < 1:
        raise ValueError(f"chains must be a positive integer, got {chains!r}")
    if executor not in ("process", "thread", "serial"):
        raise ValueError(f"executor must be 'process', 'thread' or 'serial', got {executor!r}")
    if workers is None:
        workers = min(int(chains), os.cpu_count() or 1)
    if int(workers) < 1:
        raise ValueError(f"workers must be a positive integer, got {workers}")
    ss = np.random.SeedSequence(int(seed))
    ev_seed, *chain_seeds = ss.spawn(1 + int(chains))
    ck = [None] * int(chains) if run_dir is None else \
        [str(Path(run_dir) / "chains" / f"c{c}") for c in range(int(chains))]
    parent = os.getpid() if executor == "process" and not scheduler else None
    stop_file = None if run_dir is None else str(Path(run_dir) / STOP_FILE)
    if stop_file is not None and os.path.exists(stop_file):
        os.remove(stop_file)  # left by an interrupted session whose chains have stopped
    jobs = [(c, data, config, chain_seeds[c], ev_seed, ck[c], parent, stop_file) for c in range(int(chains))]
    results = []
    if executor == "serial" and not scheduler:
        for job in jobs:
            r = _worker(job)
            if on_done:
                on_done(r)
            results.append(r)
    else:
        client = None
        if scheduler:
            from ..mcmc.run import make_executor

            pool, client = make_executor(int(workers), scheduler)
        elif executor == "process":
            import multiprocessing as mp

            # the workers ignore Ctrl-C: the main process stops them (below), so no worker prints a traceback
            pool: Executor = ProcessPoolExecutor(max_workers=int(workers), mp_context=mp.get_context("spawn"),
                                                 initializer=_ignore_sigint)
        else:
            pool = ThreadPoolExecutor(max_workers=int(workers))
        from concurrent.futures import as_completed

        futs: list = []
        try:
            futs = [pool.submit(_worker, job) for job in jobs]
            for f in as_completed(futs):
                r = f.result()
                if on_done:
                    on_done(r)
                results.append(r)
        except BaseException:
            # Ctrl-C or a failed chain. Worker processes are stopped now (every chain keeps its last completed
            # iteration on disk; its files are replaced atomically). Threads and Dask tasks cannot be killed:
            # with a run directory they find its STOP file after their current iteration and return, and we
            # wait for that (so no chain writes on after the command has exited); queued chains never start.
            for proc in list((getattr(pool, "_processes", None) or {}).values()):
                proc.terminate()
            if isinstance(pool, (ProcessPoolExecutor, ThreadPoolExecutor)):
                pool.shutdown(wait=False, cancel_futures=True)
            else:  # a Dask executor: cancels what has not started
                pool.shutdown(wait=False)
            if stop_file is not None and not isinstance(pool, ProcessPoolExecutor):
                Path(stop_file).touch()
                import concurrent.futures as cf

                cf.wait(futs)
                os.remove(stop_file)
            raise
        else:
            pool.shutdown(wait=True)
        finally:
            if client is not None:
                client.close()
    return sorted(results, key=lambda r: r.chain)
