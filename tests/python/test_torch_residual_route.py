"""The route of a whole-batch residual_fn's Jacobian (issue 39, item 5): per-point parameter
copies where each residual row depends on one point (``_per_point.py``), the batch's graph
otherwise, with a warning at the first step.

References: torch.autograd.functional.jacobian of the same residuals and BatchedReverseJacobian
(row-batched reverse mode through the batch's graph, the route before), in float64 on random
networks away from their initialization, with residual_fns written the way users write them:
input derivatives by torch.autograd.grad(..., create_graph=True) on a detached copy of x, blocks
cut out of x by position, chosen by a column of x, selected by the coordinates (rows permuted),
or evaluated on points of their own."""

from __future__ import annotations

import math
import re
import warnings

import pytest
from torch_support import lt, reference_jacobian, torch

from lmtrain.torch import _jacobian, pinn
from lmtrain.torch._linearization import TorchLinearization

NU = 0.01 / math.pi
COUNTS = (40, 9, 7)  # interior, initial, boundary points


def _network(seed: int, inputs: int = 2, outputs: int = 1, width: int = 10,
             dtype: torch.dtype = torch.float64) -> torch.nn.Module:
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(inputs, width), torch.nn.Tanh(),
                                torch.nn.Linear(width, width), torch.nn.Tanh(),
                                torch.nn.Linear(width, outputs)).to(dtype)
    with torch.no_grad():  # away from the initialization: larger, varied weights
        for p in model.parameters():
            p.mul_(1.5).add_(0.1 * torch.randn_like(p))
    return model


def _points(seed: int, counts: tuple[int, int, int] = COUNTS,
            dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """(t, x): interior points in (0, 1) × (−1, 1), then initial (t = 0), then boundary
    (x = ±1)."""
    a, b, c = counts
    g = torch.Generator().manual_seed(seed)
    p = torch.rand(a + b + c, 2, generator=g, dtype=torch.float64)
    p[:, 1] = 2 * p[:, 1] - 1
    p[a:a + b, 0] = 0.0
    p[a + b:, 1] = torch.where(torch.arange(c) % 2 == 0, -1.0, 1.0).double()
    return p.to(dtype)


def _pde(model, p: torch.Tensor) -> torch.Tensor:
    """Burgers' u_t + u·u_x − ν·u_xx at the points p, input derivatives by autograd."""
    p = p.detach().clone().requires_grad_(True)
    u = model(p)[:, 0]
    grad = torch.autograd.grad(u.sum(), p, create_graph=True)[0]
    u_xx = torch.autograd.grad(grad[:, 1].sum(), p, create_graph=True)[0][:, 1]
    return grad[:, 0] + u * grad[:, 1] - NU * u_xx


def burgers_by_position(model, x, y):
    """The blocks cut out of x by their sizes, one model call each, weighted, torch.cat'ed."""
    a, b, _ = COUNTS
    initial = model(x[a:a + b])[:, 0] + torch.sin(math.pi * x[a:a + b, 1])
    boundary = model(x[a + b:])[:, 0]
    return torch.cat([_pde(model, x[:a]) / math.sqrt(a), 3.0 * initial, 0.5 * boundary])


def burgers_by_tag(model, x, y):
    """One model call; the block of each point chosen by x's third column (0, 1, 2)."""
    p = x[:, :2].detach().clone().requires_grad_(True)
    u = model(p)[:, 0]
    grad = torch.autograd.grad(u.sum(), p, create_graph=True)[0]
    u_xx = torch.autograd.grad(grad[:, 1].sum(), p, create_graph=True)[0][:, 1]
    pde = grad[:, 0] + u * grad[:, 1] - NU * u_xx
    initial = 3.0 * (u + torch.sin(math.pi * p[:, 1]))
    return torch.where(x[:, 2] == 0, pde, torch.where(x[:, 2] == 1, initial, 0.5 * u))


def burgers_by_coordinates(model, x, y):
    """Blocks selected by the coordinates (t = 0 initial, |x| = 1 boundary): the rows of r are
    the points permuted into blocks."""
    initial, boundary = x[:, 0] == 0, x[:, 1].abs() == 1
    interior = ~initial & ~boundary
    return torch.cat([_pde(model, x[interior]),
                      model(x[initial])[:, 0] + torch.sin(math.pi * x[initial, 1]),
                      model(x[boundary])[:, 0]])


def poisson_with_boundary_of_its_own(model, x, y):
    """examples/pinn/poisson.py's form: x holds the interior points only, the boundary rows
    come from two points built inside (not rows of x)."""
    p = x.detach().clone().requires_grad_(True)
    du = torch.autograd.grad(model(p).sum(), p, create_graph=True)[0]
    d2u = torch.autograd.grad(du.sum(), p, create_graph=True)[0]
    boundary = model(torch.tensor([[0.0], [1.0]], dtype=x.dtype))
    return torch.cat([(-d2u - math.pi ** 2 * torch.sin(math.pi * p)).reshape(-1),
                      10.0 * boundary.reshape(-1)])


def two_rows_per_point(model, x, y):
    """Two outputs (u, v) and two equations per point, interleaved: u_t + v_x, v − u_x."""
    p = x.detach().clone().requires_grad_(True)
    z = model(p)
    du = torch.autograd.grad(z[:, 0].sum(), p, create_graph=True)[0]
    dv = torch.autograd.grad(z[:, 1].sum(), p, create_graph=True)[0]
    return torch.stack([du[:, 0] + dv[:, 1], z[:, 1] - du[:, 1]], 1).reshape(-1)


class _TwoInputs(torch.nn.Module):
    """u(t, x) with t and x as two inputs."""

    def __init__(self) -> None:
        super().__init__()
        self.net = _network(28)

    def forward(self, t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([t, x], 1))


def heat_with_two_inputs(model, x, y):
    """u_t − u_xx with t and x given to the model apart, each a (points × 1) tensor."""
    t = x[:, :1].detach().clone().requires_grad_(True)
    s = x[:, 1:].detach().clone().requires_grad_(True)
    u = model(t, s)
    u_t = torch.autograd.grad(u.sum(), t, create_graph=True)[0]
    u_s = torch.autograd.grad(u.sum(), s, create_graph=True)[0]
    u_ss = torch.autograd.grad(u_s.sum(), s, create_graph=True)[0]
    return (u_t - u_ss).reshape(-1)


def burgers_by_torch_func(model, x, y):
    """Input derivatives by torch.func (grad, hessian: forward over reverse) under vmap."""
    def u(q):
        return model(q.unsqueeze(0))[0, 0]

    def one(q):
        grad = torch.func.grad(u)(q)
        return grad[0] + u(q) * grad[1] - NU * torch.func.hessian(u)(q)[1, 1]

    return torch.func.vmap(one)(x)


def with_mean(model, x, y):
    """Not per point: every row minus the mean over the points (a global constraint)."""
    r = burgers_by_tag(model, x, y)
    return r - r.mean()


def _tagged(seed: int) -> torch.Tensor:
    kinds = torch.cat([torch.full((c,), float(i)) for i, c in enumerate(COUNTS)]).double()
    return torch.cat([_points(seed), kinds[:, None]], 1)


def _route(model, fn, x, jacobian: str = "auto") -> TorchLinearization:
    names, params = zip(*model.named_parameters())
    lin = TorchLinearization(model, names, params, None, fn, jacobian)
    lin.set_batch(x, None)
    return lin


def _batch_graph(model, fn, x) -> torch.Tensor:
    r = fn(model, x, None)
    return _jacobian.BatchedReverseJacobian(r, list(model.parameters()), warn=False)._slice(
        0, r.numel())


CASES = {
    "by position": (burgers_by_position, lambda s: _points(s), 2),
    "by tag": (burgers_by_tag, _tagged, 2),
    "by coordinates": (burgers_by_coordinates, lambda s: _points(s), 2),
    "boundary of its own": (poisson_with_boundary_of_its_own,
                            lambda s: torch.rand(30, 1, generator=torch.Generator().manual_seed(s),
                                                 dtype=torch.float64), 1),
}


def test_a_model_of_two_inputs() -> None:
    x = _points(29)
    model = _TwoInputs()
    expected = _batch_graph(model, heat_with_two_inputs, x)
    lin = _route(model, heat_with_two_inputs, x)
    j = lin.jacobian(None, 0, 56)
    assert lin.path == "autograd per point"
    assert float((j - expected).abs().max()) <= 1e-12 * float(expected.abs().max())


@pytest.mark.parametrize("case", sorted(CASES))
def test_per_point_jacobian_equals_the_batch_graph_and_autograd(case: str) -> None:
    fn, points, inputs = CASES[case]
    x = points(11)
    model = _network(12, inputs=inputs)
    expected = reference_jacobian(model, lambda f: fn(f, x, None))
    graph = _batch_graph(model, fn, x)
    m = expected.shape[0]
    lin = _route(model, fn, x)
    # Slices as the library asks for them, across block edges; J from the per-point copies.
    j = torch.cat([lin.jacobian(None, a, b - a) for a, b in [(0, 5), (5, m - 7), (m - 7, m)]])
    assert lin.path == "autograd per point"
    assert lin.jacobian_choice["rows_per_point"] == 1
    scale = float(expected.abs().max())
    assert float((j - expected).abs().max()) <= 1e-12 * scale
    assert float((j - graph).abs().max()) <= 1e-12 * scale


def test_two_rows_per_point_take_two_passes() -> None:
    x = _points(13)
    model = _network(14, outputs=2)
    expected = reference_jacobian(model, lambda f: two_rows_per_point(f, x, None))
    lin = _route(model, two_rows_per_point, x)
    j = torch.cat([lin.jacobian(None, 0, 31), lin.jacobian(None, 31, expected.shape[0] - 31)])
    assert lin.path == "autograd per point"
    assert lin.jacobian_choice["rows_per_point"] == 2
    assert float((j - expected).abs().max()) <= 1e-12 * float(expected.abs().max())


def test_the_map_of_an_earlier_batch_is_checked_and_found_again() -> None:
    # Blocks by coordinates: a new batch with as many points but the blocks elsewhere keeps the
    # row count and changes the map; the slice's check against J·d finds it again.
    model = _network(15)
    x = _points(16)
    lin = _route(model, burgers_by_coordinates, x)
    lin.jacobian(None, 0, 56)
    moved = torch.cat([x[40:], x[:40]])  # the same points, the initial and boundary ones first
    lin.reset_step()
    lin.set_batch(moved, None)
    expected = reference_jacobian(model, lambda f: burgers_by_coordinates(f, moved, None))
    j = lin.jacobian(None, 0, 56)
    assert lin.path == "autograd per point"
    assert float((j - expected).abs().max()) <= 1e-12 * float(expected.abs().max())


def test_the_optimizer_steps_as_on_the_batch_graph() -> None:
    # The same three LM steps by both routes: the same normal equations, the same parameters.
    x = _tagged(17)
    models = [_network(18), _network(18)]
    per_point = lt.LevenbergMarquardt(models[0], residual_fn=burgers_by_tag)
    graph = lt.LevenbergMarquardt(models[1], residual_fn=burgers_by_tag, jacobian="autograd")
    f0, a0, g0 = per_point.normal_equations(x)
    f1, a1, g1 = graph.normal_equations(x)
    torch.testing.assert_close(a0, a1, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(g0, g1, rtol=1e-12, atol=1e-12)
    for _ in range(3):
        reports = [per_point.step(x), graph.step(x)]
        assert reports[0].accepted == reports[1].accepted
    assert per_point.path == "autograd per point" and graph.path == "autograd"
    for p, q in zip(models[0].parameters(), models[1].parameters()):
        torch.testing.assert_close(p, q, rtol=1e-9, atol=1e-10)


def test_float32_rows_per_point() -> None:
    x = _points(19, dtype=torch.float32)
    model = _network(20, dtype=torch.float32)
    expected = reference_jacobian(model.double(), lambda f: burgers_by_position(
        f, x.double(), None)).float()
    model.float()
    lin = _route(model, burgers_by_position, x)
    j = lin.jacobian(None, 0, 56)
    assert lin.path == "autograd per point"
    assert float((j - expected).abs().max()) <= 1e-4 * float(expected.abs().max())


class _RowMixingNet(torch.nn.Module):
    """A model whose rows are not independent: its input centred on the batch's mean."""

    def __init__(self) -> None:
        super().__init__()
        self.net = _network(21)

    def forward(self, p: torch.Tensor) -> torch.Tensor:
        return self.net(p - p.mean(0))


class _DataDependent(torch.nn.Module):
    """A forward that reads a value (``.item()``), which vmap cannot batch."""

    def __init__(self) -> None:
        super().__init__()
        self.net = _network(30)

    def forward(self, p: torch.Tensor) -> torch.Tensor:
        return self.net(p) if p.abs().max().item() < 1e9 else self.net(p / 2)


class _WithCoefficient(torch.nn.Module):
    """A network and a learnt coefficient that the residual_fn uses outside model(…)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = _network(22)
        self.nu = torch.nn.Parameter(torch.tensor(0.3, dtype=torch.float64))

    def forward(self, p: torch.Tensor) -> torch.Tensor:
        return self.net(p)


def with_coefficient(model, x, y):
    return burgers_by_tag(model, x, y) * model.nu


def with_periodic_boundary(model, x, y):
    """A row of two points: u(t, −1) − u(t, 1) for each boundary time."""
    a, b, c = COUNTS
    left = x[a + b:].clone()
    left[:, 1] = -1.0
    right = left.clone()
    right[:, 1] = 1.0
    return torch.cat([burgers_by_position(model, x, y)[:a + b],
                      model(left)[:, 0] - model(right)[:, 0]])


REFUSED = {
    "a mean over the points": (lambda: _network(23), with_mean, _tagged,
                               r"its row \d+ depends on several points"),
    "a row of two points": (lambda: _network(24), with_periodic_boundary, _points,
                            r"its row \d+ depends on several points"),
    "a parameter outside the model's call": (_WithCoefficient, with_coefficient, _tagged,
                                             r"uses the parameters \['nu'\] outside model"),
    "a model mixing its rows": (_RowMixingNet, burgers_by_position, _points,
                                r"gives other residuals|differs from J·d"),
    "torch.func forward-mode derivatives": (lambda: _network(33), burgers_by_torch_func, _points,
                                            r"forward mode \(torch\.autograd\.forward_ad\) "
                                            r"cannot run through it"),
    "a model vmap cannot run": (_DataDependent, burgers_by_position, _points,
                                r"cannot be evaluated row by row \(torch\.func\.vmap"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_rows_not_per_point_take_the_batch_graph_and_say_why(
        case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_jacobian.BatchedReverseJacobian, "warn_seconds", 0.0)
    make, fn, points, why = REFUSED[case]
    model, x = make(), points(25)
    expected = _batch_graph(model, fn, x)
    lin = _route(model, fn, x)
    with pytest.warns(pinn.SlowJacobianWarning,
                      match=rf"over its {expected.shape[0]} rows \(its rows are not each of one "
                            rf"point: .*\), measured \d+ rows/s: about [\d.]+ s per LM step.*"
                            r"lmtrain\.torch\.pinn\.Problem.*pinn\.Pointwise") as record:
        j = torch.cat([lin.jacobian(None, 0, 30),
                       lin.jacobian(None, 30, expected.shape[0] - 30)])
    assert len(record) == 1
    assert lin.path == "autograd" and lin.jacobian_choice["mode"] == "batch graph"
    assert re.search(why, lin.jacobian_choice["why"])
    assert float((j - expected).abs().max()) <= 1e-12 * float(expected.abs().max())


def test_the_warning_comes_once_at_the_first_step(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_jacobian.BatchedReverseJacobian, "warn_seconds", 0.0)
    x = _tagged(26)
    optimizer = lt.LevenbergMarquardt(_network(27), residual_fn=with_mean)
    with pytest.warns(pinn.SlowJacobianWarning, match="depends on several points"):
        optimizer.step(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error", pinn.SlowJacobianWarning)
        optimizer.step(x)
    assert optimizer.path == "autograd"
    # Per point: no warning at all.
    optimizer = lt.LevenbergMarquardt(_network(27), residual_fn=burgers_by_tag)
    with warnings.catch_warnings():
        warnings.simplefilter("error", pinn.SlowJacobianWarning)
        optimizer.step(x)
    assert optimizer.path == "autograd per point"
