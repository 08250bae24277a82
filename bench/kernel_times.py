#!/usr/bin/env python3
"""Each kernel's GPU time per LM step, from Nsight Compute's CSV (scripts/gpu-run.sh's profile stage).

    python3 bench/kernel_times.py --steps 5 profile-W2.csv [profile-W2-graphs.csv …] > profile.md

Each CSV is what `ncu --profile-from-start off --metrics gpu__time_duration.sum --csv
lmtrain_workloads … --profile-steps A:B > FILE 2>&1` wrote: one row per kernel launched while
lmtrain_workloads had the profiler collecting (steps A … B, `--steps` = B − A + 1 of them),
among the program's own output lines.
Nsight Compute runs the kernels one at a time, so their sum is the step's kernel time without
the gaps between launches: set beside the step's wall time (the bench and peers stages, without
the profiler), it says how much of a phase is the kernels and how much is launching and waiting
(issue 36: W2's factorization, 479 µs on the H200 of 2026-11-28, either way).

Prints, per file: the kernel time and launches per step, then the kernels by time, the largest
first, with launches and µs per step and µs per launch.  Lines that are not rows of ncu's CSV
(its ==PROF== lines, the program's output, before the header or among the rows) are skipped; a
file without rows says so.
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import sys
from collections import defaultdict
from pathlib import Path

UNITS = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3,
         "second": 1e6, "s": 1e6}


def short_name(name: str, width: int = 90) -> str:
    """A kernel's name without its parameter list and namespaces, at most `width` characters."""
    name = name.replace("(anonymous namespace)::", "")
    name = re.sub(r"^void ", "", name)
    depth = 0
    for i, ch in enumerate(name):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            name = name[:i]
            break
    name = re.sub(r"\b[a-z_]+::", "", name)
    return name if len(name) <= width else name[: width - 1] + "…"


def kernel_times(text: str) -> dict[str, list[float]]:
    """Kernel name → the µs of each launch, from ncu's CSV (rows of other metrics ignored)."""
    start = next((i for i, line in enumerate(text.splitlines()) if line.startswith('"ID"')), None)
    if start is None:
        return {}
    lines = [line for line in text.splitlines()[start:] if line.startswith('"')]
    rows = csv.DictReader(io.StringIO("\n".join(lines)))
    times: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        unit = UNITS.get((row.get("Metric Unit") or "").strip())
        value = (row.get("Metric Value") or "").replace(",", "").strip()
        if unit is None or not value:
            raise ValueError(f"unexpected time {value!r} {row.get('Metric Unit')!r} in {row}")
        times[short_name(row["Kernel Name"])].append(float(value) * unit)
    return times


def report(label: str, times: dict[str, list[float]], steps: int, top: int) -> str:
    if not times:
        return f"## {label}\n\nno kernel rows: the profiler collected nothing (see the file)\n"
    total = sum(sum(t) for t in times.values())
    launches = sum(len(t) for t in times.values())
    lines = [f"## {label}", "",
             f"{steps} steps: **{total / steps:.1f} µs of kernels per step**, "
             f"{launches / steps:.1f} launches per step ({len(times)} kernels)", "",
             "| kernel | launches per step | µs per step | µs per launch | share |",
             "|---|---|---|---|---|"]
    ranked = sorted(times.items(), key=lambda kv: -sum(kv[1]))
    for name, t in ranked[:top]:
        lines.append(f"| `{name}` | {len(t) / steps:.1f} | {sum(t) / steps:.1f} | "
                     f"{sum(t) / len(t):.1f} | {sum(t) / total:.1%} |")
    if len(ranked) > top:
        rest = ranked[top:]
        lines.append(f"| ({len(rest)} others) | {sum(len(t) for _, t in rest) / steps:.1f} | "
                     f"{sum(sum(t) for _, t in rest) / steps:.1f} | | "
                     f"{sum(sum(t) for _, t in rest) / total:.1%} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--steps", type=int, required=True,
                        help="LM steps the profiler collected (B − A + 1 of --profile-steps A:B)")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error("--steps must be at least 1")
    for path in args.files:
        print(report(path.stem, kernel_times(path.read_text(errors="replace")), args.steps,
                     args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
