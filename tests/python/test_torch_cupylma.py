"""cuPyLMA users switch by one line: ``lmtrain.torch.LMA(model, devices, loss_fn, residual_fn)``
and ``lma.step(x, y, slice_size) -> (loss, terminated)``, in the call shape of cuPyLMA's
examples/curve_fitting (written here for this project, on the CPU with devices = [cpu])."""

from __future__ import annotations

import warnings

import pytest
from torch_support import lt, torch

import lmtrain.torch as cuPyLMA  # the one line a cuPyLMA script changes
from lmtrain.torch import configuration


class DNN(torch.nn.Module):
    """cuPyLMA's curve-fitting model: a 1-w-1 tanh network in a Module of its own."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.linear_tanh_stack = torch.nn.Sequential(
            torch.nn.Linear(1, width), torch.nn.Tanh(), torch.nn.Linear(width, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_tanh_stack(x)


def _sinc(points: int) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.linspace(-1, 1, points, dtype=torch.float32).unsqueeze(1)
    return x, torch.sinc(10 * x)


def test_curve_fitting_in_cupylmas_call_shape() -> None:
    torch.manual_seed(0)
    configuration.OPTIM_OVERLAP_H2D = True  # accepted, as in cuPyLMA's example
    x_train, y_train = _sinc(4000)
    devices = [torch.device("cpu")]
    model = DNN(20).to(devices[0])

    def residual_fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.flatten(a - b)

    loss_fn = torch.nn.MSELoss()
    lma = cuPyLMA.LMA(model, devices, loss_fn, residual_fn)
    losses = []
    for _ in range(30):
        loss, terminated = lma.step(x_train, y_train, 1000)
        losses.append(loss)
        assert isinstance(loss, float) and isinstance(terminated, bool)
        if terminated:
            break
    # loss is loss_fn after the step, as cuPyLMA returns it.
    with torch.no_grad():
        assert losses[-1] == pytest.approx(float(loss_fn(model(x_train), y_train)), rel=1e-6)
    # Full batches with cuPyLMA's ×10/×0.1 damping: W7's slow plateau, still falling.
    assert all(b <= a for a, b in zip(losses, losses[1:])), losses
    assert losses[-1] < 0.1 * losses[0], losses
    # MSELoss with r = outputs − targets is lmtrain's mse: the model (a Module, not a
    # Sequential) takes the torch path, slices of 1000 samples, cuPyLMA's ×10/×0.1 damping.
    opt = lma.optimizer
    assert opt.path.startswith("torch.func") and opt.last_report.slice_size == 1000
    assert opt.options.damping == "multiplicative" and opt.options.lambda_increase == 10.0


def test_a_per_sample_residual_fn_of_outputs_and_its_jacobian() -> None:
    # A weighted residual per sample (not MSELoss's): its rows are checked to be per sample and
    # differentiated per sample; the normal equations equal autograd's J of the whole batch.
    torch.manual_seed(1)
    x, y = _sinc(64)
    x, y = x.double(), y.double()
    model = DNN(5).double()
    weights = torch.linspace(0.5, 2.0, 64, dtype=torch.float64).unsqueeze(1)

    def residual_fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.cat([a - b, 0.1 * (a - b) ** 2], dim=1).flatten()

    lma = cuPyLMA.LMA(model, ["cpu"], torch.nn.L1Loss(), residual_fn, dtype=torch.float64)
    loss, _ = lma.step(x, y)
    opt = lma.optimizer
    assert opt.path.startswith("torch.func")
    assert opt.loss.residuals_per_sample(1) == 2
    from torch_support import reference_jacobian
    f, a, g = opt.normal_equations(x, y)
    j = reference_jacobian(model, lambda call: residual_fn(call(x), y))
    r = residual_fn(model(x), y).detach()
    torch.testing.assert_close(a, j.T @ j, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(g, j.T @ r, rtol=1e-10, atol=1e-12)
    assert weights.shape == (64, 1)
    with torch.no_grad():
        assert loss == pytest.approx(float(torch.nn.L1Loss()(model(x), y)), rel=1e-12)


def test_several_devices_in_one_process_say_what_to_do() -> None:
    with pytest.raises(NotImplementedError, match="torchrun --nproc_per_node"):
        cuPyLMA.LMA(DNN(3), ["cpu", "cpu"], torch.nn.MSELoss(), lambda a, b: (a - b).flatten())


def test_solver_argument_is_ignored_with_a_warning() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cuPyLMA.LMA(DNN(3), ["cpu"], torch.nn.MSELoss(), lambda a, b: (a - b).flatten(),
                    solver=object())
    assert any("ignores it" in str(w.message) for w in caught)
    assert lt.LMA is cuPyLMA.LMA
