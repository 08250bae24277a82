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


def test_float64_inputs_of_a_float32_model_are_converted() -> None:
    # cuPyLMA scripts often build float64 data for cuPyLMA's default float32 model: lma.step
    # converts x to the model's dtype, as LevenbergMarquardt does (it raised torch's "mat1 and
    # mat2 must have the same dtype"), and steps as on float32 inputs, bit for bit.
    x, y = _sinc(64)
    runs = []
    for xd in (x.double(), x.float()):
        torch.manual_seed(3)
        model = DNN(5)
        lma = cuPyLMA.LMA(model, ["cpu"], torch.nn.MSELoss(), lambda a, b: torch.flatten(a - b))
        losses = [lma.step(xd, y.float())[0] for _ in range(3)]
        runs.append((losses, torch.cat([p.detach().reshape(-1) for p in model.parameters()])))
    assert runs[0][0] == runs[1][0] and runs[0][0][-1] < runs[0][0][0]
    torch.testing.assert_close(runs[0][1], runs[1][1], rtol=0, atol=0)


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


def _flat(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def test_two_cpu_devices_equal_one_device() -> None:
    # cuPyLMA's --gpus 2 shape on the CPU: devices=[cpu, cpu] splits each batch in two, each
    # device's A and g are summed by the library, and every replica keeps the same parameters.
    # float64, 5 steps, against the same script on one device: the sums of A and g change order
    # only.  Measured 8.1e-13–9.2e-13 on 2 and 3 devices (OPENBLAS_CORETYPE Haswell, SkylakeX),
    # where targets moved by one ulp move one device's parameters by 1.8e-13–2.9e-13; the bound
    # is ~100× the largest.
    x = torch.linspace(-1, 1, 1999, dtype=torch.float64).unsqueeze(1)  # an odd split
    y = torch.sinc(10 * x)
    runs = []
    for devices in (["cpu"], ["cpu", "cpu"], [torch.device("cpu")] * 3):
        torch.manual_seed(5)
        model = DNN(9).double()
        lma = cuPyLMA.LMA(model, devices, torch.nn.MSELoss(), lambda a, b: torch.flatten(a - b),
                          dtype=torch.float64)
        losses = [lma.step(x, y, 400)[0] for _ in range(5)]
        runs.append((_flat(model), losses, lma))
    (one, one_losses, _), *several = runs
    assert float((one - _flat(DNN(9).double())).abs().max()) > 0.05
    for flat, losses, lma in several:
        torch.testing.assert_close(flat, one, rtol=0, atol=1e-10)
        assert losses == pytest.approx(one_losses, rel=1e-10)
        opt = lma.optimizer
        assert len(opt.devices) == len(opt._replicas) + 1 > 1
        for replica in opt._replicas:  # every device holds the same parameters, bit for bit
            assert torch.equal(_flat(replica.model), flat)
        assert "threads" in opt.plan["communicator"]


def test_devices_with_lmtraines_schedule_and_a_residual_fn_of_the_batch() -> None:
    # LevenbergMarquardt(devices=…) with geodesic acceleration (its second derivatives and its
    # right-hand side summed over the devices too) and a residual_fn of (model, x, y): two CPU
    # devices against one, float64, 6 steps.
    torch.manual_seed(8)
    x = torch.rand(301, 2, dtype=torch.float64) * 2 - 1
    y = torch.sin(2 * x[:, :1]) * torch.cos(x[:, 1:])

    def residual_fn(model: torch.nn.Module, xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        return (model(xb) - yb).reshape(-1)

    results = []
    for devices in (None, ["cpu", "cpu"]):
        torch.manual_seed(9)
        model = torch.nn.Sequential(torch.nn.Linear(2, 10), torch.nn.Tanh(),
                                    torch.nn.Linear(10, 1)).double()
        opt = lt.LevenbergMarquardt(model, residual_fn=residual_fn, devices=devices,
                                    geodesic_acceleration=True)
        reports = [opt.step(x, y) for _ in range(6)]
        results.append((_flat(model), reports))
    (one, one_reports), (two, two_reports) = results
    assert sum(r.geodesic_applied for r in one_reports) > 0
    assert [r.attempts for r in two_reports] == [r.attempts for r in one_reports]
    torch.testing.assert_close(two, one, rtol=0, atol=1e-10)
    assert two_reports[-1].loss_after == pytest.approx(one_reports[-1].loss_after, rel=1e-10)


class _FailsOnTheSecondShard:
    """A residual_fn whose Jacobian slices (its jacobian_slice hook, which the library calls
    from the device's own thread during the step) fail on the shard of positive x only."""

    def __call__(self, model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return (model(x) - y).reshape(-1)

    def jacobian_slice(self, model: torch.nn.Module, params: dict, x: torch.Tensor,
                       y: torch.Tensor, start: int, stop: int) -> torch.Tensor:
        if float(x.min()) > 0:
            raise ArithmeticError("this shard cannot be differentiated")
        flat = torch.cat([p.reshape(-1) for p in params.values()])
        shapes = [p.shape for p in params.values()]

        def r(theta: torch.Tensor) -> torch.Tensor:
            parts = dict(zip(params, torch.split(theta, [s.numel() for s in shapes])))
            call = {k: v.reshape(s) for (k, v), s in zip(parts.items(), shapes)}
            return (torch.func.functional_call(model, call, (x,)) - y).reshape(-1)

        return torch.func.jacrev(r)(flat)[start:stop]


def test_an_error_on_one_device_is_raised_with_every_replica_unchanged() -> None:
    # The second device's Jacobian fails inside the step: its source hands out NaNs, the step
    # ends on both devices without an update, and the error is raised afterwards.
    torch.manual_seed(4)
    x = torch.linspace(-1, 1, 100, dtype=torch.float64).unsqueeze(1)
    y = torch.sinc(10 * x)
    model = DNN(4).double()
    opt = lt.LevenbergMarquardt(model, residual_fn=_FailsOnTheSecondShard(),
                                devices=["cpu", "cpu"], slice_size=25)
    before = _flat(model)
    with pytest.raises(ArithmeticError, match="cannot be differentiated"):
        opt.step(x, y)
    assert torch.equal(_flat(model), before)
    assert all(torch.equal(_flat(r.model), before) for r in opt._replicas)
    # The group stays usable: a batch the hook can differentiate steps on both devices.
    report = opt.step(-x.abs() - 0.01, y)
    assert report.accepted
    assert torch.equal(_flat(opt._replicas[0].model), _flat(model))


def test_devices_are_checked() -> None:
    with pytest.raises(ValueError, match="devices\\[0\\]"):
        lt.LevenbergMarquardt(DNN(3), devices=["meta", "cpu"])
    with pytest.raises(ValueError, match="no device"):
        cuPyLMA.LMA(DNN(3), [], torch.nn.MSELoss(), lambda a, b: (a - b).flatten())
    opt = lt.LevenbergMarquardt(DNN(3), devices=["cpu", "cpu"])
    with pytest.raises(NotImplementedError, match="step\\(\\)"):
        opt.fit((torch.zeros(4, 1), torch.zeros(4, 1)), epochs=1)


def test_solver_argument_is_ignored_with_a_warning() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cuPyLMA.LMA(DNN(3), ["cpu"], torch.nn.MSELoss(), lambda a, b: (a - b).flatten(),
                    solver=object())
    assert any("ignores it" in str(w.message) for w in caught)
    assert lt.LMA is cuPyLMA.LMA
