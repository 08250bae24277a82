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


def _cupylma_reference(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int,
                       start: float = 1e-3, up: float = 10.0, down: float = 0.1,
                       lowest: float = 1e-10, highest: float = 1e10,
                       attempts: int = 10) -> tuple[torch.Tensor, list[float], list[bool]]:
    """cuPyLMA's published algorithm in float64, written here from its description (README and
    the paper: the normal equations of the step's B samples divided by B, λ per sample on the
    identity, ×up on a failed attempt, ×down — not below DAMPING_MIN — on the first trial that
    lowers the mean squared residual, at most UPDATE_ATTEMPTS attempts, `terminated` once a raise
    reaches DAMPING_MAX, which restarts λ): parameters after `steps` steps, the returned losses
    and terminated flags.  J by torch.func.jacrev of the flat parameters."""
    names = [n for n, _ in model.named_parameters()]
    shapes = [p.shape for p in model.parameters()]
    theta = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).clone()

    def residuals(flat: torch.Tensor) -> torch.Tensor:
        params, offset = {}, 0
        for name, shape in zip(names, shapes):
            k = shape.numel()
            params[name] = flat[offset:offset + k].reshape(shape)
            offset += k
        return (torch.func.functional_call(model, params, (x,)) - y).reshape(-1)

    lam, losses, flags = start, [], []
    for _ in range(steps):
        r = residuals(theta)
        j = torch.func.jacrev(residuals)(theta)
        b = x.shape[0]
        a, g = j.T @ j / b, j.T @ r / b
        loss, terminated = float((r ** 2).mean()), False
        for _ in range(attempts):
            u = torch.linalg.solve(a + lam * torch.eye(len(theta), dtype=a.dtype), g)
            new = float((residuals(theta - u) ** 2).mean())
            if new < loss:
                theta, loss, lam = theta - u, new, max(lam * down, lowest)
                break
            lam *= up
            if lam >= highest:
                lam, terminated = start, True
                break
        losses.append(loss)
        flags.append(terminated)
    return theta, losses, flags


def test_five_steps_are_cupylmas_algorithm() -> None:
    # cuPyLMA's call shape (a Module of its own, MSELoss, slices of the batch) in float64: the
    # parameters after 5 steps equal the reference written from cuPyLMA's algorithm to 1e-9 (the
    # two solves differ by LU against Cholesky rounding, ~1e-15 amplified by cond(JᵀJ/B + λI)).
    # Without λ per sample (lmtrain's λ on JᵀJ) the same λ₀ damps 2 000 times less: far away.
    torch.manual_seed(3)
    x = torch.linspace(-1, 1, 2000, dtype=torch.float64).unsqueeze(1)
    y = torch.sinc(10 * x)
    model = DNN(12).double()
    start = [p.detach().clone() for p in model.parameters()]
    expected, expected_losses, expected_flags = _cupylma_reference(model, x, y, 5)

    lma = cuPyLMA.LMA(model, [torch.device("cpu")], torch.nn.MSELoss(),
                      lambda a, b: torch.flatten(a - b), dtype=torch.float64)
    results = [lma.step(x, y, 500) for _ in range(5)]
    got = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    moved = float((expected - torch.cat([p.reshape(-1) for p in start])).abs().max())
    assert moved > 0.1, "five steps that move the parameters"
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-9)
    assert [loss for loss, _ in results] == pytest.approx(expected_losses, rel=1e-9)
    assert [t for _, t in results] == expected_flags
    assert lma.optimizer.last_report.slice_size == 500
    assert not lma.optimizer.options.geodesic_acceleration

    with torch.no_grad():
        for p, p0 in zip(model.parameters(), start):
            p.copy_(p0)
    own = cuPyLMA.LMA(model, ["cpu"], torch.nn.MSELoss(), lambda a, b: torch.flatten(a - b),
                      dtype=torch.float64, damping_per_sample=False)
    for _ in range(5):
        own.step(x, y, 500)
    elsewhere = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    assert float((elsewhere - expected).abs().max()) > 1e-3


def test_a_raise_to_damping_max_terminates_and_restarts_lambda(monkeypatch) -> None:
    # At an exact minimum no trial lowers the loss: λ = 1e-3 and 1e-2 are tried, the raise to
    # DAMPING_MAX = 0.1 ends the step with terminated, and the next step starts at 1e-3 again.
    monkeypatch.setattr(configuration, "DAMPING_MAX", 0.1)
    x = torch.linspace(-1, 1, 50, dtype=torch.float64).unsqueeze(1)
    y = 2 * x + 1
    model = torch.nn.Linear(1, 1).double()
    with torch.no_grad():
        model.weight.fill_(2.0)
        model.bias.fill_(1.0)
    lma = cuPyLMA.LMA(model, ["cpu"], torch.nn.MSELoss(), lambda a, b: torch.flatten(a - b))
    for _ in range(2):
        loss, terminated = lma.step(x, y)
        assert terminated and loss == 0.0
        report = lma.optimizer.last_report
        assert report.attempts == 2 and not report.accepted
        assert lma.optimizer.state_dict()["lambda"] == 1e-3
    _, _, flags = _cupylma_reference(model, x, y, 1, highest=0.1)
    assert flags == [True]


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
