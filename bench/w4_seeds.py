#!/usr/bin/env python3
"""W4 accuracy over many seeds, one configuration per argument: the study behind the damping and
loss choices for classification (bench/README.md, "W4: classification losses").

    python3 bench/w4_seeds.py --seeds 20 -- "" "--damping multiplicative" "--loss cross_entropy_sampled"
    python3 bench/w4_seeds.py --seeds 20 --peer        # torch-levenberg-marquardt, same seeds

(`--` ends this script's options, so that a configuration may itself start with "--".)

Each configuration is a string of extra `lmtrain_workloads W4` flags ("" = lmtrain's defaults on
cross_entropy_sqrt, the W4 driver's default loss); every run is 5 epochs of 3 batches of 2 000
images (15 steps) with --seed 1…N.  Prints, per configuration, the median test accuracy with its
range, the median final training loss, the rejected attempts summed over the seeds, the median
of the runs' median step time (meaningful only on a quiet machine: the runs are sequential, not
interleaved with a peer) and every seed's accuracy.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def result_line(command: list[str]) -> dict:
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            if record.get("type") == "result":
                return record
    raise RuntimeError(f"no result line from {' '.join(command)}")


def summarize(name: str, runs: list[dict]) -> str:
    acc = [100 * r["test_accuracy"] for r in runs]
    loss = [r["final_train_loss"] for r in runs]
    step = [1000 * r["median_step_s"] for r in runs]
    rejected = sum(r.get("rejected", 0) for r in runs)
    return (f"| {name} | {statistics.median(acc):.2f} % ({min(acc):.1f}–{max(acc):.1f}) | "
            f"{statistics.median(loss):.4f} | {rejected} | {statistics.median(step):.1f} ms | "
            f"{', '.join(f'{a:.1f}' for a in acc)} |")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("configs", nargs="*", help="extra lmtrain_workloads W4 flags per configuration")
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--binary", default=str(ROOT / "build/release/bench/lmtrain_workloads"))
    p.add_argument("--peer", action="store_true", help="also run torch-levenberg-marquardt")
    p.add_argument("--python", default=str(ROOT / "bench/peers/.venv/bin/python"))
    args = p.parse_args()
    print("| configuration | test accuracy, median (range) | final training loss | rejected "
          "| step | per seed |")
    print("|---|---|---|---|---|---|")
    seeds = range(1, args.seeds + 1)
    for config in args.configs:
        runs = [result_line([args.binary, "W4", "--epochs", str(args.epochs), "--seed", str(s),
                             "--no-roofline", *config.split()]) for s in seeds]
        print(summarize(f"lmtrain {config}".strip() if config else "lmtrain (defaults)", runs),
              flush=True)
    if args.peer:
        runs = [result_line([args.python, str(ROOT / "bench/peers/torch_lm.py"), "W4", "--epochs",
                             str(args.epochs), "--seed", str(s), "--repeats", "1"])
                for s in seeds]
        print(summarize("torch-levenberg-marquardt", runs), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
