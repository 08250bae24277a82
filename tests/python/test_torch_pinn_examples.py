"""Short runs of the PINN examples (examples/pinn/), each with a loose bound on its relative L2
error against its reference: the examples, their references and lmtrain.torch.pinn work end to
end.  A fixed number of LM steps (not a time budget), so a loaded machine is slower but not
different; the full recipes and their figures are bench/pinn.py's (docs/pinn.md)."""

from __future__ import annotations

import copy
import importlib
import sys
import warnings
from pathlib import Path

import pytest
from torch_support import torch  # noqa: F401  (skips or fails without torch, as the others)

import lmtrain.torch as lt
from lmtrain.torch import pinn

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "pinn"


@pytest.fixture(scope="module")
def examples():
    sys.path.insert(0, str(EXAMPLES))
    try:
        yield lambda name: importlib.import_module(name)
    finally:
        sys.path.remove(str(EXAMPLES))


# name, recipe overrides, steps, bound.  Measured (seed 0, OMP_NUM_THREADS=1): poisson2d
# 2.2e-4, helmholtz 4.7e-3, burgers 5.3e-3 (Burgers' error stays near 0.2 until the shock
# forms, about step 100), allen_cahn 1.4e-2 (with the recipe's initial points scaled to the
# run's, 500; 1.4e-2 with the old 256 too); the bounds leave a factor of 7–10.  The recipes of
# issue 39, measured the same way (example.train(0, steps=steps, budget=1e9, **overrides), as
# below): kdv 6.5e-2 (from 1.37 at the first step; 6.4 s on the shared machine by the Taylor
# route's u_xxx, 17 s by the jacrev route before it), allen_cahn with causal weights 2.1e-2, poisson2d with
# residual-based attention (γ 0.9, η 0.1) 1.3e-4 (7.7e-7 after 150 steps, where the plain
# recipe has 3.0e-6); bounds a factor 7–8 above.  Burgers' recipe draws its interior points by
# the residual since 2026-11-27 (pinn.ResidualAdaptive): 2.78e-4 after the 130 steps (5.3e-3
# with its uniform draws before), 2.78e-4–3.87e-4 over OPENBLAS_CORETYPE Haswell / Sandybridge
# with LMTRAIN_SIMD baseline / SkylakeX and LMTRAIN_SIMD avx2; the bound 3e-3 is 8× the largest.
# Its network is 3 × 30 after five harmonics (2 251 parameters) since 2026-11-27, later: 3.06e-4
# after the 130 steps on all four of those paths (3.059364907917e-4 and …910594e-4 for
# Sandybridge + baseline and SkylakeX: the trajectory differs in the 12th digit), 45–65 s of one
# core; the bound stays 3e-3, 10× above.
SHORT_RUNS = [
    ("poisson2d", dict(points=900), 40, 2e-3),
    ("helmholtz", dict(points=1000, points_max=1000), 100, 5e-2),
    ("burgers", dict(points=2000, points_max=2000, edge_points=200), 130, 3e-3),
    ("allen_cahn", dict(points=1000, points_max=1000, horizon_steps=50, initial_points=500), 60,
     0.1),
    ("kdv", dict(points=600, points_max=600, horizon_steps=25), 40, 0.5),
    ("allen_cahn", dict(points=1000, points_max=1000, horizon_steps=50, initial_points=500,
                        causal_epsilon=1.0), 60, 0.15),
    ("poisson2d", dict(points=900, rba=(0.9, 0.1)), 40, 1e-3),
    # The initial condition imposed exactly (u = u₀ + t·N, pinn.HardConstrained): 3.35e-3 after
    # the 60 steps, the same to 5 digits over OPENBLAS_CORETYPE Haswell, Sandybridge with
    # LMTRAIN_SIMD baseline and SkylakeX with avx2 (1.39e-2 with the condition soft, as above);
    # the bound 2.5e-2 is 7.5× that.
    ("allen_cahn", dict(points=1000, points_max=1000, horizon_steps=50, initial_points=500,
                        hard_initial=True), 60, 2.5e-2),
]
IDS = ["poisson2d", "helmholtz", "burgers", "allen_cahn", "kdv", "allen_cahn-causal",
       "poisson2d-rba", "allen_cahn-hard"]


CONDITIONS = {"poisson2d": {"pde", "boundary"}, "helmholtz": {"pde", "boundary"},
              "burgers": {"pde", "initial", "boundary"}, "allen_cahn": {"pde", "initial"},
              "kdv": {"pde", "initial"}}


@pytest.mark.parametrize("name, overrides, steps, bound", SHORT_RUNS, ids=IDS)
def test_a_short_run_of_each_example_approaches_its_reference(examples, name, overrides, steps,
                                                              bound) -> None:
    example = examples(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pinn.InterpolationWarning)
        run = example.train(0, steps=steps, budget=1e9, **overrides)
    assert run.steps == steps
    first = run.history[0][3]
    assert run.error < bound < first, (run.error, first)
    assert set(run.block_losses) == CONDITIONS[name] - (
        {"initial"} if overrides.get("hard_initial") else set())
    assert all(v < 1 for v in run.block_losses.values())
    assert run.phase_seconds["jacobian"] > 0


def test_the_example_command_line_runs(examples, capsys) -> None:
    example = examples("poisson2d")
    import common

    argv = sys.argv
    sys.argv = ["poisson2d.py", "--steps", "3", "--points", "100", "--quiet", "--set",
                "options={'geodesic_acceleration': False}"]
    try:
        run = common.main(example, "poisson2d")
    finally:
        sys.argv = argv
    out = capsys.readouterr().out
    assert run.steps == 3 and "relative L2 error" in out and "held-out / training" in out


@pytest.mark.parametrize("form", ["fourier", "sine", "fixed"])
def test_the_two_soliton_kdv_has_its_exact_values_and_trains(examples, form: str) -> None:
    # examples/pinn/kdv_solitons.py, vRBA's KdV, in its three forms (fourier: vRBA's, B
    # trained, jacrev route; sine and fixed: pinn.HardConstrained, the Taylor route): (1) the
    # network's form gives the exact initial values and u(t, 0), u(t, 20) whatever its
    # parameters; (2) the problem's residuals vanish on the exact solution (its PDE and its
    # Neumann condition are the right ones); (3) a short run trains.  Measured (seed 0, 15
    # steps, 600 + 50 points, one core): the exact solution's rows 3.0e-15 at most; relative L2
    # from 42.9 at the first step to 1.21 with fourier (0.6 s per step), 1.2088375127–
    # 1.2088375129 over OPENBLAS_CORETYPE Haswell, Sandybridge with LMTRAIN_SIMD baseline and
    # SkylakeX with avx2; sine 43.4 → 1.263 (0.3 s per step), 1.2627447892–1.2627447930 on
    # those paths; fixed 43.0 → 1.111, 1.1114111910–1.1114111911.  The bound 4 is 3.2× the
    # largest; the form alone is far off (43).
    example = examples("kdv_solitons")
    import common
    import references

    overrides = dict(points=600, points_max=600, edge_points=50, form=form)
    build_args, _ = common.split_recipe(example, overrides)
    problem, model, _ = example.build(0, **build_args)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=generator, dtype=p.dtype))
    s = torch.linspace(0, 1, 41, dtype=torch.float64).unsqueeze(1)
    zero = torch.zeros_like(s)
    for t, x in ((zero, 20 * s), (5 * s, zero), (5 * s, zero + 20)):
        u = model(torch.cat([t, x], dim=1))
        exact = references.kdv_two_soliton(t, x)
        assert torch.abs(u - exact).max() < 1e-12 * exact.abs().max()

    class Exact(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.unused = torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))

        def forward(self, p: torch.Tensor) -> torch.Tensor:
            return references.kdv_two_soliton(p[:, :1], p[:, 1:2]) + 0 * self.unused

    rows = problem(Exact(), problem.points)
    assert rows.shape[0] == 650 and torch.abs(rows).max() < 1e-9
    assert torch.abs(problem(model, problem.points)).max() > 1  # and they do not on the model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pinn.InterpolationWarning)
        run = example.train(0, steps=15, budget=1e9, **overrides)
    assert run.steps == 15 and set(run.block_losses) == {"pde", "neumann"}
    first = run.history[0][3]
    assert run.error < 4.0 < 10.0 < first, (run.error, first)


# A run in parts (common.train_lm's checkpoint / resume): the examples' recipes with their
# state between steps — residual-adaptive draws growing every 2 steps (Burgers), causal weights
# with time marching (Allen–Cahn), residual-based attention on a fixed grid (Poisson-2D) — each
# stopped after 3 steps, resumed in fresh objects and run to 6, against 6 steps in one go.
RESUMED = [
    ("burgers", dict(points=200, points_max=800, grow_every=2, edge_points=60, width=10,
                     harmonics=2)),
    ("allen_cahn", dict(points=200, points_max=200, initial_points=100, horizon_steps=4,
                        width=10, causal_epsilon=1.0)),
    ("poisson2d", dict(points=100, width=10, rba=(0.9, 0.1))),
    # The last phase on held points (polish: here the whole budget, so from the first step):
    # the checkpoint keeps them held.
    ("burgers", dict(points=100, points_max=100, edge_points=20, width=8, harmonics=0,
                     polish=(1.0, 2))),
]


@pytest.mark.parametrize("name, overrides", RESUMED, ids=[r[0] for r in RESUMED])
def test_a_run_resumed_from_its_checkpoint_goes_on_bit_for_bit(examples, tmp_path, name,
                                                               overrides) -> None:
    example = examples(name)
    path = str(tmp_path / "run.pt")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pinn.InterpolationWarning)
        whole = example.train(0, steps=6, budget=1e9, **overrides)
        first = example.train(0, steps=3, budget=1e9, checkpoint=path, **overrides)
        rest = example.train(0, steps=6, budget=1e9, resume=path, checkpoint=path, **overrides)
    assert first.steps == 3 and rest.resumed_at == 3 and rest.steps == 6
    # Every step's objective and error, and the final network's error, the same bits: the
    # points, the point weights, λ's schedule and the network were restored (history: step,
    # training clock, objective, error; the clock goes on from the checkpoint's).
    assert fits(rest) == fits(whole), (rest.history, whole.history)
    assert rest.error == whole.error and rest.final_lambda == whole.final_lambda
    assert rest.history[:3] == first.history and rest.seconds >= first.seconds
    # The checkpoint is the run's end now: resuming it with the same length does no step.
    again = example.train(0, steps=6, budget=1e9, resume=path, **overrides)
    assert again.steps == 6 and again.history == rest.history and again.error == whole.error


def fits(run) -> list[tuple[int, float, float]]:
    return [(step, loss, error) for step, _, loss, error in run.history]


def test_polish_trains_the_last_of_its_budget_on_a_held_larger_draw(examples) -> None:
    # polish = (fraction, factor): from (1 − fraction) × the budget on, one uniform draw of
    # factor × the counts is kept (Problem.hold); here the whole budget, from the first step.
    example = examples("burgers")
    small = dict(points=100, points_max=100, edge_points=20, width=8, harmonics=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pinn.InterpolationWarning)
        run = example.train(0, steps=4, budget=1e9, polish=(1.0, 3), **small)
        plain = example.train(0, steps=4, budget=1e9, **small)
    assert run.steps == 4 and run.points == 3 * 120 and plain.points == 120
    assert fits(run) != fits(plain)
    with pytest.raises(ValueError, match=r"polish = \(1.5, 2\): expected \(fraction"):
        example.train(0, steps=2, budget=1e9, polish=(1.5, 2), **small)


def test_polish_may_draw_its_held_pde_points_by_the_residual(examples) -> None:
    # polish = (fraction, factor, (pool, k, c)): the held draw of "pde" by its residual
    # (pinn.ResidualAdaptive wrapped around the recipe's uniform draw at the hold).  The
    # reference is the uniform hold at the same step from the same network: with c = 0 and
    # k = 1 the kept points are drawn with probability ∝ |F|, so the mean |F|² over them is
    # about E|F|³ / E|F|, above E F² wherever |F| varies.  After 12 steps (at step 0 the
    # untrained network's |F| is nearly flat: 1.11×) measured 1.63×, 2.11×, 2.09× the uniform
    # hold's on seeds 0, 1, 2.
    common = examples("common")
    example = examples("allen_cahn")
    recipe = dict(points=200, points_max=200, initial_points=100, horizon_steps=4, width=10)
    held = {}
    for name, hold in (("uniform", (3, None)), ("residual", (3, (4, 1.0, 0.0)))):
        build, _ = common.split_recipe(example, recipe)
        problem, model, _ = example.build(0, **build)
        optimizer = lt.LevenbergMarquardt(model, residual_fn=problem)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", pinn.InterpolationWarning)
            for step in range(12):
                common._one_step(problem, model, optimizer, step, 1)
            before = copy.deepcopy(model)
            common._one_step(problem, model, optimizer, 12, 1, hold)
        assert problem.held and problem.points.shape[0] == 3 * 300, problem.points.shape
        held[name] = problem.mean_squared(before, problem.points)["pde"]
    assert held["residual"] > 1.3 * held["uniform"], held
    build, _ = common.split_recipe(example, recipe)
    with pytest.raises(ValueError, match=r"its third item is the held draw's residual-adaptive"):
        common._polish_now(example.build(0, **build)[0], (1.0, 2, 4), 0.0, 1.0)


def test_a_checkpoint_of_another_run_or_no_checkpoint_is_a_clear_error(examples,
                                                                        tmp_path) -> None:
    example = examples("poisson2d")
    path = tmp_path / "run.pt"
    run = example.train(0, steps=2, budget=1e9, points=100, width=10, checkpoint=str(path))
    assert run.steps == 2 and path.exists() and not (tmp_path / "run.pt.partial").exists()
    with pytest.raises(ValueError, match=r"written by another run \(width: '10' there, '12' here\)"):
        example.train(0, steps=4, budget=1e9, points=100, width=12, resume=str(path))
    with pytest.raises(ValueError, match=r"seed: 0 there, 1 here"):
        example.train(1, steps=4, budget=1e9, points=100, width=10, resume=str(path))
    with pytest.raises(ValueError, match="no such file"):
        example.train(0, steps=4, budget=1e9, resume=str(tmp_path / "none.pt"))
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="bad.pt: not a checkpoint of this loop"):
        example.train(0, steps=4, budget=1e9, resume=str(tmp_path / "bad.pt"))


def test_a_paused_run_checkpoints_and_resumes_to_its_budget(examples, tmp_path) -> None:
    example = examples("poisson2d")
    path = str(tmp_path / "run.pt")
    overrides = dict(points=100, width=10)
    with pytest.raises(ValueError, match="pause_after needs a checkpoint"):
        example.train(0, steps=5, budget=1e9, pause_after=1e-9, **overrides)
    # Paused after its first step (any positive time): a resume goes on to the 5 steps.
    part = example.train(0, steps=5, budget=1e9, pause_after=1e-9, checkpoint=path, **overrides)
    assert part.paused and part.steps == 1
    rest = example.train(0, steps=5, budget=1e9, resume=path, **overrides)
    whole = example.train(0, steps=5, budget=1e9, **overrides)
    assert not rest.paused and rest.steps == 5 and fits(rest) == fits(whole)
