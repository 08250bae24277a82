"""What limits LM near convergence on the PINNs of issue 39: probes from one checkpoint.

Trains examples/pinn/poisson2d.py's recipe (W8's grid, or --points N for an N-point grid) with
λ's floor at 1e-14 for --warm seconds (or loads the checkpoint a previous run saved), then:

  options  runs the library's LM from that checkpoint for --steps steps under each set of
           SolverOptions given (Python literals, e.g. "{'geodesic_acceleration': False}"), each
           from the same parameters and λ (lambda_initial = the checkpoint's λ), and prints the
           relative L2 error at each quarter of the steps and λ at the end;
  solve    asks whether the linear algebra is the limit: at the checkpoint, the step
           (JᵀJ + λI)δ = −Jᵀr for each λ of --lambdas, solved by Cholesky of JᵀJ + λI (the
           library's route; cond(JᵀJ) = cond(J)²) and by the SVD of J (cond(J): the small
           singular directions resolved to ε·σ_max), each judged by the objective it reaches:
           the gain ratio ρ = actual / predicted reduction, as the library's acceptance reads
           it.  No damping schedule and no acceptance here: one linearization, two solves.
  relax    asks whether the fresh draws' noise is the floor of a resampling recipe (--pde
           burgers, say; --recipe overrides its RECIPE keys): trains the example's recipe with
           its own loop (common.train_lm: a fresh draw every step, the points grown) for
           --warm seconds (cached), then continues it --steps steps for each α of --alphas,
           after each LM step moving only part of the way, θ ← θ₀ + α(θ₁ − θ₀), which would
           average the draws' fits if the steps were linear, and prints the error's median,
           min and max over the last half of the steps.  A probe that moves the parameters
           outside the engine to measure whether such a step would pay.  Measured on Burgers'
           uniform draws (docs/pinn.md): it does not — α 0.3 and 0.1 end 20–40× above α 1.
  polish   asks whether a last phase on points that stay put ends below the fresh draws'
           noise: from the same cached checkpoint as relax, each --variants entry trains
           --seconds more (training clock) and prints the error at each quarter, the median,
           min and max over the second half, λ and the held-out / training residual at the end:
             recipe          the example's loop (a fresh draw every step), the baseline;
             every=K         a fresh draw every K steps (vRBA keeps a batch ~100 iterations);
             held=F[,adaptive]  Problem.hold: one draw of F × the counts, kept to the end (LM
                             converges on one objective), uniform or, with ",adaptive", by the
                             residual as the recipe draws.  (First run as fixed=N,E[,u] with
                             absolute counts: fixed=64000,1600,u is held=4 at the 16 400 points
                             of the 900 s checkpoint, fixed=64000,1600 held=4,adaptive,
                             fixed=16000,400 held=1,adaptive; hold=20 is every=20.)
  pick     asks whether a held-out residual could choose the iterate a last phase starts
           from (the fresh draws' iterates scatter several-fold in error): from --from CKPT (a
           checkpoint of the example's loop: the example's --checkpoint, bench/pinn.py's
           --checkpoint-dir) or the cached checkpoint, --steps more steps of the loop, after
           each the mean |F|² of every condition on --heldout-sets held-out draws beside the
           relative L2 error, and their rank correlation (Spearman).
  curve    reads no model: the error against time from the history of --from CKPT (each
           evaluated step's training clock and relative L2), at each of --times: the last
           iterate before it and the median, min and max of the iterates over the --window
           seconds before it — how far a resampling run's last iterate is from where its
           iterates are (docs/pinn.md's tables of 2 h runs).
  where    asks where a time-dependent PDE's error is (--pde allen_cahn, burgers, kdv or
           kdv_solitons, with --recipe's overrides): the network of --from CKPT on the
           reference's (t, x) grid, the relative L2 error of each tenth of the time interval
           and its share of the squared error, where in x its largest error is, and the shares
           of the squared error at the fronts (the 5 % of grid cells of largest |u_x|) and
           within 2.5 % of the interval's ends (a periodic domain's seam).

usage: build/venv-torch/bin/python bench/pinn_probe.py options [--warm 150] [--points 2500]
           [--steps 400] [--seed 0] "{}" "{'geodesic_acceleration': False}" …
       build/venv-torch/bin/python bench/pinn_probe.py solve [--warm 150]
           [--lambdas 1e-8 1e-10 1e-11 1e-12 1e-13 1e-14 0]
       build/venv-torch/bin/python bench/pinn_probe.py relax --pde burgers
           [--recipe "{'adaptive': None, 'width': 20, 'harmonics': 0}"] [--warm 450]
           [--steps 300] [--alphas 1 0.3 0.1]
       build/venv-torch/bin/python bench/pinn_probe.py polish --pde burgers [--warm 900]
           [--seconds 300] [--variants recipe every=20 held=4,adaptive held=4 held=1,adaptive]
       build/venv-torch/bin/python bench/pinn_probe.py pick --pde burgers --seed 0
           --from CKPT [--steps 30] [--heldout-sets 4]
       build/venv-torch/bin/python bench/pinn_probe.py curve --from CKPT
           [--times 900 1800 3600 5400 7200] [--window 300]
       build/venv-torch/bin/python bench/pinn_probe.py where --pde allen_cahn --from CKPT
Run with OMP_NUM_THREADS=1; the checkpoint is kept in build/pinn-probe/.
"""
from __future__ import annotations

import argparse
import ast
import importlib
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch.nn.utils import parameters_to_vector, vector_to_parameters

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "pinn"))

import common  # noqa: E402
import poisson2d  # noqa: E402
import references  # noqa: E402

import lmtrain.torch as lt  # noqa: E402

FLOOR = {"lambda_min": 1e-14}  # the variant poisson2d-lambda_min of bench/pinn.py
# where: each time-dependent example's reference grid (t, x, u), the one its error is taken on.
GRIDS = {"allen_cahn": references.allen_cahn_grid, "burgers": references.burgers_grid,
         "kdv": references.kdv_grid, "kdv_solitons": references.kdv_two_soliton_grid}


def checkpoint(args: argparse.Namespace):
    """(problem, model, error, λ) after --warm seconds of the library's LM (cached on disk)."""
    build_args, _ = common.split_recipe(poisson2d, {"points": args.points})
    problem, model, error = poisson2d.build(args.seed, **build_args)
    path = ROOT / "build" / "pinn-probe" / f"poisson2d-{args.points}-{args.seed}-{args.warm:g}.pt"
    if path.exists():
        state, lam = torch.load(path)
        model.load_state_dict(state)
        print(f"checkpoint {path.relative_to(ROOT)}: error {error(model):.3e}, λ {lam:.1e}")
        return problem, model, error, lam
    optimizer = lt.LevenbergMarquardt(model, residual_fn=problem, **FLOOR)
    start, steps = time.perf_counter(), 0
    while time.perf_counter() - start < args.warm:
        optimizer.step(problem.points)
        steps += 1
    lam = optimizer.lambda_
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save((model.state_dict(), lam), path)
    print(f"warm-up: {steps} LM steps in {args.warm:g} s, error {error(model):.3e}, λ {lam:.1e}")
    return problem, model, error, lam


def probe_options(args: argparse.Namespace) -> None:
    problem, model, error, lam = checkpoint(args)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    for text in args.option_sets or ["{}"]:
        options = {**FLOOR, "lambda_initial": lam, **ast.literal_eval(text)}
        model.load_state_dict(state)
        optimizer = lt.LevenbergMarquardt(model, residual_fn=problem, **options)
        start, marks = time.perf_counter(), []
        for k in range(1, args.steps + 1):
            optimizer.step(problem.points)
            if k % max(1, args.steps // 4) == 0:
                marks.append(f"{k}: {error(model):.3e}")
        print(f"{text}: {time.perf_counter() - start:.0f} s; error after " + ", ".join(marks) +
              f"; λ {optimizer.lambda_:.1e}", flush=True)


def _cholesky(j: torch.Tensor, r: torch.Tensor):
    a, g = j.T @ j, j.T @ r
    eye = torch.eye(a.shape[0], dtype=a.dtype)

    def solve(lam: float) -> torch.Tensor | None:
        factor, info = torch.linalg.cholesky_ex(a + lam * eye)
        if int(info) != 0:  # the library's attempt would be invalid (potrf failed)
            return None
        return -torch.cholesky_solve(g[:, None], factor)[:, 0]
    return solve


def _svd(j: torch.Tensor, r: torch.Tensor):
    u, s, vh = torch.linalg.svd(j, full_matrices=False)
    c = u.T @ r
    return lambda lam: -(vh.T @ (s / (s * s + lam) * c))


def probe_solve(args: argparse.Namespace) -> None:
    problem, model, error, _ = checkpoint(args)
    x = problem.points
    theta = parameters_to_vector(model.parameters()).detach().clone()
    params = {n: p.detach() for n, p in model.named_parameters()}
    with torch.no_grad():
        r = problem(model, x)
    j = problem.jacobian_slice(model, params, x, None, 0, r.numel())
    f0 = float(r @ r)
    routes = {"cholesky of JᵀJ + λI": _cholesky(j, r), "SVD of J": _svd(j, r)}
    print(f"objective ‖r‖² {f0:.6e}, error {error(model):.4e}; per λ and solve: ρ, the "
          "objective's relative change, ‖δ‖, the error after the step")
    for lam in args.lambdas:
        cells = []
        for name, solve in routes.items():
            delta = solve(lam)
            if delta is None:
                cells.append(f"{name}: factorization failed")
                continue
            vector_to_parameters(theta + delta, model.parameters())
            with torch.no_grad():
                trial = problem(model, x)
            f1, linear = float(trial @ trial), r + j @ delta
            rho = (f0 - f1) / (f0 - float(linear @ linear))
            cells.append(f"{name}: ρ {rho:.3f}, {(f1 - f0) / f0:+.2e}, ‖δ‖ "
                         f"{float(delta.norm()):.2e}, error {error(model):.4e}")
            vector_to_parameters(theta, model.parameters())
        print(f"λ {lam:.0e}:  " + ";  ".join(cells), flush=True)


def recipe_checkpoint(args: argparse.Namespace):
    """(problem, model, error, options, λ, steps) after --warm seconds of the example's own
    recipe (with --recipe's overrides) trained by its own loop, cached on disk."""
    example = importlib.import_module(args.pde)
    overrides = ast.literal_eval(args.recipe)
    build_args, loop = common.split_recipe(example, overrides)
    problem, model, error = example.build(args.seed, **build_args)
    options = dict(loop.get("options") or {})
    text = repr(sorted(overrides.items()))  # the checkpoint's name says what it trained
    tag = "".join(ch if ch.isalnum() or ch in ".-" else "_" for ch in text)
    path = ROOT / "build" / "pinn-probe" / f"{args.pde}-{tag}-{args.seed}-{args.warm:g}.pt"
    if path.exists():
        state, lam, steps = torch.load(path)
        model.load_state_dict(state)
        print(f"checkpoint {path.relative_to(ROOT)}: {steps} steps, error {error(model):.3e}, "
              f"λ {lam:.1e}")
        return problem, model, error, options, lam, steps
    run = common.train_lm(problem, model, error, budget=args.warm, steps=10 ** 9,
                          resample_every=loop.get("resample_every", 1), options=options)
    lam, steps = run.final_lambda, run.steps
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save((model.state_dict(), lam, steps), path)
    print(f"warm-up: {steps} LM steps in {args.warm:g} s, error {error(model):.3e}, λ {lam:.1e}")
    return problem, model, error, options, lam, steps


def probe_relax(args: argparse.Namespace) -> None:
    problem, model, error, options, lam, first = recipe_checkpoint(args)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    for alpha in args.alphas:
        model.load_state_dict(state)
        optimizer = lt.LevenbergMarquardt(model, residual_fn=problem,
                                          **{**options, "lambda_initial": lam})
        start, errors = time.perf_counter(), []
        for step in range(first, first + args.steps):
            problem.resample(step, model)  # the same draws for every α
            problem.update_weights(model)
            before = parameters_to_vector(model.parameters()).detach().clone()
            optimizer.step(problem.points)
            if alpha != 1.0:
                after = parameters_to_vector(model.parameters()).detach()
                vector_to_parameters(before + alpha * (after - before), model.parameters())
            errors.append(error(model))
        half = errors[len(errors) // 2:]
        print(f"α {alpha:g}: {time.perf_counter() - start:.0f} s; error over steps "
              f"{first + len(errors) // 2}–{first + len(errors)}: median "
              f"{statistics.median(half):.3e}, min {min(half):.3e}, max {max(half):.3e}; "
              f"last {errors[-1]:.3e}; λ {optimizer.lambda_:.1e}", flush=True)


def _polish_points(problem, variant: str, step: int, model) -> int:
    """Sets up `variant`'s draws (module doc), the held ones by Problem.hold; the steps between
    draws (0: never again)."""
    kind, _, value = variant.partition("=")
    if kind == "recipe":
        return 1
    if kind == "every":
        return int(value)
    if kind != "held":
        raise SystemExit(f"--variants {variant!r}: expected recipe, every=K or "
                         "held=FACTOR[,adaptive]")
    factor, _, how = value.partition(",")
    problem.hold(step, model, int(factor), adaptive=how == "adaptive")
    return 0


def probe_polish(args: argparse.Namespace) -> None:
    problem, model, error, options, lam, first = recipe_checkpoint(args)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    problem.resample(first, model)  # every variant starts from this draw (and not held)
    start_state = problem.state_dict()
    for variant in args.variants:
        model.load_state_dict(state)
        problem.load_state_dict(start_state)
        every = _polish_points(problem, variant, first, model)
        optimizer = lt.LevenbergMarquardt(model, residual_fn=problem,
                                          **{**options, "lambda_initial": lam})
        clock, step, history = 0.0, first, []
        while clock < args.seconds:
            start = time.perf_counter()
            if every and step > first and (step - first) % every == 0:
                problem.resample(step, model)
            problem.update_weights(model)
            report = optimizer.step(problem.points)
            clock += time.perf_counter() - start
            step += 1
            history.append((clock, error(model)))
            if report.termination and not every:
                break
        quarters = [min(history, key=lambda h, q=q: abs(h[0] - q * clock))[1]
                    for q in (0.25, 0.5, 0.75)]
        half = [e for c, e in history if c >= clock / 2]
        ratios = problem.interpolation_ratios(model, problem.points, problem.heldout(12345))
        print(f"{variant}: {len(history)} steps in {clock:.0f} s, {problem.points.shape[0]} "
              f"points; error at ¼ ½ ¾ {' '.join(f'{e:.2e}' for e in quarters)}, last "
              f"{history[-1][1]:.3e}; second half median {statistics.median(half):.3e} "
              f"[{min(half):.2e}–{max(half):.2e}]; λ {optimizer.lambda_:.1e}; held-out / "
              f"training {', '.join(f'{k} {v:.2f}' for k, v in ratios.items())}"
              f"{'; ' + report.termination if report.termination else ''}", flush=True)


def _ranks(values: list[float]) -> list[int]:
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0] * len(values)
    for rank, index in enumerate(order):
        ranks[index] = rank
    return ranks


def probe_pick(args: argparse.Namespace) -> None:
    if args.source is None:
        problem, model, error, options, lam, step = recipe_checkpoint(args)
        optimizer = lt.LevenbergMarquardt(model, residual_fn=problem,
                                          **{**options, "lambda_initial": lam})
    else:
        example = importlib.import_module(args.pde)
        overrides = ast.literal_eval(args.recipe)
        build_args, loop = common.split_recipe(example, overrides)
        problem, model, error = example.build(args.seed, **build_args)
        optimizer = lt.LevenbergMarquardt(model, residual_fn=problem,
                                          **dict(loop.get("options") or {}))
        # The example's own check: a checkpoint of this example, seed and recipe, else a
        # CheckpointError that names what differs.
        state = common.load_checkpoint(args.source,
                                       common.run_identity(example, args.seed, overrides))
        step = common._restore(state, model, problem, optimizer)[0]
    held_out = [problem.heldout(100 + i) for i in range(args.heldout_sets)]
    errors, residuals = [], []
    for step in range(step, step + args.steps):
        common._one_step(problem, model, optimizer, step, 1)
        with torch.no_grad():
            residual = sum(sum(problem.mean_squared(model, x).values()) for x in held_out)
        errors.append(error(model))
        residuals.append(residual / len(held_out))
        print(f"step {step + 1}: relative L2 {errors[-1]:.3e}, held-out mean |F|² "
              f"{residuals[-1]:.3e}", flush=True)
    n = len(errors)
    d2 = sum((a - b) ** 2 for a, b in zip(_ranks(errors), _ranks(residuals)))
    picked = errors[min(range(n), key=residuals.__getitem__)]
    print(f"Spearman ρ(error, held-out residual) over {n} steps: "
          f"{1 - 6 * d2 / (n * (n * n - 1)):.2f}; the lowest residual's iterate "
          f"{picked:.3e}, the median {statistics.median(errors):.3e}, the best "
          f"{min(errors):.3e}", flush=True)


def probe_curve(args: argparse.Namespace) -> None:
    if args.source is None:
        raise SystemExit("curve: --from CKPT is required (a checkpoint of an example's loop)")
    try:  # any run's: the curve needs no model, so no identity to match
        state = common.read_checkpoint(args.source)
    except common.CheckpointError as error:
        raise SystemExit(f"curve: {error}") from None
    # history rows: (step, training clock, mean r², relative L2 or None where not evaluated)
    rows = [r for r in state["history"] if len(r) > 3 and r[3] is not None]
    print(f"{args.source}: {len(rows)} evaluated steps to step {state['step']}, "
          f"{state['clock']:.0f} s")
    for mark in args.times:
        before = [r for r in rows if r[1] <= mark]
        window = [r[3] for r in before if r[1] > mark - args.window]
        if not window:
            continue
        print(f"{mark:7.0f} s  step {before[-1][0]:6d}  last iterate {before[-1][3]:.3g}  "
              f"last {args.window:.0f} s: median {statistics.median(window):.2g} "
              f"[{min(window):.2g}–{max(window):.2g}] over {len(window)} steps")
    if rows:
        print(f"    end  step {rows[-1][0]:6d}  last iterate {rows[-1][3]:.3g} "
              f"({rows[-1][1]:.0f} s)")


def probe_where(args: argparse.Namespace) -> None:
    if args.source is None or args.pde not in GRIDS:
        raise SystemExit(f"where: --from CKPT and --pde one of {sorted(GRIDS)} are required")
    example = importlib.import_module(args.pde)
    build_args, _ = common.split_recipe(example, ast.literal_eval(args.recipe))
    _, model, error = example.build(args.seed, **build_args)
    try:
        model.load_state_dict(common.read_checkpoint(args.source)["model"])
    except (common.CheckpointError, RuntimeError) as failure:  # RuntimeError: another network
        raise SystemExit(f"where: {args.source}: {failure}") from None
    t, x, u = GRIDS[args.pde]()
    points = common.txu_points(t, x)
    with torch.no_grad():
        e = model(points)[:, 0].numpy().reshape(u.shape) - u
    total, squared = float(np.linalg.norm(e) / np.linalg.norm(u)), float((e ** 2).sum())
    # The example's own error function on the same grid: the two must agree.
    print(f"{args.source}: relative L2 {total:.3e} (the example's error: {error(model):.3e})")
    bands = np.minimum(np.floor(10 * (t - t[0]) / (t[-1] - t[0]) + 1e-9).astype(int), 9)
    for band in range(10):
        rows = bands == band
        worst = np.unravel_index(np.abs(e[rows]).argmax(), e[rows].shape)
        print(f"  t in [{t[rows][0]:.2f}, {t[rows][-1]:.2f}]  relative L2 "
              f"{np.linalg.norm(e[rows]) / np.linalg.norm(u[rows]):.2e}  share "
              f"{(e[rows] ** 2).sum() / squared:.2f}  largest |error| "
              f"{np.abs(e[rows]).max():.1e} at t {t[rows][worst[0]]:.3f}, x {x[worst[1]]:+.3f}")
    slope = np.abs(np.gradient(u, x, axis=1))
    fronts = slope > np.quantile(slope, 0.95)
    span = x[-1] - x[0]
    seam = (x < x[0] + 0.025 * span) | (x > x[-1] - 0.025 * span)
    print(f"  share of the squared error at the fronts (5 % of cells): "
          f"{(e[fronts] ** 2).sum() / squared:.2f}; within 2.5 % of x's ends: "
          f"{(e[:, seam] ** 2).sum() / squared:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("probe", choices=("options", "solve", "relax", "polish", "pick",
                                          "curve", "where"))
    parser.add_argument("option_sets", nargs="*", help="SolverOptions as Python literals")
    parser.add_argument("--warm", type=float, default=150.0)
    parser.add_argument("--points", type=int, default=2500)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--lambdas", type=float, nargs="+",
                        default=[1e-8, 1e-10, 1e-11, 1e-12, 1e-13, 1e-14, 0.0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pde", default="burgers", help="relax: the example (examples/pinn/)")
    parser.add_argument("--recipe", default="{}",
                        help="relax: RECIPE overrides, a Python dict literal")
    parser.add_argument("--alphas", type=float, nargs="+", default=[1.0, 0.3, 0.1])
    parser.add_argument("--seconds", type=float, default=300.0,
                        help="polish: training seconds per variant")
    parser.add_argument("--variants", nargs="+",
                        default=["recipe", "every=20", "held=4,adaptive", "held=4"])
    parser.add_argument("--from", dest="source", default=None,
                        help="pick: a checkpoint of the example's loop to start from")
    parser.add_argument("--heldout-sets", type=int, default=4)
    parser.add_argument("--times", type=float, nargs="+",
                        default=[900.0, 1800.0, 3600.0, 5400.0, 7200.0],
                        help="curve: the training clock's marks (seconds)")
    parser.add_argument("--window", type=float, default=300.0,
                        help="curve: seconds before each mark for the median, min and max")
    args = parser.parse_intermixed_args()
    torch.set_num_threads(1)
    {"options": probe_options, "solve": probe_solve, "relax": probe_relax,
     "polish": probe_polish, "pick": probe_pick, "curve": probe_curve,
     "where": probe_where}[args.probe](args)


if __name__ == "__main__":
    main()
