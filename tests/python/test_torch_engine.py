"""The torch path drives the library's own step (issue 27): every option of the step — the
penalties, every linear solver, the geodesic correction — does on lmtrain.torch what it does in
``lmtrain.fit`` (the C++ Trainer) on an equivalent Sequential started from the same parameters,
to float64 rounding; no Python code decides λ or accepts a step."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from spread import one_ulp, within
from torch_support import flat_parameters, lt, torch

import lmtrain

PACKAGE = Path(lmtrain.__file__).resolve().parent


def _problem(samples: int, seed: int = 3):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(samples, 3, generator=g, dtype=torch.float64) * 2 - 1
    # Input 2 is noise: ard has a group to switch off.
    y = (torch.sin(2 * x[:, :1]) + 0.5 * x[:, 1:2] ** 2
         + 0.05 * torch.randn(samples, 1, generator=g, dtype=torch.float64))
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(3, 6), torch.nn.Tanh(),
                                torch.nn.Linear(6, 1)).double()
    return model, x, y


CASES = [
    ({"regularization": "l2", "weight_decay": 1e-2}, 200),
    ({"regularization": "bayesian"}, 200),
    ({"regularization": "ard"}, 200),
    ({"linear_solver": "dual"}, 12),  # 12 residuals < 31 parameters
    ({"linear_solver": "cg"}, 200),
    ({"linear_solver": "eigen", "damping_matrix": "marquardt"}, 200),
    ({"linear_solver": "cholesky", "geodesic_acceleration": False,
      "damping": "multiplicative"}, 200),
]


@pytest.mark.parametrize("options,samples", CASES,
                         ids=[" ".join(f"{k}={v}" for k, v in c.items()) for c, _ in CASES])
def test_torch_path_equals_lmtrain_fit(options: dict, samples: int) -> None:
    model, x, y = _problem(samples)
    start = flat_parameters(model).numpy().copy()
    epochs = 6
    fitted, summary = lmtrain.fit([6, "tanh", 1], x.numpy(), y.numpy(), precision="float64",
                                  standardize_inputs=False, standardize_targets=False,
                                  initial_parameters=start, max_epochs=epochs, batch_size=0,
                                  **options)
    opt = lt.LevenbergMarquardt(model, fast_path=False, **options)
    reports = [opt.step(one_ulp(x), one_ulp(y)) for _ in range(epochs)]
    assert opt.path.startswith("torch.func")
    solver = options.get("linear_solver")
    if solver is not None:
        assert opt.plan["linear_solver"] == solver
    # torch's forward pass and Jacobian against lmtrain's, the rest the same products up to
    # BLAS's blocking; 6 steps amplify float64 rounding by cond(A + λD).  Largest gaps over the 7
    # cases, the kernel paths of scripts/measure-spread.sh and the torch path's data one ulp off:
    # parameters 1.6e-9 relative (eigen, marquardt), final loss 9.2e-10 relative (dual, whose 12
    # residuals the fit drives towards 0), weight decays 9.4e-12 (ard).  Bounds ≥ 1 000 times.
    within("parameters after 6 steps", flat_parameters(model), fitted.parameters, 2e-6,
           relative=True)
    assert sum(r.accepted for r in reports) >= 4
    within("final loss", opt.evaluate((x, y)), summary.final_loss, 1e-6, relative=True)
    if options.get("regularization") == "bayesian":
        within("weight decay", opt.state_dict()["weight_decays"][0], summary.final_weight_decay,
               1e-8, relative=True)
    if options.get("regularization") == "ard":
        rho = opt.state_dict()["weight_decays"]
        names = ["input 0", "input 1", "input 2"]
        library = {g.name: g.weight_decay for g in summary.penalty_groups}
        for i, name in enumerate(names):
            within(f"weight decay of {name}", rho[i],
                   library[f"x{i}" if f"x{i}" in library else name], 1e-8, relative=True)


@pytest.mark.parametrize("geodesic", [True, False])
@pytest.mark.parametrize("loss", ["mse", "huber"])
def test_geodesic_on_and_off_equal_the_native_step(geodesic: bool, loss: str) -> None:
    g = torch.Generator().manual_seed(8)
    x = torch.randn(80, 3, generator=g, dtype=torch.float64)
    y = torch.randn(80, 2, generator=g, dtype=torch.float64)

    def model() -> torch.nn.Sequential:
        torch.manual_seed(4)
        return torch.nn.Sequential(torch.nn.Linear(3, 7), torch.nn.Tanh(),
                                   torch.nn.Linear(7, 2)).double()

    a_model, b_model = model(), model()
    a = lt.LevenbergMarquardt(a_model, loss=loss, fast_path=False, slice_size=9,
                              geodesic_acceleration=geodesic, geodesic_backoff_max=0)
    b = lt.LevenbergMarquardt(b_model, loss=loss, geodesic_acceleration=geodesic,
                              geodesic_backoff_max=0)
    assert b.path == "native"
    corrections = 0
    for k in range(5):
        ra, rb = a.step(one_ulp(x), one_ulp(y)), b.step(x, y)
        assert (ra.accepted, ra.attempts, ra.geodesic_applied, ra.geodesic_refused) == \
            (rb.accepted, rb.attempts, rb.geodesic_applied, rb.geodesic_refused)
        corrections += ra.geodesic_applied + ra.geodesic_refused
        # Measured (scripts/measure-spread.sh, kernel paths and one ulp): ≤ 1.5e-13 at step 5;
        # bound ≥ 1 000 times that.
        within(f"step {k + 1} parameters", flat_parameters(a_model), flat_parameters(b_model),
               2e-10)
    assert (corrections > 0) == geodesic


def test_resume_through_state_dict_is_exact() -> None:
    # bayesian: λ's schedule and ρ both resume (the weight decays are part of state_dict).
    model, x, y = _problem(150, seed=9)
    twin = lt.LevenbergMarquardt(_problem(150, seed=9)[0], fast_path=False,
                                 regularization="bayesian")
    opt = lt.LevenbergMarquardt(model, fast_path=False, regularization="bayesian")
    for _ in range(3):
        opt.step(x, y)
        twin.step(x, y)
    resumed_model = _problem(150, seed=9)[0]
    resumed_model.load_state_dict(model.state_dict())
    resumed = lt.LevenbergMarquardt(resumed_model, fast_path=False, regularization="bayesian")
    resumed.load_state_dict(opt.state_dict())
    for _ in range(3):
        a, b = opt.step(x, y), resumed.step(x, y)
        assert (a.accepted, a.attempts, a.lambda_, a.weight_decay) == \
            (b.accepted, b.attempts, b.lambda_, b.weight_decay)
    torch.testing.assert_close(flat_parameters(resumed_model), flat_parameters(model), rtol=0,
                               atol=0)


def test_no_python_file_decides_lambda_or_accepts_a_step() -> None:
    # The attempt loop is the library's: no module of the package computes a gain ratio, raises
    # or lowers λ, or compares a trial's objective with the current one.
    suspicious = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare) and any(isinstance(op, (ast.Lt, ast.Gt))
                                                     for op in node.ops):
                names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
                if {"f0", "f1"} <= names or {"objective", "trial"} <= names:
                    suspicious.append(f"{path.name}:{node.lineno}")
            if isinstance(node, (ast.Assign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    name = t.attr if isinstance(t, ast.Attribute) else getattr(t, "id", "")
                    if name in ("gain_ratio", "lambda_", "_lambda"):
                        suspicious.append(f"{path.name}:{node.lineno}")
    assert not suspicious, suspicious


@pytest.mark.parametrize("fast_path", [False, True])
def test_fit_is_the_library_fit_run(fast_path: bool) -> None:
    # Mini-batches of 40 reshuffled every epoch by the library's RNG from `seed`: the torch
    # path's fit and the fast path's both run the fit of lmtrain.fit (the same permutations, the
    # same steps, the same Summary), from the same start.
    model, x, y = _problem(120, seed=6)
    start = flat_parameters(model).numpy().copy()
    fitted, summary = lmtrain.fit([6, "tanh", 1], x.numpy(), y.numpy(), precision="float64",
                                  standardize_inputs=False, standardize_targets=False,
                                  initial_parameters=start, max_epochs=5, batch_size=40, seed=3)
    opt = lt.LevenbergMarquardt(model, fast_path=fast_path)
    assert opt.path == ("native" if fast_path else "torch.func jacrev")
    history = opt.fit((one_ulp(x), one_ulp(y)), epochs=5, batch_size=40, seed=3)
    # Measured (scripts/measure-spread.sh, kernel paths and one ulp): parameters ≤ 1.7e-14,
    # losses ≤ 5.5e-14 relative: far inside the bounds.
    within("parameters after 15 steps", flat_parameters(model), fitted.parameters, 1e-8,
           relative=True)
    for epoch, (h, loss) in enumerate(zip(history, summary.loss_curve, strict=True)):
        within(f"epoch {epoch + 1} loss", h["loss"], loss, 1e-8, relative=True)
    assert opt.summary.steps == summary.steps == 15
    assert opt.summary.termination == "max_epochs" and history[-1]["termination"] == "max_epochs"
    assert "Termination" in opt.summary.full_report()


def test_fit_checkpoint_resumes_the_uninterrupted_run(tmp_path) -> None:
    # A run stopped after 3 epochs by its callback, resumed from its checkpoint for the rest,
    # ends with the parameters of 6 uninterrupted epochs, bit for bit.
    whole, x, y = _problem(90, seed=7)
    lt.LevenbergMarquardt(whole, fast_path=False).fit((x, y), epochs=6, batch_size=30)
    model = _problem(90, seed=7)[0]
    path = tmp_path / "run.ckpt"
    opt = lt.LevenbergMarquardt(model, fast_path=False)
    first = opt.fit((x, y), epochs=6, batch_size=30, checkpoint=path,
                    callbacks=[lambda epoch, loss, val: epoch == 3])
    assert len(first) == 3 and first[-1]["termination"] == "user_callback"
    rest = lt.LevenbergMarquardt(model, fast_path=False).fit((x, y), epochs=6, batch_size=30,
                                                           checkpoint=path, resume=path)
    # The resumed Summary carries the checkpoint's epochs, as lmtrain fit --resume does.
    assert [h["epoch"] for h in rest] == [1, 2, 3, 4, 5, 6]
    torch.testing.assert_close(flat_parameters(model), flat_parameters(whole), rtol=0, atol=0)


@pytest.mark.parametrize("fast_path", [False, True])
def test_precision_auto_is_the_library_rule_and_float32_stays_float32(fast_path: bool) -> None:
    # A float32 model: by default the library chooses the system (float64 under ard, as lmtrain
    # fit's precision = "auto", saying why); precision="float32" asked for is float32 throughout.
    def summary(**kwargs):
        model, x, y = _problem(120, seed=8)
        opt = lt.LevenbergMarquardt(model.float(), fast_path=fast_path, **kwargs)
        opt.fit((x.float(), y.float()), epochs=2)
        return opt.summary

    auto = summary(regularization="ard")
    assert auto.precision.startswith("mixed"), auto.precision
    assert "ard" in auto.precision_reason, auto.precision_reason
    asked = summary(regularization="ard", precision="float32")
    assert asked.precision == "float32" and asked.precision_reason == ""
    assert "float32 system" in asked.full_report()
    plain = summary()  # 120 rows, far below the rows that make auto choose float64
    assert plain.precision == "float32" and "16384" in plain.precision_reason
