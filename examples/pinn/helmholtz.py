"""2-D Helmholtz PINN trained by lmtrain.torch's Levenberg–Marquardt.

    Δu + k²u = q on (−1, 1)²,  u = 0 on the boundary,
    exact u = sin(a₁πx) sin(a₂πy), a₁ = 1, a₂ = 4, k = 1,  q = (k² − (a₁² + a₂²)π²) u.

Collocation points (shared/WORKLOADS.md, W8): the 50 × 50 interior grid and 50 points on each
edge, fixed (or Sobol points redrawn every --resample-every steps with --set
random_points=True); the held-out check uses fresh uniform points.  Prints the relative L2
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

RECIPE = dict(points=2500, width=30, depth=3, boundary_weight=1.0, random_points=False,
              budget=600.0, resample_every=0, options={})


def _source(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (K ** 2 - (A1 ** 2 + A2 ** 2) * math.pi ** 2) * torch.sin(A1 * math.pi * x) * \
        torch.sin(A2 * math.pi * y)


def build(seed: int, points: int, width: int, depth: int, boundary_weight: float,
          random_points: bool) -> tuple[object, torch.nn.Module, object]:
    grid, x, y = square_grid(-1.0, 1.0, 201)
    error = common.grid_error(grid, torch.from_numpy(references.helmholtz(x, y).reshape(-1, 1)))
    pde = square_problem(lambda x, y, u, u_xx, u_yy: u_xx + u_yy + K ** 2 * u - _source(x, y),
                         points, seed, boundary_weight, random_points, -1.0, 1.0)
    return pde, common.mlp([2] + [width] * depth + [1], seed), error


def train(seed: int = 0, verbose: bool = False, **overrides) -> common.Run:
    return common.train(sys.modules[__name__], seed, verbose, **overrides)


if __name__ == "__main__":
    common.main(sys.modules[__name__], "helmholtz")
