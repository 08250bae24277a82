"""The PINN examples' reference solutions (examples/pinn/references.py) checked on their own:
the Cole–Hopf quadrature against a quadrature of twice the order and against the PDE by finite
differences, the exact 2-D solutions against their PDEs by finite differences, and the Allen–Cahn
ETDRK4 solve against half the time step, twice the modes and its energy law, the KdV solve
against its refinements, its three invariants and a second method (integrating-factor RK4), and
the two-soliton KdV's closed form against its PDE by finite differences and its two invariants.
numpy only, but they run with the torch tests (scripts/test-torch.sh), beside the examples they
serve."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("pinn_references",
                                              ROOT / "examples/pinn/references.py")
references = importlib.util.module_from_spec(spec)
spec.loader.exec_module(references)


def test_gauss_hermite_rule_integrates_moments_and_matches_numpy() -> None:
    z, log_w = references._gauss_hermite(100)
    z_np, w_np = np.polynomial.hermite.hermgauss(100)  # accurate at this size
    np.testing.assert_allclose(z, z_np, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.exp(log_w), w_np, rtol=1e-10, atol=1e-300)
    # Beyond numpy's range: ∫ z^(2j) e^{−z²} dz = Γ(j + ½), exact for 2j < 2N.
    z, log_w = references._gauss_hermite(600)
    w = np.exp(log_w)
    for j, exact in [(0, np.sqrt(np.pi)), (1, np.sqrt(np.pi) / 2), (3, 15 * np.sqrt(np.pi) / 8)]:
        assert (w * z ** (2 * j)).sum() == pytest.approx(exact, rel=1e-12)


def test_burgers_quadrature_is_converged() -> None:
    t, x, u = references.burgers_grid()
    twice = references.burgers(t[:, None], x[None, :], nodes=400)
    assert np.abs(u - twice).max() < 1e-12
    np.testing.assert_allclose(u[0], -np.sin(np.pi * x), rtol=0, atol=1e-15)  # u(0, x)
    assert np.abs(u[:, [0, -1]]).max() < 1e-12  # u(t, ±1) = 0
    assert u.max() < 1.0 and u.min() > -1.0  # a maximum principle


def test_burgers_reference_solves_the_pde_by_finite_differences() -> None:
    rng = np.random.default_rng(0)
    # Random points, and points in the steep layer at x ≈ 0 for t > 0.3 (|u_x| up to ~ 150).
    t = np.concatenate([rng.uniform(0.05, 0.95, 400), rng.uniform(0.3, 0.95, 100)])
    x = np.concatenate([rng.uniform(-0.95, 0.95, 400), rng.uniform(-0.02, 0.02, 100)])
    relative = {}
    for h in (3e-4, 1e-4):
        u = references.burgers(t, x)
        u_t = (references.burgers(t + h, x) - references.burgers(t - h, x)) / (2 * h)
        right, left = references.burgers(t, x + h), references.burgers(t, x - h)
        u_x, u_xx = (right - left) / (2 * h), (right - 2 * u + left) / h ** 2
        residual = u_t + u * u_x - references.BURGERS_NU * u_xx
        scale = np.abs(u_t) + np.abs(u * u_x) + np.abs(references.BURGERS_NU * u_xx)
        relative[h] = np.abs(residual / scale).max()
    # Measured: 3.6e-4 and 4.0e-5, the O(h²) of central differences (ratio 9 for h/3): the
    # residual is the differences' truncation, not the solution's.
    assert relative[1e-4] < 1e-4
    assert relative[3e-4] / relative[1e-4] > 6


@pytest.mark.parametrize("case", ["poisson", "helmholtz"])
def test_exact_2d_solutions_solve_their_pdes(case: str) -> None:
    rng = np.random.default_rng(1)
    if case == "poisson":
        u, low = references.poisson2d, 0.0
        f = references.poisson2d_source
    else:
        u, low = references.helmholtz, -1.0
        f = references.helmholtz_source
    x, y = rng.uniform(low, 1.0, 200), rng.uniform(low, 1.0, 200)
    h = 1e-4
    laplacian = (u(x + h, y) + u(x - h, y) + u(x, y + h) + u(x, y - h) - 4 * u(x, y)) / h ** 2
    residual = -laplacian - f(x, y) if case == "poisson" else \
        laplacian + references.HELMHOLTZ_K ** 2 * u(x, y) - f(x, y)
    assert np.abs(residual).max() < 1e-4 * np.abs(f(x, y)).max()
    edge = np.linspace(low, 1.0, 101)
    for bx, by in [(edge, low), (edge, 1.0), (low, edge), (1.0, edge)]:
        assert np.abs(u(np.asarray(bx) + 0 * edge, np.asarray(by) + 0 * edge)).max() < 1e-14


def _allen_cahn_energy(u: np.ndarray, x: np.ndarray) -> np.ndarray:
    """E(u) = ∫ d/2·u_x² + c/4·(u² − 1)² dx, spectral u_x; Allen–Cahn is its L2 gradient flow,
    so E never increases."""
    k = np.pi * np.fft.rfftfreq(x.size, d=1.0 / x.size)
    u_x = np.fft.irfft(1j * k * np.fft.rfft(u, axis=1), n=x.size, axis=1)
    density = references.ALLEN_CAHN_DIFFUSION / 2 * u_x ** 2 + \
        references.ALLEN_CAHN_REACTION / 4 * (u ** 2 - 1) ** 2
    return density.sum(axis=1) * (x[1] - x[0])


def test_allen_cahn_reference_is_converged_and_dissipates_energy() -> None:
    t, x, u = references.allen_cahn_solve()
    assert u.shape == (201, 2048) and np.abs(u[0] - x ** 2 * np.cos(np.pi * x)).max() < 1e-14
    _, _, half_step = references.allen_cahn_solve(step=5e-4)
    _, x4, more_modes = references.allen_cahn_solve(modes=4096)
    # Measured: 7e-11 (time) and relative L2 7e-7, max 9.6e-5 at the initial kink (modes).
    assert np.abs(u - half_step).max() < 1e-8
    difference = u - more_modes[:, ::2]
    assert np.linalg.norm(difference) / np.linalg.norm(more_modes[:, ::2]) < 3e-6
    assert np.abs(difference[20:]).max() < 3e-5  # t ≥ 0.1, after the kink has smoothed
    energy = _allen_cahn_energy(u, x)
    assert np.all(np.diff(energy) <= 1e-9 * energy[0])
    assert energy[-1] < 0.5 * energy[0]
    # The grid the example uses is the same solution, subsampled.
    tg, xg, ug = references.allen_cahn_grid()
    np.testing.assert_array_equal(ug, u[:, ::4])
    np.testing.assert_array_equal(xg, x[::4])


def _kdv_integrating_factor_rk4(modes: int, step: float, save_every: int, saves: int) -> np.ndarray:
    """KdV by a second method, independent of the reference's ETDRK4: classical RK4 on
    w = e^{−Lt}û (the integrating factor, L = iλ₂k³), with the product u² on the grid over all
    modes (no dealiasing)."""
    x = -1.0 + 2.0 * np.arange(modes) / modes
    k = np.pi * np.arange(modes // 2 + 1)
    linear = 1j * references.KDV_LAMBDA2 * k ** 3

    def rate(time: float, w: np.ndarray) -> np.ndarray:
        v = np.exp(linear * time) * w
        u = np.fft.irfft(v, n=modes)
        return np.exp(-linear * time) * (-0.5j * references.KDV_LAMBDA1 * k) * np.fft.rfft(u * u)

    w, time, out = np.fft.rfft(np.cos(np.pi * x)), 0.0, []
    for _ in range(saves):
        for _ in range(save_every):
            a = rate(time, w)
            b = rate(time + step / 2, w + step / 2 * a)
            c = rate(time + step / 2, w + step / 2 * b)
            d = rate(time + step, w + step * c)
            w, time = w + step / 6 * (a + 2 * b + 2 * c + d), time + step
        out.append(np.fft.irfft(np.exp(linear * time) * w, n=modes))
    return np.array(out)


def test_kdv_reference_is_converged_and_conserves_its_invariants() -> None:
    t, x, u = references.kdv_solve()
    assert u.shape == (201, 512) and t[-1] == 1.0
    assert np.abs(u[0] - np.cos(np.pi * x)).max() < 1e-14
    # Refinement.  Measured: half the step changes u by 6.7e-12, twice the step by 1.2e-10
    # (ratio 18 ≈ 2⁴: ETDRK4's order), twice or half the modes by 3e-15 (the spectrum of u(1)
    # falls to 1e-14 by mode 80 of the 170 kept).
    _, _, half_step = references.kdv_solve(step=5e-5)
    _, _, double_step = references.kdv_solve(step=2e-4)
    _, _, more_modes = references.kdv_solve(modes=1024)
    fine, coarse = np.abs(u - half_step).max(), np.abs(u - double_step).max()
    assert fine < 1e-10 and coarse / fine > 10
    assert np.abs(u - more_modes[:, ::2]).max() < 1e-12
    # The solution is not trivial: the cosine steepens into a train of solitons.
    assert u[-1].max() > 2.0 and u[-1].min() < -0.5
    # KdV's invariants on the periodic interval: the mass ∫u, the momentum ∫u² and the
    # Hamiltonian ∫(λ₁u³/6 − λ₂u_x²/2) (u_t = −∂x δH/δu).  The 2/3 rule conserves the first two
    # in the semi-discrete system; the Hamiltonian only as the solution is resolved.  Measured:
    # 2e-16, 5e-13 and relative 2.5e-13.
    dx = x[1] - x[0]
    k = np.pi * np.fft.rfftfreq(x.size, d=1.0 / x.size)
    u_x = np.fft.irfft(1j * k * np.fft.rfft(u, axis=1), n=x.size, axis=1)
    mass, momentum = u.sum(axis=1) * dx, (u ** 2).sum(axis=1) * dx
    hamiltonian = (references.KDV_LAMBDA1 * u ** 3 / 6 -
                   references.KDV_LAMBDA2 * u_x ** 2 / 2).sum(axis=1) * dx
    assert np.abs(mass - mass[0]).max() < 1e-13
    assert np.abs(momentum - momentum[0]).max() < 1e-11 and momentum[0] == pytest.approx(1.0)
    assert np.abs(hamiltonian / hamiltonian[0] - 1).max() < 1e-10
    # The grid the example uses is the solve itself.
    tg, xg, ug = references.kdv_grid()
    np.testing.assert_array_equal(ug, u)


def test_kdv_reference_agrees_with_a_second_method() -> None:
    _, _, u = references.kdv_solve()
    # Integrating-factor RK4 with 256 modes and h = 5e-5 to t = 0.25, 0.5, …, 1.  Measured:
    # largest differences 1.3e-13, 3.0e-12, 5.0e-12, 6.3e-12 (the reference's own time-step
    # error is ≈ 7e-12, above); with h = 1e-4 for the RK4, 7.3e-11.
    second = _kdv_integrating_factor_rk4(256, 5e-5, 5000, 4)
    assert np.abs(second - u[50::50, ::2]).max() < 1e-10


def test_kdv_two_soliton_solves_its_pde_and_keeps_its_invariants() -> None:
    # The closed form (references.kdv_two_soliton) against u_t + 6uu_x + u_xxx = 0 by central
    # differences of order 4 (u_t, u_x: 5 points, h = 1e-3; u_xxx: 6 points, h = 5e-3 and twice
    # that), and its closed-form u_x against the differences of u.  Measured: the residual
    # 5.8e-7 against terms up to 22 with h = 5e-3, 8.5e-6 with 1e-2 (15×: the stencil's h⁴, so
    # what is left is truncation, not the formula); u_x 1.6e-11.
    rng = np.random.default_rng(3)
    t, x = rng.uniform(0, 5, 500), rng.uniform(0, 20, 500)
    u = references.kdv_two_soliton
    h = 1e-3
    u_t = (-u(t + 2 * h, x) + 8 * u(t + h, x) - 8 * u(t - h, x) + u(t - 2 * h, x)) / (12 * h)
    u_x = (-u(t, x + 2 * h) + 8 * u(t, x + h) - 8 * u(t, x - h) + u(t, x - 2 * h)) / (12 * h)

    def residual(h3: float) -> np.ndarray:
        at = lambda k: u(t, x + k * h3)  # noqa: E731
        u_xxx = (-at(3) + 8 * at(2) - 13 * at(1) + 13 * at(-1) - 8 * at(-2) + at(-3)) / \
            (8 * h3 ** 3)
        return np.abs(u_t + 6 * u(t, x) * u_x + u_xxx).max(), np.abs(u_xxx).max()

    (fine, scale), (coarse, _) = residual(5e-3), residual(1e-2)
    assert scale > 10 and fine < 1e-7 * scale and coarse / fine > 8
    assert np.abs(references.kdv_two_soliton_x(t, x) - u_x).max() < 1e-9 * np.abs(u_x).max()
    # KdV's invariants on the line (the solitons decay as e^{−√c|x|}: [−80, 120] holds them at
    # every t of [0, 5]): the mass ∫u = 2(√c₁ + √c₂) and ∫u² = (2/3)(c₁^{3/2} + c₂^{3/2}), each
    # soliton (c/2) sech²(√c ξ/2) giving 2√c and (2/3)c^{3/2}.  Measured: relative 5e-12.
    c1, c2 = references.KDV2_C
    line = np.linspace(-80.0, 120.0, 400_001)
    dx = line[1] - line[0]
    for time in (0.0, 2.5, 5.0):
        v = u(np.full_like(line, time), line)
        assert v.sum() * dx == pytest.approx(2 * (c1 ** 0.5 + c2 ** 0.5), rel=1e-10)
        assert (v ** 2).sum() * dx == pytest.approx(2 / 3 * (c1 ** 1.5 + c2 ** 1.5), rel=1e-10)
    # At t = 5 the two have separated: the fast one's peak c₁/2 = 3 left [0, 20], where the slow
    # one's c₂/2 = 1 remains.
    assert v.max() == pytest.approx(c1 / 2, rel=1e-6)
    tg, xg, ug = references.kdv_two_soliton_grid()
    assert ug.shape == (100, 256) and xg[-1] == 20.0 and tg[-1] == 5.0
    assert ug[-1].max() == pytest.approx(c2 / 2, rel=1e-4) and ug.max() > 2.9
