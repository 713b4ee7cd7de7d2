"""Where does the blur come from? The ICP belief network on two-moons from its default start
against a chain started at a hand-built crisp state (issue 21; docs/derivations.md 3.9).

Both chains run the same exact sampler (every ICP move, hyperparameters sampled) on the same
training split (two-moons, split seed 0, 2,000 points, margin 0.3); only the start differs:

* default: ``BeliefNetwork(pilots=1, noncentred=False)``'s start (the default's until stop 49) (10 hidden units, projection activations,
  structure warm-up), as ``chefs fit`` runs it apart from the multi-start pilots;
* crisp: a network built by hand from the generator's own latent variables (which moon each
  point lies nearest to, and its angle along that moon): a switch root (activations +-(8 + |20 e|)),
  an angle root (logit of angle / pi), and ``--features`` precise step units
  ``y = 15 (u_angle - c) - 30 (switch off for this unit's moon)``, c evenly spaced along each moon,
  each a parent of both observed units, all parameters then drawn 30 times from their Gibbs
  conditionals. It uses knowledge no estimator has (the generator's latent variables): it is a
  diagnostic of the posterior and the sampler, not a start a user could get.

Every ``--every`` sweeps, each chain's current state is scored (one state, not a posterior
average): the Hellinger distance of 2,000 ancestral draws to the test split (the Table 1
rule), the importance-sampled log-likelihood of the training data (32 draws per point,
1,000 points, times N: a lower bound in expectation, looser for precise networks), and the
log prior density of the parameters (weights, biases, precisions under 002's priors). DP-GMM's
HD on the same split is printed for reference. Output: a table on stdout and a figure.

``--is-draws 512,8192`` adds, per state, the same log-likelihood with that many draws per
point (250 evenly spaced points, draws in blocks of 512, times N), the ICP log prior of the
structure at the chain's current alpha, gamma, phi, and the sum of the log-likelihood with
the most draws, the parameter log prior and the structure log prior: the log joint density
with the activations integrated out, where the two regions can be weighed (docs/derivations.md
3.9). Where the columns for two draw counts agree, the estimate has converged.

Usage: python benchmarks/crisp_start.py [--sweeps 3000] [--every 250] [--features 32]
                                        [--is-draws 512,8192] [--out docs/figures/crisp-start.png]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def latent_moons(train):
    """(switch in {0, 1}, angle / pi in [0, 1]) of the nearest point on either moon."""
    t = np.linspace(0, np.pi, 2001)
    d0 = ((train[:, None, :] - np.stack([np.cos(t), np.sin(t)], 1)[None]) ** 2).sum(-1)
    d1 = ((train[:, None, :] - np.stack([1 - np.cos(t), 0.5 - np.sin(t)], 1)[None]) ** 2).sum(-1)
    moon = (d1.min(1) < d0.min(1)).astype(float)
    return moon, np.where(moon == 1, t[d1.argmin(1)], t[d0.argmin(1)]) / np.pi


def crisp_chain(train01, train, features, seed):
    """(state, model, config) of the hand-built crisp start (module docstring)."""
    from scipy.special import expit, logit

    from chefs.graph import DAG
    from chefs.mcmc.chain import ChainConfig, init_state
    from chefs.models.nlgbn import NLGBN

    N, D = train01.shape
    moon, ang = latent_moons(train)
    rng = np.random.default_rng(seed)
    theta = np.array([0.0, 0.0, 0.9, 0.8] + list(np.linspace(0.3, 0.6, features)))
    edges = [(2, 0), (2, 1), (3, 0), (3, 1)]
    for k in range(features):
        edges += [(2, 4 + k), (3, 4 + k), (4 + k, 0), (4 + k, 1)]
    pa, ch = zip(*edges)
    obs = np.arange(theta.size) < D
    config = ChainConfig(D, 0.0, 1.0, 1.0, 1.0, sample_hyper=("alpha", "gamma", "phi"),
                         weights=(1.0, 1.0, 1.0, 1.0), structure_warmup=0)
    state = init_state(config, np.random.default_rng(seed + 1), DAG(theta, obs, pa, ch, fixed=obs))
    gs = state.graph

    def slot(th):  # the graph state orders its slots by order value
        return int(np.flatnonzero(np.isclose(gs.theta[: gs.capacity], th) & gs.alive)[0])

    model = NLGBN(train01, gs.capacity, np.random.default_rng(seed + 2), num_tries=4, init_activations="prior")
    model.init_from_state(gs, np.random.default_rng(seed + 3))
    sw, an = slot(0.9), slot(0.8)
    model.Y[sw] = np.where(moon == 1, 1.0, -1.0) * (8 + np.abs(20 * rng.normal(size=N)))
    model.Y[an] = logit(np.clip(ang, 0.005, 0.995)) + 0.05 * rng.normal(size=N)
    for i in (sw, an):
        model.U[i] = expit(model.Y[i])
    for k in range(features):
        m = slot(theta[4 + k])
        c = (k // 2 + 0.5) / (features // 2)
        shift = 30 * (model.U[sw] - 1) if k % 2 else -30 * model.U[sw]
        model.Y[m] = 15 * (model.U[an] - c) + shift + 0.05 * rng.normal(size=N)
        model.U[m] = expit(model.Y[m])
    for it in range(30):
        model.update_parameters(np.random.default_rng(seed + 100 + it), gs, model.rho_prior)
    return state, model, config


def score(rec, umap, train01, test, seed):
    """(HD of 2,000 ancestral draws to test, IS log-likelihood of the training data x N,
    parameter log prior, hidden units) of one state."""
    from scipy.stats import gamma

    from chefs.evaluation.hellinger import hellinger
    from chefs.models.predictive import ancestral, log_density_unit

    obs = np.asarray(rec["observed"])
    U = ancestral(rec, test.shape[0], np.random.default_rng(seed))[obs].T
    hd = hellinger(umap.inverse(U), test)
    idx = np.unique(np.linspace(0, train01.shape[0] - 1, 1000).astype(int))
    ll = float(np.mean(log_density_unit(rec, train01[idx], np.random.default_rng(seed + 1), 32))) * train01.shape[0]
    w, b, rho = (np.asarray(rec[k], float) for k in ("weights", "bias", "precision"))
    lpp = float(-0.5 * w @ w - 0.5 * b @ b - 0.5 * np.log(2 * np.pi) * (w.size + b.size)
                + gamma.logpdf(rho, 0.5, scale=2.0).sum())
    return hd, ll, lpp, int((~obs).sum())


def converged(rec, hyper, train01, draws, seed=5, points=250, block=512, chunk=50):
    """(IS log-likelihood of the training data x N for each count in ``draws``, ICP log
    prior of the structure at ``hyper``): the module docstring's ``--is-draws`` columns."""
    import math

    from scipy.special import logsumexp

    from chefs.graph import DAG
    from chefs.models.predictive import log_density_unit
    from chefs.priors.icp import ICP

    idx = np.unique(np.linspace(0, train01.shape[0] - 1, points).astype(int))
    U = train01[idx]
    lls = []
    for S in draws:
        per_point = []
        for c in range(0, U.shape[0], chunk):
            blocks = [log_density_unit(rec, U[c:c + chunk], np.random.default_rng([seed, S, c, k]), min(S, block))
                      for k in range(max(1, S // block))]
            per_point.append(logsumexp(np.array(blocks), axis=0) - math.log(len(blocks)))
        lls.append(float(np.mean(np.concatenate(per_point))) * train01.shape[0])
    prior = ICP(hyper["alpha"], hyper["gamma"], hyper["phi"]).log_prob(DAG.from_dict(rec))
    return lls, float(prior)


def main(sweeps: int, every: int, features: int, out: Path, draws=()) -> None:
    import json
    import sqlite3
    import tempfile

    from chefs.bench.table1 import fit_dpgmm
    from chefs.datasets import load_split
    from chefs.density import BeliefNetwork
    from chefs.evaluation.hellinger import hellinger
    from chefs.mcmc.chain import sample

    train, test = load_split("two-moons", seed=0)
    dp_fantasy, _ = fit_dpgmm(train, test, test.shape[0], np.random.default_rng(0))
    print(f"two-moons, split 0: baseline HD(train, test) {hellinger(train, test):.4f}, "
          f"DP-GMM {hellinger(dp_fantasy, test):.4f}", flush=True)
    rows = {"default": [], "crisp": []}
    extra = {"default": [], "crisp": []}  # --is-draws columns
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.process_time()
        net = BeliefNetwork(sweeps=sweeps, burn_in=0, thin=every, seed=0, pilots=1, out=Path(tmp) / "run",
                            progress=False, noncentred=False).fit(train)  # the chains of 3.9 (the default until stop 49)
        cpu = time.process_time() - t0
        train01 = np.load(net.run_dir_ / "train01.npy")
        con = sqlite3.connect(net.run_dir_ / "chain-0" / "samples.sqlite")
        for sw, g, *hyp in con.execute("select sweep, graph, alpha, gamma, phi from samples order by sweep"):
            r = json.loads(g)
            rows["default"].append((sw, *score(r, net.map_, train01, test, 11)))
            if draws:
                extra["default"].append(converged(r, dict(zip(("alpha", "gamma", "phi"), hyp)), train01, draws))
        con.close()
    print(f"default start: {sweeps} sweeps in about {cpu:.0f} CPU s (this process and its chain)", flush=True)
    state, model, config = crisp_chain(train01, train, features, 0)

    def rec():
        r = state.graph.to_dag().to_dict()
        r.update(model.snapshot(state.graph))
        return r

    def keep(sw):
        r = rec()
        rows["crisp"].append((sw, *score(r, net.map_, train01, test, 11)))
        if draws:
            extra["crisp"].append(converged(r, dict(state.hyper), train01, draws))

    keep(0)
    t0 = time.process_time()
    for st in sample(state, config, sweeps, model):
        if st.sweep % every == 0:
            keep(st.sweep)
    print(f"crisp start: {sweeps} sweeps in {time.process_time() - t0:.0f} CPU s", flush=True)
    cols = "".join(f" IS log-lik, {d} draws (x N) |" for d in draws)
    cols += " ICP log prior | log joint, activations integrated out |" if draws else ""
    print(f"\n| start | sweep | HD (one state) | IS log-lik of train (x N) | parameter log prior | hidden units |{cols}")
    print("|---|---|---|---|---|---|" + "---|" * (len(draws) + 2 if draws else 0))
    for name, rs in rows.items():
        for j, (sw, hd, ll, lpp, h) in enumerate(rs):
            more = ""
            if draws:
                lls, lps = extra[name][j]
                more = "".join(f" {v:.0f} |" for v in lls) + f" {lps:.0f} | {lls[-1] + lpp + lps:.0f} |"
            print(f"| {name} | {sw} | {hd:.4f} | {ll:.0f} | {lpp:.0f} | {h} |{more}")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    for name, rs in rows.items():
        a = np.array(rs, float)
        ax[0].plot(a[:, 0], a[:, 1], "o-", label=f"{name} start")
        if draws:  # the log joint with the most draws (module docstring)
            joint = [lls[-1] + r[3] + lps for r, (lls, lps) in zip(rs, extra[name])]
            ax[1].plot(a[:, 0], joint, "o-", label=f"{name} start")
        else:
            ax[1].plot(a[:, 0], a[:, 2] + a[:, 3], "o-", label=f"{name} start")
    ax[0].axhline(hellinger(dp_fantasy, test), color="k", ls="--", label="DP-GMM")
    ax[0].axhline(hellinger(train, test), color="0.6", ls=":", label="baseline (train vs test)")
    ax[0].set(xlabel="sweep", ylabel="Hellinger distance (one state)", title="two-moons, split 0")
    if draws:
        ax[1].set(xlabel="sweep", ylabel="log joint density (activations integrated out)",
                  title=f"IS log-lik ({draws[-1]} draws) + parameter and ICP log priors")
        top = max(lls[-1] + r[3] + lps for name in rows for r, (lls, lps) in zip(rows[name], extra[name]))
        ax[1].set_ylim(top - 2500, top + 200)  # the hand-built start itself sits tens of thousands of nats below
    else:
        ax[1].set(xlabel="sweep", ylabel="IS log-lik + parameter log prior",
                  title="activations integrated out (IS: a lower bound)")
    ax[0].legend()
    ax[1].legend()
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)
    print(f"figure: {out}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sweeps", type=int, default=3000)
    ap.add_argument("--every", type=int, default=250)
    ap.add_argument("--features", type=int, default=32)
    ap.add_argument("--is-draws", default="", help="comma-separated draw counts, e.g. 512,8192 (module docstring)")
    ap.add_argument("--out", type=Path, default=Path("docs/figures/crisp-start.png"))
    a = ap.parse_args()
    main(a.sweeps, a.every, a.features, a.out, tuple(int(d) for d in a.is_draws.split(",") if d.strip()))
