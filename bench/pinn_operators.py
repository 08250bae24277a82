"""The operators a PINN iteration issues, counted per part (issue 39: on a GPU a step of a small
network is bound by the operators the host issues, not by the device).

On the H200 (bench/results/gpu-runs/2026-11-28-h200/) an iteration of Burgers' recipe (resample,
update_weights, step) issued 16 008 aten operators for 8 ms of GPU time in about 208 ms.  Their
count does not depend on the device or its load, so it can be measured here, on the CPU: this
runs the recipe (examples/pinn/burgers.py: 3 × 30 tanh after five harmonics, n = 2 251,
float64, residual-adaptive draws) at a fixed count of interior points and counts every operator
that reaches a backend (a TorchDispatchMode) during a few iterations after a warm-up, split by
where it was issued: the draw, the Taylor route's input map, forward pass and reverse sweep, the
rest of the residual's and the Jacobian's evaluation, the library's step.  "not views" leaves out
the operators that only make a view (select, slice, view, …): on a GPU the others launch a
kernel or copy.

``--chunk-mib`` sets Problem.chunk_bytes (256: the CPU's default; on a CUDA device the default is
an eighth of the free memory, at most 2 048).  On a GPU the Taylor route computes PeriodicInput's
derivatives afresh at every evaluation (no cache lookup, which would read the device); on the CPU
it keeps them per set of points, so "input map" counts less here than on a GPU.

usage: OMP_NUM_THREADS=1 PYTHONPATH=<lmtrain package> python bench/pinn_operators.py
           [--points 8000] [--chunk-mib 2048] [--iterations 2] [--top 0]
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "pinn"))

import burgers  # noqa: E402
import common  # noqa: E402

import lmtrain.torch as lt  # noqa: E402
from lmtrain.torch import _jacobian, pinn  # noqa: E402

VIEWS = {"view", "_unsafe_view", "select", "slice", "unsqueeze", "permute", "expand", "alias",
         "t", "transpose", "squeeze", "as_strided", "detach", "lift_fresh", "is_same_size",
         "_has_same_storage_numel", "_reshape_alias", "empty", "new_empty"}
# Where an operator is counted: the innermost of these that is running (class, method, part).
PARTS = [(pinn.Problem, "resample", "draw"), (pinn.Problem, "update_weights", "point weights"),
         (pinn.Problem, "__call__", "residual"), (pinn.Problem, "jacobian_slice", "jacobian"),
         (_jacobian.TaylorMLP, "_inputs", "taylor: input map"),
         (_jacobian.TaylorMLP, "forward", "taylor: forward"),
         (_jacobian.TaylorMLP, "jacobian", "taylor: reverse sweep")]


class Counter(TorchDispatchMode):
    """Counts each operator that reaches a backend, by the part running."""

    def __init__(self) -> None:
        super().__init__()
        self.part = "step"
        self.counts: collections.Counter = collections.Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
        self.counts[(self.part, func.overloadpacket.__name__)] += 1
        return func(*args, **(kwargs or {}))

    def within(self, method: Callable, part: str) -> Callable:
        def counted(*args: Any, **kwargs: Any) -> Any:
            outer, self.part = self.part, part
            try:
                return method(*args, **kwargs)
            finally:
                self.part = outer
        return counted


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=8000, help="interior points per draw")
    parser.add_argument("--chunk-mib", type=int, default=2048, help="Problem.chunk_bytes in MiB")
    parser.add_argument("--iterations", type=int, default=2, help="iterations counted")
    parser.add_argument("--top", type=int, default=0, help="also list the most frequent operators")
    args = parser.parse_args()
    recipe = dict(points=args.points, points_max=args.points, device="cpu")
    build_args, _ = common.split_recipe(burgers, recipe)
    problem, model, _ = burgers.build(0, **build_args)
    problem.chunk_bytes = args.chunk_mib << 20
    optimizer = lt.LevenbergMarquardt(model, residual_fn=problem)
    counter = Counter()
    for cls, name, part in PARTS:
        setattr(cls, name, counter.within(getattr(cls, name), part))

    def iteration(step: int) -> None:
        problem.resample(step, model)
        problem.update_weights(model)
        optimizer.step(problem.points)

    for step in range(1, 4):  # warm-up: the route's choice, the plan, lazy loading
        iteration(step)
    with counter:
        for step in range(4, 4 + args.iterations):
            iteration(step)
    k = args.iterations
    parts: dict[str, list[int]] = {}
    for (part, op), count in counter.counts.items():
        totals = parts.setdefault(part, [0, 0])
        totals[0] += count
        totals[1] += 0 if op in VIEWS else count
    everything = [sum(v[0] for v in parts.values()), sum(v[1] for v in parts.values())]
    print(f"pinn_operators: Burgers recipe, {problem.points.shape[0]} points, "
          f"{sum(p.numel() for p in model.parameters())} parameters, chunk_bytes "
          f"{args.chunk_mib} MiB, per iteration ({k} counted; operators / of which not views):")
    for part, (total, launched) in sorted(parts.items(), key=lambda item: -item[1][0]):
        print(f"  {part:24s} {total / k:7.0f} {launched / k:7.0f}")
    print(f"  {'all':24s} {everything[0] / k:7.0f} {everything[1] / k:7.0f}")
    for (part, op), count in counter.counts.most_common(args.top):
        print(f"    {count / k:6.0f}  {part:24s} {op}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
