"""lmtrain.torch.pinn's weights of points (issue 39): CausalWeights and ResidualBasedAttention
against their closed forms, computed here from the residuals of an independent whole-batch
autograd reference (the same PDE, input derivatives by ``torch.autograd.grad``), and the rows of
J they scale against ``torch.autograd.functional.jacobian`` of the weighted reference."""

from __future__ import annotations

import math

import pytest
from test_torch_pinn import (_burgers_autograd, _helmholtz_autograd, _network, _params, NU)
from torch_support import lt, reference_jacobian, torch

from lmtrain.torch import pinn


def _burgers(point_weights) -> pinn.Problem:
    return pinn.Problem("tx", [
        pinn.Condition("pde", lambda u, u_t, u_x, u_xx: u_t + u * u_x - NU * u_xx,
                       pinn.Uniform(40, t=(0, 1), x=(-1, 1)), point_weights=point_weights),
        pinn.Condition("initial", lambda x, u: u + torch.sin(math.pi * x),
                       pinn.Uniform(9, t=0, x=(-1, 1)), weight=3.0),
        pinn.Condition("boundary", lambda u: u, pinn.Uniform(7, t=(0, 1), x=[-1, 1]),
                       weight=0.5),
    ], seed=3)


def _causal_closed_form(t: list[float], squared: list[float], epsilon: float,
                        slabs: int) -> list[float]:
    """w of each point, by the paper's formula written out with Python numbers."""
    total, count = [0.0] * slabs, [0] * slabs
    slab = [min(slabs - 1, int(math.floor(ti * slabs))) for ti in t]
    for s, f2 in zip(slab, squared):
        total[s] += f2
        count[s] += 1
    mean = [total[k] / count[k] if count[k] else 0.0 for k in range(slabs)]
    return [math.exp(-epsilon * sum(mean[:s])) for s in slab]


@pytest.mark.parametrize("route", ["taylor", "jacrev"])
def test_causal_weights_follow_their_closed_form_in_r_and_j(route: str) -> None:
    epsilon, slabs = 50.0, 4  # the residuals of this network are ≈ 0.1: ε makes w vary
    problem, model = _burgers(pinn.CausalWeights(epsilon, slabs)), _network(2, 1, seed=11)
    problem.jacobian = route
    x = problem.points
    reference = _burgers_autograd(x, (40, 9, 7))
    plain = reference(model).detach()
    f = plain[:40] * math.sqrt(40)  # F at the interior points, unweighted
    # Before any update every weight is 1 (no slab has a loss yet).
    torch.testing.assert_close(problem(model, x), plain, rtol=0, atol=1e-12)
    problem.update_weights(model)
    w = torch.tensor(_causal_closed_form(x[:40, 0].tolist(), (f ** 2).tolist(), epsilon, slabs),
                     dtype=torch.float64)
    assert w.max() == 1.0 and w.min() < 0.3  # the later slabs weighed down: a real test
    torch.testing.assert_close(problem.conditions[0].point_weights.factors(x[:40], "tx") ** 2, w,
                               rtol=1e-13, atol=0)
    scale = torch.cat([w.sqrt(), torch.ones(16, dtype=torch.float64)])
    torch.testing.assert_close(problem(model, x), plain * scale, rtol=0, atol=1e-12)
    expected = reference_jacobian(model, lambda m: reference(m) * scale)
    j = problem.jacobian_slice(model, _params(model), x, None, 0, 56)
    torch.testing.assert_close(j, expected, rtol=0, atol=1e-10)
    for start, stop in [(3, 17), (35, 52)]:  # slices across the blocks' border
        torch.testing.assert_close(problem.jacobian_slice(model, _params(model), x, None, start,
                                                          stop), expected[start:stop],
                                   rtol=0, atol=1e-10)
    # mean_squared (the held-out check's figure) is the plain mean F².
    assert problem.mean_squared(model, x)["pde"] == pytest.approx(float((f ** 2).mean()),
                                                                  rel=1e-12)


def _helmholtz(point_weights) -> pinn.Problem:
    def q(x, y):
        return (1 - 17 * math.pi ** 2) * torch.sin(math.pi * x) * torch.sin(4 * math.pi * y)

    return pinn.Problem("xy", [
        pinn.Condition("pde", lambda x, y, u, u_xx, u_yy: u_xx + u_yy + u - q(x, y),
                       pinn.Uniform(50, x=(-1, 1), y=(-1, 1)), point_weights=point_weights),
        pinn.Condition("boundary", lambda u: u, pinn.Fixed(
            torch.tensor([[-1.0, 0.3], [1.0, -0.7], [0.2, -1.0], [-0.6, 1.0], [1.0, 1.0]])),
            weight=7.0),
    ], seed=5)


def test_residual_based_attention_follows_its_update_rule() -> None:
    gamma, eta = 0.9, 0.5
    rba = pinn.ResidualBasedAttention(gamma=gamma, eta=eta)
    problem, model = _helmholtz(rba), _network(2, 1, seed=12)
    x = problem.points
    reference = _helmholtz_autograd(x)
    plain = reference(model).detach()
    relative = plain[:50].abs() / plain[:50].abs().max()
    assert relative.min() < 0.2  # the points differ: a real test
    problem.update_weights(model)
    first = gamma * 1.0 + eta * relative
    torch.testing.assert_close(rba.factors(x[:50], "xy"), first, rtol=1e-13, atol=0)
    problem.update_weights(model)  # the same parameters and points: the same |F|
    second = gamma * first + eta * relative  # = γ² + (1 + γ)·η·|F|/max|F|
    torch.testing.assert_close(rba.factors(x[:50], "xy"), second, rtol=1e-13, atol=0)
    scale = torch.cat([second, torch.ones(5, dtype=torch.float64)])
    torch.testing.assert_close(problem(model, x), plain * scale, rtol=0, atol=1e-12)
    expected = reference_jacobian(model, lambda m: reference(m) * scale)
    j = problem.jacobian_slice(model, _params(model), x, None, 0, 55)
    torch.testing.assert_close(j, expected, rtol=0, atol=1e-10)
    # Points of another draw get `initial`; the held-out check leaves the multipliers out.
    fresh = problem.sample(1)
    torch.testing.assert_close(rba.factors(fresh[:50], "xy"),
                               torch.ones(50, dtype=torch.float64))
    assert problem.mean_squared(model, x)["pde"] == pytest.approx(
        float((plain[:50] ** 2).sum()), rel=1e-12)
    # After a resample the memory starts again from `initial`.
    problem.resample(1)
    problem.update_weights(model)
    f = _helmholtz_autograd(problem.points)(model)[:50].detach().abs()
    torch.testing.assert_close(rba.factors(problem.points[:50], "xy"),
                               gamma + eta * f / f.max(), rtol=1e-13, atol=0)


def test_a_step_with_point_weights_minimizes_the_weighted_objective() -> None:
    # Within a step the weights are constants: the step's objective is ½‖r‖² of the weighted
    # rows, and the engine's report says so.
    problem, model = _burgers(pinn.CausalWeights(1.0, 4)), _network(2, 1, seed=13)
    problem.update_weights(model)
    with torch.no_grad():
        before = 0.5 * float((problem(model, problem.points) ** 2).sum())
    optimizer = lt.LevenbergMarquardt(model, residual_fn=problem)
    report = optimizer.step(problem.points)
    assert report.objective == pytest.approx(before, rel=1e-12)
    with torch.no_grad():
        after = 0.5 * float((problem(model, problem.points) ** 2).sum())
    assert after < before


def test_bad_point_weights_get_clear_errors() -> None:
    with pytest.raises(ValueError, match="epsilon"):
        pinn.CausalWeights(-1.0)
    with pytest.raises(ValueError, match="slabs"):
        pinn.CausalWeights(1.0, slabs=0)
    with pytest.raises(ValueError, match="interval"):
        pinn.CausalWeights(1.0, interval=(1.0, 0.0))
    with pytest.raises(ValueError, match="gamma"):
        pinn.ResidualBasedAttention(gamma=1.0)
    with pytest.raises(ValueError, match="point_weights must be"):
        _burgers(object())
    problem = _burgers(pinn.CausalWeights(1.0, coordinate="s"))
    with pytest.raises(ValueError, match="coordinates are"):
        problem.update_weights(_network(2, 1, seed=1))
