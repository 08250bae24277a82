"""Milliseconds per iteration of a PINN recipe (resample, update_weights, LM step) at a fixed
count of interior points, for comparing two versions of lmtrain.torch on the same machine.

Runs examples/pinn/<pde>.py's recipe (its network, draws and options; the count of interior
points fixed at --points) for --iterations iterations and prints the mean over those after the
first two (the route's choice, the plan and lazy loading happen there) and a checksum of the
parameters (equal checksums: the same steps).

An A/B of two versions' Python (the extension of the installed one): copy the installed package
twice and overwrite one copy's lmtrain/torch with the older tree, e.g.

  site=build/venv-torch/lib/python3.11/site-packages
  cp -r $site/lmtrain /tmp/new/ && cp -r $site/lmtrain /tmp/old/
  git archive REV python/lmtrain/torch | tar -x --strip-components=1 -C /tmp/old
  for v in old new old new; do OMP_NUM_THREADS=1 PYTHONPATH=/tmp/$v \\
      build/venv-torch/bin/python bench/pinn_iteration.py --pde helmholtz; done

usage: python bench/pinn_iteration.py [--pde burgers] [--points 4000] [--iterations 10]
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "pinn"))

import common  # noqa: E402

import lmtrain.torch as lt  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pde", default="burgers",
                        help="an example of examples/pinn (burgers, helmholtz, poisson2d, …)")
    parser.add_argument("--points", type=int, default=4000, help="interior points per draw")
    parser.add_argument("--iterations", type=int, default=10)
    args = parser.parse_args()
    if args.iterations < 3:
        parser.error("--iterations must be at least 3 (the first two are not counted)")
    module = importlib.import_module(args.pde)
    recipe = dict(points=args.points, points_max=args.points, device="cpu")
    build_args, _ = common.split_recipe(module, recipe)
    problem, model, _ = module.build(0, **build_args)
    optimizer = lt.LevenbergMarquardt(model, residual_fn=problem)
    seconds = []
    for step in range(1, args.iterations + 1):
        start = time.perf_counter()
        problem.resample(step, model)
        problem.update_weights(model)
        optimizer.step(problem.points)
        if step > 2:
            seconds.append(time.perf_counter() - start)
    checksum = float(sum(p.detach().double().sum() for p in model.parameters()))
    print(f"pinn_iteration: {args.pde}, {problem.points.shape[0]} points, "
          f"{1e3 * sum(seconds) / len(seconds):.0f} ms per iteration (iterations 3–"
          f"{args.iterations}), parameters' sum {checksum:.12g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
