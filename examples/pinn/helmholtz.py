"""2-D Helmholtz PINN trained by lmtrain.torch's Levenberg–Marquardt.

    Δu + k²u = q on (−1, 1)²,  u = 0 on the boundary,
    exact u = sin(a₁πx) sin(a₂πy), a₁ = 1, a₂ = 4, k = 1,  q = (k² − (a₁² + a₂²)π²) u.

Collocation points: scrambled Sobol points in the square and on its perimeter, redrawn every
step and doubled every 100 steps (the recipe; --set random_points=False --resample-every 0
--points 2500 gives W8's fixed 50 × 50 grid, which interpolates with this network).  Prints the relative L2
error against the exact solution on a 201 × 201 grid of the closed square.

usage: python examples/pinn/helmholtz.py [--seed 0] [--budget 600] [--points 2500] …
       (--set KEY=VALUE for the other keys of RECIPE)
"""

from __future__ import annotations

import math
import sys

import torch

import common
import references
from poisson2d import square_grid, square_problem

A1, A2, K = references.HELMHOLTZ_A1, references.HELMHOLTZ_A2, references.HELMHOLTZ_K

# The recipe (docs/pinn.md): Sobol points redrawn every step, 2 000 doubled every 100 steps up
# to 8 000, a 2-20-20-20-1 network (921 parameters).  Up to 16 000 before 2026-11-27: 6.05e-7
# after 600 s (median of 3 seeds) against 3.40e-7 with 8 000, whose steps cost 354 ms against
# 618 (bench/results/…-PINN-issue39-m.md and -r*.md).  W8's fixed 50 × 50 grid with 1 981
# parameters (m/n ≈ 1.4) interpolates (held-out residual 3 500× the training one; 4.8e-5 after
# 600 s), and a 100 × 100 grid makes each step 5 s (8.3e-5 after 600 s).
# rba = (γ, η): residual-based attention on the interior points (off: None).
RECIPE = dict(points=2000, points_max=8000, grow_every=100, width=20, depth=3,
              boundary_weight=1.0, random_points=True, rba=None, adaptive=None, device="cpu",
              budget=600.0, resample_every=1, options={})


def _source(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (K ** 2 - (A1 ** 2 + A2 ** 2) * math.pi ** 2) * torch.sin(A1 * math.pi * x) * \
        torch.sin(A2 * math.pi * y)


def build(seed: int, points: int, points_max: int, grow_every: int, width: int, depth: int,
          boundary_weight: float, random_points: bool, rba: tuple[float, float] | None,
          adaptive: tuple[int, float, float] | None = None, device: str = "cpu"
          ) -> tuple[object, torch.nn.Module, object]:
    grid, x, y = square_grid(-1.0, 1.0, 201)
    exact = torch.from_numpy(references.helmholtz(x, y).reshape(-1, 1))
    error = common.grid_error(grid.to(device), exact.to(device))
    pde = square_problem(lambda x, y, u, u_xx, u_yy: u_xx + u_yy + K ** 2 * u - _source(x, y),
                         points, seed, boundary_weight, random_points, -1.0, 1.0, rba, device)
    common.adapt(pde, "pde", adaptive)  # (pool, k, c): pinn.ResidualAdaptive on fresh points
    if random_points and points_max > points:
        pde.grow("pde", points_max, grow_every, start=points)
    return pde, common.mlp([2] + [width] * depth + [1], seed).to(device), error


def train(seed: int = 0, verbose: bool = False, **overrides) -> common.Run:
    return common.train(sys.modules[__name__], seed, verbose, **overrides)


if __name__ == "__main__":
    common.main(sys.modules[__name__], "helmholtz")
