"""Reference solutions of the PINN examples, computed by the project (numpy, float64).

Nothing here is downloaded or stored: each reference is recomputed from its formula when asked
for (and kept in memory for the process), so the code is the record of how it was made.  Each has
a check of its own in tests/python/test_torch_pinn_references.py.

* Viscous Burgers, u_t + u u_x = ν u_xx on x ∈ [−1, 1], t ∈ [0, 1], ν = 0.01/π,
  u(0, x) = −sin πx, u(t, ±1) = 0: the Cole–Hopf solution (Cole 1951, Hopf 1950) as a ratio of
  two Gauss–Hermite quadratures (the form of Basdevant et al., Computers & Fluids 14, 1986):

      u(t, x) = −∫ sin π(x − η) f(x − η) e^{−η²/4νt} dη / ∫ f(x − η) e^{−η²/4νt} dη,
      f(y) = exp(−cos πy / 2πν),

  with η = 2√(νt)·z, so e^{−z²} is the Gauss–Hermite weight.  f spans e^{±50}, so the sums are
  taken in log space (the largest term factored out).
* 2-D Poisson, −Δu = 2π² sin πx sin πy on [0, 1]², u = 0 on the boundary: u = sin πx sin πy.
* 2-D Helmholtz, Δu + k²u = q on [−1, 1]², u = 0 on the boundary, with the manufactured
  solution u = sin(a₁πx) sin(a₂πy) (a₁ = 1, a₂ = 4, k = 1) and q = (k² − (a₁² + a₂²)π²) u.
* Allen–Cahn, u_t − 10⁻⁴ u_xx + 5u³ − 5u = 0, periodic on [−1, 1], u(0, x) = x² cos πx, t ∈
  [0, 1]: Fourier spectral in x and ETDRK4 in t (Cox & Matthews, J. Comput. Phys. 176, 2002),
  with the φ-functions by the contour integrals of Kassam & Trefethen (SIAM J. Sci. Comput. 26,
  2005), which avoid their cancellation at small |hL|.
* Korteweg–de Vries, u_t + λ₁ u u_x + λ₂ u_xxx = 0, periodic on [−1, 1], u(0, x) = cos πx,
  t ∈ [0, 1], λ₁ = 1, λ₂ = 0.0025 (the PINN benchmark of Raissi, Perdikaris & Karniadakis,
  J. Comput. Phys. 378, 2019, §4.2): Fourier pseudo-spectral in x with the product u² dealiased
  by the 2/3 rule, and ETDRK4 in t with the purely imaginary linear part L = iλ₂k³ exact in the
  exponentials (Kassam & Trefethen 2005, §4 treat KdV the same way).
* Korteweg–de Vries with two solitons, u_t + 6uu_x + u_xxx = 0, t ∈ [0, 5], x ∈ [0, 20] (the KdV
  of Toscano et al.'s vRBA code): the closed-form two-soliton solution (Hirota's, in the form of
  Drazin & Johnson, Solitons: an Introduction, 1989, §5.1) and its x-derivative.
"""

from __future__ import annotations

import functools
import math

import numpy as np

BURGERS_NU = 0.01 / math.pi


# ---- Burgers ------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=8)
def _gauss_hermite(nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes z and log-weights of the Gauss–Hermite rule ∫ g(z) e^{−z²} dz ≈ Σ w g(z).

    The nodes are the eigenvalues of the symmetric tridiagonal Jacobi matrix of the Hermite
    polynomials, off-diagonal √(k/2) (Golub & Welsch, Math. Comp. 23, 1969).  The weights are
    not taken from the eigenvectors: their first components, about √w, fall below the
    eigenvectors' absolute accuracy (1e-16) in the tails, which is where the Cole–Hopf integrand
    lives at late times.  Instead the Christoffel function, w = 1/Σₖ pₖ(z)² over the orthonormal
    Hermite polynomials p₀ = π^{−1/4}, pₖ₊₁ = √(2/(k+1))·z·pₖ − √(k/(k+1))·pₖ₋₁, is summed with
    a running rescaling (pₖ grows like e^{z²/2}), so log w is accurate to rounding everywhere.
    numpy's hermgauss overflows beyond about 150 nodes."""
    off = np.sqrt(np.arange(1, nodes) / 2.0)
    z = np.linalg.eigvalsh(np.diag(off, 1) + np.diag(off, -1))
    p, p_before = np.full(nodes, math.pi ** -0.25), np.zeros(nodes)
    total, log_scale = p * p, np.zeros(nodes)
    for k in range(nodes - 1):
        p, p_before = math.sqrt(2.0 / (k + 1)) * z * p - math.sqrt(k / (k + 1)) * p_before, p
        total += p * p
        big = np.maximum(np.abs(p), np.abs(p_before)) > 1e100
        if big.any():
            scale = np.where(big, 1e-100, 1.0)
            p, p_before, total = p * scale, p_before * scale, total * scale * scale
            log_scale += np.where(big, 100.0 * math.log(10.0), 0.0)
    return z, -(np.log(total) + 2.0 * log_scale)


def burgers(t: np.ndarray, x: np.ndarray, nu: float = BURGERS_NU,
            nodes: int = 200) -> np.ndarray:
    """u(t, x) of viscous Burgers by Cole–Hopf with `nodes` Gauss–Hermite nodes (float64).

    t and x broadcast against each other; t = 0 gives −sin πx exactly.  The quadrature's error
    falls fast with `nodes` (tests compare 200 with 400 nodes)."""
    t, x = np.broadcast_arrays(np.asarray(t, dtype=np.float64), np.asarray(x, dtype=np.float64))
    z, log_w = _gauss_hermite(nodes)
    shape = t.shape
    t, x = t.reshape(-1), x.reshape(-1)
    u = np.empty_like(x)
    # Blocks of points keep the points × nodes arrays small.
    for s in range(0, x.size, 4096):
        tb, xb = t[s:s + 4096, None], x[s:s + 4096, None]
        y = xb - 2.0 * np.sqrt(nu * tb) * z[None, :]
        exponent = log_w[None, :] - np.cos(np.pi * y) / (2.0 * np.pi * nu)
        weight = np.exp(exponent - exponent.max(axis=1, keepdims=True))
        u[s:s + 4096] = -(np.sin(np.pi * y) * weight).sum(axis=1) / weight.sum(axis=1)
    return u.reshape(shape)


@functools.lru_cache(maxsize=4)
def burgers_grid(times: int = 101, points: int = 256) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(t, x, u) on the uniform grid t ∈ [0, 1] × x ∈ [−1, 1] (`times` × `points`), the grid of
    the error the examples print."""
    t = np.linspace(0.0, 1.0, times)
    x = np.linspace(-1.0, 1.0, points)
    return t, x, burgers(t[:, None], x[None, :])


# ---- 2-D Poisson and Helmholtz (exact) ------------------------------------------------------------
def poisson2d(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.sin(np.pi * x) * np.sin(np.pi * y)


def poisson2d_source(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """f of −Δu = f."""
    return 2.0 * np.pi ** 2 * np.sin(np.pi * x) * np.sin(np.pi * y)


HELMHOLTZ_A1, HELMHOLTZ_A2, HELMHOLTZ_K = 1.0, 4.0, 1.0


def helmholtz(x: np.ndarray, y: np.ndarray, a1: float = HELMHOLTZ_A1,
              a2: float = HELMHOLTZ_A2) -> np.ndarray:
    return np.sin(a1 * np.pi * x) * np.sin(a2 * np.pi * y)


def helmholtz_source(x: np.ndarray, y: np.ndarray, a1: float = HELMHOLTZ_A1,
                     a2: float = HELMHOLTZ_A2, k: float = HELMHOLTZ_K) -> np.ndarray:
    """q of Δu + k²u = q for the manufactured u."""
    return (k ** 2 - (a1 ** 2 + a2 ** 2) * np.pi ** 2) * helmholtz(x, y, a1, a2)


# ---- Allen–Cahn ---------------------------------------------------------------------------------
ALLEN_CAHN_DIFFUSION, ALLEN_CAHN_REACTION = 1e-4, 5.0


def _etdrk4_coefficients(linear: np.ndarray, h: float,
                         contour_points: int = 64) -> tuple[np.ndarray, ...]:
    """E, E½, Q, f₁, f₂, f₃ of ETDRK4 for the diagonal linear operator `linear` and step h.

    Kassam & Trefethen (2005), eq. (2.5)–(2.6) and §5: each φ-function of z = hL is the mean of
    its values on a circle of radius 1 around z, which avoids the cancellation of the closed forms
    (e.g. (e^z − 1)/z) at small |z|.  For real L the upper half circle suffices (the values on
    the lower half are the conjugates) and the mean's real part is the value; a complex L
    (KdV's iλ₂k³) takes the mean over the whole circle."""
    hl = h * linear
    real = np.isrealobj(linear)
    turn = np.pi if real else 2 * np.pi
    roots = np.exp(1j * turn * (np.arange(1, contour_points + 1) - 0.5) / contour_points)
    lr = hl[:, None] + roots[None, :]
    ex = np.exp(lr)
    part = np.real if real else (lambda v: v)
    q = h * part(np.mean((np.exp(lr / 2) - 1) / lr, axis=1))
    f1 = h * part(np.mean((-4 - lr + ex * (4 - 3 * lr + lr ** 2)) / lr ** 3, axis=1))
    f2 = h * part(np.mean((2 + lr + ex * (-2 + lr)) / lr ** 3, axis=1))
    f3 = h * part(np.mean((-4 - 3 * lr - lr ** 2 + ex * (4 - lr)) / lr ** 3, axis=1))
    return np.exp(hl), np.exp(hl / 2), q, f1, f2, f3


def _etdrk4(v: np.ndarray, nonlinear, coefficients: tuple[np.ndarray, ...]) -> np.ndarray:
    """One ETDRK4 step of v̂_t = L v̂ + N(v̂) (Cox & Matthews 2002, eq. (26)–(29))."""
    e, e2, q, f1, f2, f3 = coefficients
    nv = nonlinear(v)
    a = e2 * v + q * nv
    na = nonlinear(a)
    b = e2 * v + q * na
    nb = nonlinear(b)
    c = e2 * a + q * (2 * nb - nv)
    nc = nonlinear(c)
    return e * v + nv * f1 + 2 * (na + nb) * f2 + nc * f3


def _etdrk4_saved(v: np.ndarray, nonlinear, linear: np.ndarray, step: float, times: int,
                  modes: int) -> tuple[np.ndarray, np.ndarray]:
    """(t, u): ETDRK4 steps of `step` from the spectrum v, u saved on the grid of `modes` points
    at `times` equispaced times of [0, 1] (the step must divide the saving interval)."""
    steps_per_save = round((1.0 / (times - 1)) / step)
    if abs(steps_per_save * step * (times - 1) - 1.0) > 1e-12:
        raise ValueError(f"step = {step} does not divide the saving interval 1/{times - 1}")
    coefficients = _etdrk4_coefficients(linear, step)
    saved = [np.fft.irfft(v, n=modes)]
    for _ in range(times - 1):
        for _ in range(steps_per_save):
            v = _etdrk4(v, nonlinear, coefficients)
        saved.append(np.fft.irfft(v, n=modes))
    return np.linspace(0.0, 1.0, times), np.array(saved)


@functools.lru_cache(maxsize=4)
def allen_cahn_solve(modes: int = 2048, step: float = 1e-3, times: int = 201,
                     diffusion: float = ALLEN_CAHN_DIFFUSION,
                     reaction: float = ALLEN_CAHN_REACTION) -> tuple[np.ndarray, np.ndarray,
                                                                     np.ndarray]:
    """(t, x, u): u_t = d·u_xx + c(u − u³) on the periodic [−1, 1), u(0, x) = x² cos πx,
    with `modes` Fourier points and ETDRK4 steps of `step`, saved at `times` equispaced times
    of [0, 1].  The linear part L = c − d·k² is exact in the exponentials; N(u) = −c·u³ is
    evaluated on the grid (no dealiasing: the test's comparison with twice the modes bounds
    what aliasing costs).

    The initial condition has a kink at the periodic boundary (u′(−1) = 2, u′(1) = −2), so the
    spectrum decays only like k⁻² at first: the spatial error, not the time step's, dominates.
    Measured against 4 096 modes and h = 1e-4: relative L2 7.0e-7 over the 201 × 512 grid, the
    largest pointwise difference 9.6e-5 (at t = 0.005, x = −1, the kink) and 7.9e-6 for t ≥ 0.1;
    h = 1e-3 instead of 1e-4 changes the solution by 2e-10."""
    x = -1.0 + 2.0 * np.arange(modes) / modes
    k = np.pi * np.arange(modes // 2 + 1)  # the wavenumbers of a period of 2
    linear = reaction - diffusion * k ** 2

    def nonlinear(v: np.ndarray) -> np.ndarray:
        u = np.fft.irfft(v, n=modes)
        return -reaction * np.fft.rfft(u ** 3)

    t, u = _etdrk4_saved(np.fft.rfft(x ** 2 * np.cos(np.pi * x)), nonlinear, linear, step, times,
                         modes)
    return t, x, u


@functools.lru_cache(maxsize=2)
def allen_cahn_grid(points: int = 512, times: int = 201) -> tuple[np.ndarray, np.ndarray,
                                                                   np.ndarray]:
    """(t, x, u) on `times` × `points` (x ∈ [−1, 1), every (2048/points)-th point of the
    2 048-mode solve), the grid of the error the example prints."""
    t, x, u = allen_cahn_solve(times=times)
    stride = x.size // points
    return t, x[::stride], u[:, ::stride]


# ---- Korteweg–de Vries ------------------------------------------------------------------------
KDV_LAMBDA1, KDV_LAMBDA2 = 1.0, 0.0025


@functools.lru_cache(maxsize=4)
def kdv_solve(modes: int = 512, step: float = 1e-4, times: int = 201,
              lambda1: float = KDV_LAMBDA1, lambda2: float = KDV_LAMBDA2) -> tuple[
                  np.ndarray, np.ndarray, np.ndarray]:
    """(t, x, u): u_t + λ₁ u u_x + λ₂ u_xxx = 0 on the periodic [−1, 1), u(0, x) = cos πx, with
    `modes` Fourier points and ETDRK4 steps of `step`, saved at `times` equispaced times of
    [0, 1].

    In Fourier space û_t = iλ₂k³ û − (iλ₁k/2)·(u²)^, k = πn (a period of 2): the linear part is
    exact in the exponentials, the product u² is formed on the grid with the modes above 2/3 of
    the Nyquist wavenumber zeroed (Orszag's 2/3 rule), so the truncated system conserves the
    mean and ∫u² dx exactly and its time steps only to ETDRK4's error.  The explicit nonlinear
    term limits the step to about h·λ₁·k_max·max|u| ≲ 1: h = 1e-4 with 512 modes (k_max = 804,
    max|u| ≈ 2.6)."""
    x = -1.0 + 2.0 * np.arange(modes) / modes
    n = np.arange(modes // 2 + 1)
    k = np.pi * n
    linear = 1j * lambda2 * k ** 3
    keep = n < modes / 3  # the 2/3 rule on the half spectrum (n ≤ modes/2)
    derivative = -0.5j * lambda1 * k * keep

    def nonlinear(v: np.ndarray) -> np.ndarray:
        u = np.fft.irfft(v * keep, n=modes)
        return derivative * np.fft.rfft(u * u)

    t, u = _etdrk4_saved(np.fft.rfft(np.cos(np.pi * x)) * keep, nonlinear, linear, step, times,
                         modes)
    return t, x, u


@functools.lru_cache(maxsize=2)
def kdv_grid(points: int = 512, times: int = 201) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(t, x, u) on `times` × `points` (x ∈ [−1, 1), every (512/points)-th point of the 512-mode
    solve): the grid of Raissi et al.'s KdV data (201 × 512) and of the error the example
    prints."""
    t, x, u = kdv_solve(times=times)
    stride = x.size // points
    return t, x[::stride], u[:, ::stride]


# ---- Korteweg–de Vries, two solitons (vRBA's KdV) -----------------------------------------------
# u_t + 6uu_x + u_xxx = 0 on the line, the two-soliton solution of speeds c₁ = 6 and c₂ = 2 that
# start at x₁ = −2 and x₂ = 2 (the problem of Toscano et al.'s vRBA code, t ∈ [0, 5], x ∈ [0, 20]).
# With sᵢ = √cᵢ, aᵢ = sᵢ(x − cᵢt − xᵢ)/2:
#
#     u = 2(c₁ − c₂) N / D²,   N = c₁ cosh² a₂ + c₂ sinh² a₁,
#     D = (s₁ − s₂) cosh(a₁ + a₂) + (s₁ + s₂) cosh(a₁ − a₂),
#
# and, from ∂aᵢ/∂x = sᵢ/2, u_x = 2(c₁ − c₂)(N_x D − 2N D_x)/D³ with
# N_x = (c₁s₂ sinh 2a₂ + c₂s₁ sinh 2a₁)/2 and D_x = (c₁ − c₂)(sinh(a₁ + a₂) + sinh(a₁ − a₂))/2.
# Written with the array's own cosh and sinh, so the same code serves numpy arrays (the error's
# grid) and torch tensors (the example's exact boundary values, under autograd and vmap).
KDV2_C, KDV2_X0 = (6.0, 2.0), (-2.0, 2.0)
KDV2_T, KDV2_L = 5.0, 20.0


def _kdv2_parts(t, x):
    # torch's functions for torch tensors (imported only then: the module stays numpy-only for
    # the references), numpy's for everything else.
    if any(type(v).__module__.split(".")[0] == "torch" for v in (t, x)):
        import torch as lib
    else:
        lib = np
    (c1, c2), (x1, x2) = KDV2_C, KDV2_X0
    s1, s2 = math.sqrt(c1), math.sqrt(c2)
    a1, a2 = 0.5 * s1 * (x - c1 * t - x1), 0.5 * s2 * (x - c2 * t - x2)
    n = c1 * lib.cosh(a2) ** 2 + c2 * lib.sinh(a1) ** 2
    d = (s1 - s2) * lib.cosh(a1 + a2) + (s1 + s2) * lib.cosh(a1 - a2)
    return lib, a1, a2, n, d


def kdv_two_soliton(t, x):
    """u(t, x) of the two-soliton solution (numpy arrays or torch tensors, broadcast)."""
    _, _, _, n, d = _kdv2_parts(t, x)
    c1, c2 = KDV2_C
    return 2 * (c1 - c2) * n / d ** 2


def kdv_two_soliton_x(t, x):
    """u_x(t, x) of the two-soliton solution, in closed form."""
    lib, a1, a2, n, d = _kdv2_parts(t, x)
    c1, c2 = KDV2_C
    s1, s2 = math.sqrt(c1), math.sqrt(c2)
    n_x = 0.5 * (c1 * s2 * lib.sinh(2 * a2) + c2 * s1 * lib.sinh(2 * a1))
    d_x = 0.5 * (c1 - c2) * (lib.sinh(a1 + a2) + lib.sinh(a1 - a2))
    return 2 * (c1 - c2) * (n_x * d - 2 * n * d_x) / d ** 3


@functools.lru_cache(maxsize=2)
def kdv_two_soliton_grid(times: int = 100, points: int = 256) -> tuple[np.ndarray, np.ndarray,
                                                                       np.ndarray]:
    """(t, x, u) on `times` × `points` equispaced values of [0, 5] × [0, 20], ends included: the
    grid of vRBA's code and of the error the example prints."""
    t = np.linspace(0.0, KDV2_T, times)
    x = np.linspace(0.0, KDV2_L, points)
    return t, x, kdv_two_soliton(t[:, None], x[None, :])
