"""Run directories: several chains, each with its sample store and checkpoint,
run in parallel through a ``concurrent.futures`` executor (local processes by
default, a Dask distributed cluster when given a scheduler address).

Layout::

    RUN/config.json            run settings + package versions
    RUN/chain-0/samples.sqlite kept graphs and scalar traces
    RUN/chain-0/checkpoint.json
    RUN/chain-0/done           present once the chain has finished
"""

from __future__ import annotations

import concurrent.futures as cf
import importlib.metadata
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from .chain import ChainConfig, ChainState, init_state, sample, scalars
from .store import SQLiteStore, atomic_write_json

CONFIG_FILE = "config.json"


def package_versions() -> dict:
    out = {"python": sys.version.split()[0], "platform": platform.platform()}
    for pkg in ("indian-chefs", "numpy", "scipy", "numba", "arviz", "networkx"):
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = None
    return out


STOP_FILE = "stop"  # RUN/stop: every running chain of the run checkpoints and returns (run_chains writes it)
STOP_LOOK_SECONDS = 1.0  # how often a running chain looks for it


#: builders of the likelihood models a run's spec may name, ``builder(spec, run_dir, state, structure_prior)``;
#: each model registers its own (:func:`register_model`; ``chefs.models`` registers ``"nlgbn"``), so the
#: chain driver knows no model class.
_MODEL_BUILDERS: dict = {}
#: the package whose import registers the models: a fresh process (a worker resuming a chain) imports it
#: the first time a spec names a model it has no builder for
MODELS_PACKAGE = "chefs.models"


def register_model(name: str, builder) -> None:
    """Make ``{"name": name, ...}`` model specs buildable: ``builder(spec, run_dir,
    state, structure_prior)`` returns the model of a chain (data paths in ``spec``
    are relative to ``run_dir``)."""
    _MODEL_BUILDERS[str(name)] = builder


def make_model(spec: dict | None, run_dir=None, state=None):
    """Build a model from its JSON spec: ``{"name": "null"}`` or
    ``{"name": "nlgbn", "data": "train01.npy", "num_tries": 8, ...}`` (paths
    relative to the run directory; data already mapped into (0, 1)), by the
    builder registered under its name (:func:`register_model`)."""
    if spec is None or spec.get("name", "null") == "null":
        return None
    name = spec["name"]
    if name not in _MODEL_BUILDERS:
        importlib.import_module(MODELS_PACKAGE)  # registers the package's models
    if name not in _MODEL_BUILDERS:
        raise ValueError(f"unknown model {name!r} (known: null, {', '.join(sorted(_MODEL_BUILDERS))})")
    return _MODEL_BUILDERS[name](spec, run_dir, state, make_structure_prior(spec.get("structure_prior")))


def make_structure_prior(spec: dict | None):
    """None for the ICP, or a CIBP / ECIBP prior object from its JSON spec."""
    if spec is None or spec.get("name", "icp") == "icp":
        return None
    kw = {k: v for k, v in spec.items() if k != "name"}
    if spec["name"] == "cibp":
        from ..priors.cibp import CIBP

        return CIBP(**kw)
    if spec["name"] == "ecibp":
        from ..priors.ecibp import ECIBP

        return ECIBP(**kw)
    raise ValueError(f"unknown structure prior {spec['name']!r} (icp, cibp, ecibp)")


#: the most chains one run holds (each has its own directory, checkpoint and sample store, and the chains' seeds
#: are spawned up front): a typo such as --chains 100000000 is refused instead of hanging
MAX_CHAINS = 1024


def check_run_settings(sweeps, burn_in, thin, chains, seed, checkpoint_every=5.0) -> None:
    """The run's sizes and seed, as :func:`create_run` needs them: a one-line ``ValueError`` otherwise."""
    for name, v, lo in (("sweeps", sweeps, 1), ("thin", thin, 1), ("chains", chains, 1), ("burn_in", burn_in, 0),
                        ("seed", seed, 0)):
        if int(v) != v or v < lo:
            raise ValueError(f"{name} must be an integer >= {lo}, got {v}")
    if chains > MAX_CHAINS:
        raise ValueError(f"{chains} chains is more than a run holds (at most {MAX_CHAINS}: one directory, checkpoint "
                         "and sample store each)")
    if burn_in >= sweeps:
        raise ValueError(f"burn-in ({burn_in}) must be smaller than the number of sweeps ({sweeps})")
    if sweeps - burn_in < thin:
        raise ValueError(f"no sample would be kept: thin ({thin}) is larger than sweeps - burn-in "
                         f"({sweeps} - {burn_in}); lower --thin or --burn-in, or raise --sweeps")
    if not checkpoint_every > 0:
        raise ValueError("checkpoint interval must be positive (seconds)")


def create_run(out, config: ChainConfig, sweeps: int, burn_in: int = 0, thin: int = 1, chains: int = 1,
               seed: int = 0, checkpoint_every: float = 5.0, model: dict | None = None, force: bool = False,
               initial_graph=None, initial_graphs=None, pilot_graphs=None, write_files=None) -> Path:
    """Create a run directory (refuses to overwrite an existing one unless ``force``).

    ``initial_graph``: one starting structure shared by every chain (None: the observed
    nodes alone). ``initial_graphs``: one per chain instead (a list of ``chains`` DAGs;
    docs/derivations.md 3.8: causal discovery starts each chain at its own start).
    ``pilot_graphs``: per chain, the starting structures of its pilots after the first
    (a list of ``chains`` lists of DAGs; pilot 0 starts where the chain would; without
    it every pilot starts there, as runs before stop 50 did; docs/derivations.md 3.28).
    ``write_files``: None, or a callable given the new directory that writes the files the model reads (its data)
    before ``config.json``, the file that makes the directory a run: a process killed in between leaves a folder
    that ``chefs resume`` names as no run, never a run without its data."""
    check_run_settings(sweeps, burn_in, thin, chains, seed, checkpoint_every)
    if pilot_graphs is not None:
        wanted = int((model or {}).get("pilots", 1)) - 1
        if len(pilot_graphs) != int(chains) or any(len(gs) != wanted for gs in pilot_graphs):
            raise ValueError(f"pilot_graphs needs, per chain ({chains}), one graph for each pilot after the first "
                             f"({wanted}), got {[len(gs) for gs in pilot_graphs]}")
    if initial_graphs is not None:
        if initial_graph is not None:
            raise ValueError("give either initial_graph (shared) or initial_graphs (one per chain), not both")
        if len(initial_graphs) != int(chains):
            raise ValueError(f"initial_graphs needs one graph per chain ({chains}), got {len(initial_graphs)}")
    out = Path(out)
    from ..runkind import refuse_file_as_dir

    refuse_file_as_dir(out)
    if out.exists() and any(out.iterdir()):
        if not force:
            raise FileExistsError(f"{out} exists and is not empty; use --force to overwrite it or `chefs resume {out}`")
        from ..runkind import check_replaceable

        check_replaceable(out)  # only a run directory, never a project folder or the current directory
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    spec = {
        "kind": "icp-mcmc",
        "config": config.to_dict(),
        "sweeps": int(sweeps),
        "burn_in": int(burn_in),
        "thin": int(thin),
        "chains": int(chains),
        "seed": int(seed),
        "checkpoint_every": float(checkpoint_every),
        "model": model or {"name": "null"},
        "initial_graph": None if initial_graph is None else initial_graph.to_dict(),
        **({} if initial_graphs is None else {"initial_graphs": [g.to_dict() for g in initial_graphs]}),
        **({} if pilot_graphs is None else {"pilot_graphs": [[g.to_dict() for g in gs] for gs in pilot_graphs]}),
        "versions": package_versions(),
    }
    if write_files is not None:
        write_files(out)
    atomic_write_json(out / CONFIG_FILE, spec)
    return out


def load_spec(run_dir) -> dict:
    from ..runkind import other_run_message

    wrong = other_run_message(run_dir, "chefs fit or chefs prior mcmc")
    if wrong:  # a cnn or outtree run
        raise ValueError(wrong)
    path = Path(run_dir) / CONFIG_FILE
    if not path.exists():
        raise FileNotFoundError(f"{run_dir} is not a run directory (no {CONFIG_FILE})")
    try:
        with open(path, encoding="utf-8") as fh:
            spec = json.load(fh)
    except ValueError as err:  # invalid JSON or text
        raise ValueError(f"{path} is damaged (not valid JSON: {err}); the run cannot be read") from None
    missing = [k for k in SPEC_KEYS if not isinstance(spec, dict) or k not in spec]
    if missing:
        raise ValueError(f"{path} is damaged or not a run's config (missing {', '.join(missing)}); "
                         "the run cannot be read")
    return spec


#: what every run's config.json holds (:func:`create_run`)
SPEC_KEYS = ("kind", "config", "sweeps", "burn_in", "thin", "chains", "seed", "model")


def chain_seed(seed: int, chains: int, index: int) -> np.random.Generator:
    """Independent streams: SeedSequence(seed).spawn(chains)[index]."""
    return np.random.default_rng(np.random.SeedSequence(int(seed)).spawn(int(chains))[int(index)])


def is_kept(sweep: int, burn_in: int, thin: int) -> bool:
    return sweep > burn_in and (sweep - burn_in) % thin == 0


LOCK_FILE = "lock"  # RUN/chain-C/lock: held (flock) by the one process that runs chain C


class _ChainLock:
    """An exclusive lock on a chain's directory for as long as a process runs the chain, so that a second
    process (a ``chefs resume`` typed while a Dask chain has not yet seen the stop file, a second client) cannot
    write into it too: it gets a one-line error instead. ``flock`` locks die with their process, so a killed
    chain leaves no stale lock. Where ``fcntl`` does not exist (Windows) there is no lock."""

    def __init__(self, cdir: Path, index: int):
        self.path, self.index, self.fh = cdir / LOCK_FILE, index, None

    def __enter__(self):
        try:
            import fcntl
        except ImportError:  # not POSIX
            return self
        self.fh = open(self.path, "a")
        try:
            fcntl.flock(self.fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.fh.close()
            self.fh = None
            raise ValueError(f"chain {self.index} of {self.path.parent.parent} is running in another process "
                             f"(it holds {self.path}); let it stop (it checkpoints when it sees RUN/{STOP_FILE}) "
                             "and resume after that") from None
        return self

    def __exit__(self, *exc):
        if self.fh is not None:
            self.fh.close()  # closing the file releases the lock
        return False


def run_chain(run_dir, index: int, stop_after: int | None = None, progress=None) -> dict:
    """Run (or resume) chain ``index`` of a run directory to completion.

    ``stop_after`` stops after that many sweeps in this call (tests of resume).
    ``progress`` is an optional callable(sweep, state) called after each sweep.
    A file ``RUN/stop`` (``STOP_FILE``, written by :func:`run_chains` when its client is
    interrupted while chains run on Dask workers, or by a user) makes the chain
    checkpoint and return within about ``STOP_LOOK_SECONDS``, unfinished: ``chefs
    resume`` (which removes the file) continues it.
    Returns a small summary dict (sweeps done, samples stored, acceptance, stopped).
    """
    run_dir = Path(run_dir)
    spec = load_spec(run_dir)
    config = ChainConfig.from_dict(spec["config"])
    cdir = run_dir / f"chain-{index}"
    cdir.mkdir(exist_ok=True)
    with _ChainLock(cdir, index):  # one process per chain (a second one: a one-line error)
        return _run_chain(run_dir, index, spec, config, cdir, stop_after, progress)


def _run_chain(run_dir, index, spec, config, cdir, stop_after, progress) -> dict:
    """:func:`run_chain`'s work, with the chain's lock held."""
    store = SQLiteStore(cdir / "samples.sqlite")
    ckpt = cdir / "checkpoint.json"
    if ckpt.exists():
        with open(ckpt, encoding="utf-8") as fh:
            rec = json.load(fh)
        state = ChainState.from_record(rec)
        model = make_model(spec.get("model"), run_dir, state)
        if rec.get("model_file"):
            model.load_arrays(cdir / rec["model_file"])
        store.truncate_after(state.sweep)
    else:
        rng = chain_seed(spec["seed"], spec["chains"], index)
        state, model = _fresh_chain(spec, config, run_dir, rng, index)
        pilots = int((spec.get("model") or {}).get("pilots", 1))
        if pilots > 1:
            report = _PilotReport(cdir, progress, run_dir / STOP_FILE, pilot_sweeps_total(spec))
            try:
                state, model = _best_pilot(spec, config, run_dir, rng, pilots, state, model, report, index=index,
                                           record=cdir / PILOT_SCORES_FILE)
            except _Stopped:  # asked to stop during the pilots: nothing to checkpoint yet (they run again)
                store.close()
                return {"chain": index, "sweep": 0, "started_at": 0, "samples": 0, "stopped": True,
                        "acceptance": [], "proposals": []}
            finally:
                report.close()
        store.truncate_after(0)
        _checkpoint(cdir, ckpt, state, model)
    if hasattr(progress, "bind_model"):  # the chain's own bar reads the model's acceptance counters
        progress.bind_model(model)
    started_at = state.sweep  # > 0: resumed from a checkpoint (chefs resume, or a Dask task run again)
    remaining = spec["sweeps"] - state.sweep
    if stop_after is not None:
        remaining = min(remaining, int(stop_after))
    every = float(spec.get("checkpoint_every", 5.0))
    last = last_look = time.monotonic()
    stop_file = run_dir / STOP_FILE
    stopped = False
    try:
        for st in sample(state, config, remaining, model):
            if is_kept(st.sweep, spec["burn_in"], spec["thin"]):
                rec = st.graph.to_dag().to_dict()
                if model is not None and hasattr(model, "snapshot"):
                    rec.update(model.snapshot(st.graph))
                store.add(st.sweep, json.dumps(rec, separators=(",", ":")), scalars(st, model))
            if progress is not None:
                progress(st.sweep, st)
            now = time.monotonic()
            if now - last >= every:
                store.flush()                                   # data first
                _checkpoint(cdir, ckpt, state, model)           # counter last
                last = now
            if now - last_look >= STOP_LOOK_SECONDS:  # the client asked the chains to stop (Ctrl-C on a cluster)
                last_look = now
                if stop_file.exists():
                    stopped = True
                    break
        store.flush()
        _checkpoint(cdir, ckpt, state, model)
        if state.sweep >= spec["sweeps"]:
            (cdir / "done").write_text("ok\n")
        stats = model.stats if model is not None and hasattr(model, "stats") else state.stats
        return {"chain": index, "sweep": state.sweep, "started_at": started_at, "samples": store.count(),
                "stopped": stopped,
                "acceptance": (stats[:, 1] / np.maximum(stats[:, 0], 1)).tolist(),
                "proposals": stats[:, 0].astype(int).tolist()}  # 0: the move never ran (acceptance n/a)
    finally:
        store.close()


def _fresh_chain(spec: dict, config: ChainConfig, run_dir, rng, index: int, pilot: int = 0):
    """A chain's start: chain ``index``'s own initial graph when the run has one per chain
    (``initial_graphs``), else the run's shared one (or the observed nodes alone), and the
    model's start values, all drawn from ``rng``. ``pilot`` > 0 with ``pilot_graphs`` in the
    run: that pilot's own starting structure instead."""
    from ..graph import DAG

    if pilot and spec.get("pilot_graphs"):
        init = DAG.from_dict(spec["pilot_graphs"][index][pilot - 1])
    elif spec.get("initial_graphs"):
        init = DAG.from_dict(spec["initial_graphs"][index])
    else:
        init = DAG.from_dict(spec["initial_graph"]) if spec.get("initial_graph") else None
    sp = make_structure_prior((spec.get("model") or {}).get("structure_prior"))
    if sp is not None:  # layered priors: hidden units of a layer share their order value
        g0 = init if init is not None else DAG(np.zeros(config.num_observed), np.ones(config.num_observed, bool),
                                               fixed=np.ones(config.num_observed, bool))
        state = ChainState(sp.state_from_dag(g0), {"alpha": config.alpha, "gamma": config.gamma,
                                                    "phi": config.phi}, rng)
    else:
        state = init_state(config, rng, init)
    model = make_model(spec.get("model"), run_dir, state)
    if model is not None and hasattr(model, "init_from_state"):
        model.init_from_state(state.graph, state.rng)
    return state, model


class _Stopped(Exception):
    """The stop file appeared while a chain ran its pilots."""


PILOTS_FILE = "pilots.json"  # a chain's progress through its pilots (read by the progress bar of other processes)
#: each pilot's score and hidden units, and which one the chain continues (written once the pilots end)
PILOT_SCORES_FILE = "pilot_scores.json"


def pilot_sweeps_total(spec: dict) -> int:
    """Sweeps a chain spends in its pilots before sweep 0 (0 without pilots)."""
    m = spec.get("model") or {}
    pilots = int(m.get("pilots", 1))
    return pilots * int(m.get("pilot_sweeps", 0)) if pilots > 1 else 0


class _PilotReport:
    """After every pilot sweep: the in-process progress (``progress.pilots(done, total)``
    when the callable has it, as the chain's own bar does), ``chain-C/pilots.json``
    (``{"done": n}``, at most once per ``STOP_LOOK_SECONDS``) for a bar in another
    process, and a look for the stop file (raises ``_Stopped``)."""

    def __init__(self, cdir: Path, progress, stop_file: Path, total: int):
        self.path = cdir / PILOTS_FILE
        self.total = total
        self.pilots = getattr(progress, "pilots", None)
        self.stop_file = stop_file
        self.last = time.monotonic()
        self.done = 0

    def __call__(self) -> None:
        self.done += 1
        if self.pilots is not None:
            self.pilots(self.done, self.total)
        now = time.monotonic()
        if now - self.last >= STOP_LOOK_SECONDS or self.done == self.total:
            self.last = now
            atomic_write_json(self.path, {"done": self.done, "total": self.total})
            if self.stop_file.exists():
                raise _Stopped

    def close(self) -> None:
        self.path.unlink(missing_ok=True)


def _best_pilot(spec: dict, config: ChainConfig, run_dir, rng, pilots: int, state, model, report=None, *,
                index: int, record: Path | None = None):
    """Multi-start (a start-up heuristic, before any sample is kept; docs/derivations.md
    section 3.7): ``pilots`` short chains from fresh starts, ``pilot_sweeps`` sweeps each
    (structure warm-up included), all on the chain's own random stream; the one whose
    end state gives the training data the highest importance-sampled log-likelihood
    (``model.score_state`` with ``pilot_draws`` draws per point; 32 in runs written
    before the setting existed) becomes the chain's start at sweep 0. Runs before the
    first checkpoint, so an interrupted chain repeats it exactly. ``record``: a JSON file
    that receives every pilot's score (mean log-likelihood per scored training point; null
    where not finite) and hidden units, the draws, and the index of the pilot continued
    (``RUN/chain-C/pilot_scores.json``), so that a poor start can be told from a later
    collapse."""
    sweeps = int(spec["model"].get("pilot_sweeps", 0))
    draws = int(spec["model"].get("pilot_draws", 32))
    best = None
    scores, hidden = [], []
    for p in range(pilots):
        if p:
            state, model = _fresh_chain(spec, config, run_dir, rng, index, pilot=p)
        for _ in sample(state, config, sweeps, model):
            if report is not None:
                report()
        score = model.score_state(state.graph, rng, num_is=draws)
        score = score if np.isfinite(score) else -np.inf
        scores.append(float(score) if np.isfinite(score) else None)
        hidden.append(int(state.graph.num_hidden()))
        if best is None or score > best[0]:
            best = (score, state, model, p)
    _, state, model, chosen = best
    if record is not None:
        atomic_write_json(record, {"draws": draws, "pilot_sweeps": sweeps, "scores": scores, "hidden_units": hidden,
                                   "chosen": chosen})
    state.sweep = 0
    state.stats[:] = 0
    model.restart()
    return state, model


def _checkpoint(cdir: Path, ckpt: Path, state, model) -> None:
    """Model arrays (if any) to model-SWEEP.npz, then the JSON checkpoint that
    names it (renamed into place last), then older array files are removed."""
    rec = state.to_record()
    if model is not None and hasattr(model, "save_arrays"):
        name = f"model-{state.sweep}.npz"
        model.save_arrays(cdir / name)
        rec["model_file"] = name
    atomic_write_json(ckpt, rec)
    if rec.get("model_file"):
        for old in cdir.glob("model-*.npz"):
            if old.name != rec["model_file"]:
                old.unlink(missing_ok=True)


def _progress_enabled(progress) -> bool:
    if progress is not None:
        return bool(progress)
    return sys.stderr.isatty() and not os.environ.get("CI")


def make_executor(workers: int, scheduler: str | None = None):
    """A ``concurrent.futures`` executor and its Dask client (or None): a Dask
    cluster's (:class:`chefs.cluster.ClusterExecutor`, the scheduler reached and its
    workers checked), else ``workers`` local processes; None for one worker or in a
    daemonic process (a Dask worker's), which cannot start processes: the chains then
    run one after the other."""
    if scheduler:
        from ..cluster import ClusterExecutor, connect

        client, facts = connect(scheduler)
        return ClusterExecutor(client, facts), client
    import multiprocessing as mp

    if workers <= 1 or mp.current_process().daemon:
        return None, None

    from .._threads import limit_threads, share_cores

    return cf.ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"),
                                  initializer=limit_threads, initargs=(share_cores(workers),)), None


def run_chains(run_dir, executor=None, scheduler: str | None = None, progress=None, workers: int | None = None) -> list:
    """Run (or resume) every unfinished chain of a run directory.

    ``progress``: None (a bar when standard error is a terminal), a bool, or a
    callable ``(sweep, state)`` called after every sweep of every chain, as in
    :func:`run_chain`; with a callable the chains run one after the other in this
    process (``benchmarks/convergence.py`` times sweeps with it)."""
    run_dir = Path(run_dir).absolute()  # the same path on a Dask worker, whatever its working directory
    spec = load_spec(run_dir)
    todo = [c for c in range(spec["chains"]) if not (run_dir / f"chain-{c}" / "done").exists()]
    for c in todo:  # a chain still running elsewhere: refuse before the stop file it is waiting for is removed
        if (run_dir / f"chain-{c}").is_dir():
            with _ChainLock(run_dir / f"chain-{c}", c):
                pass
    results = []
    own = None
    client = None
    callback = progress if callable(progress) else None
    if callback is not None and (executor is not None or scheduler):
        raise ValueError("a progress callable needs the chains to run in this process: give no executor or scheduler")
    if executor is None:
        n = 1 if callback is not None else workers or min(len(todo), os.cpu_count() or 1)
        executor, client = make_executor(n, scheduler)
        own = executor
    show = callback is None and _progress_enabled(progress)
    stop_file = run_dir / STOP_FILE
    if todo and stop_file.exists():  # left by an interrupted run: this one continues it
        stop_file.unlink()
    try:
        from ..cluster import ClusterExecutor, check_shared_dir

        if todo and isinstance(executor, ClusterExecutor):  # the chains write into the run directory
            check_shared_dir(executor.client, run_dir, "the chains write their checkpoints and samples there")
        if executor is None:
            for c in todo:
                bar = _bar(spec, c) if show else None
                results.append(run_chain(run_dir, c, progress=callback or (
                    _bar_callback(bar, pilot_sweeps_total(spec)) if bar else None)))
                if bar:
                    bar.close()
        else:
            futures = {executor.submit(run_chain, str(run_dir), c): c for c in todo}
            bar = _poll_bar(spec, run_dir, todo) if show else None
            pending = set(futures)
            try:
                while pending:
                    done, pending = cf.wait(pending, timeout=1.0)
                    for f in done:
                        results.append(f.result())
                    if bar is not None:
                        bar.refresh_from(run_dir)
            except BaseException:
                # Ctrl-C or a failed chain: a chain running on a Dask worker is not interrupted with this
                # process (it is not in its process group), so it is asked to stop through the run
                # directory; it checkpoints and returns within about STOP_LOOK_SECONDS (local process
                # pools get the SIGINT themselves, and their executor's shutdown waits for them)
                if isinstance(executor, ClusterExecutor) and pending:
                    stop_file.write_text("stop: the client stopped waiting (interrupted, or a chain failed); "
                                         "`chefs resume` continues the run\n")
                raise
            if bar is not None:
                bar.close()
    finally:
        if own is not None and hasattr(own, "shutdown"):
            own.shutdown(wait=client is None)  # Dask (after a failure or Ctrl-C): cancel the chains not started
        if client is not None:
            client.close()
    return sorted(results, key=lambda r: r["chain"])


def _bar(spec, c):
    from tqdm.auto import tqdm

    return tqdm(total=spec["sweeps"] + pilot_sweeps_total(spec), desc=f"chain {c}", unit="sweep")


def _bar_callback(bar, offset: int = 0):
    """Progress callable of a chain's own bar; ``offset``: the pilots' sweeps, which come first."""
    from .chain import kern

    source = {"model": None}

    def cb(sweep, state):
        bar.n = offset + sweep
        model = source["model"]  # a model's chain counts its moves in the model (the prior's own in the state)
        st = model.stats if model is not None and hasattr(model, "stats") else state.stats
        acc = {kern.MOVE_NAMES[j]: f"{st[j, 1] / max(st[j, 0], 1):.2f}" for j in range(4)}
        bar.set_postfix(K=state.graph.num_nodes, **acc, refresh=False)
        bar.refresh()

    def pilots(done, total):
        if done == 1 or done == total or done % 10 == 0:
            bar.n = done
            bar.set_postfix_str(f"pilots {done}/{total}", refresh=False)
            bar.refresh()

    cb.pilots = pilots
    cb.bind_model = lambda model: source.__setitem__("model", model)
    return cb


class _poll_bar:
    """Progress of chains running in other processes, read from their checkpoints."""

    def __init__(self, spec, run_dir, chains):
        from tqdm.auto import tqdm

        self.chains = chains
        self.pilot_total = pilot_sweeps_total(spec)  # counted in the bar: a long pilot phase shows progress too
        self.bar = tqdm(total=(spec["sweeps"] + self.pilot_total) * len(chains), desc=f"{len(chains)} chains",
                        unit="sweep")

    def refresh_from(self, run_dir):
        total = 0
        for c in self.chains:
            cdir = Path(run_dir) / f"chain-{c}"
            try:
                with open(cdir / "checkpoint.json", encoding="utf-8") as fh:
                    total += json.load(fh)["sweep"] + self.pilot_total  # the pilots come before the first checkpoint
                continue
            except (OSError, ValueError, KeyError):
                pass
            try:
                with open(cdir / PILOTS_FILE, encoding="utf-8") as fh:
                    total += int(json.load(fh)["done"])
            except (OSError, ValueError, KeyError):
                pass
        self.bar.n = total
        self.bar.refresh()

    def close(self):
        self.bar.close()
