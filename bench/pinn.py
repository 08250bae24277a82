"""W8 (shared/WORKLOADS.md, issue 29): the PINN examples with lmtrain.torch's LM beside
Adam → L-BFGS, on the same network, points and wall-clock budget, seeds interleaved.

For each PDE and seed, in the order LM(seed 0), peer(seed 0), LM(seed 1), …:

* LM: the example's RECIPE (examples/pinn/<pde>.py), trained by ``lmtrain.torch.
  LevenbergMarquardt(model, residual_fn=problem)`` for the budget.
* Adam → L-BFGS: the same ``build(seed, …)`` — the same initial network and collocation points
  — Adam (lr 1e-3) for the first half of the budget, then ``torch.optim.LBFGS`` (strong Wolfe
  line search, history 50, 20 iterations per call) for the second half, on the same objective
  ½‖r‖² (the problem's weighted residuals).  Where the recipe resamples, the peer draws fresh
  points from the same sampler: Adam every ``resample_every`` of its steps, L-BFGS every 20
  iterations (a fresh L-BFGS state each time, since a new draw is a new objective).

The relative L2 error is evaluated after every LM step / every 25 Adam steps / every L-BFGS
call, outside the clock, for the time to 1e-3.  Writes bench/results/<date>-<machine>-PINN.md
(and .json with every run's history, thinned) with the medians over the seeds, the load
average before every run, and LM's phase table (the Jacobian beside the normal equations'
SYRK).

usage: build/venv-torch/bin/python bench/pinn.py [--pde poisson2d helmholtz burgers allen_cahn]
           [--seeds 0 1 2] [--budget-scale 1.0] [--threads 1] [--tag NAME] [--quick]
       (bench/run.sh PINN runs it; lmtrain.torch must be importable: scripts/test-torch.sh
        installs it into build/venv-torch)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _threads_from_argv() -> int:
    # OMP_NUM_THREADS must be set before torch and lmtrain load their OpenMP runtimes.
    for i, a in enumerate(sys.argv):
        if a == "--threads" and i + 1 < len(sys.argv):
            return int(sys.argv[i + 1])
    return 1


os.environ["OMP_NUM_THREADS"] = str(_threads_from_argv())

import torch  # noqa: E402

sys.path.insert(0, str(ROOT / "examples" / "pinn"))
import common  # noqa: E402

PDES = ("poisson2d", "helmholtz", "burgers", "allen_cahn")
TARGETS = {"poisson2d": (1e-6, 300), "helmholtz": (1e-5, 600), "burgers": (1e-4, 900),
           "allen_cahn": (None, 900)}


def load_average() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def adam_lbfgs(example, seed: int, budget: float) -> dict:
    """The peer on the example's build(seed): Adam for half the budget, then L-BFGS."""
    build_args, loop = common.split_recipe(example, {})
    problem, model, error = example.build(seed, **build_args)
    resample_every = loop.get("resample_every", 0)

    def objective() -> torch.Tensor:
        r = problem(model, problem.points)
        return 0.5 * (r * r).sum()

    history, clock, first_below, step = [], 0.0, None, 0

    def record(phase: str) -> None:
        nonlocal first_below
        e = error(model)
        history.append((step, clock, e, phase))
        if first_below is None and e <= 1e-3:
            first_below = clock

    adam = torch.optim.Adam(model.parameters(), lr=1e-3)
    while clock < budget / 2:
        start = time.perf_counter()
        for _ in range(25):
            if resample_every and step > 0 and step % resample_every == 0:
                problem.resample(step)
            adam.zero_grad()
            objective().backward()
            adam.step()
            step += 1
        clock += time.perf_counter() - start
        record("adam")
    adam_steps, lbfgs_calls = step, 0
    lbfgs = None
    while clock < budget:
        start = time.perf_counter()
        if lbfgs is None or (resample_every and lbfgs_calls > 0):
            if resample_every and lbfgs is not None:
                problem.resample(step)
            lbfgs = torch.optim.LBFGS(model.parameters(), lr=1.0, max_iter=20, history_size=50,
                                      tolerance_grad=0.0, tolerance_change=0.0,
                                      line_search_fn="strong_wolfe")

        def closure() -> torch.Tensor:
            lbfgs.zero_grad()
            loss = objective()
            loss.backward()
            return loss

        lbfgs.step(closure)
        lbfgs_calls += 1
        step += 1
        clock += time.perf_counter() - start
        record("lbfgs")
        if not all(torch.isfinite(p).all() for p in model.parameters()):
            break
    return {"error": history[-1][2], "seconds": clock, "time_to_1e3": first_below,
            "adam_steps": adam_steps, "lbfgs_calls": lbfgs_calls,
            "history": history[::max(1, len(history) // 200)] + history[-1:]}


def warm_up() -> None:
    """torch.func's first transform in a process takes seconds (its start-up); taken here, once,
    so that no run's clock pays it."""
    from lmtrain.torch import pinn

    model = common.mlp([2, 3, 1], 0)
    problem = pinn.Problem("xy", [pinn.Condition("pde", lambda u, u_x, u_yy: u_x + u_yy,
                                                 pinn.Uniform(4, x=(0, 1), y=(0, 1)))])
    params = {k: v.detach() for k, v in model.named_parameters()}
    for route in ("jacrev", "taylor"):
        problem.jacobian = route
        problem.jacobian_slice(model, params, problem.points, None, 0, 4)


def lm(example, seed: int, budget: float) -> dict:
    run = common.train(example, seed, budget=budget)
    hist = run.history
    return {"error": run.error, "seconds": run.seconds, "time_to_1e3": run.time_to_1e3,
            "steps": run.steps, "ms_per_step": run.ms_per_step,
            "phase_ms": {k: 1e3 * v / max(run.steps, 1) for k, v in run.phase_seconds.items()},
            "heldout_ratios": run.heldout_ratios, "block_losses": run.block_losses,
            "points": run.points, "parameters": run.parameters,
            "history": hist[::max(1, len(hist) // 200)] + hist[-1:]}


def _median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _fmt(v: float | None, kind: str = "e") -> str:
    if v is None:
        return "—"
    return f"{v:.2e}" if kind == "e" else f"{v:.0f}" if kind == "0" else f"{v:.1f}"


def write_report(results: dict, path: Path, args: argparse.Namespace, started: str,
                 elapsed: float, loads: list) -> None:
    lines = [f"# W8 PINNs: lmtrain.torch LM beside Adam → L-BFGS — {started[:10]}", ""]
    lines.append(f"Measured by `bench/run.sh PINN` (`bench/pinn.py --pde {' '.join(args.pde)} "
                 f"--seeds {' '.join(map(str, args.seeds))} --budget-scale {args.budget_scale} "
                 f"--threads {args.threads}`) on {started} UTC, in {elapsed / 60:.0f} min.")
    lines.append("")
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), platform.processor())
    lines.append(f"* Machine: {cpu}, {os.cpu_count()} cores; {args.threads} thread(s) per run "
                 f"(OMP_NUM_THREADS, torch.set_num_threads). The machine is shared with other "
                 f"builds: load average {loads[0]} at the start, {loads[-1]} at the end; the "
                 "load before every run is in the JSON file. Timings are slower than on an idle "
                 "machine by the load.")
    lines.append("* float64 throughout; errors are relative L2 against the references of "
                 "examples/pinn/references.py on their grids; medians over the seeds with the "
                 "min–max in brackets; time to 1e-3 counts training time only.")
    lines.append("")
    lines.append("| PDE | budget | tool | relative L2 | time to 1e-3 | steps | ms/step | "
                 "target | met |")
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for pde, runs in results.items():
        budget = TARGETS[pde][1] * args.budget_scale
        for tool in ("lm", "peer"):
            rs = runs[tool]
            errors = [r["error"] for r in rs]
            t3 = [r["time_to_1e3"] for r in rs]
            reached = sum(t is not None for t in t3)
            steps = _median([r.get("steps", r.get("adam_steps", 0) + r.get("lbfgs_calls", 0))
                             for r in rs])
            ms = _median([r.get("ms_per_step") for r in rs])
            target = TARGETS[pde][0]
            med = _median(errors)
            met = "" if tool == "peer" or target is None else ("yes" if med <= target else
                                                               f"no ({med / target:.1f}×)")
            name = "lmtrain.torch LM" if tool == "lm" else "Adam → L-BFGS"
            lines.append(f"| {pde} | {budget:.0f} s | {name} | {_fmt(med)} [{_fmt(min(errors))}"
                         f"–{_fmt(max(errors))}] | {_fmt(_median(t3), '1')} s ({reached}/"
                         f"{len(rs)}) | {_fmt(steps, '0')} | {_fmt(ms, '0')} | "
                         f"{'—' if target is None or tool == 'peer' else f'≤ {target:.0e}'} | "
                         f"{met} |")
        ratio = _median([p["error"] for p in runs["peer"]]) / _median(
            [r["error"] for r in runs["lm"]])
        lines.append(f"| {pde} | | peer / LM error | {ratio:.1f}× | | | | ≥ 10× | "
                     f"{'yes' if ratio >= 10 else 'no'} |")
    lines.append("")
    lines.append("LM's time per step by phase (ms, median over the seeds); normal_equations is "
                 "the library's SYRK and GEMV of each Jacobian slice:")
    lines.append("")
    phases = ("forward", "jacobian", "normal_equations", "factorization", "trial_evaluation",
              "geodesic")
    lines.append("| PDE | m × n | " + " | ".join(phases) + " | jacobian / SYRK |")
    lines.append("|---|---|" + "---|" * len(phases) + "---|")
    for pde, runs in results.items():
        rs = runs["lm"]
        med = {p: _median([r["phase_ms"].get(p, 0.0) for r in rs]) for p in phases}
        lines.append(f"| {pde} | {rs[0]['points']}… × {rs[0]['parameters']} | " +
                     " | ".join(f"{med[p]:.0f}" for p in phases) +
                     f" | {med['jacobian'] / max(med['normal_equations'], 1e-9):.2f} |")
    lines.append("")
    lines.append("Held-out / training RMS residual at the end of each LM run (≫ 1: the run "
                 "fits its points, not the PDE):")
    lines.append("")
    for pde, runs in results.items():
        ratios = "; ".join(", ".join(f"{k} {v:.2f}" for k, v in r["heldout_ratios"].items())
                           for r in runs["lm"])
        lines.append(f"* {pde}: {ratios}")
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pde", nargs="+", default=list(PDES), choices=PDES)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--budget-scale", type=float, default=1.0,
                        help="times each PDE's budget (the target's wall time)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tag", default="")
    parser.add_argument("--machine", default=None,
                        help="the results file's machine name (bench/run.sh passes its own)")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke test: one seed, 2%% of the budgets")
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.budget_scale = args.seeds[:1], 0.02
    torch.set_num_threads(args.threads)
    import importlib

    warm_up()
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")
    t0 = time.perf_counter()
    loads = [load_average()]
    results: dict = {}
    for pde in args.pde:
        example = importlib.import_module(pde)
        budget = TARGETS[pde][1] * args.budget_scale
        results[pde] = {"lm": [], "peer": []}
        for seed in args.seeds:
            for tool, fn in (("lm", lm), ("peer", adam_lbfgs)):
                load = load_average()
                print(f"[pinn.py {time.strftime('%H:%M:%S')}] {pde} {tool} seed {seed}, "
                      f"budget {budget:.0f} s, load {load}", flush=True)
                out = fn(example, seed, budget)
                out["seed"], out["load_before"] = seed, load
                results[pde][tool].append(out)
                print(f"    relative L2 {out['error']:.3e}, time to 1e-3 "
                      f"{out['time_to_1e3']}", flush=True)
    loads.append(load_average())
    machine = args.machine or f"{os.cpu_count()}core-{platform.machine()}"
    stamp = started[:10]
    tag = "-PINN" + (f"-{args.tag}" if args.tag else "") + ("-quick" if args.quick else "")
    out_dir = ROOT / "bench" / "results"
    path = out_dir / f"{stamp}-{machine}{tag}.md"
    write_report(results, path, args, started, time.perf_counter() - t0, loads)
    path.with_suffix(".json").write_text(json.dumps(results, indent=1, default=str))
    print(f"[pinn.py] wrote {path} and {path.with_suffix('.json').name}")


if __name__ == "__main__":
    main()
