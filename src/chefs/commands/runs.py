"""``chefs prior mcmc``, ``chefs resume``, ``chefs summary``, ``chefs export``."""

from __future__ import annotations

import json
from pathlib import Path

from ._util import (actions_of, nonneg_int, note_if_incomplete, observed_order_arg, positive_float, positive_int,
                    print_chain_comparison, refuse_existing)


def register(sub) -> None:
    # ``prior mcmc`` hangs under the ``prior`` parser created by commands/prior.py (registered first)
    ps = actions_of(sub, "prior")
    m = ps.add_parser("mcmc", help="reversible-jump MCMC on the ICP prior (no data)")
    m.add_argument("--num-observed", type=positive_int, required=True)
    m.add_argument("--observed-order", type=observed_order_arg, default=None,
                   help="fix the observed orders: one value in [0, 1] for all, or one per node (comma-separated; "
                        "'free' leaves that node's order free) (default: all free)")
    m.add_argument("--alpha", type=positive_float, default=1.0)
    m.add_argument("--gamma", type=positive_float, default=1.0)
    m.add_argument("--phi", type=positive_float, default=1.0)
    m.add_argument("--sample-hyper", action="store_true",
                   help="sample alpha, gamma, phi under their Gamma(0.5, 0.5) priors (1/alpha for alpha)")
    m.add_argument("--sweeps", type=positive_int, default=1000)
    m.add_argument("--burn-in", type=nonneg_int, default=0)
    m.add_argument("--thin", type=positive_int, default=1)
    m.add_argument("--chains", type=positive_int, default=1)
    m.add_argument("--seed", type=nonneg_int, default=0)
    m.add_argument("--checkpoint-every", type=positive_float, default=5.0, help="seconds between checkpoints")
    m.add_argument("--scheduler", default=None, help="Dask scheduler address (default: local processes)")
    m.add_argument("--no-progress", action="store_true")
    m.add_argument("--force", action="store_true", help="overwrite an existing run directory")
    m.add_argument("--out", required=True, help="run directory")
    m.set_defaults(func=cmd_prior_mcmc)


    r = sub.add_parser("resume", help="continue an interrupted run where its checkpoints left off")
    r.add_argument("run")
    r.add_argument("--scheduler", default=None, metavar="ADDR",
                   help="Dask scheduler address: run the unfinished chains on that cluster (the run directory on a "
                        "file system the workers share)")
    r.add_argument("--no-progress", action="store_true")
    r.set_defaults(func=cmd_resume)

    s = sub.add_parser("summary", help="R-hat, ESS and posterior structure summaries of a run")
    s.add_argument("run")
    s.add_argument("--plot", action="store_true", help="also write RUN/traces.png")
    s.set_defaults(func=cmd_summary)

    e = sub.add_parser("export", help="kept graphs of a run as JSONL or GraphML")
    e.add_argument("run")
    e.add_argument("--format", choices=["jsonl", "graphml"], default="jsonl")
    e.add_argument("--out", required=True, help="output file")
    e.add_argument("--force", action="store_true", help="overwrite an existing output file")
    e.set_defaults(func=cmd_export)


def _finish(run_dir, args) -> None:
    from ..mcmc.diagnostics import summary_table, write_netcdf

    path = write_netcdf(run_dir)
    print(f"traces: {path}")
    print(summary_table(run_dir).to_string())


def cmd_prior_mcmc(args) -> int:
    from ..mcmc.chain import ChainConfig
    from ..mcmc.run import create_run, make_executor, run_chains

    config = ChainConfig(args.num_observed, args.observed_order, args.alpha, args.gamma, args.phi,
                         sample_hyper=("alpha", "gamma", "phi") if args.sample_hyper else ())
    # reach the scheduler before creating the run: an unreachable one leaves no run that needs --force
    executor, client = make_executor(args.chains, args.scheduler) if args.scheduler else (None, None)
    try:
        run_dir = create_run(args.out, config, args.sweeps, args.burn_in, args.thin, args.chains, args.seed,
                             args.checkpoint_every, force=args.force)
        res = run_chains(run_dir, executor=executor, progress=False if args.no_progress else None)
    finally:
        if client is not None:
            client.close()
    for r in res:
        acc = ", ".join(f"{n}={a:.3f}" if k else f"{n}=n/a" for n, a, k in
                        zip(("edge", "birth_death", "order", "depth"), r["acceptance"], r["proposals"]))
        print(f"chain {r['chain']}: {r['sweep']} sweeps, {r['samples']} samples, acceptance {acc}")
    _finish(run_dir, args)
    return 0


def cmd_resume(args) -> int:
    from ..mcmc.run import load_spec, run_chains

    load_spec(args.run)
    res = run_chains(args.run, scheduler=args.scheduler, progress=False if args.no_progress else None)
    if res:
        print(f"resumed {len(res)} chain(s) of {args.run}")
    else:  # a complete run: nothing sampled; its derived files are rewritten (the repair after a crash in them)
        print(f"{args.run} is complete: every chain had finished, nothing was sampled; its summaries are rewritten "
              "from the kept samples")
    _finish(args.run, args)
    from ..causal import is_causal_run

    if is_causal_run(args.run):  # a `chefs discover` run: its summaries are rewritten from all kept samples
        from ..causal import CausalDiscovery
        from .discover import report

        report(CausalDiscovery.load(args.run), args.run)
    return 0


def _observed_names(run, D: int) -> list[str] | None:
    """The observed units' names, where they are the data's columns: a causal run's variables, or a
    density run's column names when its unit map keeps the columns (no principal axes); else None."""
    from ..causal import COLUMNS_FILE

    run = Path(run)
    try:
        causal = run / COLUMNS_FILE
        if causal.exists():
            names = json.loads(causal.read_text()).get("names")
        else:
            unitmap = run / "unitmap.json"
            if not unitmap.exists() or "rotation" in json.loads(unitmap.read_text()):
                return None
            names = json.loads((run / "columns.json").read_text()) if (run / "columns.json").exists() else None
    except (OSError, ValueError, AttributeError):
        return None
    return [str(n) for n in names] if isinstance(names, list) and len(names) == D else None


def cmd_summary(args) -> int:
    from ..mcmc.diagnostics import structure_summary, summary_table, trace_plot
    from ..mcmc.run import load_spec

    table = summary_table(args.run)
    note_if_incomplete(args.run)
    print(table.to_string())
    if load_spec(args.run)["chains"] < 2:
        print("(r_hat needs at least two chains: run with --chains 2 or more)")
    else:
        print_chain_comparison(args.run)
    s = structure_summary(args.run)
    print(f"\n{s['num_samples']} kept graphs")
    for key in ("num_nodes", "num_hidden", "depth"):
        post = s["posterior"][key]
        print(f"posterior of {key}: " + ", ".join(f"{v}: {p:.3f}" for v, p in list(post.items())[:12]))
    D = len(s["edge_inclusion_observed"])
    if D:
        names = _observed_names(args.run, D)
        width = max(4, *(len(n) for n in names)) if names else 4
        print("edge inclusion between observed nodes (row = parent" + (", named by the data's columns):" if names
                                                                        else "):"))
        if names:
            print("  " + " " * width + " " + " ".join(f"{n[:width]:>{width}}" for n in names))
        for d, row in enumerate(s["edge_inclusion_observed"]):
            lead = f"{names[d][:width]:>{width}} " if names else ""
            print("  " + lead + " ".join(f"{x:>{width}.2f}" if names else f"{x:.2f}" for x in row))
    out = Path(args.run) / "representative.json"
    out.write_text(json.dumps(s["representative"]) + "\n")
    print(f"representative graph (highest log joint {s['representative_log_joint']:.3f}): {out}")
    if args.plot:
        print(f"trace plot: {trace_plot(args.run)}")
    return 0


def cmd_export(args) -> int:
    from ..mcmc.diagnostics import kept_graphs

    out = Path(args.out)
    if out.is_dir():
        raise IsADirectoryError(f"{out} is a directory; --out takes a file name (e.g. {out / ('graphs.' + args.format)})")
    refuse_existing(out, args.force, run=args.run)
    graphs = list(kept_graphs(args.run))  # read (and validate the run) before touching the output
    if not graphs:
        raise ValueError(f"{args.run} has no kept samples yet (nothing to export)")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    if args.format == "jsonl":
        tmp.write_text("".join(g.to_json() + "\n" for g in graphs), encoding="utf-8")
    else:
        import networkx as nx

        big = nx.DiGraph()
        for j, g in enumerate(graphs):
            G = g.to_networkx()
            big.update(nx.relabel_nodes(G, {k: f"g{j}_n{k}" for k in G.nodes}))
            for k in G.nodes:
                big.nodes[f"g{j}_n{k}"]["graph"] = j
        nx.write_graphml(big, str(tmp))
    tmp.replace(out)  # a failure above leaves any earlier file untouched
    print(f"exported {len(graphs)} graph(s) to {out}")
    return 0
