"""2-D Poisson PINN trained by lmtrain.torch's Levenberg–Marquardt.

    −Δu = 2π² sin πx sin πy on (0, 1)²,  u = 0 on the boundary;  exact u = sin πx sin πy.

Collocation points (shared/WORKLOADS.md, W8): the 50 × 50 interior grid and 50 points on each
edge, fixed; the held-out check uses as many uniformly random points.  Prints the relative L2
error against the exact solution on a 101 × 101 grid of the closed square.

usage: python examples/pinn/poisson2d.py [--seed 0] [--budget 300] [--points 2500] …
       (--set KEY=VALUE for the other keys of RECIPE)
"""

from __future__ import annotations

import math
import sys

import numpy as np
import torch

import common
import references
from lmtrain.torch import pinn

# The recipe (docs/pinn.md): W8's fixed grid (m/n ≈ 2.9 for 921 parameters does not
# interpolate here: the solution is smooth and the grid even), LM's defaults.
# rba = (γ, η): residual-based attention on the interior points (pinn.ResidualBasedAttention),
# off by default (None).
# device: where the network, the points and the error's grid live (every example's recipe has
# it: bench/pinn.py --device cuda).
RECIPE = dict(points=2500, points_max=2500, grow_every=100, width=20, depth=3,
              boundary_weight=1.0, random_points=False, rba=None, device="cpu",
              budget=300.0, resample_every=0, options={})


def _source(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return 2 * math.pi ** 2 * torch.sin(math.pi * x) * torch.sin(math.pi * y)


def grid_points(per_side: int, low: float, high: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The per_side² interior points of the uniform grid of (low, high)² (the ends excluded)
    and per_side points on each of the four edges."""
    s = torch.linspace(low, high, per_side + 2, dtype=torch.float64)[1:-1]
    interior = torch.cartesian_prod(s, s)
    lo, hi = torch.full_like(s, low), torch.full_like(s, high)
    edges = torch.cat([torch.stack(pair, 1) for pair in [(s, lo), (s, hi), (lo, s), (hi, s)]])
    return interior, edges


class Perimeter:
    """`count` points on the boundary of the square (low, high)², uniform in arc length (a
    random or scrambled-Sobol position along the perimeter, folded onto the four sides)."""

    def __init__(self, count: int | None, low: float, high: float, method: str = "random"):
        self.count, self.low, self.high = count, low, high
        self.along = pinn.Uniform(count, s=(0.0, 4.0), method=method)

    def draw(self, coordinates, generator_seed, dtype, count=None):
        s = self.along.draw("s", generator_seed, torch.float64, count or self.count)[:, 0]
        side, f = torch.clamp(s.floor(), max=3), s - torch.clamp(s.floor(), max=3)
        a = self.low + (self.high - self.low) * f
        lo, hi = torch.full_like(a, self.low), torch.full_like(a, self.high)
        x = torch.where(side == 0, a, torch.where(side == 1, hi, torch.where(side == 2, a, lo)))
        y = torch.where(side == 0, lo, torch.where(side == 1, a, torch.where(side == 2, hi, a)))
        return torch.stack([x, y], 1).to(dtype)


def square_problem(pde, points: int, seed: int, boundary_weight: float, random_points: bool,
                   low: float, high: float, rba: tuple[float, float] | None = None,
                   device: str = "cpu") -> pinn.Problem:
    """A PDE on the square (low, high)² with u = 0 on its boundary, on a grid (held out:
    uniform points) or on uniform random points; rba = (γ, η): residual-based attention on the
    interior points; the points on `device`."""
    side = round(math.sqrt(points))
    square = dict(x=(low, high), y=(low, high))
    if random_points:
        inside = pinn.Uniform(side * side, method="sobol", **square)
        edge = Perimeter(4 * side, low, high, method="sobol")
    else:
        interior, edges = grid_points(side, low, high)
        inside = pinn.Fixed(interior, heldout=pinn.Uniform(**square))
        edge = pinn.Fixed(edges, heldout=Perimeter(None, low, high))
    return pinn.Problem("xy", [
        pinn.Condition("pde", pde, inside, point_weights=None if rba is None else
                       pinn.ResidualBasedAttention(*rba)),
        pinn.Condition("boundary", lambda u: u, edge, weight=boundary_weight),
    ], seed=seed, device=device)


def square_grid(low: float, high: float, count: int) -> tuple[torch.Tensor, np.ndarray,
                                                              np.ndarray]:
    s = np.linspace(low, high, count)
    x, y = np.meshgrid(s, s, indexing="ij")
    return torch.from_numpy(np.stack([x, y], -1).reshape(-1, 2)), x, y


def build(seed: int, points: int, points_max: int, grow_every: int, width: int, depth: int,
          boundary_weight: float, random_points: bool, rba: tuple[float, float] | None,
          device: str = "cpu") -> tuple[pinn.Problem, torch.nn.Module, object]:
    grid, x, y = square_grid(0.0, 1.0, 101)
    exact = torch.from_numpy(references.poisson2d(x, y).reshape(-1, 1))
    error = common.grid_error(grid.to(device), exact.to(device))
    pde = square_problem(lambda x, y, u_xx, u_yy: -(u_xx + u_yy) - _source(x, y), points, seed,
                         boundary_weight, random_points, 0.0, 1.0, rba, device)
    if random_points and points_max > points:
        pde.grow("pde", points_max, grow_every, start=points)
    return pde, common.mlp([2] + [width] * depth + [1], seed).to(device), error


def train(seed: int = 0, verbose: bool = False, **overrides) -> common.Run:
    return common.train(sys.modules[__name__], seed, verbose, **overrides)


if __name__ == "__main__":
    common.main(sys.modules[__name__], "poisson2d")
