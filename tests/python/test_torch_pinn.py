"""lmtrain.torch.pinn: pointwise PDE residuals and their Jacobians.

The references are independent of the pointwise machinery (nested jvp under vmap of jacrev):
the same residuals written as whole-batch functions with autograd input derivatives
(``torch.autograd.grad(..., create_graph=True)``), differentiated in θ by
``torch.autograd.functional.jacobian`` — on non-trivial random networks and points, with
weighted blocks, in float64."""

from __future__ import annotations

import io
import math
import warnings

import pytest
from torch_support import flat_parameters, lt, reference_jacobian, torch

from lmtrain.torch import pinn
from lmtrain.torch._optimizer import _checkpoint_position

NU = 0.01 / math.pi
A1, A2, K = 1.0, 4.0, 1.0


def _network(inputs: int, outputs: int, seed: int, width: int = 12) -> torch.nn.Module:
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(inputs, width), torch.nn.Tanh(),
                                torch.nn.Linear(width, width), torch.nn.Tanh(),
                                torch.nn.Linear(width, outputs)).double()
    with torch.no_grad():  # a network far from its initialization: larger, varied weights
        for p in model.parameters():
            p.mul_(1.5).add_(0.1 * torch.randn_like(p))
    return model


def _burgers_problem(seed: int = 3) -> pinn.Problem:
    return pinn.Problem("tx", [
        pinn.Condition("pde", lambda u, u_t, u_x, u_xx: u_t + u * u_x - NU * u_xx,
                       pinn.Uniform(40, t=(0, 1), x=(-1, 1))),
        pinn.Condition("initial", lambda x, u: u + torch.sin(math.pi * x),
                       pinn.Uniform(9, t=0, x=(-1, 1)), weight=3.0),
        pinn.Condition("boundary", lambda u: u, pinn.Uniform(7, t=(0, 1), x=[-1, 1]),
                       weight=0.5),
    ], seed=seed)


def _burgers_autograd(x: torch.Tensor, counts: tuple[int, int, int]):
    """Burgers' weighted residuals at x, whole batch, input derivatives by autograd."""
    a, b, c = counts

    def residuals(f):
        p = x[:a].clone().requires_grad_(True)
        u = f(p)[:, 0]
        grad = torch.autograd.grad(u.sum(), p, create_graph=True)[0]
        u_t, u_x = grad[:, 0], grad[:, 1]
        u_xx = torch.autograd.grad(u_x.sum(), p, create_graph=True)[0][:, 1]
        pde = (u_t + u * u_x - NU * u_xx) / math.sqrt(a)
        initial = 3.0 * (f(x[a:a + b])[:, 0] + torch.sin(math.pi * x[a:a + b, 1])) / math.sqrt(b)
        boundary = 0.5 * f(x[a + b:])[:, 0] / math.sqrt(c)
        return torch.cat([pde, initial, boundary])

    return residuals


def _helmholtz_problem(seed: int = 5) -> pinn.Problem:
    def q(x, y):
        return (K ** 2 - (A1 ** 2 + A2 ** 2) * math.pi ** 2) * torch.sin(A1 * math.pi * x) * \
            torch.sin(A2 * math.pi * y)

    return pinn.Problem("xy", [
        pinn.Condition("pde", lambda x, y, u, u_xx, u_yy: u_xx + u_yy + K ** 2 * u - q(x, y),
                       pinn.Uniform(50, x=(-1, 1), y=(-1, 1))),
        pinn.Condition("boundary", lambda u: u, pinn.Fixed(
            torch.tensor([[-1.0, 0.3], [1.0, -0.7], [0.2, -1.0], [-0.6, 1.0], [1.0, 1.0]])),
            weight=7.0),
    ], seed=seed)


def _helmholtz_autograd(x: torch.Tensor):
    def residuals(f):
        p = x[:50].clone().requires_grad_(True)
        u = f(p)[:, 0]
        grad = torch.autograd.grad(u.sum(), p, create_graph=True)[0]
        u_xx = torch.autograd.grad(grad[:, 0].sum(), p, create_graph=True)[0][:, 0]
        u_yy = torch.autograd.grad(grad[:, 1].sum(), p, create_graph=True)[0][:, 1]
        px, py = p[:, 0], p[:, 1]
        q = (K ** 2 - (A1 ** 2 + A2 ** 2) * math.pi ** 2) * torch.sin(A1 * math.pi * px) * \
            torch.sin(A2 * math.pi * py)
        pde = (u_xx + u_yy + K ** 2 * u - q) / math.sqrt(50)
        boundary = 7.0 * f(x[50:])[:, 0] / math.sqrt(5)
        return torch.cat([pde, boundary])

    return residuals


def _params(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach() for name, p in model.named_parameters()}


@pytest.mark.parametrize("route", ["taylor", "jacrev"])
@pytest.mark.parametrize("case", ["burgers", "helmholtz"])
def test_pointwise_jacobian_equals_autograd_of_the_same_residuals(case: str, route: str) -> None:
    if case == "burgers":
        problem, model = _burgers_problem(), _network(2, 1, seed=11)
        reference = _burgers_autograd(problem.points, (40, 9, 7))
    else:
        problem, model = _helmholtz_problem(), _network(2, 1, seed=12)
        reference = _helmholtz_autograd(problem.points)
    problem.jacobian = route
    x = problem.points
    r = problem(model, x)
    torch.testing.assert_close(r, reference(model), rtol=0, atol=1e-12)
    expected = reference_jacobian(model, reference)
    assert expected.abs().max() > 0.5  # non-trivial
    j = problem.jacobian_slice(model, _params(model), x, None, 0, r.numel())
    assert torch.allclose(j, expected, rtol=0, atol=1e-10), (j - expected).abs().max()
    # Any row range, across the blocks' borders.
    for start, stop in [(3, 17), (35, 52), (r.numel() - 4, r.numel())]:
        part = problem.jacobian_slice(model, _params(model), x, None, start, stop)
        torch.testing.assert_close(part, expected[start:stop], rtol=0, atol=1e-10)


class _Periodic(torch.nn.Module):
    def forward(self, p: torch.Tensor) -> torch.Tensor:
        return torch.cat([p[:, :1], torch.cos(math.pi * p[:, 1:]), torch.sin(math.pi * p[:, 1:])],
                         dim=1)


def test_taylor_route_through_an_input_map_and_sigmoid_layers() -> None:
    # Allen–Cahn's form: a parameter-free periodic embedding first, Sigmoid activations.
    torch.manual_seed(19)
    model = torch.nn.Sequential(_Periodic(), torch.nn.Linear(3, 9), torch.nn.Sigmoid(),
                                torch.nn.Linear(9, 9), torch.nn.Tanh(),
                                torch.nn.Linear(9, 1)).double()
    problem = pinn.Problem("tx", [
        pinn.Condition("pde", lambda u, u_t, u_xx, u_tx: u_t - 1e-2 * u_xx + 5 * u ** 3 - u_tx,
                       pinn.Uniform(30, t=(0, 1), x=(-1, 1))),
        pinn.Condition("initial", lambda x, u: u - x ** 2 * torch.cos(math.pi * x),
                       pinn.Uniform(8, t=0, x=(-1, 1)), weight=4.0)], jacobian="taylor")
    x = problem.points

    def reference(f):
        p = x[:30].clone().requires_grad_(True)
        u = f(p)[:, 0]
        grad = torch.autograd.grad(u.sum(), p, create_graph=True)[0]
        u_t, u_x = grad[:, 0], grad[:, 1]
        second = torch.autograd.grad(u_x.sum(), p, create_graph=True)[0]
        pde = (u_t - 1e-2 * second[:, 1] + 5 * u ** 3 - second[:, 0]) / math.sqrt(30)
        q = x[30:]
        initial = 4.0 * (f(q)[:, 0] - q[:, 1] ** 2 * torch.cos(math.pi * q[:, 1])) / math.sqrt(8)
        return torch.cat([pde, initial])

    r = problem(model, x)
    torch.testing.assert_close(r, reference(model), rtol=0, atol=1e-12)
    expected = reference_jacobian(model, reference)
    j = problem.jacobian_slice(model, _params(model), x, None, 0, r.numel())
    assert problem.jacobian_path == "pinn taylor"
    assert torch.allclose(j, expected, rtol=0, atol=1e-10), (j - expected).abs().max()


def _taylor_and_jacrev_against(problem: pinn.Problem, model, x: torch.Tensor,
                               reference) -> None:
    """r and J by the Taylor route against autograd's `reference` (r within 1e-11, J within
    1e-10 of a non-trivial J), and the transform route's J as a second method."""
    r = problem(model, x)
    torch.testing.assert_close(r, reference(model), rtol=0, atol=1e-11)
    expected = reference_jacobian(model, reference)
    assert expected.abs().max() > 0.5  # non-trivial
    j = problem.jacobian_slice(model, _params(model), x, None, 0, r.numel())
    assert problem.jacobian_path == "pinn taylor"
    torch.testing.assert_close(j, expected, rtol=0, atol=1e-10)
    problem.jacobian = "jacrev"
    torch.testing.assert_close(problem.jacobian_slice(model, _params(model), x, None, 0,
                                                      r.numel()), expected, rtol=0, atol=1e-10)


def test_periodic_input_is_periodic_with_its_derivatives_and_on_the_taylor_route() -> None:
    g = torch.Generator().manual_seed(31)
    p = torch.rand(50, 3, generator=g, dtype=torch.float64) * 2 - 1
    embed = pinn.PeriodicInput("txy", {"x": 2.0, "y": 0.5}, harmonics=3)
    assert embed.features == 13
    k = torch.arange(1, 4, dtype=torch.float64)
    x, y = p[:, 1:2] * k, p[:, 2:3] * k
    expected = torch.cat([p[:, :1], torch.cos(math.pi * x), torch.sin(math.pi * x),
                          torch.cos(4 * math.pi * y), torch.sin(4 * math.pi * y)], 1)
    torch.testing.assert_close(embed(p), expected, rtol=0, atol=1e-14)
    torch.testing.assert_close(pinn.PeriodicInput("tx", {"x": 2})(p[:, :2]), _Periodic()(p[:, :2]),
                               rtol=0, atol=0)
    torch.manual_seed(32)
    model = torch.nn.Sequential(embed, torch.nn.Linear(13, 10), torch.nn.Tanh(),
                                torch.nn.Linear(10, 10), torch.nn.Sigmoid(),
                                torch.nn.Linear(10, 1)).double()

    def derivatives(q: torch.Tensor) -> torch.Tensor:  # u, u_x, u_y, u_xx, u_xy, u_yy
        q = q.clone().requires_grad_(True)
        u = model(q)[:, 0]
        first = torch.autograd.grad(u.sum(), q, create_graph=True)[0]
        second = [torch.autograd.grad(first[:, a].sum(), q, create_graph=True)[0]
                  for a in (1, 2)]
        return torch.stack([u, first[:, 1], first[:, 2], second[0][:, 1], second[0][:, 2],
                            second[1][:, 2]], 1).detach()

    at = derivatives(p)
    assert at[:, 1:].abs().max() > 0.1  # non-trivial derivatives
    for shift in ([0, 2.0, 0], [0, 0, 0.5], [0, -4.0, 1.0]):
        torch.testing.assert_close(derivatives(p + torch.tensor(shift, dtype=torch.float64)),
                                   at, rtol=0, atol=1e-12)
    problem = pinn.Problem("txy", [pinn.Condition(
        "pde", lambda u, u_t, u_xx, u_yy, u_xy: u_t - u_xx - u_yy + u * u_xy,
        pinn.Uniform(20, t=(0, 1), x=(-1, 1), y=(0, 0.5)))], jacobian="taylor")
    j = problem.jacobian_slice(model, _params(model), problem.points, None, 0, 20)
    assert problem.jacobian_path == "pinn taylor" and j.abs().max() > 0.5
    problem.jacobian = "jacrev"
    torch.testing.assert_close(problem.jacobian_slice(model, _params(model), problem.points,
                                                      None, 0, 20), j, rtol=0, atol=1e-10)
    for arguments, message in ((("tx", {"z": 1.0}), r"periods of some of the coordinates"),
                               (("tx", {"x": 0.0}), r"period of 'x' is 0.0"),
                               (("tx", {"x": 2.0}, 0), r"harmonics=0"),
                               (("", {"x": 2.0}), r"coordinates=''")):
        with pytest.raises(ValueError, match=message):
            pinn.PeriodicInput(*arguments)
    with pytest.raises(ValueError, match=r"shape \(50, 2\); expected \(points, 3\)"):
        embed(p[:, :2])


def test_the_residual_of_every_condition_takes_one_forward_pass(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Conditions with different derivatives (u_t, u_x, u_xx; u; u_x) through one Taylor pass over
    # all the points with the union of their derivatives: the rows each condition's own pass
    # gives, point weights included, in one call of TaylorMLP.forward.
    from lmtrain.torch._jacobian import TaylorMLP

    model = _network(2, 1, seed=41)
    problem = pinn.Problem("tx", [
        pinn.Condition("pde", lambda u, u_t, u_x, u_xx: u_t + u * u_x - 0.05 * u_xx,
                       pinn.Uniform(60, t=(0, 1), x=(-1, 1)),
                       point_weights=pinn.ResidualBasedAttention(initial=0.7)),
        pinn.Condition("initial", lambda x, u: u + torch.sin(math.pi * x),
                       pinn.Uniform(20, t=0, x=(-1, 1)), weight=3.0),
        pinn.Condition("flux", lambda u_x: u_x, pinn.Uniform(10, t=(0, 1), x=1))])
    x = problem.points
    separately = torch.cat([problem._rows(i, model, part)
                            for i, part in enumerate(problem._split(x))]).detach()
    calls = []
    forward = TaylorMLP.forward
    monkeypatch.setattr(TaylorMLP, "forward", lambda self, *a, **k: (
        calls.append(len(self.first) + len(self.second)), forward(self, *a, **k))[1])
    together = problem(model, x).detach()
    assert calls == [3]  # one pass: u_t, u_x and u_xx
    # Measured: equal to the bit on torch's default, AVX2 and scalar kernels and OpenBLAS
    # Haswell and Sandybridge; a product over more points may round differently elsewhere.
    torch.testing.assert_close(together, separately, rtol=0,
                               atol=1e-14 * float(separately.abs().max()))
    assert float(separately[:60].abs().max()) > 0.01 and float(separately[80:].abs().max()) > 0.01


def test_the_jacobian_of_every_condition_takes_one_pass_per_chunk(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Two rows per point in every condition (a system of two residuals; a boundary pair), point
    # weights on one: J's rows by one forward pass and one reverse sweep per row for all the
    # conditions, equal to each condition's own rows — whole slices, slices that split a point's
    # rows or a condition, chunks of 7 points crossing the conditions.
    from lmtrain.torch._jacobian import TaylorMLP

    model = _network(2, 2, seed=43)
    problem = pinn.Problem("tx", [
        pinn.Condition("pde", lambda u, v, u_t, v_x, u_xx: torch.stack(
            [u_t + v * v_x - 0.1 * u_xx, v_x - u]), pinn.Uniform(23, t=(0, 1), x=(-1, 1)),
            point_weights=pinn.ResidualBasedAttention(initial=0.6)),
        pinn.Condition("edge", lambda u, v, x: torch.stack([u - x, 2 * v]),
                       pinn.Uniform(9, t=(0, 1), x=1), weight=2.0)],
        outputs="uv", jacobian="taylor")
    x, params = problem.points, _params(model)
    problem(model, x)
    separately = torch.cat([problem._condition_rows("taylor", i, model, params, part) * (
        problem._point_factors(i, part).repeat_interleave(2)[:, None] if i == 0 else 1)
        for i, part in enumerate(problem._split(x))])
    assert separately.shape == (64, sum(p.numel() for p in model.parameters()))
    passes = []
    jacobian = TaylorMLP.jacobian
    monkeypatch.setattr(TaylorMLP, "jacobian", lambda self, *a, **k: (
        passes.append(1), jacobian(self, *a, **k))[1])
    # Measured: 1.7e-16–2.5e-16 of J's largest entry (torch's default, AVX2 and scalar kernels,
    # OpenBLAS Haswell and Sandybridge); a seed on the wrong points misses by O(1).
    scale = float(separately.abs().max())
    for chunk_bytes in (1 << 30, 7 * 4 * 2 * separately.shape[1] * 8):
        problem.chunk_bytes = chunk_bytes
        for start, stop in ((0, 64), (5, 51), (46, 47), (10, 30)):
            passes.clear()
            j = problem.jacobian_slice(model, params, x, None, start, stop)
            torch.testing.assert_close(j, separately[start:stop], rtol=0, atol=1e-14 * scale)
            points = -(-stop // 2) - start // 2
            assert len(passes) == 2 * -(-points // (32 if chunk_bytes == 1 << 30 else 7))


def test_periodic_input_gives_the_taylor_route_its_derivatives_in_closed_form() -> None:
    # Against nested forward mode through its forward (the route of any other input map), for
    # several coordinates, periods and harmonics: first, mixed and pure second, pure and mixed
    # third (0: a feature depends on one coordinate), pure fourth.
    from lmtrain.torch._jacobian import TaylorMLP

    g = torch.Generator().manual_seed(37)
    p = torch.rand(40, 3, generator=g, dtype=torch.float64) * 4 - 2
    embed = pinn.PeriodicInput("txy", {"x": 2.0, "y": 0.7}, harmonics=4)
    model = torch.nn.Sequential(embed, torch.nn.Linear(embed.features, 5)).double()
    taylor = TaylorMLP(model, 3, [0, 1, 2], [(0, 1), (1, 1), (1, 2), (2, 2), (0, 0)],
                       [1, 2, 0, (0, 1, 1), (1, 2, 1)], [1, 2])
    closed = embed.taylor_components(p, taylor.first, taylor.second, taylor.third, taylor.fourth)
    nested = taylor._derivatives_of(embed, p)
    assert [tuple(c.shape) for c in closed] == [(40, 17), (40, 3, 17), (40, 5, 17), (40, 5, 17),
                                                (40, 2, 17)]
    for a, b in zip(closed, nested):
        # Measured: 1.8e-16 of the largest entry (torch's default, AVX2 and scalar kernels,
        # OpenBLAS Haswell and Sandybridge); a wrong sign or order misses by O(1).
        torch.testing.assert_close(a, b, rtol=0, atol=1e-14 * float(b.abs().max()))
    assert float(closed[3].abs().max()) > 1e4 and float(closed[1][:, 0].abs().max()) == 1.0
    # The route takes them: no nested forward mode (and so nothing kept per set of points).
    calls = []
    taylor._derivatives_of = lambda f, q: calls.append(q) or nested
    torch.testing.assert_close(taylor._inputs(p)[2], closed[2], rtol=0, atol=0)
    assert not calls


def test_the_input_maps_derivatives_are_kept_per_set_of_points() -> None:
    from lmtrain.torch._jacobian import uncached

    # A map without derivatives of its own (PeriodicInput gives them in closed form).
    torch.manual_seed(36)
    model = torch.nn.Sequential(_Periodic(), torch.nn.Linear(3, 8), torch.nn.Tanh(),
                                torch.nn.Linear(8, 1)).double()
    problem = pinn.Problem("tx", [pinn.Condition(
        "pde", lambda u, u_t, u_x, u_xx: u_t + u * u_x - 0.1 * u_xx,
        pinn.Uniform(50, t=(0, 1), x=(-1, 1)))], jacobian="taylor")
    x, params = problem.points.clone(), _params(model)
    with uncached():
        r0 = problem(model, x)
        j0 = problem.jacobian_slice(model, params, x, None, 0, 50)
    for _ in range(2):  # computed and kept, then found: the same bits as without the cache
        torch.testing.assert_close(problem(model, x), r0, rtol=0, atol=0)
        torch.testing.assert_close(problem.jacobian_slice(model, params, x, None, 0, 50), j0,
                                   rtol=0, atol=0)
    # New points in the same storage (a fresh draw may reuse it): new derivatives.
    x.copy_(problem.sample(5))
    with uncached():
        expected = problem(model, x)
    assert not torch.equal(expected, r0)
    torch.testing.assert_close(problem(model, x), expected, rtol=0, atol=0)
    # Derivatives with respect to the points go through the map: not from the cache.
    def gradient() -> torch.Tensor:
        q = x.clone().requires_grad_(True)
        return torch.autograd.grad(problem(model, q).square().sum(), q)[0]
    with uncached():
        through = gradient()
    torch.testing.assert_close(gradient(), through, rtol=0, atol=0)


class _WithCoefficient(torch.nn.Module):
    """An inverse problem's model: a network and an unknown coefficient k of the PDE, which
    only the residual reads."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(33)
        self.network = torch.nn.Sequential(torch.nn.Linear(1, 10), torch.nn.Tanh(),
                                           torch.nn.Linear(10, 1)).double()
        self.k = torch.nn.Parameter(torch.tensor(1.0, dtype=torch.float64))

    def forward(self, p: torch.Tensor) -> torch.Tensor:
        return self.network(p)


def test_a_coefficient_read_by_the_residual_has_its_column_and_is_found() -> None:
    # u'' + k²u = 0 with data u = sin 2x: k = 2.  Before the fix the residual's model.k was
    # outside the differentiated parameters: its column of J was 0 and k stayed at 1.
    model = _WithCoefficient()
    problem = pinn.Problem("x", [
        pinn.Condition("pde", lambda u, u_xx: u_xx + model.k ** 2 * u,
                       pinn.Uniform(60, x=(0, 1), method="sobol")),
        pinn.Condition("data", lambda x, u: u - torch.sin(2 * x), pinn.Uniform(20, x=(0, 1)))])
    x = problem.points
    names = [name for name, _ in model.named_parameters()]
    shapes = [p.shape for p in model.parameters()]

    def reference(flat: torch.Tensor) -> torch.Tensor:  # k taken from θ explicitly
        params, offset = {}, 0
        for name, shape in zip(names, shapes):
            size = math.prod(shape)
            params[name] = flat[offset:offset + size].reshape(shape)
            offset += size
        p = x.clone().requires_grad_(True)
        u = torch.func.functional_call(model, params, (p,))[:, 0]
        u_x = torch.autograd.grad(u.sum(), p, create_graph=True)[0][:, 0]
        u_xx = torch.autograd.grad(u_x.sum(), p, create_graph=True)[0][:, 0]
        return torch.cat([(u_xx + params["k"] ** 2 * u)[:60] / math.sqrt(60),
                          (u - torch.sin(2 * p[:, 0]))[60:] / math.sqrt(20)])

    expected = torch.autograd.functional.jacobian(reference, flat_parameters(model).clone())
    j = problem.jacobian_slice(model, _params(model), x, None, 0, 80)
    assert problem.jacobian_path == "pinn pointwise jacrev"  # not the Taylor route: k is beside
    assert names[0] == "k" and expected[:60, 0].abs().max() > 0.01  # k's column: 2k·u/√N
    torch.testing.assert_close(j, expected, rtol=0, atol=1e-10)
    optimizer = lt.LevenbergMarquardt(model, residual_fn=problem)
    for step in range(25):
        if step > 0:
            problem.resample(step)
        optimizer.step(problem.points)
    # Measured: k = 1.99991 after 25 steps (one thread); k stays at 1.0 without its column.
    assert abs(model.k.item() - 2.0) < 1e-3, model.k.item()


@pytest.mark.parametrize("constrained", [False, True])
def test_with_coefficients_takes_the_taylor_route_with_the_coefficients_columns(
        constrained: bool) -> None:
    # Burgers with unknown ν and a two-valued coefficient c (u_t + c₀·u·u_x − ν·u_xx + c₁·u = 0),
    # the network plain or HardConstrained (u = −sin πx + t·N): J by the Taylor route against
    # the jacrev route's (autograd, k and θ substituted throughout) and against the columns in
    # closed form, ∂F/∂ν = −u_xx, ∂F/∂c = (u·u_x, u), over rows across the conditions' borders.
    network = _network(2, 1, seed=36)
    if constrained:
        network = pinn.HardConstrained(network, offset=lambda p: -torch.sin(math.pi * p[:, 1]),
                                       factor=lambda p: p[:, 0])
    model = pinn.WithCoefficients(network, nu=0.05, c=[0.7, -0.3])
    assert model.coefficient_names == ["nu", "c"] and model.c.dtype == torch.float64
    assert pinn.TaylorMLP.supports(model)

    def problem(route: str) -> pinn.Problem:
        return pinn.Problem("tx", [
            pinn.Condition("pde", lambda u, u_t, u_x, u_xx: u_t + model.c[0] * u * u_x
                           - model.nu * u_xx + model.c[1] * u,
                           pinn.Uniform(40, t=(0, 1), x=(-1, 1))),
            pinn.Condition("boundary", lambda u: u, pinn.Uniform(7, t=(0, 1), x=[-1, 1]),
                           weight=0.5)], seed=4, jacobian=route)

    taylor, jacrev = problem("taylor"), problem("jacrev")
    x = taylor.points
    params = _params(model)
    j = taylor.jacobian_slice(model, params, x, None, 0, 47)
    assert taylor.jacobian_path == "pinn taylor"
    expected = jacrev.jacobian_slice(model, params, x, None, 0, 47)
    assert expected.abs().max() > 0.1  # non-trivial: the residuals carry 1/√40 and 0.5/√7
    torch.testing.assert_close(j, expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(taylor.jacobian_slice(model, params, x, None, 33, 44),
                               expected[33:44], rtol=0, atol=1e-12)
    p = x[:40].clone().requires_grad_(True)
    u = model(p)[:, 0]
    grad = torch.autograd.grad(u.sum(), p, create_graph=True)[0]
    u_xx = torch.autograd.grad(grad[:, 1].sum(), p)[0][:, 1]
    names = list(params)
    nu, c = names.index("nu"), names.index("nu") + 1  # c right after ν, 2 columns
    scale = 1 / math.sqrt(40)
    torch.testing.assert_close(j[:40, nu], -u_xx * scale, rtol=0, atol=1e-12)
    torch.testing.assert_close(j[:40, c], (u * grad[:, 1]).detach() * scale, rtol=0, atol=1e-12)
    torch.testing.assert_close(j[:40, c + 1], u.detach() * scale, rtol=0, atol=1e-12)
    assert j[40:, nu:c + 2].abs().max() == 0  # the boundary does not read them


def test_with_coefficients_finds_k_on_the_taylor_route() -> None:
    # The docs' inverse problem (u'' + k²u = 0, data u = sin 2x) with pinn.WithCoefficients: the
    # same k = 2 as the module of one's own on the jacrev route (test above), by the Taylor route.
    torch.manual_seed(33)
    model = pinn.WithCoefficients(torch.nn.Sequential(
        torch.nn.Linear(1, 10), torch.nn.Tanh(), torch.nn.Linear(10, 1)).double(), k=1.0)
    problem = pinn.Problem("x", [
        pinn.Condition("pde", lambda u, u_xx: u_xx + model.k ** 2 * u,
                       pinn.Uniform(60, x=(0, 1), method="sobol")),
        pinn.Condition("data", lambda x, u: u - torch.sin(2 * x), pinn.Uniform(20, x=(0, 1)))],
        jacobian="taylor")
    optimizer = lt.LevenbergMarquardt(model, residual_fn=problem)
    for step in range(25):
        if step > 0:
            problem.resample(step)
        optimizer.step(problem.points)
    assert problem.jacobian_path == "pinn taylor"
    assert abs(model.k.item() - 2.0) < 1e-3, model.k.item()


def test_with_coefficients_refuses_what_it_cannot_train() -> None:
    network = _network(1, 1, seed=37)
    with pytest.raises(ValueError, match="no coefficient given"):
        pinn.WithCoefficients(network)
    with pytest.raises(ValueError, match="would hide the module's attribute"):
        pinn.WithCoefficients(network, network=1.0)
    with pytest.raises(ValueError, match="not a Python identifier"):
        pinn.WithCoefficients(network, **{"a.b": 1.0})
    with pytest.raises(ValueError, match="must be finite"):
        pinn.WithCoefficients(network, k=float("nan"))
    with pytest.raises(ValueError, match="expected a number or a tensor"):
        pinn.WithCoefficients(network, k="two")


def test_the_taylor_route_leaves_a_model_with_parameters_beside_its_layers() -> None:
    network = _network(2, 1, seed=34)
    assert pinn.TaylorMLP.supports(network)
    network.scale = torch.nn.Parameter(torch.tensor(0.5, dtype=torch.float64))
    assert not pinn.TaylorMLP.supports(network)
    problem = pinn.Problem("tx", [pinn.Condition(
        "pde", lambda u, u_t, u_xx: u_t - network.scale * u_xx,
        pinn.Uniform(30, t=(0, 1), x=(-1, 1)))])
    j = problem.jacobian_slice(network, _params(network), problem.points, None, 0, 30)
    assert problem.jacobian_path == "pinn pointwise jacrev"
    params = _params(network)
    column = sum(params[name].numel() for name in list(params)[:list(params).index("scale")])
    assert j[:, column].abs().max() > 0.01  # the scale's column, −u_xx/√N
    p = problem.points.clone().requires_grad_(True)
    u = network(p)[:, 0]
    u_xx = torch.autograd.grad(torch.autograd.grad(u.sum(), p, create_graph=True)[0][:, 1].sum(),
                               p)[0][:, 1]
    torch.testing.assert_close(j[:, column], -u_xx.detach() / math.sqrt(30), rtol=0, atol=1e-12)


@pytest.mark.parametrize("embedded", [True, False])
def test_taylor_route_takes_pure_third_derivatives(embedded: bool) -> None:
    # KdV's u_xxx (issue 39): through the periodic embedding and Sigmoid/Tanh layers, beside a
    # mixed second derivative; without the embedding, third derivatives along both axes.
    # Measured: r within 2.2e-16, J within 5.6e-17 of autograd's (|J| up to 1.4), the jacrev
    # route within 4.2e-17; the bounds are the neighbouring route tests' (1e-11, 1e-10).
    torch.manual_seed(23)
    layers = [torch.nn.Linear(3 if embedded else 2, 9), torch.nn.Sigmoid(),
              torch.nn.Linear(9, 9), torch.nn.Tanh(), torch.nn.Linear(9, 1)]
    model = torch.nn.Sequential(*([_Periodic()] if embedded else []), *layers).double()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1.5).add_(0.1 * torch.randn_like(p))
    if embedded:
        pde = lambda u, u_t, u_x, u_xxx, u_tx: u_t + u * u_x + 0.0025 * u_xxx - 0.3 * u_tx  # noqa: E731
    else:
        pde = lambda u, u_x, u_xxx, u_ttt: u * u_x + u_xxx - 0.5 * u_ttt  # noqa: E731
    problem = pinn.Problem("tx", [
        pinn.Condition("pde", pde, pinn.Uniform(30, t=(0, 1), x=(-1, 1))),
        pinn.Condition("initial", lambda x, u: u - torch.cos(math.pi * x),
                       pinn.Uniform(8, t=0, x=(-1, 1)), weight=4.0)], jacobian="taylor")
    x = problem.points

    def reference(f):
        p = x[:30].clone().requires_grad_(True)
        u = f(p)[:, 0]

        def d(v, axis):
            return torch.autograd.grad(v.sum(), p, create_graph=True)[0][:, axis]

        u_t, u_x = d(u, 0), d(u, 1)
        u_xxx = d(d(u_x, 1), 1)
        if embedded:
            rows = u_t + u * u_x + 0.0025 * u_xxx - 0.3 * d(u_t, 1)
        else:
            rows = u * u_x + u_xxx - 0.5 * d(d(u_t, 0), 0)
        q = x[30:]
        initial = 4.0 * (f(q)[:, 0] - torch.cos(math.pi * q[:, 1])) / math.sqrt(8)
        return torch.cat([rows / math.sqrt(30), initial])

    _taylor_and_jacrev_against(problem, model, x, reference)


def _higher_order_model(form: str, coordinates: str, periodic: dict, hidden: list,
                        seed: int, scale: float, constraint: tuple, width: int = 8):
    """The higher-derivative tests' model: an MLP with the activations `hidden`, alone
    ("plain"), after PeriodicInput(coordinates, periodic) ("periodic") or inside
    HardConstrained(network, *constraint) ("constrained"); its weights larger and varied."""
    torch.manual_seed(seed)
    embed = [pinn.PeriodicInput(coordinates, periodic, harmonics=2)] if form == "periodic" else []
    sizes = [embed[0].features if embed else len(coordinates)] + [width] * len(hidden)
    layers = [m for a, b, act in zip(sizes, sizes[1:], hidden)
              for m in (torch.nn.Linear(a, b), act)]
    network = torch.nn.Sequential(*embed, *layers, torch.nn.Linear(width, 1)).double()
    with torch.no_grad():
        for p in network.parameters():
            p.mul_(scale).add_(0.1 * torch.randn_like(p))
    return pinn.HardConstrained(network, *constraint) if form == "constrained" else network


def _d(w: torch.Tensor, axis: int, at: torch.Tensor) -> torch.Tensor:
    """∂w/∂(at's column `axis`), per point, with a graph for the next derivative."""
    return torch.autograd.grad(w.sum(), at, create_graph=True)[0][:, axis]


def _edge(count: int, axis: str, **where) -> pinn.Condition:
    """The higher-derivative tests' second condition: u − ½·u_<axis> at `count` points."""
    residual = {"x": lambda u, u_x: u - 0.5 * u_x, "y": lambda u, u_y: u - 0.5 * u_y}[axis]
    return pinn.Condition("edge", residual, pinn.Uniform(count, **where), weight=2.0)


def _edge_reference(f, q: torch.Tensor, axis: int) -> torch.Tensor:
    """_edge's weighted rows at the points q by autograd."""
    q = q.clone().requires_grad_(True)
    e = f(q)[:, 0]
    return 2.0 * (e - 0.5 * _d(e, axis, q)) / math.sqrt(q.shape[0])


@pytest.mark.parametrize("form", ["plain", "periodic", "constrained"])
def test_taylor_route_takes_mixed_third_derivatives(form: str) -> None:
    # u_txx (BBM's), u_xxy and u_xyy (a stream function's momentum equations) beside a pure
    # u_yyy and the second derivatives they carry, on (t, x, y): a plain MLP, one after a
    # periodic embedding in x (its mixed derivatives across coordinates are 0), and a
    # HardConstrained one (the product rule's mixed third terms).  Against autograd's
    # derivatives of the same module and the jacrev route, to the neighbouring tests' bounds.
    model = _higher_order_model(
        form, "txy", {"x": 2.0}, [torch.nn.Tanh(), torch.nn.Sigmoid()], seed=41, scale=1.5,
        constraint=(lambda p: torch.sin(p[:, 1]) * torch.cos(p[:, 2]) * p[:, 0] ** 2,
                    lambda p: torch.exp(p[:, 0]) * (1 - p[:, 1] ** 2) * (1 + p[:, 2] ** 3)))
    problem = pinn.Problem("txy", [
        pinn.Condition("pde", lambda u, u_t, u_x, u_txx, u_xxy, u_xyy, u_yyy, u_xy:
                       u_t + u * u_x - 0.7 * u_txx + 0.2 * u_xxy * u_xyy - 0.1 * u_yyy + u_xy,
                       pinn.Uniform(30, t=(0, 1), x=(-1, 1), y=(-1, 1))),
        _edge(7, "y", t=(0, 1), x=1.0, y=(-1, 1))], jacobian="taylor")
    x = problem.points

    def reference(f):
        p = x[:30].clone().requires_grad_(True)
        u = f(p)[:, 0]
        u_x, u_y = _d(u, 1, p), _d(u, 2, p)
        u_xx, u_yy = _d(u_x, 1, p), _d(u_y, 2, p)
        rows = (_d(u, 0, p) + u * u_x - 0.7 * _d(u_xx, 0, p) + 0.2 * _d(u_xx, 2, p) *
                _d(u_yy, 1, p) - 0.1 * _d(u_yy, 2, p) + _d(u_x, 2, p))
        return torch.cat([rows / math.sqrt(30), _edge_reference(f, x[30:], 2)])

    _taylor_and_jacrev_against(problem, model, x, reference)
    problem.jacobian = "taylor"
    taylor = problem._taylor(0, model)
    assert taylor.third == [(0, 1, 1), (1, 1, 2), (1, 2, 2), (2, 2, 2)]
    assert not taylor.pure_third


@pytest.mark.parametrize("form", ["plain", "periodic", "constrained"])
def test_taylor_route_takes_pure_fourth_derivatives(form: str) -> None:
    # Kuramoto–Sivashinsky's u_xxxx and a beam's u_tttt, beside a mixed third (u_txx) and the
    # derivatives they carry: a plain MLP with a pinn.Sin layer, one after a periodic embedding
    # in x, a HardConstrained one (the product rule's 4bᵃᵃᵃnᵃ + 6bᵃᵃnᵃᵃ + 4bᵃnᵃᵃᵃ).  Against
    # autograd's derivatives of the same module and the jacrev route, to the neighbouring
    # tests' bounds.
    model = _higher_order_model(
        form, "tx", {"x": 2.0}, [torch.nn.Tanh(), pinn.Sin(), torch.nn.Sigmoid()], seed=43,
        scale=1.3, constraint=(lambda p: torch.sin(2 * p[:, 1]) * p[:, 0],
                               lambda p: torch.exp(p[:, 0]) * torch.cos(p[:, 1])))
    problem = pinn.Problem("tx", [
        pinn.Condition("pde", lambda u, u_t, u_x, u_xx, u_xxxx, u_tttt, u_txx:
                       u_t + u * u_x + u_xx + 0.3 * u_xxxx - 0.2 * u_tttt * u_txx,
                       pinn.Uniform(30, t=(0, 1), x=(-1, 1))),
        _edge(7, "x", t=(0, 1), x=1.0)], jacobian="taylor")
    x = problem.points

    def reference(f):
        p = x[:30].clone().requires_grad_(True)
        u = f(p)[:, 0]
        u_x, u_t = _d(u, 1, p), _d(u, 0, p)
        u_xx = _d(u_x, 1, p)
        u_xxxx = _d(_d(u_xx, 1, p), 1, p)
        u_tttt = _d(_d(_d(u_t, 0, p), 0, p), 0, p)
        rows = u_t + u * u_x + u_xx + 0.3 * u_xxxx - 0.2 * u_tttt * _d(u_xx, 0, p)
        return torch.cat([rows / math.sqrt(30), _edge_reference(f, x[30:], 1)])

    _taylor_and_jacrev_against(problem, model, x, reference)
    problem.jacobian = "taylor"
    taylor = problem._taylor(0, model)
    assert taylor.fourth == [(0, 0, 0, 0), (1, 1, 1, 1)] and taylor.pure_fourth
    assert (0, 1, 1) in taylor.third


@pytest.mark.parametrize("form", ["plain", "periodic", "constrained"])
def test_taylor_route_takes_mixed_fourth_derivatives(form: str) -> None:
    # The biharmonic's u_xxyy (a Kirchhoff plate: u_xxxx + 2u_xxyy + u_yyyy), u_txxx (three
    # along one axis), u_txyy and u_txxy (three axes; u_txxy's pairings differ: tx·xy twice and
    # ty·xx) beside a pure u_yyyy on (t, x, y): a plain MLP, one
    # after a periodic embedding in y, a HardConstrained one (the product rule's sixteen
    # terms).  Against autograd's derivatives of the same module and the jacrev route.
    model = _higher_order_model(
        form, "txy", {"y": 2.0}, [torch.nn.Tanh(), torch.nn.Sigmoid()], seed=47, scale=1.3,
        width=7, constraint=(lambda p: torch.sin(p[:, 1] + 2 * p[:, 2]) * p[:, 0] ** 2,
                             lambda p: torch.exp(p[:, 0] * p[:, 2]) * torch.cos(p[:, 1] * p[:, 2])))
    problem = pinn.Problem("txy", [
        pinn.Condition("pde", lambda u, u_x, u_xxyy, u_txxx, u_txyy, u_yyyy, u_xxxx, u_txxy:
                       u_xxxx + 2 * u_xxyy + u_yyyy + 0.3 * u * u_txxx - 0.2 * u_x * u_txyy
                       + 0.4 * u_txxy,
                       pinn.Uniform(25, t=(0, 1), x=(-1, 1), y=(-1, 1))),
        _edge(6, "y", t=(0, 1), x=1.0, y=(-1, 1))], jacobian="taylor")
    x = problem.points

    def reference(f):
        p = x[:25].clone().requires_grad_(True)
        u = f(p)[:, 0]
        u_x, u_y = _d(u, 1, p), _d(u, 2, p)
        u_xx, u_yy = _d(u_x, 1, p), _d(u_y, 2, p)
        u_xxx = _d(u_xx, 1, p)
        rows = (_d(u_xxx, 1, p) + 2 * _d(_d(u_xx, 2, p), 2, p) + _d(_d(u_yy, 2, p), 2, p)
                + 0.3 * u * _d(u_xxx, 0, p) - 0.2 * u_x * _d(_d(u_yy, 1, p), 0, p)
                + 0.4 * _d(_d(u_xx, 2, p), 0, p))
        return torch.cat([rows / math.sqrt(25), _edge_reference(f, x[25:], 2)])

    _taylor_and_jacrev_against(problem, model, x, reference)
    problem.jacobian = "taylor"
    taylor = problem._taylor(0, model)
    assert taylor.fourth == [(0, 1, 1, 1), (0, 1, 1, 2), (0, 1, 2, 2), (1, 1, 1, 1),
                             (1, 1, 2, 2), (2, 2, 2, 2)] and not taylor.pure_fourth


@pytest.mark.parametrize("layer", [torch.nn.Tanh(), torch.nn.Sigmoid(), torch.nn.SiLU(),
                                   torch.nn.Softplus(), torch.nn.Softplus(beta=2.0),
                                   torch.nn.GELU(), pinn.Sin(), torch.nn.Identity()],
                         ids=lambda m: repr(m))
def test_activation_derivatives_to_the_fifth_order_equal_nested_autograd(layer) -> None:
    # The closed forms the Taylor route propagates with (σ … σ⁽⁵⁾) against five nested
    # autograd derivatives of the layer itself, on [−4, 4].  Measured: 1.8e-15 at most (Tanh's
    # σ⁽⁵⁾, whose values reach 17); a wrong coefficient misses by O(1).
    from lmtrain.torch._jacobian import _activation_derivatives

    h = torch.linspace(-4, 4, 101, dtype=torch.float64)
    closed = _activation_derivatives(layer, h, 5)
    x = h.clone().requires_grad_(True)
    nested = [layer(x)]
    for _ in range(5):
        last = nested[-1]
        nested.append(torch.autograd.grad(last.sum(), x, create_graph=True)[0]
                      if last.requires_grad else torch.zeros_like(h))  # Identity: constants
    for order, (a, b) in enumerate(zip(closed, nested)):
        torch.testing.assert_close(a, b.detach(), rtol=0, atol=1e-13, msg=f"order {order}")


@pytest.mark.parametrize("activation", ["SiLU", "Softplus", "GELU"])
def test_taylor_route_takes_silu_softplus_and_gelu(activation: str) -> None:
    # The smooth activations beside tanh that PINNs use: x·σ(x), log(1 + e^(βx))/β with β = 2,
    # and the exact GELU x·Φ(x) (their derivatives to the fifth order in closed form), through
    # first to mixed fourth derivatives, against autograd and the jacrev route.  GELU's tanh
    # approximation is not among them: such a network takes the jacrev route.
    layer = {"SiLU": torch.nn.SiLU(), "Softplus": torch.nn.Softplus(beta=2.0),
             "GELU": torch.nn.GELU()}[activation]
    model = _higher_order_model("plain", "tx", {}, [layer, torch.nn.Tanh()], seed=53, scale=1.5,
                                constraint=())
    assert pinn.TaylorMLP.supports(model)
    problem = pinn.Problem("tx", [
        pinn.Condition("pde", lambda u, u_t, u_x, u_xx, u_txx, u_xxxx, u_ttxx:
                       u_t + u * u_x - 0.5 * u_xx + 0.2 * u_txx + 0.1 * u_xxxx - 0.05 * u_ttxx,
                       pinn.Uniform(30, t=(0, 1), x=(-1, 1))),
        pinn.Condition("initial", lambda x, u: u - torch.sin(math.pi * x),
                       pinn.Uniform(8, t=0, x=(-1, 1)), weight=3.0)], jacobian="taylor")
    x = problem.points

    def reference(f):
        p = x[:30].clone().requires_grad_(True)
        u = f(p)[:, 0]
        u_x = _d(u, 1, p)
        u_xx = _d(u_x, 1, p)
        rows = (_d(u, 0, p) + u * u_x - 0.5 * u_xx + 0.2 * _d(u_xx, 0, p)
                + 0.1 * _d(_d(u_xx, 1, p), 1, p) - 0.05 * _d(_d(u_xx, 0, p), 0, p))
        q = x[30:]
        initial = 3.0 * (f(q)[:, 0] - torch.sin(math.pi * q[:, 1])) / math.sqrt(8)
        return torch.cat([rows / math.sqrt(30), initial])

    _taylor_and_jacrev_against(problem, model, x, reference)
    approximate = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.GELU(approximate="tanh"),
                                      torch.nn.Linear(4, 1))
    assert not pinn.TaylorMLP.supports(approximate)


@pytest.mark.parametrize("parts", ["offset and factor", "factor", "offset"])
def test_taylor_route_through_exactly_imposed_values(parts: str) -> None:
    # pinn.HardConstrained: u = g(t, x) + d(t, x)·N(t, x) with N an MLP (a pinn.Sin layer
    # among its activations) after an input map holding a constant (a buffer), g with several
    # outputs' values, d one for all; first,
    # mixed second and pure third derivatives along both axes.  The Taylor route (the product
    # rule over N's propagation) against autograd's derivatives of the same module, and the
    # jacrev route as a second method.  Measured: r within 3.3e-16, J within 1.1e-16 of
    # autograd's (|J| up to 3.5), the same with OPENBLAS_CORETYPE Sandybridge and LMTRAIN_SIMD
    # baseline; the helper's bounds (1e-11, 1e-10) are its neighbours', and a wrong term of the
    # product rule is off by O(1) (mutations of 3·b″·n′, of the seeds' transpose and of sin‴
    # fail).
    torch.manual_seed(29)

    class Features(torch.nn.Module):  # fixed Fourier features: a constant, not a parameter
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("b", torch.randn(2, 3, dtype=torch.float64))

        def forward(self, p: torch.Tensor) -> torch.Tensor:
            z = p @ self.b
            return torch.cat([torch.sin(z), torch.cos(z)], dim=1)

    network = torch.nn.Sequential(Features(), torch.nn.Linear(6, 9), pinn.Sin(),
                                  torch.nn.Linear(9, 9), torch.nn.Sigmoid(),
                                  torch.nn.Linear(9, 2)).double()
    offset = lambda p: torch.stack([torch.sin(p[:, 1]) * torch.exp(-p[:, 0]),  # noqa: E731
                                    p[:, 1] ** 3 - p[:, 0]], dim=1)
    factor = lambda p: p[:, 0] * (1 - p[:, 1] ** 2) * torch.cosh(p[:, 1])  # noqa: E731
    model = pinn.HardConstrained(network, offset=offset if "offset" in parts else None,
                                 factor=factor if "factor" in parts else None)
    problem = pinn.Problem("tx", [
        pinn.Condition("pde", lambda u, v, u_t, v_x, u_xxx, v_tt, u_tx, v_ttt:
                       torch.stack([u_t + u * v_x + 0.1 * u_xxx - 0.3 * u_tx,
                                    v_tt + v * v_ttt - u]),
                       pinn.Uniform(25, t=(0, 1), x=(-1, 1))),
        pinn.Condition("edge", lambda u, v, u_x: u - v + u_x, pinn.Uniform(6, t=(0, 1), x=1.0),
                       weight=3.0)], outputs="uv", jacobian="taylor")
    x = problem.points

    def reference(f):
        p = x[:25].clone().requires_grad_(True)
        out = f(p)
        u, v = out[:, 0], out[:, 1]

        def d(w, axis, at=p):
            return torch.autograd.grad(w.sum(), at, create_graph=True)[0][:, axis]

        v_tt = d(d(v, 0), 0)
        pde = torch.stack([d(u, 0) + u * d(v, 1) + 0.1 * d(d(d(u, 1), 1), 1) - 0.3 * d(d(u, 0), 1),
                           v_tt + v * d(v_tt, 0) - u], dim=1).reshape(-1) / math.sqrt(25)
        q = x[25:].clone().requires_grad_(True)
        e = f(q)
        edge = 3.0 * (e[:, 0] - e[:, 1] + d(e[:, 0], 1, q)) / math.sqrt(6)
        return torch.cat([pde, edge])

    _taylor_and_jacrev_against(problem, model, x, reference)
    # The offset's and the factor's derivatives are kept per set of points: other points in
    # the same memory (a fresh draw where the last one was; here a tensor on the storage of x
    # with new values and a fresh version counter) get their own.
    problem.jacobian = "taylor"
    x.add_(0)  # a write: x's version counter at 1, as a tensor set_ on its storage will have
    problem(model, x)
    moved = torch.empty(0, dtype=x.dtype).set_(x.untyped_storage(), x.storage_offset(),
                                               x.shape, x.stride())
    moved.mul_(0.5)
    same_memory = torch.empty(0, dtype=x.dtype).set_(x.untyped_storage(), x.storage_offset(),
                                                     x.shape, x.stride())
    assert same_memory.data_ptr() == x.data_ptr() and same_memory._version == x._version
    torch.testing.assert_close(problem(model, same_memory),
                               _residuals_by(problem, "jacrev", model, moved), rtol=0, atol=1e-11)
    if "factor" in parts:  # the values it imposes: u = g where d = 0 (t = 0 or x = ±1)
        edge = torch.tensor([[0.0, 0.3], [0.5, 1.0], [0.7, -1.0]], dtype=torch.float64)
        torch.testing.assert_close(model(edge), offset(edge) if "offset" in parts else
                                   torch.zeros(3, 2, dtype=torch.float64), rtol=0, atol=1e-15)


def _residuals_by(problem: pinn.Problem, route: str, model, x: torch.Tensor) -> torch.Tensor:
    """The problem's residuals at x by `route` (jacrev: vmap of the one-point residual)."""
    before, problem.jacobian = problem.jacobian, route
    try:
        return problem(model, x.clone())
    finally:
        problem.jacobian = before


def test_hard_constrained_refuses_a_trained_offset() -> None:
    with pytest.raises(ValueError, match="has parameters"):
        pinn.HardConstrained(torch.nn.Linear(2, 1), offset=torch.nn.Linear(2, 1))
    with pytest.raises(ValueError, match="expected a function"):
        pinn.HardConstrained(torch.nn.Linear(2, 1), factor=3.0)


def test_taylor_route_refuses_what_it_does_not_know() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.ReLU(),
                                torch.nn.Linear(4, 1)).double()
    problem = pinn.Problem("tx", [pinn.Condition("pde", lambda u_t: u_t,
                                                 pinn.Uniform(4, t=(0, 1), x=(0, 1)))],
                           jacobian="taylor")
    with pytest.raises(ValueError, match="jacobian = 'taylor' needs an nn.Sequential"):
        problem.jacobian_slice(model, _params(model), problem.points, None, 0, 4)
    problem.jacobian = "auto"  # the transform route takes any module
    j = problem.jacobian_slice(model, _params(model), problem.points, None, 0, 4)
    assert problem.jacobian_choice == {"mode": "jacrev", "by": "shape"} and j.shape == (4, 17)
    # A fifth derivative is beyond the Taylor route (u_txx, u_xxxx and u_txxx are not).
    tanh = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.Tanh(),
                               torch.nn.Linear(4, 1)).double()
    fourth = pinn.Problem("tx", [pinn.Condition("pde", lambda u_txxxx: u_txxxx,
                                                pinn.Uniform(4, t=(0, 1), x=(0, 1)))],
                          jacobian="taylor")
    with pytest.raises(ValueError, match="derivatives of order ≤ 4"):
        fourth.jacobian_slice(tanh, _params(tanh), fourth.points, None, 0, 4)


def test_forward_mode_in_theta_gives_the_same_jacobian() -> None:
    problem, model = _burgers_problem(), _network(2, 1, seed=13, width=4)
    x = problem.points
    rows = problem(model, x).numel()
    by_reverse = problem.jacobian_slice(model, _params(model), x, None, 0, rows)
    forward = _burgers_problem()
    forward.jacobian = "jacfwd"
    by_forward = forward.jacobian_slice(model, _params(model), x, None, 0, rows)
    torch.testing.assert_close(by_forward, by_reverse, rtol=0, atol=1e-12)


@pytest.mark.parametrize("route", ["taylor", "jacrev"])
def test_several_outputs_and_rows_per_point_and_mixed_derivatives(route: str) -> None:
    # A system in (u, v) with a two-valued residual and a mixed derivative u_xy.
    problem = pinn.Problem("xy", [
        pinn.Condition("pde", lambda x, u, v, u_xy, v_x, v_yy: torch.stack(
            [u_xy - v * x, v_x + v_yy * u]), pinn.Uniform(13, x=(0, 1), y=(0, 2))),
        pinn.Condition("edge", lambda u, v: u - v, pinn.Uniform(5, x=0, y=(0, 2)), weight=2.0),
    ], outputs="uv", seed=1, jacobian=route)
    model = _network(2, 2, seed=14)
    x = problem.points

    def reference(f):
        p = x[:13].clone().requires_grad_(True)
        out = f(p)
        u, v = out[:, 0], out[:, 1]
        u_x = torch.autograd.grad(u.sum(), p, create_graph=True)[0][:, 0]
        u_xy = torch.autograd.grad(u_x.sum(), p, create_graph=True)[0][:, 1]
        dv = torch.autograd.grad(v.sum(), p, create_graph=True)[0]
        v_yy = torch.autograd.grad(dv[:, 1].sum(), p, create_graph=True)[0][:, 1]
        pde = torch.stack([u_xy - v * p[:, 0], dv[:, 0] + v_yy * u], dim=1).reshape(-1)
        e = f(x[13:])
        return torch.cat([pde / math.sqrt(13), 2.0 * (e[:, 0] - e[:, 1]) / math.sqrt(5)])

    r = problem(model, x)
    torch.testing.assert_close(r, reference(model), rtol=0, atol=1e-12)
    assert problem.blocks == [("pde", slice(0, 26)), ("edge", slice(26, 31))]
    expected = reference_jacobian(model, reference)
    for start, stop in [(0, 31), (5, 28), (25, 27)]:  # slices that split a point's two rows
        j = problem.jacobian_slice(model, _params(model), x, None, start, stop)
        torch.testing.assert_close(j, expected[start:stop], rtol=0, atol=1e-10)
    # The rows are computed in chunks of points written straight into the slice: chunks of one
    # point (chunk_bytes) give one chunk's J, point weights included — to rounding (a product
    # of one row and one of 13 round differently: 1.4e-16 seen; a misplaced row is off by O(1)).
    whole = problem.jacobian_slice(model, _params(model), x, None, 0, 31)
    problem.chunk_bytes = 1
    problem.conditions[0].point_weights = pinn.ResidualBasedAttention(initial=0.5)
    torch.testing.assert_close(problem.jacobian_slice(model, _params(model), x, None, 0, 31),
                               torch.cat([0.5 * whole[:26], whole[26:]]), rtol=0, atol=1e-14)
    torch.testing.assert_close(problem.jacobian_slice(model, _params(model), x, None, 5, 28),
                               torch.cat([0.5 * whole[5:26], whole[26:28]]), rtol=0, atol=1e-14)
    with pytest.raises(ValueError, match="rows 0:32: the residual has 31 rows"):
        problem.jacobian_slice(model, _params(model), x, None, 0, 32)


def test_the_optimizer_builds_the_same_system_from_the_problem_and_from_autograd() -> None:
    problem = _burgers_problem(seed=7)
    reference = _burgers_autograd(problem.points, (40, 9, 7))
    systems = []
    for residual_fn in (problem, lambda model, x, y: reference(model)):
        model = _network(2, 1, seed=15)
        optimizer = lt.LevenbergMarquardt(model, residual_fn=residual_fn)
        # Before the first step a Problem's route is not chosen yet, and the path says so.
        assert optimizer.path == ("pinn (its route chosen at the first step)"
                                  if residual_fn is problem else "autograd")
        systems.append(optimizer.normal_equations(problem.points))
        report = optimizer.step(problem.points)
        systems.append(torch.cat([p.detach().reshape(-1) for p in model.parameters()]))
        assert report.path == optimizer.path == ("pinn " + {"taylor": "taylor", "jacrev": "pointwise jacrev"}[
            problem.jacobian_choice["mode"]] if residual_fn is problem else "autograd per point")
    assert problem.jacobian_choice["by"] == "measurement"
    assert set(problem.jacobian_choice["seconds"]) == {"taylor", "jacrev"}
    (f1, a1, g1), theta1, (f2, a2, g2), theta2 = systems
    assert f1 == pytest.approx(f2, rel=1e-13)
    torch.testing.assert_close(a1, a2, rtol=0, atol=1e-10 * float(a2.abs().max()))
    torch.testing.assert_close(g1, g2, rtol=0, atol=1e-10 * float(g2.abs().max()))
    torch.testing.assert_close(theta1, theta2, rtol=0, atol=1e-9)


def test_block_losses_add_up_to_the_objective() -> None:
    problem, model = _burgers_problem(), _network(2, 1, seed=16)
    r = problem(model, problem.points).detach()
    losses = problem.block_losses(r)
    weights = {c.name: c.weight for c in problem.conditions}
    assert 0.5 * sum(weights[k] ** 2 * v for k, v in losses.items()) == \
        pytest.approx(0.5 * float((r ** 2).sum()), rel=1e-13)
    # The boundary block's loss is the mean of u² at its points, unweighted.
    with torch.no_grad():
        u = model(problem.points[49:])
    assert losses["boundary"] == pytest.approx(float((u ** 2).mean()), rel=1e-13)


def _reference_block_losses(model: torch.nn.Module, x: torch.Tensor) -> dict[str, float]:
    """Each Burgers condition's mean F² from the autograd reference's weighted residuals
    (Σ r² / w² over the block's rows), at the model's current parameters."""
    r = _burgers_autograd(x, (40, 9, 7))(model).detach()
    return {"pde": float((r[:40] ** 2).sum()), "initial": float((r[40:49] ** 2).sum()) / 9.0,
            "boundary": float((r[49:] ** 2).sum()) / 0.25}


def test_the_step_reports_each_conditions_loss_before_its_update() -> None:
    problem, model = _burgers_problem(seed=7), _network(2, 1, seed=15)
    optimizer = lt.LevenbergMarquardt(model, residual_fn=problem)
    for _ in range(2):  # the second step starts from the first one's parameters
        expected = _reference_block_losses(model, problem.points)
        with torch.no_grad():
            own = problem.block_losses(problem(model, problem.points))
        report = optimizer.step(problem.points)
        assert report.accepted
        assert list(report.block_losses) == ["pde", "initial", "boundary"]  # the problem's order
        for name, value in report.block_losses.items():
            assert value == pytest.approx(expected[name], rel=1e-12), name
            assert value == pytest.approx(own[name], rel=1e-12), name
        # ½ Σ w²·loss is the objective F = ½‖r‖² before the step.
        weights = {c.name: c.weight for c in problem.conditions}
        assert 0.5 * sum(weights[k] ** 2 * v for k, v in report.block_losses.items()) == \
            pytest.approx(report.objective, rel=1e-12)
    # A residual_fn without residual_blocks(): no blocks.
    plain = lt.LevenbergMarquardt(_network(2, 1, seed=15), residual_fn=lambda m, x, y: problem(
        m, x))
    assert plain.step(problem.points).block_losses == {}


def test_fit_keeps_the_block_losses_in_its_history_and_summary() -> None:
    import json
    import pickle

    problem = _burgers_problem(seed=7)
    model, replay = _network(2, 1, seed=15), _network(2, 1, seed=15)
    at_start = _reference_block_losses(model, problem.points)
    optimizer = lt.LevenbergMarquardt(model, residual_fn=problem)
    history = optimizer.fit((problem.points, None), epochs=2, shuffle=False)
    summary = optimizer.summary
    assert [e["epoch"] for e in history] == [1, 2]
    # One full-batch step per epoch: epoch 1's blocks are those at the start ...
    for name, value in history[0]["block_losses"].items():
        assert value == pytest.approx(at_start[name], rel=1e-12), name
    # ... and epoch 2's those a second step() reports on the same model.
    steps = lt.LevenbergMarquardt(replay, residual_fn=problem)
    steps.step(problem.points)
    second = steps.step(problem.points).block_losses
    assert history[1]["block_losses"] == pytest.approx(second, rel=1e-12)
    assert summary.block_losses == history[1]["block_losses"]
    assert summary.history[1].block_losses == summary.block_losses
    report = summary.full_report()
    assert "Residual blocks (last step, before its update)" in report
    for name, value in summary.block_losses.items():
        assert f"  {name:<32}{value:.6e}\n" in report
    # summary.json and the pickle (through it) carry them, in order.
    stored = json.loads(summary.to_json())["progress"]["final_block_losses"]
    assert [(b["name"], b["loss"]) for b in stored] == list(summary.block_losses.items())
    back = pickle.loads(pickle.dumps(summary))
    assert back.block_losses == summary.block_losses
    assert back.history[0].block_losses == summary.history[0].block_losses
    assert back.full_report() == report


def test_bad_blocks_from_a_residual_fn_are_refused_by_name() -> None:
    problem = _burgers_problem(seed=7)

    class Shifted:
        def __call__(self, model, x, y=None):
            return problem(model, x)

        def residual_blocks(self):
            return [("pde", 0, 40, 1.0), ("boundary", 50, 7, 4.0)]  # past the 56 rows

    model = _network(2, 1, seed=15)
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = lt.LevenbergMarquardt(model, residual_fn=Shifted())
    with pytest.raises(ValueError, match=r'block "boundary" covers rows \[50, 57\).*56 rows'):
        optimizer.step(problem.points)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_resampling_is_seeded_and_keeps_the_layout() -> None:
    a, b = _burgers_problem(seed=4), _burgers_problem(seed=4)
    torch.testing.assert_close(a.points, b.points, rtol=0, atol=0)
    first = a.points.clone()
    a.resample(10)
    b.resample(10)
    torch.testing.assert_close(a.points, b.points, rtol=0, atol=0)
    assert not torch.equal(a.points, first) and a.points.shape == first.shape
    assert float(a.points[40:49, 0].abs().max()) == 0.0  # initial points at t = 0
    assert set(a.points[49:, 1].tolist()) <= {-1.0, 1.0}  # boundary points at x = ±1
    heldout = a.heldout()
    assert heldout.shape == first.shape and not torch.equal(heldout, a.sample(0))
    assert float(a.points[:40, 0].min()) >= 0 and float(a.points[:40, 1].max()) <= 1
    sobol = pinn.Uniform(64, method="sobol", t=(0, 1), x=(-1, 1)).draw("tx", 3, torch.float64)
    # A scrambled Sobol set fills each axis's 8 bins exactly evenly (a (0, m, 2)-net).
    counts = torch.bincount((sobol[:, 0] * 8).long(), minlength=8)
    assert counts.tolist() == [8] * 8


def test_a_problems_state_restores_its_points_counts_and_weights() -> None:
    a = _burgers_problem(seed=4)
    a.conditions[0].point_weights = pinn.ResidualBasedAttention(gamma=0.5, eta=0.2)
    a.conditions[2].point_weights = pinn.CausalWeights(1.0, slabs=4)
    model = _network(2, 1, 0)
    a.set_count("pde", 25)
    a.resample(7)
    a.update_weights(model)
    state = a.state_dict()
    b = _burgers_problem(seed=4)
    b.conditions[0].point_weights = pinn.ResidualBasedAttention(gamma=0.5, eta=0.2)
    b.conditions[2].point_weights = pinn.CausalWeights(1.0, slabs=4)
    b.load_state_dict(state)
    assert b.counts == [25, 9, 7] and b.step_drawn == 7
    torch.testing.assert_close(b.points, a.points, rtol=0, atol=0)
    # The rows carry the restored weights (RBA's multipliers, the slabs' losses): the same bits.
    torch.testing.assert_close(b(model, b.points), a(model, a.points), rtol=0, atol=0)
    fresh = _burgers_problem(seed=4)
    fresh.conditions[0].point_weights = pinn.ResidualBasedAttention(gamma=0.5, eta=0.2)
    fresh.conditions[2].point_weights = pinn.CausalWeights(1.0, slabs=4)
    fresh.set_count("pde", 25)
    fresh.resample(7)  # the same points, but the weights of no update: other rows
    assert not torch.equal(fresh(model, fresh.points), a(model, a.points))
    for field, value, message in (("seed", 5, "seed 5, this problem's are 4"),
                                  ("conditions", ["pde", "initial"], "conditions"),
                                  ("counts", [25, 9], "one count per condition")):
        with pytest.raises(ValueError, match=message):
            b.load_state_dict({**state, field: value})
    with pytest.raises(ValueError, match="misses"):
        b.load_state_dict({"points": state["points"]})
    with pytest.raises(ValueError, match="slab_losses of shape"):
        b.load_state_dict({**state, "point_weights": {"boundary": {"slab_losses":
                                                                   torch.zeros(3)}}})


def test_a_count_changed_before_the_next_draw() -> None:
    # set_count takes effect at the next resample: points of the last draw passed after it are a
    # clear error that says so; a state saved in between keeps both layouts.
    a, model = _burgers_problem(seed=4), _network(2, 1, 0)
    drawn = a.points.clone()
    a.set_count("pde", 25)
    with pytest.raises(ValueError, match=r"layout of the last draw; set_count has changed it "
                       r"since \(pde 40 → 25\): call problem.resample\(step\) after set_count"):
        a(model, a.points)
    b = _burgers_problem(seed=4)
    b.load_state_dict(a.state_dict())
    assert b.counts == [25, 9, 7] and b.drawn_counts == [40, 9, 7]
    torch.testing.assert_close(b.points, drawn, rtol=0, atol=0)
    torch.testing.assert_close(b.resample(3), a.resample(3), rtol=0, atol=0)
    assert a.points.shape[0] == 25 + 9 + 7
    torch.testing.assert_close(b(model, b.points), a(model, a.points), rtol=0, atol=0)


def test_a_growing_count_follows_the_step_and_is_part_of_the_state() -> None:
    a = _burgers_problem(seed=4)
    a.grow("pde", 100, every=2)
    counts = {step: a.resample(step).shape[0] - 16 for step in (1, 2, 3, 5, 4, 0)}
    assert counts == {1: 40, 2: 80, 3: 80, 5: 100, 4: 100, 0: 40}  # min(100, 40·2^(step // 2))
    assert a.counts == [40, 9, 7] == a.drawn_counts
    b = _burgers_problem(seed=4)
    b.grow("pde", 1000, every=5, start=25)
    assert b.resample(12).shape[0] - 16 == 100
    a.resample(6)
    c = _burgers_problem(seed=4)
    with pytest.raises(ValueError, match=r"grows \{'pde': \[40, 100, 2\]\}, this problem \{\}"):
        c.load_state_dict(a.state_dict())
    c.grow("pde", 100, every=2)
    c.load_state_dict(a.state_dict())
    torch.testing.assert_close(c.resample(9), a.resample(9), rtol=0, atol=0)
    for arguments, message in ((("pde", 30, 2), r"at least the start, 100"),  # its count now
                               (("pde", 100, 0), r"every=0"),
                               (("pde", 100, 2, 0), r"start=0"),
                               (("wave", 100, 2), r"no condition 'wave'")):
        with pytest.raises(ValueError, match=message):
            c.grow(*arguments)
    fixed = pinn.Problem("x", [pinn.Condition("pde", lambda u: u, pinn.Fixed(
        torch.linspace(0, 1, 5, dtype=torch.float64)[:, None]))])
    with pytest.raises(ValueError, match="Fixed points"):
        fixed.grow("pde", 10, 1)


def test_held_points_are_one_larger_draw_kept_to_the_end() -> None:
    # hold(step, model, factor): the draw that resample would make at `step` with factor × the
    # counts (the grow schedule's at that step), and from then on resample returns it.
    a = _burgers_problem(seed=5)
    a.grow("pde", 100, every=2)
    with pytest.raises(ValueError, match=r"hold\(factor=0\): expected a positive integer"):
        a.hold(3, factor=0)
    held = a.hold(3, factor=3)
    assert a.held and a.counts == [240, 27, 21] == a.drawn_counts  # 3 × (80, 9, 7)
    # The reference: a problem without the schedule, its counts set to those, resampled at 3.
    b = _burgers_problem(seed=5)
    for name, count in (("pde", 240), ("initial", 27), ("boundary", 21)):
        b.set_count(name, count)
    torch.testing.assert_close(held, b.resample(3), rtol=0, atol=0)
    assert all(a.resample(step) is held for step in (4, 9, 20))  # kept, whatever the step
    with pytest.raises(ValueError, match="holds its points already"):
        a.hold(5)
    with pytest.raises(ValueError, match=r"set_count\('pde', …\): the problem holds"):
        a.set_count("pde", 10)
    # The rows follow the held counts (w/√N with N = 240): the objective of b's problem.
    model = _network(2, 1, seed=29)
    torch.testing.assert_close(a(model, held), b(model, held), rtol=0, atol=0)
    # Part of the state: a problem loaded from it holds the same points.
    c = _burgers_problem(seed=5)
    c.grow("pde", 100, every=2)
    c.load_state_dict(a.state_dict())
    assert c.held and c.resample(30) is c.points
    torch.testing.assert_close(c.points, held, rtol=0, atol=0)
    # Fixed conditions keep their points.
    fixed = pinn.Problem("x", [pinn.Condition("pde", lambda u: u, pinn.Fixed(
        torch.linspace(0, 1, 5, dtype=torch.float64)[:, None])), pinn.Condition(
        "ends", lambda u: u, pinn.Uniform(2, x=[0, 1]))])
    assert fixed.hold(1, factor=4).shape == (5 + 8, 1)
    # A residual-adaptive condition draws its base's points (uniform), or by the residual as
    # resample does with adaptive=True (which needs the model).
    def adaptive_problem() -> pinn.Problem:
        return pinn.Problem("x", [pinn.Condition("pde", lambda x, u: u - x, pinn.ResidualAdaptive(
            pinn.Uniform(50, x=(0, 1)), pool=4))], seed=2)

    line = torch.nn.Linear(1, 1).double()
    base = adaptive_problem()
    base.set_count("pde", 100)
    torch.testing.assert_close(adaptive_problem().hold(3, line, factor=2), base.sample(3),
                               rtol=0, atol=0)
    torch.testing.assert_close(adaptive_problem().hold(3, line, factor=2, adaptive=True),
                               base.resample(3, line), rtol=0, atol=0)
    assert not torch.equal(base.sample(3), base.points)  # the two draws differ
    with pytest.raises(ValueError, match=r"problem.hold\(step, model, adaptive=True\)"):
        adaptive_problem().hold(1, adaptive=True)


def test_marching_points_cover_a_growing_time_interval() -> None:
    base = pinn.Uniform(64, t=(0.5, 2.5), x=(-1, 1), method="sobol")
    marching = pinn.Marching(base, "t", start=0.25, steps=6)
    problem = pinn.Problem("tx", [pinn.Condition("pde", lambda u, u_t: u_t, marching)], seed=2)
    for step, fraction in ((0, 0.25), (2, 0.5), (4, 0.75), (6, 1.0), (9, 1.0), (3, 0.625)):
        points = problem.resample(step)
        plain = base.draw("tx", pinn._seed(2, 0, step, 0), torch.float64)
        torch.testing.assert_close(points[:, 1], plain[:, 1], rtol=0, atol=0)
        torch.testing.assert_close(points[:, 0], 0.5 + (plain[:, 0] - 0.5) * fraction,
                                   rtol=0, atol=0)
        assert float(points[:, 0].max()) <= 0.5 + 2.0 * fraction
    # The held-out points follow the step drawn last; a loaded state restores it.
    heldout = problem.heldout()
    assert float(heldout[:, 0].max()) <= 0.5 + 2.0 * 0.625 < float(base.draw(
        "tx", 1, torch.float64)[:, 0].max())
    fresh = pinn.Problem("tx", [pinn.Condition("pde", lambda u, u_t: u_t, pinn.Marching(
        pinn.Uniform(64, t=(0.5, 2.5), x=(-1, 1), method="sobol"), "t", start=0.25,
        steps=6))], seed=2)
    fresh.load_state_dict(problem.state_dict())
    torch.testing.assert_close(fresh.heldout(), heldout, rtol=0, atol=0)
    # Inside a residual-adaptive draw the step reaches the base too.
    inner = pinn.Marching(pinn.Uniform(32, t=(0, 1), x=(-1, 1)), start=0.1, steps=10)
    adaptive = pinn.Problem("tx", [pinn.Condition("pde", lambda u, u_t: u_t,
                                                  pinn.ResidualAdaptive(inner, pool=2))])
    assert float(adaptive.resample(5, _network(2, 1, 0))[:, 0].max()) <= 0.55
    for arguments, keywords, message in (
            ((pinn.Fixed(torch.zeros(3, 2)),), {}, "draws fresh points"),
            ((pinn.Uniform(8, t=0, x=(0, 1)),), {}, r"no interval of 't'.*interval="),
            ((base,), {"start": 0.0}, r"start=0.0"),
            ((base,), {"steps": -1}, r"steps=-1")):
        with pytest.raises(ValueError, match=message):
            pinn.Marching(*arguments, **keywords)
    with pytest.raises(ValueError, match=r"Marching\('y'\)"):
        pinn.Marching(base, "y", interval=(0, 1)).draw("tx", 0, torch.float64)


def _drawn_burgers(seed: int) -> tuple[pinn.Problem, torch.nn.Module]:
    problem = _burgers_problem(seed=seed)
    problem.conditions[0].points = pinn.ResidualAdaptive(problem.conditions[0].points, pool=3)
    problem.conditions[0].point_weights = pinn.CausalWeights(1.0, slabs=4)
    problem.grow("pde", 160, every=2)
    return problem, _network(2, 1, seed=35)


def test_fit_on_draws_takes_the_steps_of_the_loop() -> None:
    # The examples' loop: resample every 2 steps (adaptive draws, growing), point weights
    # updated before every step.
    problem, model = _drawn_burgers(5)
    optimizer = lt.LevenbergMarquardt(model, residual_fn=problem)
    for step in range(7):
        if step > 0 and step % 2 == 0:
            problem.resample(step, model)
        problem.update_weights(model)
        optimizer.step(problem.points)
    drawn, fitted = _drawn_burgers(5)
    fitter = lt.LevenbergMarquardt(fitted, residual_fn=drawn)
    history = fitter.fit(drawn.draws(fitted, every=2), epochs=7)
    assert [h["epoch"] for h in history] == list(range(1, 8))
    assert history[-1]["termination"] == "max_epochs" and "pde" in history[-1]["block_losses"]
    for a, b in zip(model.parameters(), fitted.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    # fit() says which Jacobian route it took, as step() does (it said "autograd", the
    # constructor's guess, before).
    assert fitter.path == optimizer.path == "pinn " + {
        "taylor": "taylor", "jacrev": "pointwise jacrev"}[drawn.jacobian_choice["mode"]]
    assert drawn.counts[0] == 160  # the draw after the last epoch (step 7: 40·2³ capped)
    # The fit run's time budget stops it.
    timed, net = _drawn_burgers(6)
    history = lt.LevenbergMarquardt(net, residual_fn=timed).fit(timed.draws(net), epochs=10**6,
                                                                max_time_seconds=0.3)
    assert 1 < len(history) < 10**6 and "time" in history[-1]["termination"]
    with pytest.raises(ValueError, match=r"every=-1"):
        timed.draws(net, every=-1)


def test_fit_on_draws_holds_its_points_from_an_epoch_on(tmp_path) -> None:
    # draws(hold=(3, 2)): the loop's steps with hold(3, model, 2) in place of the third draw;
    # a run resumed past that epoch holds the same points.
    problem, model = _drawn_burgers(10)
    optimizer = lt.LevenbergMarquardt(model, residual_fn=problem)
    for step in range(6):
        if step == 3:
            problem.hold(3, model, 2)
        elif step > 0:
            problem.resample(step, model)
        problem.update_weights(model)
        optimizer.step(problem.points)
    drawn, fitted = _drawn_burgers(10)
    lt.LevenbergMarquardt(fitted, residual_fn=drawn).fit(drawn.draws(fitted, hold=(3, 2)),
                                                         epochs=6)
    assert drawn.held and drawn.counts == [2 * 80, 2 * 9, 2 * 7]  # the schedule's at 3, × 2
    torch.testing.assert_close(drawn.points, problem.points, rtol=0, atol=0)
    for a, b in zip(model.parameters(), fitted.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    first, part = _drawn_burgers(10)
    checkpoint = str(tmp_path / "run.safetensors")
    lt.LevenbergMarquardt(part, residual_fn=first).fit(first.draws(part, hold=(3, 2)), epochs=4,
                                                       checkpoint=checkpoint)
    again, resumed = _drawn_burgers(10)
    lt.LevenbergMarquardt(resumed, residual_fn=again).fit(again.draws(resumed, hold=(3, 2)),
                                                          epochs=6, resume=checkpoint)
    for a, b in zip(model.parameters(), resumed.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    for bad in ((0, 2), (3,), (3, 2.0)):
        with pytest.raises(ValueError, match=r"draws\(hold="):
            drawn.draws(fitted, hold=bad)


def test_fit_on_draws_resumes_bit_for_bit(tmp_path) -> None:
    whole, model = _drawn_burgers(7)
    lt.LevenbergMarquardt(model, residual_fn=whole).fit(whole.draws(model), epochs=6)
    first, part = _drawn_burgers(7)
    checkpoint = str(tmp_path / "run.safetensors")
    lt.LevenbergMarquardt(part, residual_fn=first).fit(first.draws(part), epochs=3,
                                                       checkpoint=checkpoint)
    # A fresh problem and model, as in another process: the checkpoint's parameters, the draw
    # after its epoch 3 (by the residual of that model), then the library's resume.
    again, resumed = _drawn_burgers(7)
    optimizer = lt.LevenbergMarquardt(resumed, residual_fn=again)
    history = optimizer.fit(again.draws(resumed), epochs=6, resume=checkpoint)
    assert [h["epoch"] for h in history][-3:] == [4, 5, 6]
    for a, b in zip(model.parameters(), resumed.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    # Not a checkpoint, or another model's: a clear error, the parameters as they were.
    before = [p.detach().clone() for p in resumed.parameters()]
    points_before = again.points.clone()
    (tmp_path / "text.safetensors").write_text("no")
    other = str(tmp_path / "other.safetensors")
    small_problem, small = _drawn_burgers(8)
    small = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Tanh(),
                                torch.nn.Linear(3, 1)).double()
    lt.LevenbergMarquardt(small, residual_fn=small_problem).fit(small_problem.draws(small),
                                                                epochs=1, checkpoint=other)
    # The same network, another run (its seed): refused by the library after the parameters
    # were read, so they are put back.
    seeded = str(tmp_path / "seeded.safetensors")
    seeded_problem, seeded_model = _drawn_burgers(9)
    lt.LevenbergMarquardt(seeded_model, residual_fn=seeded_problem).fit(
        seeded_problem.draws(seeded_model), epochs=1, checkpoint=seeded, seed=5)
    for path, message in ((str(tmp_path / "text.safetensors"), "not a checkpoint of fit"),
                          (other, r"holds 13 parameters, this model 205"),
                          (seeded, r"seed")):
        with pytest.raises(ValueError, match=message):
            optimizer.fit(again.draws(resumed), epochs=9, resume=path)
        for a, b in zip(before, resumed.parameters()):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
        torch.testing.assert_close(again.points, points_before, rtol=0, atol=0)  # and its data


def _attended_burgers(seed: int) -> tuple[pinn.Problem, torch.nn.Module]:
    # Residual-based attention on points held from epoch 2: its multipliers are a memory of
    # every epoch since, which a resumed run must have.
    problem = _burgers_problem(seed=seed)
    problem.conditions[0].point_weights = pinn.ResidualBasedAttention(gamma=0.9, eta=0.5)
    return problem, _network(2, 1, seed=36)


def _attended_run(seed: int, **fit: object) -> torch.nn.Module:
    problem, model = _attended_burgers(seed)
    lt.LevenbergMarquardt(model, residual_fn=problem).fit(problem.draws(model, hold=(2, 2)),
                                                          **fit)
    return model


def test_fit_on_draws_keeps_the_point_weights_memory_in_its_checkpoint(tmp_path) -> None:
    model = _attended_run(11, epochs=7)
    first, part = _attended_burgers(11)
    checkpoint = str(tmp_path / "run.safetensors")
    lt.LevenbergMarquardt(part, residual_fn=first).fit(first.draws(part, hold=(2, 2)), epochs=4,
                                                       checkpoint=checkpoint, checkpoint_every=2)
    multipliers = first.conditions[0].point_weights.multipliers
    assert multipliers is not None and float(multipliers.std()) > 0.01  # not all `initial`

    def resumed_run() -> torch.nn.Module:
        again, resumed = _attended_burgers(11)
        lt.LevenbergMarquardt(resumed, residual_fn=again).fit(
            again.draws(resumed, hold=(2, 2)), epochs=7, resume=checkpoint)
        return resumed

    resumed = resumed_run()  # FILE.data: the problem's state after epoch 4, multipliers too
    for a, b in zip(model.parameters(), resumed.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    # Without it (an older checkpoint) the held points are drawn again and the multipliers
    # start over: another run, which the test above would see.
    saved = (tmp_path / "run.safetensors.data").read_bytes()
    (tmp_path / "run.safetensors.data").unlink()
    fresh = resumed_run()
    assert any(not torch.equal(a, b) for a, b in zip(model.parameters(), fresh.parameters()))
    # Another epoch's state (the run stopped between the two files): a warning, drawn anew.
    torch.save({"epoch": 2, "state": torch.load(io.BytesIO(saved), weights_only=True)["state"]},
               tmp_path / "run.safetensors.data")
    with pytest.warns(RuntimeWarning, match=r"state of epoch 2, the checkpoint epoch 4"):
        warned = resumed_run()
    for a, b in zip(fresh.parameters(), warned.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_fit_on_draws_keeps_the_data_of_an_interrupted_run(tmp_path) -> None:
    # An interruption (a KeyboardInterrupt from a callback after epoch 4 — a real Ctrl-C is
    # raised by the per-step signal check instead and sets the same stop flag; that route is not
    # driven here): the library stops after the next step and checkpoints it, epoch 5, off its
    # checkpoint_every cadence; its hook
    # writes FILE.data beside it.  Epoch 5's epoch_end never ran (the callbacks stop at the
    # exception), so FILE.data holds the data after epoch 4's, and the resume runs epoch 5's
    # epoch_end as the uninterrupted run did: the same parameters, bit for bit.
    model = _attended_run(12, epochs=7)
    first, part = _attended_burgers(12)
    checkpoint = str(tmp_path / "run.safetensors")

    def interrupt(epoch: int, *_: object) -> None:
        if epoch == 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        lt.LevenbergMarquardt(part, residual_fn=first).fit(
            first.draws(part, hold=(2, 2)), epochs=7, callbacks=[interrupt],
            checkpoint=checkpoint, checkpoint_every=100)
    assert _checkpoint_position(checkpoint, torch.float64)[0] == 5
    assert torch.load(checkpoint + ".data", weights_only=True)["epoch"] == 4
    again, resumed = _attended_burgers(12)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the data's state is taken, not drawn anew
        lt.LevenbergMarquardt(resumed, residual_fn=again).fit(
            again.draws(resumed, hold=(2, 2)), epochs=7, resume=checkpoint)
    for a, b in zip(model.parameters(), resumed.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def _adaptive_problem(k: float, c: float, count: int = 20000, pool: int = 40) -> pinn.Problem:
    # F(x) = x on (0, 1) whatever the network: the density of a draw is known in closed form.
    return pinn.Problem("x", [pinn.Condition(
        "pde", lambda x, u: x + 0 * u,
        pinn.ResidualAdaptive(pinn.Uniform(count, x=(0, 1), method="sobol"), pool=pool, k=k,
                              c=c))])


# p(x) ∝ x^k / mean(x^k) + c on (0, 1), integrated over the bins [j/10, (j+1)/10).
def _adaptive_bins(k: float, c: float) -> torch.Tensor:
    edges = torch.linspace(0, 1, 11, dtype=torch.float64)
    mass = edges[1:] ** (k + 1) - edges[:-1] ** (k + 1) + c * 0.1  # mean(x^k) = 1/(k + 1)
    return mass / mass.sum()


@pytest.mark.parametrize("k, c", [(1.0, 1.0), (2.0, 0.0), (1.0, 1e9)])
def test_residual_adaptive_points_follow_the_residual(k: float, c: float) -> None:
    problem, model = _adaptive_problem(k, c), _network(1, 1, seed=23)
    points = problem.resample(3, model)
    assert points.shape == (20000, 1)
    assert torch.unique(points).numel() == 20000  # chosen without replacement
    share = torch.bincount(torch.clamp((points[:, 0] * 10).long(), max=9), minlength=10)
    deviation = (share.double() / 20000 - _adaptive_bins(k, c)).abs().max()
    # Measured over steps 0–19: largest bin deviation 0.0062 (k 1, c 1), 0.0052 (c 1e9:
    # uniform) and 0.0109 (k 2, c 0, where drawing without replacement leaves the top bin
    # 0.0043 below p on average; 0.0011 with pool 160).  A wrong density misses by more than
    # 0.04 in the top bin (0.271 for k 2, c 0; 0.145 for k 1, c 1; 0.1 uniform).
    assert float(deviation) < 0.015, (share, _adaptive_bins(k, c))


def test_residual_adaptive_draws_are_seeded_and_need_the_model() -> None:
    model = _network(1, 1, seed=23)
    a, b = _adaptive_problem(1.0, 0.0, count=500, pool=8), _adaptive_problem(1.0, 0.0, 500, 8)
    first = a.points.clone()  # the draw at construction is the base's (no model yet)
    torch.testing.assert_close(first, pinn.Uniform(500, x=(0, 1), method="sobol").draw(
        "x", pinn._seed(0, 0, 0, 0), torch.float64))
    torch.testing.assert_close(a.resample(5, model), b.resample(5, model), rtol=0, atol=0)
    assert not torch.equal(a.resample(6, model), b.points)
    # The held-out points are the base's, uniform: half of them below 0.5 (a Sobol net).
    assert int((a.heldout()[:, 0] < 0.5).sum()) in range(240, 261)
    assert int((a.points[:, 0] < 0.5).sum()) < 160  # p = 2x: a quarter expected
    with pytest.raises(ValueError, match=r"\['pde'\] draw their points by the residual.*"
                       r"resample\(step, model\)"):
        a.resample(7)
    with torch.no_grad():
        model[0].weight.fill_(math.nan)
    broken = pinn.Problem("x", [pinn.Condition(
        "pde", lambda x, u: x * u, pinn.ResidualAdaptive(pinn.Uniform(50, x=(0, 1))))])
    with pytest.raises(ValueError, match="condition 'pde' at step 2: .*not finite"):
        broken.resample(2, model)
    for bad, message in ((dict(pool=0), "pool=0"), (dict(k=-1.0), "k=-1.0"),
                         (dict(k=0.0, c=0.0), "probability 0"), (dict(c=math.inf), "c=inf")):
        with pytest.raises(ValueError, match=message):
            pinn.ResidualAdaptive(pinn.Uniform(5, x=(0, 1)), **bad)
    with pytest.raises(ValueError, match="draws fresh points"):
        pinn.ResidualAdaptive(pinn.Fixed(torch.zeros(3, 1)))


def test_a_residual_adaptive_draw_evaluates_its_candidates_in_as_few_chunks_as_memory_allows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # On a GPU each evaluation costs the operators it issues, not its points: the candidates
    # go through the Taylor route in chunks of chunk_bytes (at least `count` points), and the
    # points drawn do not depend on the chunking (each point's residual is its own).
    model = _network(1, 1, seed=23)
    calls: list[int] = []
    rows = pinn.Problem._rows
    monkeypatch.setattr(pinn.Problem, "_rows", lambda self, index, model, points, **kw: (
        calls.append(points.shape[0]), rows(self, index, model, points, **kw))[1])
    draws = []
    # 1 500 points' worth: 2 × 8 bytes × 3 components (u, u_x, u_xx) × 50 (the layers' widths)
    for chunk_bytes in (1, 1500 * 2 * 8 * 3 * (1 + 12 + 12 + 12 + 12 + 1), None):
        problem = pinn.Problem("x", [pinn.Condition(
            "pde", lambda x, u, u_xx: u_xx + x * u,
            pinn.ResidualAdaptive(pinn.Uniform(500, x=(0, 1), method="sobol"), pool=8))],
            chunk_bytes=chunk_bytes)
        calls.clear()
        draws.append(problem.resample(4, model))
        draws.append(calls[:])
    assert draws[1] == [500] * 8  # chunk_bytes 1: chunks of `count`
    assert draws[3] == [1500, 1500, 1000]  # 3 × 500 points' worth of memory
    assert draws[5] == [4000]  # 256 MiB: one evaluation
    # The same points to the bit: the residuals of larger evaluations may round differently on
    # another BLAS path, but the draw follows them only through the density's cumulative sum, so
    # an ulp moves a chosen point with probability about 1e-13.
    for drawn in draws[2:6:2]:
        torch.testing.assert_close(drawn, draws[0], rtol=0, atol=0)


def test_chunk_bytes_by_device(monkeypatch: pytest.MonkeyPatch) -> None:
    condition = pinn.Condition("pde", lambda x, u: u - x, pinn.Uniform(10, x=(0, 1)))
    assert pinn.Problem("x", [condition]).chunk_bytes == 256 << 20
    assert pinn.Problem("x", [condition], chunk_bytes=4096).chunk_bytes == 4096
    with pytest.raises(ValueError, match="chunk_bytes = 0: expected a positive number"):
        pinn.Problem("x", [condition], chunk_bytes=0)
    # On a CUDA device: an eighth of the free memory, between 256 MiB and 2 GiB.
    for free, expected in ((80 << 30, 2 << 30), (8 << 30, 1 << 30), (1 << 30, 256 << 20)):
        monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device, free=free: (free, 0))
        assert pinn._chunk_bytes(None, torch.device("cuda", 0)) == expected


def test_a_problem_sizes_its_work_by_the_librarys_memory_plan(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The library's plan, not the front end, decides what the problem's own work takes: the
    # optimizer hands the problem the bytes of one slice (use_memory_plan) when it plans the
    # step; J is then computed one slice per pass — the slices the plan chose — and a draw's
    # candidates are evaluated in chunks of those bytes.  A chunk_bytes given stays.
    def make(chunk_bytes: int | None = None) -> pinn.Problem:
        return pinn.Problem("x", [
            pinn.Condition("pde", lambda x, u, u_xx: u_xx + x * u, pinn.ResidualAdaptive(
                pinn.Uniform(500, x=(0, 1), method="sobol"), pool=8)),
            pinn.Condition("ends", lambda u: u - 1, pinn.Uniform(2, x=[0, 1]))],
            jacobian="taylor", chunk_bytes=chunk_bytes)

    passes: list[int] = []
    taylor_pass = pinn.Problem._taylor_pass
    monkeypatch.setattr(pinn.Problem, "_taylor_pass", lambda self, t, params, points, *a: (
        passes.append(points.shape[0]), taylor_pass(self, t, params, points, *a))[1])
    problem, model = make(), _network(1, 1, seed=23)
    assert problem.chunk_bytes == 256 << 20  # before any plan: the device's default
    optimizer = lt.LevenbergMarquardt(model, residual_fn=problem)
    optimizer.step(problem.points)
    plan = optimizer.plan
    assert plan["slice_units"] == 502  # the whole batch fits the default budget
    assert problem.chunk_bytes == 502 * plan["bytes_per_unit"]
    # A budget that holds a slice of about 100 units: J in passes of the plan's slices.
    budget = plan["fixed_bytes"] + 100 * plan["bytes_per_unit"]
    problem, model = make(), _network(1, 1, seed=23)
    optimizer = lt.LevenbergMarquardt(model, residual_fn=problem, memory_budget=budget)
    passes.clear()
    optimizer.step(problem.points)
    # (Its footprint is measured again, on the CPU from the peak resident memory, which may
    # differ by a page: the slice is then 100 units give or take a few.)
    small = optimizer.plan
    units = small["slice_units"]
    assert 50 < units < 200
    assert problem.chunk_bytes == units * small["bytes_per_unit"]
    slices = [units] * (502 // units) + ([502 % units] if 502 % units else [])
    assert passes[-len(slices):] == slices  # after the footprint's probe slices
    # The draw's candidates (8 × 500) in chunks of the plan's bytes: 2 × 8 bytes × 3
    # components (u, u_x, u_xx) × the layers' widths per point, at least `count` points.
    calls: list[int] = []
    rows = pinn.Problem._rows
    monkeypatch.setattr(pinn.Problem, "_rows", lambda self, index, model, points, **kw: (
        calls.append(points.shape[0]), rows(self, index, model, points, **kw))[1])
    per_point = 2 * 8 * 3 * (1 + 12 + 12 + 12 + 12 + 1)
    chunk = max(500, problem.chunk_bytes // per_point)
    assert chunk < 4000  # more than one evaluation, else the test shows nothing
    drawn = problem.resample(1, model)
    assert calls == [chunk] * (4000 // chunk) + ([4000 % chunk] if 4000 % chunk else [])
    given = make(chunk_bytes=1 << 30)
    given.use_memory_plan(4096)  # a given chunk_bytes is the user's: the plan leaves it
    assert given.chunk_bytes == 1 << 30
    calls.clear()
    torch.testing.assert_close(given.resample(1, model), drawn, rtol=0, atol=0)
    assert calls == [4000]


def test_a_network_that_interpolates_its_points_is_flagged() -> None:
    # u fits u = x² exactly at the fixed points k/50 but oscillates between them.
    points = torch.linspace(0, 1, 51, dtype=torch.float64).reshape(-1, 1)

    class Interpolant(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = torch.nn.Parameter(torch.tensor(1.0, dtype=torch.float64))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.a * x ** 2 + 0.1 * torch.sin(50 * math.pi * x)

    problem = pinn.Problem("x", [pinn.Condition(
        "fit", lambda x, u: u - x ** 2,
        pinn.Fixed(points, heldout=pinn.Uniform(x=(0, 1))))])
    model = Interpolant()
    with pytest.warns(pinn.InterpolationWarning, match=r"fit: \d"):
        ratios = problem.warn_if_interpolating(model, problem.points, problem.heldout())
    assert ratios["fit"] > 1e6
    with warnings.catch_warnings():
        warnings.simplefilter("error", pinn.InterpolationWarning)
        assert problem.warn_if_interpolating(model, problem.points, problem.points)["fit"] == 1.0


def test_bad_definitions_and_inputs_get_clear_errors() -> None:
    with pytest.raises(ValueError, match="'u_z' is not a symbol.*coordinates t, x"):
        pinn.Problem("tx", [pinn.Condition("pde", lambda u_z: u_z,
                                           pinn.Uniform(4, t=(0, 1), x=(0, 1)))])
    with pytest.raises(ValueError, match="weight = -1"):
        pinn.Problem("x", [pinn.Condition("pde", lambda u: u, pinn.Uniform(4, x=(0, 1)),
                                          weight=-1)])
    with pytest.raises(ValueError, match=r"missing \['t'\]"):
        pinn.Problem("tx", [pinn.Condition("pde", lambda u: u, pinn.Uniform(4, x=(0, 1)))])
    with pytest.raises(ValueError, match="low < high"):
        pinn.Uniform(4, x=(1, 0))
    problem, model = _burgers_problem(), _network(2, 1, seed=17)
    with pytest.raises(ValueError, match=r"56 × 2 \(pde 40, initial 9, boundary 7\)"):
        problem(model, problem.points[:10])
    with pytest.raises(ValueError, match="points are torch.float32 but the model is "
                       "torch.float64: make the Problem with dtype=torch.float64"):
        problem(model, problem.points.float())
    optimizer = lt.LevenbergMarquardt(model, residual_fn=problem)
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(ValueError, match="pass problem.points"):
        optimizer.step(problem.points[:, :1])
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_a_jacobian_slice_of_the_wrong_shape_is_refused() -> None:
    class Wrong:
        def __call__(self, model, x, y):
            return model(x).reshape(-1)

        def jacobian_slice(self, model, params, x, y, start, stop):
            return torch.zeros(stop - start, 3, dtype=torch.float64)

    model = _network(1, 1, seed=18, width=3)
    optimizer = lt.LevenbergMarquardt(model, residual_fn=Wrong(), fast_path=False)
    with pytest.raises(ValueError, match=r"jacobian_slice returned \(5, 3\).*expected \(5, 22\)"):
        optimizer.step(torch.rand(5, 1, dtype=torch.float64))


def _burgers_with_autograd(model, x, y):
    """The form a new user writes: input derivatives by torch.autograd.grad, the block chosen
    by x's third column (0 interior, 1 initial, 2 boundary), so rows are pointwise in x."""
    p = x[:, :2].detach().clone().requires_grad_(True)
    kind = x[:, 2]
    u = model(p)[:, 0]
    grad = torch.autograd.grad(u.sum(), p, create_graph=True)[0]
    u_xx = torch.autograd.grad(grad[:, 1].sum(), p, create_graph=True)[0][:, 1]
    pde = grad[:, 0] + u * grad[:, 1] - NU * u_xx
    initial = 3.0 * (u + torch.sin(math.pi * p[:, 1]))
    return torch.where(kind == 0, pde, torch.where(kind == 1, initial, 0.5 * u))


def _burgers_with_torch_func(model, x, y):
    """The same residuals with torch.func input derivatives, which torch.func can transform."""
    def u(q):
        return model(q.unsqueeze(0))[0, 0]

    def one(q, kind):
        grad = torch.func.grad(u)(q)
        u_xx = torch.func.hessian(u)(q)[1, 1]
        value = u(q)
        pde = grad[0] + value * grad[1] - NU * u_xx
        initial = 3.0 * (value + torch.sin(math.pi * q[1]))
        return torch.where(kind == 0, pde, torch.where(kind == 1, initial, 0.5 * value))

    return vmap_points(one, x)


def vmap_points(one, x):
    return torch.func.vmap(one)(x[:, :2], x[:, 2])


def _kinds_points(seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    pts = torch.rand(70, 2, generator=g, dtype=torch.float64) * torch.tensor([1.0, 2.0]) - \
        torch.tensor([0.0, 1.0], dtype=torch.float64)
    kind = torch.cat([torch.zeros(50), torch.ones(12), 2 * torch.ones(8)]).double()
    pts[50:62, 0] = 0.0
    pts[62:, 1] = torch.where(torch.arange(8) % 2 == 0, -1.0, 1.0).double()
    return torch.cat([pts, kind[:, None]], 1)


@pytest.mark.parametrize("form", ["autograd", "torch.func"])
def test_pointwise_residual_fn_jacobian_equals_autograd(form: str) -> None:
    fn = _burgers_with_autograd if form == "autograd" else _burgers_with_torch_func
    x = _kinds_points(21)
    model = _network(2, 1, seed=22)
    expected = reference_jacobian(model, lambda f: _burgers_with_autograd(f, x, None))
    torch.testing.assert_close(fn(model, x, None), _burgers_with_autograd(model, x, None),
                               rtol=0, atol=1e-12)
    routes = ["sliced"] + (["vmap"] if form == "torch.func" else [])
    for route in routes + ["auto"]:
        wrapped = pinn.Pointwise(fn, route=route, slice_points=16)
        for start, stop in [(0, 70), (5, 61)]:
            j = wrapped.jacobian_slice(model, _params(model), x, None, start, stop)
            assert torch.allclose(j, expected[start:stop], rtol=0, atol=1e-10), route
    # torch.func cannot transform autograd.grad: auto falls back to slices, and says why.
    assert wrapped.jacobian_choice["mode"] in routes
    if form == "autograd":
        assert wrapped.jacobian_choice["mode"] == "sliced"
        assert wrapped.jacobian_choice["vmap_failed"]


def test_the_slow_route_warns_with_its_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    from lmtrain.torch import _jacobian

    monkeypatch.setattr(_jacobian.BatchedReverseJacobian, "warn_seconds", 0.0)
    x = _kinds_points(23)
    model = _network(2, 1, seed=24)
    optimizer = lt.LevenbergMarquardt(model, residual_fn=_burgers_with_autograd,
                                      jacobian="autograd")
    with pytest.warns(pinn.SlowJacobianWarning,
                      match=r"over its 70 rows \(jacobian = 'autograd' asks for the batch's "
                            r"graph\), measured \d+ rows/s"):
        optimizer.step(x)
    # By default its rows, each of one point, are built per point (test_torch_residual_route.py);
    # declared pointwise it takes the sliced route.  Neither warns.
    for residual_fn, path in ((_burgers_with_autograd, "autograd per point"),
                              (pinn.Pointwise(_burgers_with_autograd),
                               "pinn pointwise residual_fn sliced")):
        optimizer = lt.LevenbergMarquardt(_network(2, 1, seed=24), residual_fn=residual_fn)
        with warnings.catch_warnings():
            warnings.simplefilter("error", pinn.SlowJacobianWarning)
            report = optimizer.step(x)
        assert optimizer.path == path and report.accepted


def test_a_pinn_step_warns_nothing_about_torchs_internals() -> None:
    # torch 2.15 warns "`torch.jit.script` is deprecated" (FutureWarning) when its forward-mode
    # decompositions load at a process's first jvp — which the jacrev route's input
    # derivatives are.  lmtrain.torch loads them silently; in a fresh process with every
    # FutureWarning an error, a PINN step on that route must run.
    import os
    import subprocess
    import sys

    program = (
        "import torch\n"
        "import lmtrain.torch as lt\n"
        "from lmtrain.torch import pinn\n"
        "problem = pinn.Problem('x', [pinn.Condition('pde', lambda u_xx: u_xx + 1,\n"
        "                                            pinn.Uniform(20, x=(0, 1)))],\n"
        "                       jacobian='jacrev')\n"
        "model = torch.nn.Sequential(torch.nn.Linear(1, 4), torch.nn.Tanh(),\n"
        "                            torch.nn.Linear(4, 1)).double()\n"
        "lt.LevenbergMarquardt(model, residual_fn=problem).step(problem.points)\n"
        "print(problem.jacobian_path)\n")
    result = subprocess.run([sys.executable, "-W", "error::FutureWarning", "-c", program],
                            capture_output=True, text=True, timeout=120,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "pinn pointwise jacrev"
