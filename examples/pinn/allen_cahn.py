"""Allen–Cahn PINN trained by lmtrain.torch's Levenberg–Marquardt.

    u_t − 10⁻⁴ u_xx + 5u³ − 5u = 0,  x ∈ [−1, 1] periodic,  t ∈ [0, 1],  u(0, x) = x² cos πx.

The network sees (t, cos kπx, sin kπx), so u is periodic in x exactly and needs no boundary
residual.  Causality, two ways (recipe keys): time marching — the interior points are drawn on
t ∈ [0, T] with the horizon T grown from horizon_start to 1 in horizon_steps LM steps — and
causal weights (causal_epsilon > 0: ``pinn.CausalWeights``, Wang, Sankaran & Perdikaris, arXiv
2203.07404).  Prints the relative L2 error against the ETDRK4 reference (references.py) on its
201 × 512 grid.

usage: python examples/pinn/allen_cahn.py [--seed 0] [--budget 900] [--points 8000] …
       (--set KEY=VALUE for the other keys of RECIPE)
"""

from __future__ import annotations

import math
import sys
from typing import Any, Callable

import numpy as np
import torch

import common
import references
from lmtrain.torch import pinn

D, C = references.ALLEN_CAHN_DIFFUSION, references.ALLEN_CAHN_REACTION


def marching(points: int, horizon: tuple[float, int]) -> pinn.Marching:
    """Sobol points on t ∈ [0, h] × x ∈ [−1, 1], h from horizon[0] at step 0 to 1 at step
    horizon[1] (time marching)."""
    return pinn.Marching(pinn.Uniform(points, t=(0, 1), x=(-1, 1), method="sobol"), "t",
                         start=horizon[0], steps=horizon[1])


# The recipe (docs/pinn.md): fresh Sobol points every step, 4 000 doubled every 100 steps up to
# 16 000, and time marching (horizon 0.1 → 1 in 200 steps).  Measured after 600 s on the shared
# machine: 1.8e-4; without the growth 4.4e-4, without marching 7.2e-4, causal weights
# (ε = 1, 32 slabs) instead of marching 9.7e-4.  initial_points: the initial condition's points
# per draw (0: an eighth of `points`, ≥ 256): 2 000 rather than 500 took the median of 3 seeds
# at 180 s from 5.8e-4 to 2.4e-4, the initial block's held-out / training residual from 8–12 to
# 0.7–3.3 (bench/results/2026-11-27-2core-amd-epyc-PINN-scale0.2-issue39-k.md).
RECIPE = dict(points=4000, points_max=16000, grow_every=100, width=20, depth=3, harmonics=1,
              initial_weight=10.0, initial_points=2000, horizon_start=0.1, horizon_steps=200,
              causal_epsilon=0.0, causal_slabs=32, adaptive=None, hard_initial=False,
              device="cpu", budget=900.0, resample_every=1, options={})


def initial_count(points: int, initial_points: int) -> int:
    """The initial condition's points per draw: `initial_points`, or an eighth of the interior
    points' first count and at least 256 (0)."""
    return initial_points if initial_points > 0 else max(256, points // 8)


def initial_value(x: torch.Tensor) -> torch.Tensor:
    """u(0, x) = x² cos πx."""
    return x ** 2 * torch.cos(math.pi * x)


def problem(points: int, seed: int, initial_weight: float, horizon: tuple[float, int],
            causal: pinn.CausalWeights | None, initial_points: int = 0,
            device: str = "cpu") -> pinn.Problem:
    return pinn.Problem("tx", [
        pinn.Condition("pde", lambda u, u_t, u_xx: u_t - D * u_xx + C * u ** 3 - C * u,
                       marching(points, horizon), point_weights=causal),
        pinn.Condition("initial", lambda x, u: u - initial_value(x),
                       pinn.Uniform(initial_count(points, initial_points), t=0, x=(-1, 1),
                                    method="sobol"),
                       weight=initial_weight),
    ], seed=seed, device=device)


def marching_build(reference: tuple[np.ndarray, np.ndarray, np.ndarray],
                   make_problem: Callable[..., pinn.Problem], seed: int, points: int,
                   points_max: int, grow_every: int, width: int, depth: int, harmonics: int,
                   initial_weight: float, horizon_start: float, horizon_steps: int,
                   causal_epsilon: float, causal_slabs: int, initial_points: int = 0,
                   adaptive: tuple[int, float, float] | None = None, device: str = "cpu",
                   hard_initial: bool = False,
                   initial_value: Callable[[torch.Tensor], torch.Tensor] | None = None
                   ) -> tuple[pinn.Problem, torch.nn.Module, object]:
    """build() of a PDE periodic in x trained by time marching (Allen–Cahn, KdV): the error on
    the reference's (t, x, u) grid, the periodic-input MLP, `make_problem`'s problem with its
    first condition's points marching in time (pinn.Marching), and its interior points grown
    (and drawn by the residual: adaptive = (pool, k, c), pinn.ResidualAdaptive); all on
    `device`.
    `hard_initial`: u = u₀(x) + t·N(t, x) (pinn.HardConstrained; u₀ = `initial_value` of the
    (P × 1) x column), the initial condition exact and dropped from the problem."""
    error = common.txu_error(reference, device)
    first = pinn.PeriodicInput("tx", {"x": 2.0}, harmonics)
    model = common.mlp([first.features] + [width] * depth + [1], seed, first=first).to(device)
    if hard_initial:
        model = pinn.HardConstrained(model, offset=lambda p: initial_value(p[:, 1:2]),
                                     factor=lambda p: p[:, :1])
    # The causal weights are updated before every step from the residuals at the step's
    # points (common.train_lm calls problem.update_weights).
    causal = pinn.CausalWeights(causal_epsilon, causal_slabs) if causal_epsilon > 0 else None
    pde = make_problem(points, seed, initial_weight, (horizon_start, horizon_steps), causal,
                       initial_points, device)
    if hard_initial:  # the same conditions but the initial one
        # Draws are seeded by a condition's index: the initial condition is the last, so the
        # others keep theirs and draw the points they would with it.
        assert pde.conditions[-1].name == "initial"
        pde = pinn.Problem("tx", pde.conditions[:-1], seed=seed, device=device)
    common.schedule_points(pde, "pde", points, points_max, grow_every, adaptive)
    return pde, model, error


def build(seed: int, **recipe: Any) -> tuple[pinn.Problem, torch.nn.Module, object]:
    return marching_build(references.allen_cahn_grid(), problem, seed,
                          initial_value=initial_value, **recipe)


def train(seed: int = 0, verbose: bool = False, **overrides) -> common.Run:
    return common.train(sys.modules[__name__], seed, verbose, **overrides)


if __name__ == "__main__":
    common.main(sys.modules[__name__], "allen_cahn")
