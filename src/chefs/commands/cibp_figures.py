"""``chefs prior cibp-figures``: drawings of the CIBP (003 Figures 2 and 3) and the ECIBP.

Registered after ``prior`` (``chefs.commands.MODULES``): the sub-command hangs
under the ``prior`` parser of ``commands/prior.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ._util import actions_of, nonneg_int, positive_int

FIG3_SETTINGS = [(0.5, 1.0), (1.0, 1.0), (1.0, 2.0), (1.5, 0.5)]


def register(sub) -> None:
    ps = actions_of(sub, "prior")
    f = ps.add_parser("cibp-figures",
                      help="003 Figure 3 (CIBP samples for four (alpha, beta)), the same for the ECIBP, and "
                           "Figure 2 (layer-width Markov chain)")
    f.add_argument("--out", required=True, help="output directory for the PNGs")
    f.add_argument("--num-observed", type=positive_int, default=5, help="visible units of the drawn samples")
    f.add_argument("--samples", type=positive_int, default=3, help="samples drawn per (alpha, beta) setting")
    f.add_argument("--max-units", type=positive_int, default=40,
                   help="redraw samples with more units than this (to keep drawings legible)")
    f.add_argument("--num", type=positive_int, default=4000,
                   help="forward draws for the Monte Carlo check of E[K(m+1) | K(m)]")
    f.add_argument("--seed", type=nonneg_int, default=0)
    f.set_defaults(func=cmd_cibp_figures)


def _samples_figure(prior_cls, name, args, rng, path) -> None:
    from ..graph import DAG
    from ..plots import _mpl, draw_dag

    plt = _mpl()
    S = args.samples
    fig, axes = plt.subplots(len(FIG3_SETTINGS), S, figsize=(4.2 * S, 4.2 * len(FIG3_SETTINGS)), squeeze=False)
    for r, (a, b) in enumerate(FIG3_SETTINGS):
        prior = prior_cls(a, b, alpha_bounds=(0.05, 2.0), beta_bounds=(0.05, 2.0))
        for c in range(S):
            for _ in range(1000):
                try:
                    g = prior.sample(rng, args.num_observed, max_nodes=args.max_units + args.num_observed)
                except ValueError:  # too big or too deep for a drawing: draw again
                    continue
                if g.num_nodes <= args.max_units:
                    break
            else:  # never a silent drawing of a sample larger than asked for
                raise ValueError(f"no {name} draw with at most --max-units {args.max_units} units (visible ones "
                                 f"included) in 1,000 tries at alpha={a}, beta={b}; raise --max-units")
            # drawn with evenly spaced layers (y = layer / depth) instead of theta = 1 - 2^-l
            lay = prior.layers(g)
            shown = DAG(lay / max(1, int(lay.max())), g.observed, g.parents, g.children, validate=False)
            draw_dag(shown, axes[r, c], title=f"{name} α={a}, β={b}: {g.num_hidden} hidden, depth {g.depth()}",
                     node_size=60)
            axes[r, c].set_ylabel("layer / depth")
            axes[r, c].title.set_fontsize(9)
    fig.suptitle(f"Samples from the {name} prior, {args.num_observed} visible units "
                 f"(drawn one row per layer; draws with more than {args.max_units} units redrawn)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _width_chain_figure(args, rng, path) -> None:
    from ..plots import _mpl
    from ..priors.cibp import CIBP, expected_next_width

    plt = _mpl()
    alpha, beta = 3.0, 1.0  # the values of 003 Figure 2
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    for t in range(3):
        K = [args.num_observed]
        while K[-1] > 0 and len(K) < 200:
            K.append(int(rng.poisson(expected_next_width(K[-1], alpha, beta))))
        axes[0].plot(range(len(K)), K, marker=".", label=f"trace {t + 1}")
    axes[0].set(xlabel="depth m", ylabel="width K(m)", title=f"(a) traces of the width chain, α={alpha}, β={beta}")
    axes[0].legend()
    k = np.arange(0, 21)
    lam = expected_next_width(k, alpha, beta)
    axes[1].plot(k, lam, color="tab:blue", label="E[K(m+1) | K(m)] = λ(K(m); α, β)")
    axes[1].plot(k, k, color="tab:green", label="Lyapunov function L(k) = k")
    # Monte Carlo check: the CIBP's own restaurant (one layer of a forward draw) for K(m) customers
    xs, means, ses = [], [], []
    for v in range(1, 21):
        sel = np.array([len(CIBP._restaurant(rng, list(range(v)), v, alpha, beta)) for _ in range(max(10, args.num // 20))])
        xs.append(v)
        means.append(sel.mean())
        ses.append(sel.std(ddof=1) / np.sqrt(sel.size))
    axes[1].errorbar(xs, means, yerr=2 * np.asarray(ses), fmt="o", color="k", ms=3,
                     label="CIBP restaurant draws (mean ± 2 SE)")
    axes[1].set(xlabel="K(m)", ylabel="K(m+1)", title="(b) expected next width")
    axes[1].legend(fontsize=8)
    axes[2].plot(k, lam - k, color="tab:red")
    axes[2].axhline(0, color="0.5", lw=0.8)
    axes[2].set(xlabel="K(m)", ylabel="drift E[L(K(m+1))] - L(K(m))", title="(c) drift (negative past K = 8)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def cmd_cibp_figures(args) -> int:
    from ..priors.cibp import CIBP
    from ..priors.ecibp import ECIBP

    out = Path(args.out)
    if args.max_units < args.num_observed:  # every draw holds the visible units: none could be drawn
        raise ValueError(f"--max-units ({args.max_units}) is below --num-observed ({args.num_observed}): every "
                         "sample has the visible units")
    from ..runkind import refuse_file_as_dir

    refuse_file_as_dir(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    paths = [out / "cibp_fig3_samples.png", out / "ecibp_samples.png", out / "cibp_fig2_width_chain.png"]
    _samples_figure(CIBP, "CIBP", args, rng, paths[0])
    _samples_figure(ECIBP, "ECIBP", args, rng, paths[1])
    _width_chain_figure(args, rng, paths[2])
    for p in paths:
        print(f"wrote {p}")
    return 0
