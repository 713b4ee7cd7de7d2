"""``chefs prior ...``: draws, densities, the hyperparameter study and drawings."""

from __future__ import annotations

import csv
import math
import sys
from pathlib import Path

import numpy as np

from ._util import nonneg_int, observed_order_arg, positive_float, positive_int, refuse_existing


def _add_prior_flags(p, prior_help: str, max_layers_help: str) -> None:
    """--prior and its hyperparameters, shared by ``prior sample`` and ``prior logprob``."""
    p.add_argument("--prior", default="icp", choices=["icp", "cibp", "ecibp"], help=prior_help)
    p.add_argument("--alpha", type=positive_float, default=1.0,
                   help="icp: concentration; cibp/ecibp: IBP mass of every layer (default 1)")
    p.add_argument("--gamma", type=positive_float, default=None, help="icp only (default 1)")
    p.add_argument("--phi", type=positive_float, default=None, help="icp only (default 1)")
    p.add_argument("--beta", type=positive_float, default=None,
                   help="cibp/ecibp only: IBP concentration of every layer (default 1)")
    p.add_argument("--max-layers", type=positive_int, default=None,
                   help=f"cibp/ecibp only: {max_layers_help} (default 50, at most 50)")


def _prior_from_args(args, icp_only: list[str]):
    """The prior ``--prior`` names, refusing the other priors' flags. ``icp_only``:
    the command's own ICP-only flags that were given."""
    from ..priors import ICP

    if args.prior == "icp":
        if args.beta is not None or args.max_layers is not None:
            raise ValueError("--beta and --max-layers belong to --prior cibp/ecibp; the ICP has alpha, gamma, phi")
        return ICP(args.alpha, 1.0 if args.gamma is None else args.gamma, 1.0 if args.phi is None else args.phi)
    given = [flag for flag, v in (("--gamma", args.gamma), ("--phi", args.phi)) if v is not None] + icp_only
    if given:
        raise ValueError(f"{', '.join(given)} belong(s) to --prior icp; --prior {args.prior} takes --alpha, --beta "
                         "and --max-layers (observed units sit at theta = 0)")
    if args.prior == "cibp":
        from ..priors.cibp import CIBP as Prior
    else:
        from ..priors.ecibp import ECIBP as Prior
    alpha = args.alpha
    beta = 1.0 if args.beta is None else args.beta
    hi_a, hi_b = max(2.0, alpha), max(2.0, beta)  # top-hat bounds wide enough for the given values
    return Prior(alpha, beta, alpha_bounds=(min(0.05, alpha / 2), hi_a), beta_bounds=(min(0.05, beta / 2), hi_b),
                 max_layers=50 if args.max_layers is None else args.max_layers)


def register(sub) -> None:
    from ..priors.study import MAX_ROUNDS, TARGET_Z, TOLERANCE

    p = sub.add_parser("prior", help="draw from the ICP prior, evaluate its density, study it")
    ps = p.add_subparsers(dest="prior_command", metavar="ACTION")

    s = ps.add_parser("sample", help="draw graphs from the prior into a .jsonl file")
    _add_prior_flags(s, "icp (default), cibp (cascading IBP, 003) or ecibp (extended CIBP, docs/derivations-cibp.md)",
                     "give up on draws deeper than this")
    s.add_argument("--num-observed", type=positive_int, required=True)
    s.add_argument("--observed-order", type=observed_order_arg, default=None,
                   help="fix the observed orders: one value in [0, 1] for all, or one per node (comma-separated; "
                        "'free' leaves that node's order free); icp only (default: all free)")
    s.add_argument("--num", type=positive_int, default=1)
    s.add_argument("--seed", type=nonneg_int, default=0)
    s.add_argument("--method", choices=["chefs", "finite"], default="chefs")
    s.add_argument("--finite-K", type=positive_int, default=None,
                   help="--method finite only: total nodes K of the finite model")
    s.add_argument("--hidden-at-one", action="store_true", help="IBP special case: hidden nodes at theta = 1")
    s.add_argument("--out", required=True, help="output .jsonl file")
    s.add_argument("--force", action="store_true", help="overwrite an existing output file")
    s.set_defaults(func=cmd_sample)

    lp = ps.add_parser("logprob", help="print one log-density per graph of a .jsonl file")
    lp.add_argument("file")
    _add_prior_flags(lp, "icp (default: eq. 9, or eq. 8 with --finite-K); cibp/ecibp: the probability of the "
                         "unlabelled layered network (docs/derivations-cibp.md)",
                     "deeper graphs get log-density -inf")
    lp.add_argument("--finite-K", type=positive_int, default=None, help="icp only: total nodes K of eq. 8")
    lp.set_defaults(func=cmd_logprob)

    st = ps.add_parser("study", help="Figure 3 of 002: E[K+], E[E+] over (alpha, gamma); hidden count vs D")
    st.add_argument("--out", required=True, help="output directory (CSV + PNG)")
    st.add_argument("--num", type=positive_int, default=400, help="draws per grid point")
    st.add_argument("--seed", type=nonneg_int, default=0)
    st.set_defaults(func=cmd_study)

    ca = ps.add_parser("calibrate", help="the gamma giving a desired E[K+] for alpha and D",
                       description="The gamma giving a desired E[K+] for alpha and D: Monte Carlo root finding by "
                       f"reweighting draws, repeated until gamma moves by less than {TOLERANCE:.0%} between rounds "
                       f"(at most {MAX_ROUNDS} rounds; an error if the last round's root lay beyond the gamma its "
                       "draws can reach). The achieved E[K+] is checked with --num fresh draws and reported with its "
                       "standard error and its distance to the target in SE; exit status 1 when that is more than "
                       f"{TARGET_Z:g} SE.")
    ca.add_argument("--expected-nodes", type=positive_float, required=True)
    ca.add_argument("--alpha", type=positive_float, default=1.0)
    ca.add_argument("--num-observed", type=positive_int, default=1)
    ca.add_argument("--observed-order", type=observed_order_arg, default=0.0,
                    help="observed orders in [0, 1]: one for all or one per node, 'free' for a free one "
                         "(default all at 0, as in Figure 3)")
    ca.add_argument("--num", type=positive_int, default=4000, help="Monte Carlo draws per round")
    ca.add_argument("--seed", type=nonneg_int, default=0)
    ca.set_defaults(func=cmd_calibrate)

    dr = ps.add_parser("draw", help="picture of one DAG of a .jsonl file")
    dr.add_argument("file")
    dr.add_argument("--index", type=nonneg_int, default=0)
    dr.add_argument("--out", required=True, help="output picture, rewritten in place (.png unless another extension "
                                                 "is given; a name without one gets .png)")
    dr.set_defaults(func=cmd_draw)

    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def cmd_sample(args) -> int:
    from ..graph import write_jsonl

    refuse_existing(args.out, args.force)
    icp_only = [flag for flag, given in (("--observed-order", args.observed_order is not None),
                                         ("--finite-K", args.finite_K is not None),
                                         ("--hidden-at-one", args.hidden_at_one),
                                         ("--method", args.method != "chefs")) if given]
    prior = _prior_from_args(args, icp_only)
    if args.finite_K is not None and args.method != "finite":
        raise ValueError("--finite-K belongs to --method finite; --method chefs draws the infinite model")
    rng = np.random.default_rng(args.seed)
    if args.prior == "icp":
        graphs = (prior.sample(rng, args.num_observed, observed_order=args.observed_order, method=args.method,
                               finite_K=args.finite_K, hidden_order=1.0 if args.hidden_at_one else None)
                  for _ in range(args.num))
    else:  # forward draws of the cascading IBP or its extension
        graphs = (prior.sample(rng, args.num_observed) for _ in range(args.num))
    n = write_jsonl(graphs, args.out)
    print(f"wrote {n} graph(s) to {args.out}")
    return 0


def cmd_logprob(args) -> int:
    from ..graph import read_jsonl

    prior = _prior_from_args(args, ["--finite-K"] if args.finite_K is not None else [])
    if args.prior == "icp":
        def score(g):
            return prior.log_prob(g, finite_K=args.finite_K)
    else:
        from ..priors._cibp_common import theta_layer

        def score(g):  # a graph that is no layered network at all is an error, one too deep has probability 0
            if g.num_nodes and theta_layer(g.theta).max() > prior.max_layers:
                return -math.inf
            return prior.log_prob(g)
    n = 0
    for g in read_jsonl(args.file):
        print(repr(score(g)))
        n += 1
    if n == 0:
        raise ValueError(f"{args.file} holds no graphs")
    return 0


def cmd_draw(args) -> int:
    from ..graph import read_jsonl
    from ..plots import save_dag_png

    for i, g in enumerate(read_jsonl(args.file)):
        if i == args.index:
            print(f"wrote {save_dag_png(g, args.out)}")  # save_dag_png adds .png where needed and returns the path
            return 0
    raise ValueError(f"{args.file} has fewer than {args.index + 1} graphs")


def cmd_study(args) -> int:
    from ..plots import _mpl
    from ..priors.study import expectations

    from ..runkind import refuse_file_as_dir

    out = Path(args.out)
    refuse_file_as_dir(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    alphas = [0.25, 0.5, 1.0, 2.0, 4.0]
    gammas = [0.25, 0.5, 1.0, 2.0, 3.0]
    rows = []
    for a in alphas:
        for g in gammas:
            e = expectations(a, g, 1, args.num, rng)
            rows.append({"study": "grid", "alpha": a, "gamma": g, "num_observed": 1, **e})
    for a in [0.5, 1.0, 2.0, 4.0]:
        for D in [1, 2, 4, 8, 16, 32]:
            e = expectations(a, 1.0, D, max(50, args.num // 2), rng)
            rows.append({"study": "observed", "alpha": a, "gamma": 1.0, "num_observed": D, **e})
    path = out / "prior_study.csv"
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    plt = _mpl()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    grid = [r for r in rows if r["study"] == "grid"]
    Kmat = np.array([[r["K"] for r in grid if r["alpha"] == a] for a in alphas])
    cs = axes[0].contourf(gammas, alphas, Kmat, levels=12, cmap="viridis")
    fig.colorbar(cs, ax=axes[0])
    axes[0].set(xlabel="γ", ylabel="α", title="E[K+ | α, γ] (one observed node at θ=0)")
    for a in alphas:
        sel = [r for r in grid if r["alpha"] == a]
        axes[1].errorbar([r["K"] for r in sel], [r["E"] for r in sel], yerr=[2 * r["E_se"] for r in sel],
                         marker="o", label=f"α={a}")
    axes[1].set(xlabel="E[K+]", ylabel="E[E+]", title="edges against nodes")
    axes[1].legend()
    for a in [0.5, 1.0, 2.0, 4.0]:
        sel = [r for r in rows if r["study"] == "observed" and r["alpha"] == a]
        axes[2].errorbar([r["num_observed"] for r in sel], [r["H"] for r in sel],
                         yerr=[2 * r["H_se"] for r in sel], marker="o", label=f"α={a}")
    axes[2].set(xlabel="number of observed nodes D", ylabel="E[hidden]", xscale="log",
                title="hidden nodes against D (γ=1, observed at θ=0)")
    axes[2].legend()
    fig.tight_layout()
    fig.savefig(out / "prior_study.png", dpi=110)
    plt.close(fig)
    print(f"wrote {path} and {out / 'prior_study.png'}")
    return 0


def cmd_calibrate(args) -> int:
    from ..priors.study import TARGET_Z, TOLERANCE, calibrate_gamma

    rng = np.random.default_rng(args.seed)
    res = calibrate_gamma(args.expected_nodes, args.alpha, args.num_observed, rng, num=args.num,
                          observed_order=args.observed_order)
    z = res["z"]
    within = abs(z) <= TARGET_Z
    print(f"gamma = {res['gamma']:.6g}  (E[K+] = {res['expected_nodes']:.4g} ± {res['expected_nodes_se']:.2g}"
          f" from {args.num} fresh draws; alpha = {args.alpha}, D = {args.num_observed}; target "
          f"{args.expected_nodes:g} is {abs(z):.1f} SE away (fresh draws' and solver's errors combined), "
          f"{'within' if within else 'NOT within'} {TARGET_Z:g} SE)")
    if not res["converged"]:
        print(f"chefs: note: gamma still moved by {res['last_move']:.1%} in the last of {res['rounds']} rounds "
              f"(more than the {TOLERANCE:.0%} tolerance: Monte Carlo noise; a larger --num steadies it)",
              file=sys.stderr)
    if not within:
        print(f"chefs: error: the achieved E[K+] misses the target {args.expected_nodes:g} by more than {TARGET_Z:g} SE; "
              "a larger --num gives a finer solution", file=sys.stderr)
        return 1
    return 0
