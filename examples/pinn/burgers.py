"""Viscous Burgers PINN trained by lmtrain.torch's Levenberg–Marquardt.

    u_t + u u_x = ν u_xx,  x ∈ [−1, 1], t ∈ [0, 1],  ν = 0.01/π,
    u(0, x) = −sin πx,  u(t, ±1) = 0.

The residuals are written pointwise (lmtrain.torch.pinn), so lmtrain builds J by forward
Taylor propagation through the MLP (or vmap of jacrev in θ).  Prints the relative L2 error
against the Cole–Hopf reference (references.py) on a 101 × 256 grid of [0, 1] × [−1, 1].

usage: python examples/pinn/burgers.py [--seed 0] [--budget 900] [--points 4000] …
       (--set KEY=VALUE for the other keys of RECIPE)
"""

from __future__ import annotations

import math
import sys

import torch

import common
import references
from lmtrain.torch import pinn

NU = references.BURGERS_NU

# The recipe (docs/pinn.md): a fresh scrambled-Sobol draw of the points at every LM step, and
# more of them as the fit gets finer: 2 000 interior points doubled every 100 steps up to
# 16 000 (m/n ≈ 2 → 17 for the 921 parameters it was found with, 0.9 → 7 for 2 251).  LM fits
# each draw almost exactly, so the draw's sampling error is the floor of the fit: a fixed set of
# m/n ≈ 5 is interpolated within a few steps (held-out residual 200× the training one), and a
# fixed count per draw levels off (≈ 2e-4 with 4 000 points, ≈ 1e-5 with 8 000, after 600 s).
# adaptive = (pool, k, c): the interior points drawn where the residual is large
# (pinn.ResidualAdaptive: count of pool × count Sobol candidates, p ∝ |F|^k / mean + c); the
# recipe takes (4, 1, 1) since 2026-11-27: after 900 s, 3 seeds, median 4.59e-7 against 9.21e-7
# for uniform draws, every seed below every seed of those (bench/results/…-PINN-issue39-w, -z1,
# -z2 against -l), for 10 % more time per step.  None: uniform Sobol draws (the recipe before).
# harmonics: 0 feeds the network (t, x); k ≥ 1 the periodic map (t, cos jπx, sin jπx, j = 1 … k)
# of Allen–Cahn (pinn.PeriodicInput).  The recipe's network since 2026-11-27 is the vRBA code's
# for its 8.25e-9 (3 × 30 tanh after five harmonics, 2 251 parameters; u(t, ±1) = 0 stays a
# condition, periodicity alone gives only u(t, −1) = u(t, 1)): after 900 s, 3 seeds, median
# 5.67e-8 against 4.59e-7 for 2-20-20-20-1 on (t, x) (921 parameters; width=20, harmonics=0),
# every seed below every seed of it, at 1.64 s per step against 0.67 (bench/results/…-PINN-
# issue39-bu-h5w30*).
# polish = (fraction, factor): the last tenth of the budget on one held uniform draw of 4 × the
# counts (pinn.Problem.hold; the examples' loop key): LM converges on one objective there instead
# of fitting each fresh draw, whose sampling noise set the error near the end.  The hold's gain
# comes in its first steps and it creeps after, so where it ends is set by the iterate it starts
# from: a late start, after more fresh draws, ends lower.  The last third held (2026-11-28) gave,
# after 900 s, 3 seeds, 4.17e-8, 5.11e-8, 5.22e-8 against 5.22e-8, 5.68e-8, 1.29e-7 without a
# hold (bench/results/…-PINN-issue39-bu-polish against …-bu-h5w30*); the last tenth, the recipe
# since 2026-11-28, 3.55e-8, 3.97e-8, 3.96e-8 after 900 s (…-bu-polish01) and 8.81e-9, 9.07e-9,
# 1.001e-8 after 2 h against 1.06e-8, 1.16e-8 for the last third (…-bu2h-p01; docs/pinn.md, "A
# last phase on held points"), seed 0 end to end 9.40e-9 (…-bu2h-e2e-s0); seeds 1 and 2 end to
# end 1.18e-8, 1.33e-8 with a third fewer steps on a busier core (…-bu2h-e2e-s1, -s2).
# device: where the network, the points and the error's grid live ("cuda": scripts/gpu-run.sh's
# pinn stage).
RECIPE = dict(points=2000, points_max=16000, grow_every=100, edge_points=400, method="sobol",
              width=30, depth=3, harmonics=5, weights=(1.0, 1.0), adaptive=(4, 1.0, 1.0),
              device="cpu", budget=900.0, resample_every=1, options={}, polish=(0.1, 4))


def problem(points: int, seed: int, edge_points: int, weights: tuple[float, float],
            method: str, device: str = "cpu") -> pinn.Problem:
    return pinn.Problem("tx", [
        pinn.Condition("pde", lambda u, u_t, u_x, u_xx: u_t + u * u_x - NU * u_xx,
                       pinn.Uniform(points, t=(0, 1), x=(-1, 1), method=method)),
        pinn.Condition("initial", lambda x, u: u + torch.sin(math.pi * x),
                       pinn.Uniform(edge_points // 2, t=0, x=(-1, 1), method=method),
                       weight=weights[0]),
        pinn.Condition("boundary", lambda u: u,
                       pinn.Uniform(edge_points // 2, t=(0, 1), x=[-1, 1], method=method),
                       weight=weights[1]),
    ], seed=seed, device=device)


def build(seed: int, points: int, points_max: int, grow_every: int, edge_points: int,
          method: str, width: int, depth: int, weights: tuple[float, float],
          adaptive: tuple[int, float, float] | None = None, harmonics: int = 0,
          device: str = "cpu") -> tuple[pinn.Problem, torch.nn.Module, object]:
    error = common.txu_error(references.burgers_grid(), device)
    first = pinn.PeriodicInput("tx", {"x": 2.0}, harmonics) if harmonics > 0 else None
    inputs = first.features if first is not None else 2
    model = common.mlp([inputs] + [width] * depth + [1], seed, first=first).to(device)
    pde = problem(points, seed, edge_points, weights, method, device)
    common.schedule_points(pde, "pde", points, points_max, grow_every, adaptive)
    return pde, model, error


def train(seed: int = 0, verbose: bool = False, **overrides) -> common.Run:
    return common.train(sys.modules[__name__], seed, verbose, **overrides)


if __name__ == "__main__":
    common.main(sys.modules[__name__], "burgers")
