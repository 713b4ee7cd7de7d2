"""CPU against GPU for the CNN architecture sampler's training and evidence (chefs.cnn).

For graphs grown from the bare X -> Y graph by random ICP births (``--hidden``
hidden nodes each), on one data set, prints per device:

* milliseconds per Adam step (batch ``--batch``, median of ``--repeats`` timed
  blocks of ``--steps`` steps after a warm-up block);
* milliseconds per evidence evaluation (``Evaluator.log_evidence`` on the whole
  evidence set);
* per graph, the relative difference of the log evidence between the CPU and
  each other device for the same weights, with TF32 (cuDNN convolutions and
  matrix products) on and off (``TrainConfig.tf32``). TF32 keeps 10 mantissa
  bits, so its differences can reach about 1e-3 relative (measured here: 1e-6
  to 3e-5); float32 agrees to about 1e-7.

    python benchmarks/cnn_device.py --data digits --devices cpu,cuda
    python benchmarks/cnn_device.py --data mnist123 --devices cpu,cuda --hidden 0,4,12 --json out.json

Ratios are measured in one run (medians); a GPU's first steps include cuDNN's
algorithm search, which the warm-up block absorbs.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def _sync(torch, device):
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="digits")
    ap.add_argument("--devices", default="cpu,cuda")
    ap.add_argument("--hidden", default="0,4,12", help="hidden nodes of the graphs timed (comma-separated)")
    ap.add_argument("--steps", type=int, default=20, help="Adam steps per timed block")
    ap.add_argument("--repeats", type=int, default=5, help="timed blocks (the median is printed)")
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    import torch

    from chefs import ICP
    from chefs.cnn import NodeBirthDeath, ShapeRule, load_data
    from chefs.cnn.chain import bare_graph
    from chefs.cnn.train import Evaluator, TrainConfig

    torch.set_num_threads(args.threads)
    # the CPU comes first: it is the reference for the evidence differences
    devices = ["cpu", *(d for d in args.devices.split(",") if d and d != "cpu")]
    data = load_data(args.data, seed=args.seed)
    icp = ICP(1.0, 20.0, 5.0)
    rows = []
    print(f"data {args.data}: {data.y_train.size} training images; torch {torch.__version__}; "
          f"CPU threads {args.threads}"
          + (f"; GPU {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ""))
    for h in (int(v) for v in args.hidden.split(",")):
        dag = NodeBirthDeath(icp).grow(np.random.default_rng(args.seed + h), bare_graph(), h)
        ref_net = None
        row = {"hidden": h, "nodes": dag.num_nodes, "edges": dag.num_edges}
        for dev in devices:
            for tf32 in ((False, True) if dev != "cpu" else (False,)):
                cfg = TrainConfig(batch_size=args.batch, device=dev, tf32=tf32, threads=0)
                ev = Evaluator(data, cfg, ShapeRule())
                if ref_net is None:
                    ref_net = ev.build(dag, rng=np.random.default_rng(args.seed))
                    ev.train(ref_net, args.steps, np.random.default_rng(args.seed))
                    ref_w = ref_net.arrays()
                    ref_lev = ev.log_evidence(ref_net)
                net = ev.build(dag, init=ref_w, rng=np.random.default_rng(args.seed))
                lev = ev.log_evidence(net)
                key = dev + ("+tf32" if tf32 else "")
                row[f"{key}_rel_diff"] = abs(lev - ref_lev) / abs(ref_lev)
                rng = np.random.default_rng(args.seed + 1)
                ev.train(net, args.steps, rng)  # warm-up: cuDNN autotuning, allocator
                step_ms, ev_ms = [], []
                for _ in range(args.repeats):
                    _sync(torch, dev)
                    t0 = time.perf_counter()
                    ev.train(net, args.steps, rng)
                    _sync(torch, dev)
                    step_ms.append(1e3 * (time.perf_counter() - t0) / args.steps)
                    t0 = time.perf_counter()
                    ev.log_evidence(net)
                    _sync(torch, dev)
                    ev_ms.append(1e3 * (time.perf_counter() - t0))
                row[f"{key}_step_ms"] = float(np.median(step_ms))
                row[f"{key}_evidence_ms"] = float(np.median(ev_ms))
        rows.append(row)
        line = f"hidden {h:2d} ({row['nodes']} nodes, {row['edges']} edges):"
        for k, v in row.items():
            if k.endswith("_step_ms"):
                dev = k[:-8]
                line += (f"  {dev} {v:.2f} ms/step, evidence {row[dev + '_evidence_ms']:.1f} ms"
                         + ("" if dev == "cpu" else f", rel diff {row[dev + '_rel_diff']:.1e}"))
        for k in list(row):
            if k.endswith("_step_ms") and k != "cpu_step_ms":
                line += f"  [cpu/{k[:-8]} step ratio {row['cpu_step_ms'] / row[k]:.1f}]"
        print(line)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"args": vars(args), "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
