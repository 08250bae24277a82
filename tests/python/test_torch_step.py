"""One LM step of lmtrain.torch against the library's own step (the fast path) and against an
independent float64 NumPy reference of the same damped solve; the optimizer's state; bad input."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from test_torch_jacobian import TwoInputResidualNet, _data, _model
from spread import one_ulp, within
from torch_support import flat_parameters, lt, reference_jacobian, torch


def _sequential(seed: int, outputs: int = 2, activation=torch.nn.Tanh) -> torch.nn.Sequential:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(3, 8), activation(), torch.nn.Linear(8, 8),
                               torch.nn.Sigmoid(), torch.nn.Linear(8, outputs)).double()


@pytest.mark.parametrize("damping", ["nielsen", "multiplicative"])
@pytest.mark.parametrize("loss", ["mse", "cross_entropy", "huber"])
def test_torch_path_step_equals_native_step(loss: str, damping: str) -> None:
    g = torch.Generator().manual_seed(11)
    # 200 residuals for 122 parameters: the native step chooses cholesky (not the dual form),
    # with geodesic acceleration, as the torch path does.
    x = torch.randn(100, 3, generator=g, dtype=torch.float64)
    y = (torch.randint(0, 2, (100,), generator=g) if loss == "cross_entropy"
         else torch.randn(100, 2, generator=g, dtype=torch.float64))
    torch_model, native_model = _sequential(3), _sequential(3)
    on_torch = lt.LevenbergMarquardt(torch_model, loss=loss, damping=damping, fast_path=False,
                                     slice_size=7)
    native = lt.LevenbergMarquardt(native_model, loss=loss, damping=damping)
    assert on_torch.path == "torch.func jacrev" and native.path == "native"
    geodesic_applied = 0
    # The two paths round differently (torch's kernels against lmtrain's), and 4 steps amplify
    # it.  Largest gaps over the 6 cases, the kernel paths of scripts/measure-spread.sh and the
    # torch path's data one ulp off: parameters 1.7e-12 (cross_entropy, nielsen, step 4), λ
    # 1.1e-12 relative, the loss after a step 6.2e-14.  Bounds ≥ 1 000 times that.
    for k in range(4):
        a, b = on_torch.step(one_ulp(x), one_ulp(y)), native.step(x, y)
        geodesic_applied += a.geodesic_applied
        assert (a.accepted, a.attempts, a.rejected) == (b.accepted, b.attempts, b.rejected)
        within(f"step {k + 1} lambda", a.lambda_, b.lambda_, 2e-9, relative=True)
        within(f"step {k + 1} loss after", a.loss_after, b.loss_after, 1e-10, relative=True)
        within(f"step {k + 1} parameters", flat_parameters(torch_model),
               flat_parameters(native_model), 2e-9)
    within("state lambda", on_torch.state_dict()["lambda"], native.state_dict()["lambda"], 2e-9,
           relative=True)
    if (loss, damping) == ("mse", "nielsen"):  # (the others refuse every correction here)
        assert geodesic_applied > 0


@pytest.mark.parametrize("given", [None, True, False])
def test_geodesic_auto_is_off_for_softmax_losses_on_both_paths(given: bool | None) -> None:
    # geodesic_acceleration unset (auto) computes no correction with cross_entropy (the library's
    # rule, SolverOptions::geodesic_acceleration); True computes one on every attempt.  Both
    # paths resolve it the same way.
    g = torch.Generator().manual_seed(5)
    x = torch.randn(100, 3, generator=g, dtype=torch.float64)
    y = torch.randint(0, 2, (100,), generator=g)
    options = {} if given is None else {"geodesic_acceleration": given}
    for fast_path in (False, True):
        opt = lt.LevenbergMarquardt(_sequential(3), loss="cross_entropy", fast_path=fast_path,
                                    geodesic_backoff_max=0, **options)
        report = opt.step(x, y)
        computed = report.geodesic_applied + report.geodesic_refused
        assert computed == (report.attempts if given else 0), (fast_path, report)
        assert report.geodesic_skipped == 0


def test_geodesic_step_equals_numpy_reference() -> None:
    # Transtrum & Sethna's correction: a' = (A + λI)⁻¹Jᵀr_vv with r_vv by central differences
    # (h = 0.1) along v = −δ, δ ← δ + a'/2, kept when 2‖a'‖ ≤ 0.75‖δ‖.
    model = _model(seed=12, outputs=2)
    reference = copy.deepcopy(model)
    x, y = _data(60, 2, "mse", seed=13)
    lam = 30.0
    residuals = lambda f: (f(*x) - y).reshape(-1)  # noqa: E731
    j = reference_jacobian(reference, residuals).numpy()
    theta = flat_parameters(reference).numpy()
    r = residuals(reference).detach().numpy()
    a = j.T @ j + lam * np.eye(theta.size)
    delta = np.linalg.solve(a, j.T @ r)

    def at(point):
        m = copy.deepcopy(reference)
        torch.nn.utils.vector_to_parameters(torch.from_numpy(point), m.parameters())
        return residuals(m).detach().numpy()

    r_vv = (at(theta - 0.1 * delta) + at(theta + 0.1 * delta) - 2 * r) / 0.01
    correction = np.linalg.solve(a, j.T @ r_vv)
    assert 2 * np.linalg.norm(correction) <= 0.75 * np.linalg.norm(delta)
    expected = theta - (delta + correction / 2)
    assert 0.5 * at(expected) @ at(expected) < 0.5 * r @ r  # the trial is accepted
    report = lt.LevenbergMarquardt(model, damping="multiplicative", lambda_initial=lam,
                                   slice_size=16).step(x, y)
    assert report.accepted and report.geodesic_applied == 1
    np.testing.assert_allclose(flat_parameters(model).numpy(), expected, rtol=0, atol=1e-10)


def _reference_step(model, x, y, lam: float, marquardt: bool):
    """θ after one multiplicative-damping LM step in NumPy float64 (λ ×10 on rejection)."""
    residuals = lambda f: (f(*x) - y).reshape(-1)  # noqa: E731
    j = reference_jacobian(model, residuals).numpy()
    theta = flat_parameters(model).numpy()
    r = residuals(model).detach().numpy()
    f0 = 0.5 * r @ r
    a, g = j.T @ j, j.T @ r
    d = np.clip(np.diag(a), 1e-6, 1e32) if marquardt else np.ones_like(theta)
    trial_model = copy.deepcopy(model)
    for _ in range(10):
        delta = np.linalg.solve(a + lam * np.diag(d), g)
        trial = theta - delta
        torch.nn.utils.vector_to_parameters(torch.from_numpy(trial), trial_model.parameters())
        rt = residuals(trial_model).detach().numpy()
        if 0.5 * rt @ rt < f0:
            return trial, lam * 0.1
        lam *= 10
    return theta, lam


@pytest.mark.parametrize("marquardt", [False, True])
def test_step_equals_numpy_reference_on_a_non_sequential_model(marquardt: bool) -> None:
    model = _model(seed=8, outputs=2)
    x, y = _data(30, 2, "mse", seed=9)
    lam = 1e-2
    for _ in range(3):
        expected, lam_next = _reference_step(model, x, y, lam, marquardt)
        opt = lt.LevenbergMarquardt(model, damping="multiplicative", lambda_initial=lam,
                                    damping_matrix="marquardt" if marquardt else "identity",
                                    slice_size=8, geodesic_acceleration=False)
        report = opt.step(x, y)
        assert report.accepted
        np.testing.assert_allclose(flat_parameters(model).numpy(), expected, rtol=0, atol=1e-10)
        assert opt.lambda_ == pytest.approx(lam_next, rel=1e-12)
        lam = lam_next


def test_state_dict_resumes_the_schedule() -> None:
    g = torch.Generator().manual_seed(5)
    x = torch.randn(25, 3, generator=g, dtype=torch.float64)
    y = torch.randn(25, 2, generator=g, dtype=torch.float64)
    for fast_path in (False, "auto"):
        model = _sequential(4)
        opt = lt.LevenbergMarquardt(model, fast_path=fast_path)
        for _ in range(3):
            opt.step(x, y)
        state = opt.state_dict()
        assert state["lambda"] != pytest.approx(1e-3)
        resumed_model = copy.deepcopy(model)
        resumed = lt.LevenbergMarquardt(resumed_model, fast_path=fast_path)
        resumed.load_state_dict(state)
        a, b = opt.step(x, y), resumed.step(x, y)
        assert a.lambda_ == b.lambda_ and a.loss_after == b.loss_after
        torch.testing.assert_close(flat_parameters(model), flat_parameters(resumed_model),
                                   rtol=0, atol=0)
        with pytest.raises(ValueError, match="lambda"):
            resumed.load_state_dict({"lambda": -1.0, "nu": 2.0, "floor": 0.0})


def test_repr_shows_the_figures_of_a_converged_step() -> None:
    # A converged fit's loss and λ are far below 1e-6: the repr must show them, not 0.000000.
    g = torch.Generator().manual_seed(6)
    x = torch.randn(40, 3, generator=g, dtype=torch.float64)
    with torch.no_grad():
        y = _sequential(7)(x) * (1 + 1e-6 * torch.randn(40, 2, generator=g, dtype=torch.float64))
    report = lt.LevenbergMarquardt(_sequential(7), lambda_initial=1e-9).step(x, y)
    assert 0 < report.loss < 1e-9 and 0 < report.lambda_ < 1e-6
    shown = dict(field.split("=") for field in repr(report)[len("StepReport("):-1].split(", "))
    for name in ("loss", "loss_after", "lambda_"):
        assert float(shown[name]) == pytest.approx(getattr(report, name), rel=1e-5), shown
    assert shown["accepted"] == str(report.accepted)
    opt = lt.LevenbergMarquardt(_sequential(7), lambda_initial=1e-9)
    opt.fit((x, y), epochs=3, shuffle=False)
    for record in opt.summary.history:
        assert 0 < record.training_loss < 1e-6
        shown = dict(f.split("=") for f in repr(record)[len("EpochRecord("):-1].split(", "))
        assert float(shown["training_loss"]) == pytest.approx(record.training_loss, rel=1e-5)
        assert int(shown["epoch"]) == record.epoch


def test_geodesic_backoff_is_the_same_on_both_paths_and_resumes() -> None:
    # A ratio so small that every correction is refused: after each refusal the next 1, 2, 2 …
    # attempts skip it.  Both paths skip the same attempts, and state_dict carries where the
    # backoff stands, so a resumed optimizer skips what the original does.
    g = torch.Generator().manual_seed(8)
    x = torch.randn(100, 3, generator=g, dtype=torch.float64)
    y = torch.randn(100, 2, generator=g, dtype=torch.float64)
    options = dict(geodesic_ratio=1e-9, geodesic_backoff_max=2, max_attempts=3)
    torch_model, native_model = _sequential(9), _sequential(9)
    on_torch = lt.LevenbergMarquardt(torch_model, fast_path=False, **options)
    native = lt.LevenbergMarquardt(native_model, **options)
    counts = []
    for k in range(5):
        a, b = on_torch.step(one_ulp(x), one_ulp(y)), native.step(x, y)
        counts.append((a.geodesic_applied, a.geodesic_refused, a.geodesic_skipped))
        assert counts[-1] == (b.geodesic_applied, b.geodesic_refused, b.geodesic_skipped)
        assert a.geodesic_refused + a.geodesic_skipped == a.attempts
        # Measured as in the first test: ≤ 2.1e-12 (step 5); bound ≥ 1 000 times that.
        within(f"step {k + 1} parameters", flat_parameters(torch_model),
               flat_parameters(native_model), 5e-9)
    assert sum(c[2] for c in counts) > 0 and sum(c[0] for c in counts) == 0
    state = on_torch.state_dict()
    assert (state["geodesic_skip"], state["geodesic_backoff"]) == (
        native.state_dict()["geodesic_skip"], native.state_dict()["geodesic_backoff"])
    assert state["geodesic_backoff"] > 0
    for opt, model, fast_path in ((on_torch, torch_model, False), (native, native_model, "auto")):
        resumed_model = copy.deepcopy(model)
        resumed = lt.LevenbergMarquardt(resumed_model, fast_path=fast_path, **options)
        resumed.load_state_dict(opt.state_dict())
        for _ in range(3):
            a, b = opt.step(x, y), resumed.step(x, y)
            assert (a.geodesic_refused, a.geodesic_skipped) == (b.geodesic_refused,
                                                                b.geodesic_skipped)
        torch.testing.assert_close(flat_parameters(model), flat_parameters(resumed_model),
                                   rtol=0, atol=0)
    with pytest.raises(ValueError, match="geodesic"):
        on_torch.load_state_dict(dict(state, geodesic_skip=-1))


def test_mixed_precision_step_is_close_to_float64() -> None:
    g = torch.Generator().manual_seed(6)
    x = torch.randn(50, 3, generator=g, dtype=torch.float64)
    y = torch.randn(50, 2, generator=g, dtype=torch.float64)
    m64, m32 = _sequential(7), _sequential(7).float()
    lt.LevenbergMarquardt(m64, fast_path=False).step(x, y)
    report = lt.LevenbergMarquardt(m32, fast_path=False, precision="mixed").step(x.float(),
                                                                                 y.float())
    assert report.accepted
    np.testing.assert_allclose(flat_parameters(m32).double(), flat_parameters(m64), atol=1e-4)


# ---- bad input: an exception that names the problem, parameters unchanged --------------------
def _unchanged(model, before):
    torch.testing.assert_close(flat_parameters(model), before, rtol=0, atol=0)


def test_parameters_that_do_not_require_grad() -> None:
    model = _model()
    model.head.weight.requires_grad_(False)
    with pytest.raises(ValueError, match=r"head\.weight.*require grad"):
        lt.LevenbergMarquardt(model)


def test_inputs_on_another_device() -> None:
    model = _model()
    before = flat_parameters(model)
    x, y = _data(5, 3, "mse")
    opt = lt.LevenbergMarquardt(model)
    with pytest.raises(ValueError, match="meta.*cpu"):
        opt.step((x[0].to("meta"), x[1]), y)
    _unchanged(model, before)


def test_residual_fn_of_the_wrong_shape_or_not_finite() -> None:
    model = _model(outputs=1)
    before = flat_parameters(model)
    x, _ = _data(6, 1, "mse")
    matrix = lt.LevenbergMarquardt(model, residual_fn=lambda m, x, y: m(*x))
    with pytest.raises(ValueError, match=r"shape \(6, 1\).*vector"):
        matrix.step(x)
    _unchanged(model, before)
    calls = []

    def growing(m, inputs, y):  # one residual more at every call: the trial's count differs
        calls.append(1)
        return m(*inputs)[: 4 + len(calls) % 2, 0]

    with pytest.raises(ValueError, match="trial point"):
        lt.LevenbergMarquardt(model, residual_fn=growing, jacobian="autograd").step(x)
    _unchanged(model, before)
    # The per-point route (the default) evaluates it again at the linearization point first.
    with pytest.raises(ValueError, match="evaluated again for its Jacobian"):
        lt.LevenbergMarquardt(model, residual_fn=growing).step(x)
    _unchanged(model, before)

    def not_finite(m, inputs, y):
        r = m(*inputs)[:, 0]
        return torch.cat([r[:3], r[3:] / 0.0])

    with pytest.raises(ValueError, match="non-finite"):
        lt.LevenbergMarquardt(model, residual_fn=not_finite).step(x)
    _unchanged(model, before)


def _small_problem() -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(4)
    model = torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.Tanh(),
                                torch.nn.Linear(8, 1)).double()
    x = torch.rand(40, 2, dtype=torch.float64)
    return model, x, torch.sin(x[:, :1])


def _with_a_bad_value(x: torch.Tensor, y: torch.Tensor,
                      where: str) -> tuple[torch.Tensor, torch.Tensor]:
    """A NaN in x's sample 7 or an inf in y's sample 30."""
    bad_x, bad_y = x.clone(), y.clone()
    if where == "x":
        bad_x[7, 1] = float("nan")
    else:
        bad_y[30, 0] = float("inf")
    return bad_x, bad_y


@pytest.mark.parametrize("where", ["x", "y"])
def test_fast_path_refuses_non_finite_data_and_keeps_the_parameters(where: str) -> None:
    # NativeStep checks its own copies of x and y before the step, and fit()'s trainer its data
    # sets: a NaN in x or an inf in y is a ValueError, the parameters stay bit for bit, and the
    # next finite step works from them.
    model, x, y = _small_problem()
    opt = lt.LevenbergMarquardt(model)
    assert opt.path == "native"
    opt.step(x, y)
    before = flat_parameters(model)
    bad_x, bad_y = _with_a_bad_value(x, y, where)
    with pytest.raises(ValueError, match="NaN or inf; parameters are unchanged"):
        opt.step(bad_x, bad_y)
    _unchanged(model, before)
    # fit(): the library's trainer validates its data sets and names the sample.
    sample = 7 if where == "x" else 30
    with pytest.raises(ValueError, match=f"sample {sample} column .*non-finite"):
        opt.fit((bad_x, bad_y), epochs=1, shuffle=False)
    _unchanged(model, before)
    with torch.no_grad():
        mse = float(((model(x) - y) ** 2).mean())
    report = opt.step(x, y)  # from the kept parameters: its starting loss is theirs
    assert report.loss == pytest.approx(mse, rel=1e-12)
    assert report.loss_after <= report.loss


@pytest.mark.parametrize("where", ["x", "y"])
def test_torch_path_refuses_non_finite_data_and_keeps_the_parameters(where: str) -> None:
    # The torch path checks as the fast path does (before: x's NaN ended the step with
    # 'non_finite_objective' and no error, and fit() returned an empty history).
    model, x, y = _small_problem()
    opt = lt.LevenbergMarquardt(model, fast_path=False)
    assert opt.path.startswith("torch.func")
    opt.step(x, y)
    before = flat_parameters(model)
    bad_x, bad_y = _with_a_bad_value(x, y, where)
    sample = 7 if where == "x" else 30
    with pytest.raises(ValueError, match=f"^{where} holds 1 NaN or inf value.*sample {sample};"):
        opt.step(bad_x, bad_y)
    _unchanged(model, before)
    with pytest.raises(ValueError, match=f"^{where} holds .*sample {sample};"):
        opt.fit((bad_x, bad_y), epochs=1, shuffle=False)
    with pytest.raises(ValueError, match=f"^validation {where} holds .*sample {sample};"):
        opt.fit((x, y), epochs=1, validation=(bad_x, bad_y))
    _unchanged(model, before)
    with pytest.raises(TypeError, match=r"takes torch tensors, not ndarray/ndarray.*from_numpy"):
        opt.fit((x.numpy(), y.numpy()), epochs=1)
    _unchanged(model, before)


@pytest.mark.parametrize("fast_path", [True, False])
def test_data_of_another_float_dtype_is_converted_to_the_models(fast_path: bool) -> None:
    # float64 data for a float32 model: both paths convert it (the torch path raised torch's
    # "mat1 and mat2 must have the same dtype"), and train as on the converted data, bit for bit.
    x = torch.rand(60, 2, dtype=torch.float64)
    y = torch.sin(3 * x[:, :1]) * x[:, 1:]
    runs = []
    for xd, yd in ((x, y), (x.float(), y.float())):
        torch.manual_seed(5)
        model = torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.Tanh(),
                                    torch.nn.Linear(8, 1))
        opt = lt.LevenbergMarquardt(model, fast_path=fast_path)
        assert (opt.path == "native") == fast_path
        losses = [opt.step(xd, yd).loss_after for _ in range(3)]
        losses += [h["loss"] for h in opt.fit((xd, yd), epochs=2, validation=(xd, yd))]
        runs.append((losses, flat_parameters(model)))
    assert runs[0][0] == runs[1][0]
    torch.testing.assert_close(runs[0][1], runs[1][1], rtol=0, atol=0)
    assert runs[0][0][-1] < runs[0][0][0]


def test_buffers_that_change_in_forward() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4),
                                torch.nn.Tanh(), torch.nn.Linear(4, 1)).double()
    before = flat_parameters(model)
    stats = model[1].running_mean.clone()
    x = torch.randn(10, 3, dtype=torch.float64)
    y = torch.randn(10, 1, dtype=torch.float64)
    opt = lt.LevenbergMarquardt(model)
    assert opt.path.startswith("torch.func")  # BatchNorm is not a layer of the library
    with pytest.raises(ValueError, match="BatchNorm"):
        opt.step(x, y)
    _unchanged(model, before)
    torch.testing.assert_close(model[1].running_mean, stats, rtol=0, atol=0)
    model.eval()
    assert opt.step(x, y).attempts >= 1


def test_unknown_option_and_loss() -> None:
    with pytest.raises(TypeError, match="lamda_initial"):
        lt.LevenbergMarquardt(_model(), lamda_initial=1.0)
    with pytest.raises(ValueError, match="loss = 'mae'"):
        lt.LevenbergMarquardt(_model(), loss="mae")
    with pytest.raises(ValueError, match="fast_path=True needs"):
        lt.LevenbergMarquardt(_sequential(1), residual_fn=lambda m, x, y: m(x)[:, 0],
                              fast_path=True)
    # A combination the library refuses, in its own words, before the parameters change.
    model = _model()
    before = flat_parameters(model)
    x, y = _data(20, 3, "mse", seed=4)
    with pytest.raises(ValueError, match="bayesian.*cg|cg.*bayesian"):
        lt.LevenbergMarquardt(model, regularization="bayesian", linear_solver="cg").step(x, y)
    _unchanged(model, before)
    assert TwoInputResidualNet  # imported for the models above


def test_memory_plan_sizes_the_slices() -> None:
    # The library's planner sizes the torch path's slices: the budget less the fixed buffers (A,
    # the solver's, the residuals) over the Jacobian's footprint per sample, measured on a probe
    # slice and never below the rows of J themselves (R = 3 rows per sample here).  Every
    # slicing folds the same A and g.
    model = _model(seed=14)
    x, y = _data(50, 3, "mse", seed=15)
    n = sum(p.numel() for p in model.parameters())
    whole = lt.LevenbergMarquardt(copy.deepcopy(model), slice_size=50)
    f_whole, a_whole, g_whole = whole.normal_equations(x, y)
    rows_of_j = 3 * n * 8
    budget = whole.plan["fixed_bytes"] + 10 * rows_of_j + 1
    planned = lt.LevenbergMarquardt(model, memory_budget=budget)
    f_planned, a_planned, g_planned = planned.normal_equations(x, y)
    torch.testing.assert_close(a_planned, a_whole, rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(g_planned, g_whole, rtol=1e-12, atol=1e-13)
    plan = planned.plan
    assert plan["budget_bytes"] == budget and plan["bytes_per_unit"] >= rows_of_j
    expected = min(50, (budget - plan["fixed_bytes"]) // plan["bytes_per_unit"])
    assert 1 <= expected <= 10 and plan["slice_units"] == expected
    assert planned.step(x, y).slice_size == expected and whole.step(x, y).slice_size == 50
    before = flat_parameters(model)
    with pytest.raises(MemoryError, match="does not fit the memory budget of 97.7 KiB"):
        lt.LevenbergMarquardt(model, memory_budget=100_000).step(x, y)
    _unchanged(model, before)


def _cnn(seed: int) -> torch.nn.Sequential:
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Conv2d(2, 3, 3, padding=1), torch.nn.ELU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(3, 4, (2, 3), stride=(1, 2), padding=(0, 1)), torch.nn.Tanh(),
        torch.nn.AvgPool2d((2, 1), stride=1), torch.nn.Flatten(), torch.nn.Linear(4 * 1 * 1, 3)).double()


def test_convolutional_sequential_on_the_native_step_equals_the_torch_path() -> None:
    # Conv2d, ELU, MaxPool2d, AvgPool2d, Flatten and Linear translated into the library's layers
    # (weights in PyTorch's (out, in, kh, kw) order): its steps equal the torch path's.
    g = torch.Generator().manual_seed(16)
    x = torch.randn(60, 2, 6, 5, generator=g, dtype=torch.float64)
    y = torch.randint(0, 3, (60,), generator=g)
    native_model, torch_model = _cnn(17), _cnn(17)
    assert torch_model(x).shape == (60, 3)
    native = lt.LevenbergMarquardt(native_model, loss="cross_entropy")
    on_torch = lt.LevenbergMarquardt(torch_model, loss="cross_entropy", fast_path=False)
    assert native.path == "native"
    # Measured as in the first test: loss ≤ 4.6e-15, parameters ≤ 2.3e-14; bounds ≥ 1 000 times.
    for k in range(3):
        a, b = native.step(x, y), on_torch.step(one_ulp(x), y)
        assert a.path == "native" and (a.accepted, a.attempts) == (b.accepted, b.attempts)
        within(f"step {k + 1} loss after", b.loss_after, a.loss_after, 1e-10, relative=True)
    within("parameters after 3 steps", flat_parameters(torch_model), flat_parameters(native_model),
           1e-10)
    # Layers the library does not have take the torch path.
    for model in (torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3, dilation=2), torch.nn.Flatten(),
                                      torch.nn.Linear(2, 1)),
                  torch.nn.Sequential(torch.nn.Linear(2, 2, bias=False)),
                  torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.GELU(approximate="tanh"))):
        assert lt.LevenbergMarquardt(model).path.startswith("torch.func")


def test_sampled_cross_entropy_on_the_fast_path() -> None:
    # The native engine draws cross_entropy_sampled's rows; its reported loss is the mean CE
    # (nn.CrossEntropyLoss, the independent reference) and it trains as the exact loss does.
    g = torch.Generator().manual_seed(3)
    labels = torch.randint(0, 3, (300,), generator=g)
    centers = torch.tensor([[0.0, 0.0, 0.0], [2.0, 0.0, 0.0], [0.0, 2.0, 0.0]], dtype=torch.float64)
    x = centers[labels] + 0.6 * torch.randn(300, 3, generator=g, dtype=torch.float64)
    accuracy = {}
    for loss in ("cross_entropy_sampled", "cross_entropy"):
        model = _sequential(5, outputs=3)
        opt = lt.LevenbergMarquardt(model, loss=loss)
        assert opt.path == "native"
        for _ in range(12):
            report = opt.step(x, labels)
        with torch.no_grad():
            z = model(x)
        reference = torch.nn.functional.cross_entropy(z, labels).item()
        assert report.loss_after == pytest.approx(reference, rel=1e-9)
        accuracy[loss] = (z.argmax(1) == labels).double().mean().item()
    assert accuracy["cross_entropy_sampled"] > accuracy["cross_entropy"] - 0.03
    assert accuracy["cross_entropy_sampled"] > 0.8


def test_sampled_cross_entropy_on_the_torch_path_draws_what_the_engine_draws() -> None:
    # The torch path computes the sampled rows in torch (the uniforms of the same keys, the class
    # from q = (p + y)/2, the row √(p_k/q_k)(e_k − p)); the native engine in C++.  Same model,
    # data and draws: the same steps, to rounding.  Soft targets too (y a probability row).
    g = torch.Generator().manual_seed(21)
    x = torch.randn(80, 3, generator=g, dtype=torch.float64)
    labels = torch.randint(0, 3, (80,), generator=g)
    soft = torch.softmax(torch.randn(80, 3, generator=g, dtype=torch.float64), dim=1)
    for y in (labels, soft):
        native_model, torch_model = _sequential(5, outputs=3), _sequential(5, outputs=3)
        torch_model.load_state_dict(native_model.state_dict())
        native = lt.LevenbergMarquardt(native_model, loss="cross_entropy_sampled")
        on_torch = lt.LevenbergMarquardt(torch_model, loss="cross_entropy_sampled",
                                         fast_path=False)
        assert native.path == "native" and on_torch.path.startswith("torch.func")
        kind = "labels" if y is labels else "soft"
        for k in range(4):
            a, b = native.step(x, y), on_torch.step(one_ulp(x), one_ulp(y))
            assert (a.accepted, a.attempts) == (b.accepted, b.attempts)
            within(f"{kind} step {k + 1} loss after", b.loss_after, a.loss_after, 1e-10,
                   relative=True)
        # Measured as in the first test: loss ≤ 4.9e-14, parameters ≤ 9.4e-13 (labels); bounds
        # ≥ 1 000 times that.
        within(f"{kind} parameters after 4 steps", flat_parameters(torch_model),
               flat_parameters(native_model), 1e-9)
        assert on_torch.state_dict()["draw_key"] == native.state_dict()["draw_key"] == 4


def test_sampled_uniforms_are_the_engines_splitmix64() -> None:
    # SplitMix64's finalizer written out with Python integers (an independent second form), and
    # the draws' spread: uniform enough that class frequencies follow q.
    from lmtrain.torch._losses import sampled_uniforms

    def splitmix(key: int, index: int) -> float:
        m = (1 << 64) - 1
        h = (key * 0x9E3779B97F4A7C15 + index + 0x9E3779B97F4A7C15) & m
        h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & m
        h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & m
        h ^= h >> 31
        return (h >> 11) * 2.0 ** -53

    for key in (0, 1, 7, 2**40 + 3, 2**64 - 1):
        u = sampled_uniforms(key, 5, 50)
        assert u.tolist() == [splitmix(key, i) for i in range(5, 55)]
    u = sampled_uniforms(3, 0, 20000)
    assert 0 <= float(u.min()) and float(u.max()) < 1
    assert abs(float(u.mean()) - 0.5) < 0.01


def test_sampled_cross_entropy_resumes_from_state_dict_bit_for_bit() -> None:
    # state_dict carries where cross_entropy_sampled's draws stand (draw_key): a resumed
    # optimizer draws what the uninterrupted one does.  Without it, the same steps draw again
    # from the start and the parameters differ.
    g = torch.Generator().manual_seed(8)
    x = torch.randn(120, 3, generator=g, dtype=torch.float64)
    y = torch.randint(0, 3, (120,), generator=g)
    model = _sequential(6, outputs=3)
    opt = lt.LevenbergMarquardt(model, loss="cross_entropy_sampled")
    for _ in range(3):
        opt.step(x, y)
    state = opt.state_dict()
    assert state["draw_key"] == 3
    resumed_model, forgetful_model = copy.deepcopy(model), copy.deepcopy(model)
    resumed = lt.LevenbergMarquardt(resumed_model, loss="cross_entropy_sampled")
    resumed.load_state_dict(state)
    forgetful = lt.LevenbergMarquardt(forgetful_model, loss="cross_entropy_sampled")
    forgetful.load_state_dict({k: v for k, v in state.items() if k != "draw_key"})
    for _ in range(3):
        opt.step(x, y)
        resumed.step(x, y)
        forgetful.step(x, y)
    torch.testing.assert_close(flat_parameters(resumed_model), flat_parameters(model),
                               rtol=0, atol=0)
    assert not torch.equal(flat_parameters(forgetful_model), flat_parameters(model))
    with pytest.raises(ValueError, match="draw_key"):
        resumed.load_state_dict(dict(state, draw_key=-1))

