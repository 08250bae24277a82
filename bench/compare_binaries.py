#!/usr/bin/env python3
"""Interleaved runs of lmtrain_workloads variants (two builds, or one build with other flags).

Each variant is "label=BINARY [flags]"; for every seed the variants run one after another
(A B A B …), so that a change in the machine's load reaches all of them alike.  Prints one line per
run and then, per variant, the median time per LM step (lmtrain_workloads' median of steps 2.. of
each epoch), its min–max, the final training loss (median and worst) and the invalid attempts, and
each variant's median step time over the first variant's.  Use one thread for timings that compare
(OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 are set unless --threads says otherwise).

usage: bench/compare_binaries.py W1 --epochs 50 --seeds 1-10 \\
           "main=/path/to/main/lmtrain_workloads" "new=build/release/bench/lmtrain_workloads"
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
from pathlib import Path


def seeds(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def run(command: list[str], env: dict[str, str]) -> dict:
    out = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    results = [json.loads(line) for line in out.stdout.splitlines()
               if line.startswith("{") and '"type":"result"' in line.replace(" ", "")]
    if out.returncode != 0 or not results:
        raise SystemExit(f"{' '.join(command)} failed (exit {out.returncode}):\n{out.stderr[-2000:]}")
    return results[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload")
    parser.add_argument("variants", nargs="+", help='"label=BINARY [flags]"')
    parser.add_argument("--epochs", default="")
    parser.add_argument("--seeds", type=seeds, default=seeds("1-5"))
    parser.add_argument("--threads", default="1")
    args = parser.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS=args.threads, OPENBLAS_NUM_THREADS=args.threads)
    variants = [(label, cmd.split()) for label, _, cmd in (v.partition("=") for v in args.variants)]
    print(f"load before: {Path('/proc/loadavg').read_text().strip()}; threads {args.threads}")
    rows: dict[str, list[dict]] = {label: [] for label, _ in variants}
    for seed in args.seeds:
        for label, (binary, *flags) in variants:
            command = [binary, args.workload, *flags, "--seed", str(seed), "--no-roofline"]
            if args.epochs:
                command += ["--epochs", args.epochs]
            r = run(command, env)
            rows[label].append(r)
            print(f"{label} seed {seed}: {1e3 * r['median_step_s']:.3f} ms/step, final loss "
                  f"{r['final_train_loss']:.3e}, invalid {r['invalid']}, {r['precision']}",
                  flush=True)
    print(f"load after: {Path('/proc/loadavg').read_text().strip()}")
    print()
    print("| variant | ms per step (median) | min–max | final loss (median) | worst | invalid "
          "(median) | step time / first |")
    print("|---|---|---|---|---|---|---|")
    first = None
    for label, runs in rows.items():
        step = [1e3 * r["median_step_s"] for r in runs]
        loss = [r["final_train_loss"] for r in runs]
        median = statistics.median(step)
        first = first or median
        print(f"| {label} | {median:.3f} | {min(step):.3f}–{max(step):.3f} | "
              f"{statistics.median(loss):.3g} | {max(loss):.3g} | "
              f"{statistics.median(r['invalid'] for r in runs)} | {median / first:.3f} |")


if __name__ == "__main__":
    main()
