"""Warm-start saving of the CNN architecture chain (chefs.cnn).

For a few structure proposals from a trained current state, compare

* scratch: the proposal's network from a fresh initialisation, ``--steps`` Adam
  steps; its final evidence-set loss is the target;
* warm: the proposal's network started from the current state's weights for
  every edge it keeps (new edges started so as to keep its function), trained until
  its evidence-set loss reaches the same target (at most ``--steps`` steps).

The loss (mean cross-entropy on the fixed evidence set) is checked every
``--check-every`` steps; times count training steps only. Prints one row per
proposal and the medians; ``--json FILE`` also writes them.

    python benchmarks/cnn.py --data digits --proposals 7
    python benchmarks/cnn.py --data mnist123 --steps 540 --proposals 5
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np


def _loss_curve(ev, net, steps, rng, every, target=None):
    """Train ``net``; return (steps to reach target or None, training seconds, final loss, first loss)."""
    state = {"train_s": 0.0, "t": time.perf_counter(), "hit": None}
    first = ev.mean_loss(net)
    if target is not None and first <= target:
        return 0, 0.0, first, first

    def monitor(step, net):
        if step % every and step != steps:
            return False
        state["train_s"] += time.perf_counter() - state["t"]
        loss = ev.mean_loss(net)
        state["last"] = loss
        stop = target is not None and loss <= target
        if stop:
            state["hit"] = step
        state["t"] = time.perf_counter()
        return stop

    ev.train(net, steps, rng, monitor=monitor)
    return state["hit"], state["train_s"], state.get("last", first), first


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="digits")
    ap.add_argument("--steps", type=int, default=540, help="Adam steps from scratch (paper: 540)")
    ap.add_argument("--proposals", type=int, default=7, help="proposals that change the network")
    ap.add_argument("--check-every", type=int, default=10)
    ap.add_argument("--grow", type=int, default=4, help="random births/toggles applied to X->Y for the current state")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--new-edge-init", choices=("preserve", "random"), default="preserve")
    ap.add_argument("--tolerance", type=float, default=0.0,
                    help="warm counts as done at loss <= scratch's final loss + TOL (nats per image)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    import torch

    from chefs import ICP
    from chefs.cnn import ShapeRule, default_proposal, load_data, network_key
    from chefs.cnn.chain import bare_graph
    from chefs.cnn.proposals import NodeBirthDeath
    from chefs.cnn.train import Evaluator, TrainConfig

    torch.set_num_threads(1)
    rng = np.random.default_rng(args.seed)
    data = load_data(args.data, seed=args.seed)
    cfg = TrainConfig(steps=args.steps, warm_steps=args.steps, lr=args.lr, new_edge_init=args.new_edge_init)
    ev = Evaluator(data, cfg, ShapeRule())
    icp = ICP(1.0, 20.0, 5.0)
    # current state: a few unconditional births / toggles from X -> Y
    cur = NodeBirthDeath(icp).grow(rng, bare_graph(), args.grow)
    prop = default_proposal(icp)
    for _ in range(args.grow):
        new, lr = prop(rng, cur)
        if math.isfinite(lr) and network_key(new) != network_key(cur):
            cur = new
    t0 = time.perf_counter()
    cur_net = ev.build(cur, rng=rng)
    ev.train(cur_net, args.steps, rng)
    warm_w = cur_net.arrays()
    print(f"data {args.data}; current state: {cur.num_nodes} nodes, {cur.num_edges} edges, "
          f"loss {ev.mean_loss(cur_net):.2e}, trained {args.steps} steps in {time.perf_counter() - t0:.1f} s")
    rows = []
    tries = 0
    while len(rows) < args.proposals and tries < 50 * args.proposals:
        tries += 1
        new, lr = prop(rng, cur)
        if not math.isfinite(lr) or network_key(new) == network_key(cur):
            continue
        seed = int(rng.integers(2**31))
        scratch = ev.build(new, rng=np.random.default_rng(seed))
        _, s_sec, target, s_first = _loss_curve(ev, scratch, args.steps, np.random.default_rng(seed + 1),
                                                args.check_every)
        # scratch steps to reach its own final loss (first check at or below it)
        hit_s, hit_s_sec, _, _ = _loss_curve(ev, ev.build(new, rng=np.random.default_rng(seed)), args.steps,
                                             np.random.default_rng(seed + 1), args.check_every, target)
        warm = ev.build(new, rng=np.random.default_rng(seed), init=warm_w)
        hit_w, w_sec, w_final, w_first = _loss_curve(ev, warm, args.steps, np.random.default_rng(seed + 2),
                                                     args.check_every, target + args.tolerance)
        row = {
            "move": prop.last_name, "nodes": new.num_nodes, "edges": new.num_edges, "target_loss": target,
            "scratch_steps": hit_s if hit_s is not None else args.steps, "scratch_seconds": hit_s_sec,
            "warm_steps": hit_w if hit_w is not None else args.steps, "warm_reached": hit_w is not None,
            "warm_seconds": w_sec, "warm_initial_loss": w_first, "scratch_initial_loss": s_first,
        }
        rows.append(row)
        print(f"{row['move']:6s} nodes {row['nodes']:2d}  target loss {target:.2e}  scratch {row['scratch_steps']:4d} "
              f"steps {row['scratch_seconds']:.2f} s  warm {row['warm_steps']:4d} steps {row['warm_seconds']:.2f} s"
              f"{'' if row['warm_reached'] else ' (not reached)'}  warm initial loss {w_first:.2e}")
    if not rows:
        print("no proposal changed the network")
        return 1
    med = {k: float(np.median([r[k] for r in rows])) for k in
           ("scratch_steps", "warm_steps", "scratch_seconds", "warm_seconds")}
    ratio_steps = float(np.median([r["warm_steps"] / max(1, r["scratch_steps"]) for r in rows]))
    ratio_sec = float(np.median([r["warm_seconds"] / max(1e-9, r["scratch_seconds"]) for r in rows]))
    print(f"median over {len(rows)} proposals: scratch {med['scratch_steps']:.0f} steps / {med['scratch_seconds']:.2f} s,"
          f" warm {med['warm_steps']:.0f} steps / {med['warm_seconds']:.2f} s;"
          f" median warm/scratch ratio: steps {ratio_steps:.2f}, seconds {ratio_sec:.2f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"args": vars(args), "rows": rows, "median": med, "median_ratio_steps": ratio_steps,
                       "median_ratio_seconds": ratio_sec}, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
