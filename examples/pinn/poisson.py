"""1-D Poisson PINN trained by lmtrain.torch: −u″ = π² sin(πx) on (0, 1), u(0) = u(1) = 0.

The exact solution is u(x) = sin(πx).  The network u_θ (1-20-20-1 tanh, float64) is trained on
two residual blocks, each with its own weight:

    interior   r_i = w_f · (−u_θ″(x_i) − π² sin(πx_i))       at N collocation points
    boundary   r_b = w_b · u_θ(x_b)                          at x_b ∈ {0, 1}

u_θ″ comes from autograd with respect to the input (create_graph=True), so the residual's
Jacobian with respect to θ contains second derivatives of the network; each residual row depends
on one point (an interior point, or one of the two boundary points built inside), so lmtrain.torch
builds it by per-point copies of θ (docs/torch.md, "residual_fn and PINNs") and solves the LM
steps with the library.  Prints the relative L2 error ‖u_θ − u‖₂/‖u‖₂ on 1 001 uniform points.

usage: python examples/pinn/poisson.py [--epochs 200] [--points 64] [--seed 0]
"""

from __future__ import annotations

import argparse
import math
import time

import torch

import lmtrain.torch as lt


def network(seed: int, width: int = 20) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(1, width), torch.nn.Tanh(),
                               torch.nn.Linear(width, width), torch.nn.Tanh(),
                               torch.nn.Linear(width, 1)).double()


def residuals(model: torch.nn.Module, x: torch.Tensor, _y: object, w_interior: float = 1.0,
              w_boundary: float = 10.0) -> torch.Tensor:
    """The interior block (−u″ − f at the collocation points x) and the boundary block."""
    x = x.detach().clone().requires_grad_(True)
    u = model(x)
    du = torch.autograd.grad(u.sum(), x, create_graph=True)[0]
    d2u = torch.autograd.grad(du.sum(), x, create_graph=True)[0]
    f = math.pi ** 2 * torch.sin(math.pi * x)
    boundary = model(torch.tensor([[0.0], [1.0]], dtype=x.dtype))
    return torch.cat([w_interior * (-d2u - f).reshape(-1), w_boundary * boundary.reshape(-1)])


class Residuals:
    """``residuals`` as lmtrain.torch's residual_fn, naming its two blocks for the step report:
    (name, first row, rows, scale) with scale 1/(w²·N), so that the library's block loss
    scale·Σ r² is the block's mean squared residual."""

    def __init__(self, points: int, w_interior: float = 1.0, w_boundary: float = 10.0) -> None:
        self.points, self.w_interior, self.w_boundary = points, w_interior, w_boundary

    def __call__(self, model: torch.nn.Module, x: torch.Tensor, y: object) -> torch.Tensor:
        return residuals(model, x, y, self.w_interior, self.w_boundary)

    def residual_blocks(self) -> list[tuple[str, int, int, float]]:
        return [("interior", 0, self.points, 1.0 / (self.w_interior ** 2 * self.points)),
                ("boundary", self.points, 2, 1.0 / (self.w_boundary ** 2 * 2))]


def relative_l2_error(model: torch.nn.Module, points: int = 1001) -> float:
    x = torch.linspace(0, 1, points, dtype=torch.float64).reshape(-1, 1)
    with torch.no_grad():
        u = model(x)
    exact = torch.sin(math.pi * x)
    return float(torch.linalg.norm(u - exact) / torch.linalg.norm(exact))


def train(epochs: int = 200, points: int = 64, seed: int = 0,
          verbose: bool = False) -> tuple[float, list[dict[str, float]], float]:
    """Trains the PINN; returns (relative L2 error, the history, seconds)."""
    model = network(seed)
    # Collocation points: the interior of a uniform grid.
    x = torch.linspace(0, 1, points + 2, dtype=torch.float64)[1:-1].reshape(-1, 1)
    optimizer = lt.LevenbergMarquardt(model, residual_fn=Residuals(points))
    start = time.perf_counter()
    history = optimizer.fit((x, None), epochs=epochs, loss_goal=1e-24, verbose=verbose)
    return relative_l2_error(model), history, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--points", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    error, history, seconds = train(args.epochs, args.points, args.seed, verbose=True)
    blocks = ", ".join(f"{k} {v:.3e}" for k, v in history[-1]["block_losses"].items())
    print(f"poisson: {len(history)} LM steps in {seconds:.2f} s, final mean squared residual "
          f"{history[-1]['loss']:.3e} (before the last step: {blocks}), relative L2 error "
          f"{error:.3e}")


if __name__ == "__main__":
    main()
