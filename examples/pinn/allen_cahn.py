"""Allen–Cahn PINN trained by lmtrain.torch's Levenberg–Marquardt.

    u_t − 10⁻⁴ u_xx + 5u³ − 5u = 0,  x ∈ [−1, 1] periodic,  t ∈ [0, 1],  u(0, x) = x² cos πx.

The network sees (t, cos πx, sin πx), so u is periodic in x exactly and needs no boundary
residual.  Time marching: the interior points are drawn on t ∈ [0, T] with the horizon T grown
from `--horizon-start` to 1 in `--horizon-steps` LM steps, so the network settles the early
times before it is asked about the later ones (causality; Wang, Sankaran & Perdikaris,
arXiv 2203.07404, use weights instead).  Prints the relative L2 error against the ETDRK4
reference (references.py) on its 201 × 512 grid.

usage: python examples/pinn/allen_cahn.py [--seed 0] [--budget 900] [--points 8000] …
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

D, C = references.ALLEN_CAHN_DIFFUSION, references.ALLEN_CAHN_REACTION


class PeriodicInput(torch.nn.Module):
    """(t, x) → (t, cos πx, sin πx): functions of it are 2-periodic in x, with every
    derivative."""

    def forward(self, p: torch.Tensor) -> torch.Tensor:
        return torch.cat([p[:, :1], torch.cos(math.pi * p[:, 1:]), torch.sin(math.pi * p[:, 1:])],
                         dim=1)


class MarchingUniform(pinn.Uniform):
    """Uniform points on t ∈ [0, horizon] × x ∈ [−1, 1], the horizon set between steps."""

    def __init__(self, count: int, horizon: float) -> None:
        super().__init__(count, t=(0, 1), x=(-1, 1))
        self.horizon = horizon

    def draw(self, coordinates, generator_seed, dtype, count=None):
        points = super().draw(coordinates, generator_seed, dtype, count)
        points[:, 0] *= self.horizon
        return points


RECIPE = dict(points=8000, width=20, depth=3, initial_weight=10.0, horizon_start=0.1,
              horizon_steps=300, budget=900.0, resample_every=1, options={})


def problem(points: int, seed: int, initial_weight: float, horizon: float) -> pinn.Problem:
    return pinn.Problem("tx", [
        pinn.Condition("pde", lambda u, u_t, u_xx: u_t - D * u_xx + C * u ** 3 - C * u,
                       MarchingUniform(points, horizon)),
        pinn.Condition("initial", lambda x, u: u - x ** 2 * torch.cos(math.pi * x),
                       pinn.Uniform(max(256, points // 8), t=0, x=(-1, 1), method="sobol"),
                       weight=initial_weight),
    ], seed=seed)


def build(seed: int, points: int, width: int, depth: int, initial_weight: float,
          horizon_start: float, horizon_steps: int) -> tuple[pinn.Problem, torch.nn.Module,
                                                             object]:
    t, x, u = references.allen_cahn_grid()
    grid = torch.from_numpy(np.stack(np.meshgrid(t, x, indexing="ij"), -1).reshape(-1, 2))
    error = common.grid_error(grid, torch.from_numpy(u.reshape(-1, 1)))
    model = common.mlp([3] + [width] * depth + [1], seed, first=PeriodicInput())
    pde = problem(points, seed, initial_weight, horizon_start)
    sampler = pde.conditions[0].points

    def resample(step: int) -> torch.Tensor:
        # The horizon grows before the draw (time marching), then the usual seeded draw.
        sampler.horizon = min(1.0, horizon_start + (1 - horizon_start) * step /
                              max(horizon_steps, 1))
        return pinn.Problem.resample(pde, step)

    pde.resample = resample
    return pde, model, error


def train(seed: int = 0, verbose: bool = False, **overrides) -> common.Run:
    return common.train(sys.modules[__name__], seed, verbose, **overrides)


if __name__ == "__main__":
    common.main(sys.modules[__name__], "allen_cahn")
