"""Where a PINN step's time goes on a device (issue 39), for scripts/gpu-run.sh (stage pinn).

The Burgers recipe (examples/pinn/burgers.py: 3 × 30 after five harmonics, 2 251 parameters,
float64, residual-adaptive draws) at a fixed count of interior points, after a few warm-up steps,
one loop iteration as common.train_lm runs it (resample, update_weights, step) under
torch.profiler, several times.  On the H200 (2026-11-27) a step of this recipe took 209 ms with
its phases adding up to 110 ms, and the phases themselves (Jacobian 48 ms, geodesic correction
40, trial 19) were no faster than one core of a CPU: a step of a small network is launch- and
host-bound, and this says where.  Prints

  * ms per iteration: the resample, the step, the step's phases (the library's phase clock);
  * what the host issued per iteration: aten operators, CUDA kernel launches, host↔device copies
    and synchronizations (cudaStreamSynchronize, cudaDeviceSynchronize, cudaMemcpy*);
  * the operators with the most self time on the host and, on CUDA, on the device.

``--device cpu`` runs it on the CPU (how it was checked without a GPU); there the CUDA columns
are absent.

usage: PYTHONPATH=<lmtrain package> python scripts/gpu-python/pinn_profile.py [--device cuda]
           [--points 8000] [--iterations 3] [--rows 12]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "pinn"))

import burgers  # noqa: E402
import common  # noqa: E402

import lmtrain.torch as lt  # noqa: E402

SYNCS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--points", type=int, default=8000, help="interior points per draw")
    parser.add_argument("--iterations", type=int, default=3, help="profiled iterations")
    parser.add_argument("--rows", type=int, default=12, help="operators listed per table")
    args = parser.parse_args()
    cuda = args.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        print("pinn_profile: torch sees no CUDA device", file=sys.stderr)
        return 77
    recipe = dict(points=args.points, points_max=args.points, device=args.device)
    build_args, _ = common.split_recipe(burgers, recipe)
    problem, model, _ = burgers.build(0, **build_args)
    optimizer = lt.LevenbergMarquardt(model, residual_fn=problem)

    def iteration(step: int) -> tuple[float, float, dict[str, float]]:
        start = time.perf_counter()
        problem.resample(step, model)
        problem.update_weights(model)
        drawn = time.perf_counter()
        report = optimizer.step(problem.points)
        if cuda:
            torch.cuda.synchronize()
        return drawn - start, time.perf_counter() - drawn, report.phase_seconds

    for step in range(1, 4):  # warm-up: the route's choice, the library's plan, lazy loading
        iteration(step)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    resample = stepping = 0.0
    phases: dict[str, float] = {}
    with profile(activities=activities) as prof:
        for step in range(4, 4 + args.iterations):
            r, s, p = iteration(step)
            resample, stepping = resample + r, stepping + s
            for k, v in p.items():
                phases[k] = phases.get(k, 0.0) + v
    k = args.iterations
    print(f"pinn_profile: Burgers recipe on {args.device}, {problem.points.shape[0]} points, "
          f"{sum(p.numel() for p in model.parameters())} parameters, {k} iterations (profiled: "
          "times include the profiler's overhead)")
    print(f"  ms per iteration: resample {1e3 * resample / k:.1f}, step {1e3 * stepping / k:.1f}"
          f" (phases: " + ", ".join(f"{n} {1e3 * v / k:.1f}" for n, v in phases.items()
                                    if v > 1e-5) + ")")
    events = prof.key_averages()
    aten = sum(e.count for e in events if e.key.startswith("aten::"))
    line = f"  per iteration: {aten / k:.0f} aten operators"
    if cuda:
        launches = sum(e.count for e in events if e.key in ("cudaLaunchKernel",
                                                            "cudaLaunchKernelExC"))
        copies = sum(e.count for e in events if e.key.startswith("cudaMemcpy"))
        syncs = sum(e.count for e in events if e.key in SYNCS)
        line += (f", {launches / k:.0f} kernel launches, {copies / k:.0f} cudaMemcpy*, "
                 f"{syncs / k:.0f} synchronizations")
    print(line)
    print(f"  the most host time (self):\n{events.table(sort_by='self_cpu_time_total', row_limit=args.rows)}")
    if cuda:
        print(f"  the most device time (self):\n"
              f"{events.table(sort_by='self_cuda_time_total', row_limit=args.rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
