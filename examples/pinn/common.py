"""What the PINN examples share: the network, the LM training loop with a time budget,
resampling and the held-out check, and the command line.

Each example module defines ``RECIPE`` (its documented settings: points, network, resampling,
budget, LM options) and ``build(seed, **recipe) → (problem, model, error)``; ``train`` and
``main`` here do the rest, and bench/pinn.py builds its Adam → L-BFGS runs from the same
``build``.

The loop is lmtrain.torch's ``step()`` in a loop; every ``resample_every`` steps the problem
draws fresh collocation points (``problem.resample(step, model)``, seeded), before every step the
conditions' point weights are updated (``problem.update_weights(model)``: causal weights,
residual-based attention; nothing without them), and the relative L2 error
against the example's reference is evaluated after every step *outside* the training clock (so
the reported times are training times).  At the end the residual on a held-out set of fresh
points is compared with the training residual, and a run that fits its collocation points but
not the PDE is flagged (``pinn.InterpolationWarning``).

A run can be cut into parts (``--checkpoint FILE``, ``--resume FILE``, ``--pause-after S``;
``train_lm``): the network, the problem's points and point weights, λ's schedule, the step, the
clock and the history go into the checkpoint, and a resumed run takes the same steps.
"""

from __future__ import annotations

import argparse
import ast
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import numpy as np
import torch

import lmtrain.torch as lt
from lmtrain.torch import pinn

# Recipe keys the loop reads; every other key goes to the example's build().
LOOP_KEYS = ("budget", "steps", "resample_every", "target", "options", "diagnose", "polish")


def mlp(widths: list[int], seed: int, activation: type = torch.nn.Tanh,
        first: torch.nn.Module | None = None) -> torch.nn.Sequential:
    """A float64 MLP of Linear layers (PyTorch's default initialization, seeded) and
    `activation`, optionally after a fixed input map `first` (a periodic embedding, say)."""
    torch.manual_seed(seed)
    layers: list[torch.nn.Module] = [first] if first is not None else []
    for a, b in zip(widths[:-1], widths[1:]):
        layers += [torch.nn.Linear(a, b), activation()]
    return torch.nn.Sequential(*layers[:-1]).double()


def parameter_count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def relative_l2(prediction: torch.Tensor, reference: torch.Tensor) -> float:
    return float(torch.linalg.norm(prediction - reference) / torch.linalg.norm(reference))


def grid_error(grid: torch.Tensor, exact: torch.Tensor) -> Callable[[torch.nn.Module], float]:
    """The relative L2 error of a model on the points `grid` against the values `exact`."""
    def error(model: torch.nn.Module) -> float:
        with torch.no_grad():
            return relative_l2(model(grid), exact)

    return error


def txu_error(reference: tuple[Any, Any, Any],
              device: str = "cpu") -> Callable[[torch.nn.Module], float]:
    """grid_error on a reference's (t, x, u): u[i, j] at (t[i], x[j]), on `device`."""
    t, x, u = reference
    return grid_error(txu_points(t, x).to(device), torch.from_numpy(u.reshape(-1, 1)).to(device))


def txu_points(t: Any, x: Any) -> torch.Tensor:
    """The (t, x) points of a reference's grid, row-major as its u[i, j] = u(t[i], x[j])."""
    return torch.from_numpy(np.stack(np.meshgrid(t, x, indexing="ij"), -1).reshape(-1, 2))


def schedule_points(problem: pinn.Problem, name: str, points: int, points_max: int,
                    grow_every: int, adaptive: tuple[int, float, float] | None) -> None:
    """Condition `name`'s draws: by the residual (adapt), doubled every `grow_every` steps from
    `points` up to `points_max` (Problem.grow; not when points_max ≤ points)."""
    adapt(problem, name, adaptive)
    if points_max > points:
        problem.grow(name, points_max, grow_every, start=points)


def adapt(problem: pinn.Problem, name: str,
          adaptive: tuple[int, float, float] | None) -> None:
    """Condition `name` draws its points where the residual is large (adaptive = (pool, k, c):
    ``pinn.ResidualAdaptive`` around its sampler, replacing the settings of an earlier one; None
    leaves it as it is)."""
    if adaptive is None:
        return
    pool, k, c = adaptive
    condition = next(each for each in problem.conditions if each.name == name)
    base = condition.points
    if isinstance(base, pinn.ResidualAdaptive):
        base = base.base
    condition.points = pinn.ResidualAdaptive(base, pool=int(pool), k=k, c=c)


@dataclass
class Run:
    """What a training run did: the final relative L2 error, the training seconds, the time it
    first fell below 1e-3 (None if never), the held-out ratios, each block's mean squared
    residual at the final parameters (measured after the last step, on its points; the step
    reports give them before each step), the summed phase seconds and the history (step,
    seconds, loss, error)."""

    error: float
    seconds: float
    steps: int
    ms_per_step: float
    time_to_1e3: float | None
    heldout_ratios: dict[str, float]
    block_losses: dict[str, float]
    phase_seconds: dict[str, float]
    points: int
    parameters: int
    history: list[tuple[int, float, float, float]] = field(default_factory=list)
    termination: str = ""
    final_lambda: float = float("nan")  # λ after the last step
    condition: float | None = None  # cond(JᵀJ) at the end, at most 2⁵² (train_lm(diagnose=True))
    paused: bool = False  # stopped by pause_after before its budget: resume from its checkpoint
    resumed_at: int = 0  # the step its checkpoint had reached (0: a run from the start)


# What a checkpoint may change on resume: the run's length, its last phase (polish) and where it
# runs.  Every other
# recipe key (the points, the network, the options) makes another run.
RESUMABLE_KEYS = ("budget", "steps", "target", "diagnose", "device", "polish")


def save_checkpoint(path: str, identity: dict[str, Any], model: torch.nn.Module,
                    problem: pinn.Problem, optimizer: lt.LevenbergMarquardt, step: int,
                    clock: float, first_below: float | None, history: list,
                    phases: dict[str, float]) -> None:
    """Everything train_lm needs to go on as if never stopped, written atomically (a temporary
    file beside `path`, then renamed: an interrupted write leaves the previous checkpoint)."""
    state = {"format": 1, "identity": identity, "step": step, "clock": clock,
             "first_below": first_below, "history": [list(h) for h in history],
             "phases": dict(phases),
             "model": {k: v.detach().cpu() for k, v in model.state_dict().items()},
             "problem": problem.state_dict(), "optimizer": optimizer.state_dict(),
             "rng": torch.get_rng_state()}
    temporary = f"{path}.partial"
    torch.save(state, temporary)
    os.replace(temporary, path)


class CheckpointError(ValueError):
    """A --resume file that is missing, not a checkpoint, or another run's."""


def read_checkpoint(path: str) -> dict[str, Any]:
    """A checkpoint of this loop, whichever run wrote it (its history, step and clock; a
    CheckpointError naming the file otherwise); load_checkpoint also checks it is this run's."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise CheckpointError(f"--resume {path}: no such file (a run writes one with "
                              "--checkpoint)") from None
    except Exception as error:  # noqa: BLE001 - torch.load's errors vary: say which file
        raise CheckpointError(f"--resume {path}: not a checkpoint of this loop "
                              f"({error})") from None
    if not isinstance(state, dict) or state.get("format") != 1:
        raise CheckpointError(f"--resume {path}: not a checkpoint of this loop (format "
                              f"{state.get('format') if isinstance(state, dict) else None!r}, "
                              "expected 1)")
    return state


def load_checkpoint(path: str, identity: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint of the same run (the same example, seed and recipe but for
    RESUMABLE_KEYS): a CheckpointError naming what differs otherwise."""
    state = read_checkpoint(path)
    theirs = state["identity"]
    differ = sorted(k for k in set(theirs) | set(identity) if theirs.get(k) != identity.get(k))
    if differ:
        what = "; ".join(f"{k}: {theirs.get(k)!r} there, {identity.get(k)!r} here"
                         for k in differ)
        raise CheckpointError(f"--resume {path}: written by another run ({what}); resume with "
                              "the same example, seed and recipe (only "
                              f"{', '.join(RESUMABLE_KEYS)} may change)")
    return state


def finish(problem: pinn.Problem, model: torch.nn.Module, error: float, seconds: float,
           steps: int, first_below: float | None, phases: dict[str, float],
           history: list, termination: str) -> Run:
    """The held-out check (a warning when the run interpolates) and the Run."""
    heldout = problem.heldout(seed=12345)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", pinn.InterpolationWarning)
        ratios = problem.warn_if_interpolating(model, problem.points, heldout)
    for w in caught:
        print(f"WARNING: {w.message}")
        warnings.warn(w.message, pinn.InterpolationWarning, stacklevel=3)
    return Run(error=error, seconds=seconds, steps=steps, ms_per_step=1e3 * seconds / max(steps, 1),
               time_to_1e3=first_below, heldout_ratios=ratios,
               block_losses=problem.mean_squared(model, problem.points), phase_seconds=phases,
               points=problem.points.shape[0], parameters=parameter_count(model),
               history=history, termination=termination)


def train_lm(problem: pinn.Problem, model: torch.nn.Module,
             error: Callable[[torch.nn.Module], float], *, budget: float, steps: int,
             resample_every: int, target: float = 0.0, verbose: bool = False,
             log_every: int = 25, options: dict[str, Any] | None = None,
             diagnose: bool = False, checkpoint: str | None = None,
             checkpoint_every: float = 300.0, resume: str | None = None,
             pause_after: float | None = None, polish: tuple | None = None,
             identity: dict[str, Any] | None = None) -> Run:
    """LM steps until `steps`, `budget` training seconds, the error ≤ `target` or a step's own
    stop (ignored while resampling: a new draw is a new problem); returns the Run.
    `diagnose`: also the condition number of JᵀJ at the end, outside the clock (an
    eigendecomposition of the n × n matrix).

    A run in parts: `checkpoint` is written every `checkpoint_every` training seconds and when
    the loop stops; `resume` (a checkpoint of the same run: `identity`, the example, seed and
    recipe, must match) restores the network, the points, the point weights, λ's schedule, the
    step, the clock and the history, so the steps go on as the uninterrupted run's would (bit
    for bit on the same machine and threads; tested); `pause_after` stops this call after that
    many training seconds of its own (Run.paused), leaving the budget for a later resume.

    `polish` = (fraction, factor): the last `fraction` of the time budget on held points — one
    uniform draw of `factor` times the counts, kept (``problem.hold``), so that LM converges on
    one objective instead of fitting a fresh draw each step; the run then also ends at the
    step's own stop.  A fraction, not seconds, so that a recipe keeps its shape at any budget
    (a 45 s GPU check as a 2 h run).  (fraction, factor, (pool, k, c)): the held draw of the
    "pde" condition by its residual instead (``pinn.ResidualAdaptive`` with those settings, at
    the model of that step; the other conditions' draws uniform), for solutions whose residual
    sits in thin fronts that a uniform draw samples thinly."""
    if pause_after is not None and checkpoint is None:
        raise ValueError("pause_after needs a checkpoint to resume from: pass checkpoint")
    identity = identity or {}
    optimizer = lt.LevenbergMarquardt(model, residual_fn=problem, **(options or {}))
    history: list[tuple[int, float, float, float]] = []
    phases: dict[str, float] = {}
    clock, first_below, termination, step = 0.0, None, "", 0
    if resume is not None:
        step, clock, first_below, history, phases = _restore(
            load_checkpoint(resume, identity), model, problem, optimizer)
    resumed_at, e = step, error(model)
    started, saved = clock, clock
    paused = False
    while step < steps and clock < budget:
        if pause_after is not None and clock - started >= pause_after:
            paused = True
            break
        if checkpoint is not None and clock - saved >= checkpoint_every:
            save_checkpoint(checkpoint, identity, model, problem, optimizer, step, clock,
                            first_below, history, phases)
            saved = clock
        start = time.perf_counter()
        report = _one_step(problem, model, optimizer, step, resample_every,
                           _polish_now(problem, polish, clock, budget))
        clock += time.perf_counter() - start
        for name, seconds in report.phase_seconds.items():
            phases[name] = phases.get(name, 0.0) + seconds
        step += 1
        e = error(model)
        history.append((step, clock, report.loss_after, e))
        if first_below is None and e <= 1e-3:
            first_below = clock
        if verbose and (step % log_every == 0 or step == 1):
            _log(step, clock, report, e)
        termination = _stop(report, problem, resample_every, e, target)
        if termination:
            break
    if checkpoint is not None:
        save_checkpoint(checkpoint, identity, model, problem, optimizer, step, clock,
                        first_below, history, phases)
    run = finish(problem, model, e, clock, step, first_below, phases, history, termination)
    run.final_lambda = optimizer.lambda_
    run.paused, run.resumed_at = paused, resumed_at
    if diagnose:
        run.condition = _condition(optimizer, problem)
    return run


def _polish_now(problem: pinn.Problem, polish: tuple | None, clock: float,
                budget: float) -> tuple[int, tuple[int, float, float] | None] | None:
    """polish's (factor, residual-adaptive settings or None) when its last phase starts now
    (`clock` of `budget` seconds gone), else None."""
    if polish is None:
        return None
    if not isinstance(polish, (tuple, list)) or len(polish) not in (2, 3):
        raise ValueError(f"polish = {polish!r}: expected (fraction of the budget in (0, 1], "
                         "factor) or (fraction, factor, (pool, k, c))")
    fraction, factor, adaptive = (*polish, None) if len(polish) == 2 else polish
    if not 0 < fraction <= 1:
        raise ValueError(f"polish = {polish!r}: expected (fraction of the budget in (0, 1], "
                         "factor)")
    if adaptive is not None and (not isinstance(adaptive, (tuple, list)) or len(adaptive) != 3):
        raise ValueError(f"polish = {polish!r}: its third item is the held draw's "
                         "residual-adaptive (pool, k, c)")
    if problem.held or clock < budget * (1 - float(fraction)):
        return None
    return int(factor), (None if adaptive is None else tuple(adaptive))


def _stop(report: Any, problem: pinn.Problem, resample_every: int, error: float,
          target: float) -> str:
    """Why the loop stops after this step ("" to go on): the step's own stop where the points
    stay (a new draw is a new problem), or the target reached."""
    # (getattr: scripts/gpu-run.sh runs this loop over an older package too, without hold.)
    if report.termination and (not resample_every or getattr(problem, "held", False)):
        return report.termination
    return "target" if target and error <= target else ""


def _one_step(problem: pinn.Problem, model: torch.nn.Module, optimizer: lt.LevenbergMarquardt,
              step: int, resample_every: int,
              hold: tuple[int, tuple[int, float, float] | None] | None = None) -> Any:
    """The loop's step: a fresh draw when due (or, with `hold` = (factor, adaptive), the last
    one: that factor of the counts, kept; the "pde" condition's drawn by its residual when
    adaptive = (pool, k, c) is given), the point weights, one LM step."""
    if hold is not None:
        factor, adaptive = hold
        adapt(problem, "pde", adaptive)
        problem.hold(step, model, factor, adaptive=adaptive is not None)
    elif resample_every and step > 0 and step % resample_every == 0:
        problem.resample(step, model)
    problem.update_weights(model)  # the conditions' point weights, if any (docs/pinn.md)
    return optimizer.step(problem.points)


def _log(step: int, clock: float, report: Any, error: float) -> None:
    # Each condition's mean |F|², as the library's step reports it (before the step).
    blocks = "  ".join(f"{k} {v:.2e}" for k, v in report.block_losses.items())
    print(f"  step {step:5d}  {clock:7.1f} s  mean r² {report.loss_after:.3e}  "
          f"λ {report.lambda_:.1e}  rel L2 {error:.3e}  [{blocks}]", flush=True)


def _restore(state: dict[str, Any], model: torch.nn.Module, problem: pinn.Problem,
             optimizer: lt.LevenbergMarquardt) -> tuple[int, float, Any, list, dict]:
    """A checkpoint's network, problem, λ schedule and RNG put back; (step, clock, first time
    below 1e-3, history, phase seconds) to go on from."""
    device = next(model.parameters()).device
    model.load_state_dict({k: v.to(device) for k, v in state["model"].items()})
    problem.load_state_dict(state["problem"])
    optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["rng"])
    return (int(state["step"]), float(state["clock"]), state["first_below"],
            [tuple(h) for h in state["history"]], dict(state["phases"]))


def _condition(optimizer: lt.LevenbergMarquardt, problem: pinn.Problem) -> float:
    """cond(JᵀJ) at the problem's points (an eigendecomposition of the n × n matrix)."""
    _, a, _ = optimizer.normal_equations(problem.points)
    eigenvalues = torch.linalg.eigvalsh(a.double())
    # JᵀJ of a PINN is numerically singular: its smallest eigenvalue is rounding (≤ 0
    # included); then the condition is given as at least 1/ε64.
    smallest = max(float(eigenvalues[0]), float(eigenvalues[-1]) * 2.0 ** -52)
    return float(eigenvalues[-1]) / smallest


def split_recipe(example: ModuleType, overrides: dict[str, Any]) -> tuple[dict, dict]:
    """(build's keyword arguments, the loop's) from the example's RECIPE and `overrides`."""
    unknown = set(overrides) - set(example.RECIPE) - set(LOOP_KEYS)
    if unknown:
        raise ValueError(f"unknown recipe keys {sorted(unknown)}; {example.__name__} knows "
                         f"{sorted(example.RECIPE)}")
    recipe = {**example.RECIPE, **overrides}
    loop = {k: recipe[k] for k in LOOP_KEYS if k in recipe}
    return {k: v for k, v in recipe.items() if k not in LOOP_KEYS}, loop


def train(example: ModuleType, seed: int = 0, verbose: bool = False,
          checkpoint: str | None = None, checkpoint_every: float = 300.0,
          resume: str | None = None, pause_after: float | None = None,
          **overrides: Any) -> Run:
    """The example's recipe (with `overrides`) trained by LM from `seed`; `checkpoint`,
    `resume`, `pause_after`: a run in parts (train_lm)."""
    build_args, loop = split_recipe(example, overrides)
    problem, model, error = example.build(seed, **build_args)
    loop.setdefault("steps", 100_000)
    return train_lm(problem, model, error, verbose=verbose, checkpoint=checkpoint,
                    checkpoint_every=checkpoint_every, resume=resume, pause_after=pause_after,
                    identity=run_identity(example, seed, overrides), **loop)


def run_identity(example: ModuleType, seed: int, overrides: dict[str, Any]) -> dict[str, Any]:
    """What a checkpoint of the example's run must match to be resumed (load_checkpoint): the
    example's file name — run as a script its module is __main__, imported (bench/pinn.py) its
    name, one run either way, so that either may resume the other's checkpoint — the seed and
    the recipe but for RESUMABLE_KEYS."""
    recipe = {**example.RECIPE, **overrides}
    return {"example": Path(example.__file__).stem, "seed": seed,
            **{k: repr(v) for k, v in recipe.items() if k not in RESUMABLE_KEYS}}


def report(name: str, run: Run) -> None:
    below = f"{run.time_to_1e3:.1f} s" if run.time_to_1e3 is not None else "not reached"
    ratios = ", ".join(f"{k} {v:.2f}" for k, v in run.heldout_ratios.items())
    losses = ", ".join(f"{k} {v:.2e}" for k, v in run.block_losses.items())
    per_step = ", ".join(f"{k} {1e3 * v / max(run.steps, 1):.0f}"
                         for k, v in run.phase_seconds.items() if v > 0)
    print(f"{name}: {run.steps} LM steps in {run.seconds:.1f} s ({run.ms_per_step:.0f} ms/step), "
          f"{run.parameters} parameters, {run.points} points (m/n = "
          f"{run.points / run.parameters:.1f})")
    print(f"  mean squared residual per block: {losses}")
    print(f"  held-out / training RMS residual: {ratios}")
    print(f"  ms per step by phase: {per_step}")
    print(f"  time to relative L2 1e-3: {below}")
    print(f"  relative L2 error: {run.error:.3e}")


def main(example: ModuleType, name: str) -> Run:
    """The command line of every example: --seed, --budget, --steps, --points, --width,
    --depth, --resample-every, and --set KEY=VALUE for any other recipe key."""
    recipe = example.RECIPE
    parser = argparse.ArgumentParser(description=example.__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="network and points (default 0)")
    for key in ("budget", "steps", "points", "width", "depth", "resample_every"):
        if key in recipe or key == "steps":
            kind = float if key == "budget" else int
            parser.add_argument("--" + key.replace("_", "-"), type=kind, default=None,
                                help=f"default {recipe.get(key, 100_000)}")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="any other recipe key, a Python literal (e.g. --set "
                             "options={'geodesic_acceleration':False})")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--checkpoint", metavar="FILE", default=None,
                        help="write the run's state to FILE every --checkpoint-every training "
                             "seconds and at the end (a run in parts: --resume FILE)")
    parser.add_argument("--checkpoint-every", type=float, default=300.0, metavar="SECONDS")
    parser.add_argument("--resume", metavar="FILE", default=None,
                        help="go on from a checkpoint of the same seed and recipe (--budget, "
                             "--steps and device may change)")
    parser.add_argument("--pause-after", type=float, default=None, metavar="SECONDS",
                        help="stop after this many training seconds of this invocation, "
                             "checkpointed (needs --checkpoint); the budget stays for --resume")
    args = parser.parse_args()
    if args.pause_after is not None and args.checkpoint is None:
        parser.error("--pause-after needs --checkpoint FILE (the state a later --resume reads)")
    parts = {"checkpoint": args.checkpoint, "checkpoint_every": args.checkpoint_every,
             "resume": args.resume, "pause_after": args.pause_after}
    overrides = {k: v for k, v in vars(args).items()
                 if k not in ("seed", "set", "quiet", *parts) and v is not None}
    for item in args.set:
        key, _, value = item.partition("=")
        try:
            overrides[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            overrides[key] = value
    print(f"{name}: recipe {({**recipe, **overrides})}, seed {args.seed}")
    try:
        run = train(example, args.seed, verbose=not args.quiet, **parts, **overrides)
    except CheckpointError as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    report(name, run)
    if run.paused:
        budget = overrides.get("budget", recipe.get("budget"))
        print(f"  paused after {run.seconds:.1f} s of its {budget} s budget: go on with "
              f"--resume {args.checkpoint}")
    return run
