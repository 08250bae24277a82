"""LevenbergMarquardt.fit: tensors and DataLoaders, and the stop criteria of `lmtrain fit`."""

from __future__ import annotations

import math

import pytest
from torch_support import flat_parameters, lt, torch


def _problem(seed: int = 0, samples: int = 300):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(samples, 2, generator=g, dtype=torch.float64) * 2 - 1
    y = torch.sin(3 * x[:, :1]) * torch.cos(2 * x[:, 1:])
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(2, 12), torch.nn.Tanh(),
                                torch.nn.Linear(12, 1)).double()
    return model, x, y


@pytest.mark.parametrize("fast_path", [False, "auto"])
def test_fit_on_tensors_lowers_the_loss_and_reports_it(fast_path) -> None:
    model, x, y = _problem()
    opt = lt.LevenbergMarquardt(model, fast_path=fast_path)
    history = opt.fit((x, y), epochs=15, batch_size=100)
    assert [h["epoch"] for h in history] == list(range(1, 16))
    with torch.no_grad():
        mse = float(((model(x) - y) ** 2).mean())
    assert history[-1]["loss"] == pytest.approx(mse, rel=1e-9)
    assert mse < 1e-3 * history[0]["loss"] or mse < 1e-6


def test_fit_on_a_data_loader_equals_the_same_batches_as_tensors() -> None:
    model_a, x, y = _problem(1)
    model_b, _, _ = _problem(1)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=75,
                                         shuffle=False)
    by_loader = lt.LevenbergMarquardt(model_a, fast_path=False)
    by_loader.fit(loader, epochs=3)
    by_tensors = lt.LevenbergMarquardt(model_b, fast_path=False)
    by_tensors.fit((x, y), epochs=3, batch_size=75, shuffle=False)
    torch.testing.assert_close(flat_parameters(model_a), flat_parameters(model_b), rtol=0,
                               atol=1e-12)
    # The Summary counts samples, not batches (it said 4 samples in batches of 1 before).
    for summary in (by_loader.summary, by_tensors.summary):
        assert (summary.training_samples, summary.batch_size, summary.batches_per_epoch) == \
            (x.shape[0], 75, -(-x.shape[0] // 75))
        assert f"Training samples                  {x.shape[0]}\n" in summary.full_report()


def test_stop_criteria() -> None:
    model, x, y = _problem(2)
    history = lt.LevenbergMarquardt(model).fit((x, y), epochs=200, loss_goal=1e-3)
    assert history[-1]["termination"] == "loss_goal" and history[-1]["loss"] <= 1e-3
    assert all(h["loss"] > 1e-3 for h in history[:-1])

    model, x, y = _problem(3)
    history = lt.LevenbergMarquardt(model, fast_path=False).fit(
        (x, y), epochs=50, callbacks=[lambda epoch, loss, val: epoch == 4])
    assert len(history) == 4 and history[-1]["termination"] == "user_callback"

    # λ above lambda_max ends training as in `lmtrain fit` (a tiny lambda_max stops at once
    # when a step is rejected).
    model, x, y = _problem(4)
    opt = lt.LevenbergMarquardt(model, fast_path=False, lambda_max=1e-3, lambda_initial=1e-3,
                                damping="multiplicative")
    history = opt.fit((x, y), epochs=500)
    assert history[-1]["termination"] == "lambda_above_max" and len(history) < 500
    # The Summary names the option as the keyword argument above, not as the C++ API does.
    assert "λ at lambda_max = 1.000e-03" in opt.summary.message
    assert "SolverOptions::" not in opt.summary.full_report()


def test_validation_failures_restore_the_best_model() -> None:
    model, x, y = _problem(5, samples=60)
    g = torch.Generator().manual_seed(9)
    xv = torch.rand(40, 2, generator=g, dtype=torch.float64) * 2 - 1
    yv = torch.sin(3 * xv[:, :1]) * torch.cos(2 * xv[:, 1:]) + 0.3 * torch.randn(
        40, 1, generator=g, dtype=torch.float64)
    opt = lt.LevenbergMarquardt(model, fast_path=False)
    history = opt.fit((x, y), epochs=200, validation=(xv, yv), max_validation_failures=3)
    best = min(h["validation_loss"] for h in history)
    assert history[-1]["termination"] == "validation_max_fail"
    assert opt.evaluate((xv, yv)) == pytest.approx(best, rel=1e-12)
    assert math.isfinite(best)


@pytest.mark.parametrize("fast_path", [False, "auto"])
def test_an_option_the_run_does_not_use_is_a_warning(fast_path) -> None:
    # The engine's judgment (Summary.options_ignored), in the keyword arguments' words, on the
    # native path and on the torch-computed one alike; nothing when every option acts.
    import warnings

    model, x, y = _problem(6)
    opt = lt.LevenbergMarquardt(model, fast_path=fast_path, marquardt_min=1e-4)
    with pytest.warns(UserWarning, match=r"^marquardt_min / marquardt_max: ignored, the damping "
                                         r"matrix is the identity"):
        opt.fit((x, y), epochs=2)
    assert len(opt.summary.options_ignored) == 1
    model, x, y = _problem(6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lt.LevenbergMarquardt(model, fast_path=fast_path, marquardt_min=1e-4,
                              damping_matrix="marquardt").fit((x, y), epochs=2)
