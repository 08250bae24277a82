"""The PINN path on CUDA tensors (issue 39), for scripts/gpu-run.sh (stage pinn): Burgers as
examples/pinn/burgers.py builds it (2-20-20-20-1 tanh, 921 parameters, float64, fresh Sobol
points every step at a fixed count) trained for a fixed number of LM steps on --device and on
the CPU from the same seed, by each Jacobian route of lmtrain.torch.pinn.Problem: "taylor" (the
forward Taylor propagation through the MLP) and "jacrev" (vmap over the points of jacrev in θ,
input derivatives by nested jvp).  Per route it checks

  * J at the initial parameters, device against CPU: equal to 1e-10 of its largest entry
    (float64; cuBLAS/CUDA's libm and the CPU round differently, ~1e-16 per operation);
  * the relative L2 error against the Cole–Hopf reference after the steps: the device's within a
    factor 3 of the CPU's (an LM trajectory amplifies rounding, so only a bound on the outcome is
    meaningful; after 100 steps of one route on the CPU the error is ≈ 1e-2, test_torch_pinn_
    examples.py's Burgers run) and below a tenth of the first step's (it trained).

And J on the Taylor route, device against CPU, to the same 1e-10, of three variants of the pde
residual on the same points: the inverse problem (ν unknown, pinn.WithCoefficients; ν's column
non-zero), a mixed third derivative (BBM's u_txx), a pure fourth one (Kuramoto–Sivashinsky's
u_xxxx) and mixed fourth ones (the biharmonic in (t, x)) — added 2026-11-28, run on the CPU only
so far.

Prints one line per route (errors, ms per step on each device) and exits 1 when a check fails.
``--device cpu`` runs the logic on the CPU against itself (how it was checked without a GPU).

usage: PYTHONPATH=<lmtrain package> python scripts/gpu-python/pinn_cuda.py [--device cuda]
           [--steps 100] [--points 2000]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
import warnings
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "pinn"))

import burgers  # noqa: E402
import common  # noqa: E402
from lmtrain.torch import pinn  # noqa: E402


def run(device: str, route: str, steps: int, points: int) -> dict:
    # Uniform draws (adaptive=None): the residual-adaptive draw of the recipe chooses its points
    # by the model's residual, which rounding makes differ between the devices.
    # The 921-parameter network (2-20-20-20-1 on (t, x)) this check was written and bounded for.
    recipe = dict(points=points, points_max=points, edge_points=400, adaptive=None,
                  width=20, harmonics=0, device=device)
    build_args, _ = common.split_recipe(burgers, recipe)
    problem, model, error = burgers.build(0, **build_args)
    problem.jacobian = route
    params = {k: v.detach() for k, v in model.named_parameters()}
    rows = problem(model, problem.points).numel()
    jacobian = problem.jacobian_slice(model, params, problem.points, None, 0, rows).cpu()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pinn.InterpolationWarning)
        result = common.train_lm(problem, model, error, budget=1e9, steps=steps,
                                 resample_every=1)
    return {"jacobian": jacobian, "error": result.error, "first": result.history[0][3],
            "ms": result.ms_per_step, "path": problem.jacobian_path}


def variant_jacobian(variant: str, device: str, points: int) -> torch.Tensor:
    """J at the initial parameters, by the Taylor route, on `device`, of Burgers' problem with
    its pde residual replaced: "inverse" (ν unknown, pinn.WithCoefficients), "u_txx" (BBM's
    form), "u_xxxx" (Kuramoto–Sivashinsky's) or "biharmonic" (Δ²u in (t, x): mixed fourth)."""
    recipe = dict(points=points, points_max=points, edge_points=400, adaptive=None,
                  width=20, harmonics=0, device=device)
    build_args, _ = common.split_recipe(burgers, recipe)
    problem, network, _ = burgers.build(0, **build_args)
    model = pinn.WithCoefficients(network, nu=burgers.NU) if variant == "inverse" else network
    residual = {
        "inverse": lambda u, u_t, u_x, u_xx: u_t + u * u_x - model.nu * u_xx,
        "u_txx": lambda u, u_t, u_x, u_txx: u_t + u_x + u * u_x - u_txx,
        "u_xxxx": lambda u, u_t, u_x, u_xx, u_xxxx: u_t + u * u_x + u_xx + u_xxxx,
        "biharmonic": lambda u_tttt, u_ttxx, u_xxxx: u_tttt + 2 * u_ttxx + u_xxxx}[variant]
    pde, *others = problem.conditions
    inverse = pinn.Problem("tx", [dataclasses.replace(pde, residual=residual), *others],
                           device=device, jacobian="taylor")
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = problem.points
    rows = inverse(model, x).numel()
    return inverse.jacobian_slice(model, params, x, None, 0, rows).cpu()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--points", type=int, default=2000)
    args = parser.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("pinn_cuda.py: no CUDA device visible to torch")
        return 1
    ok = True
    for route in ("taylor", "jacrev"):
        t0 = time.perf_counter()
        on_device = run(args.device, route, args.steps, args.points)
        on_cpu = run("cpu", route, args.steps, args.points)
        j, reference = on_device["jacobian"], on_cpu["jacobian"]
        j_gap = float((j - reference).abs().max() / reference.abs().max())
        ratio = on_device["error"] / on_cpu["error"]
        good = (j_gap <= 1e-10 and 1 / 3 <= ratio <= 3 and
                on_device["error"] < 0.1 * on_device["first"])
        ok = ok and good
        print(f"{route}: {'PASS' if good else 'FAIL'}  J {args.device} vs cpu {j_gap:.1e} "
              f"(≤ 1e-10); relative L2 after {args.steps} steps: {args.device} "
              f"{on_device['error']:.3e}, cpu {on_cpu['error']:.3e} (ratio {ratio:.3f}, within "
              f"3×; first step {on_device['first']:.2e}); ms/step {args.device} "
              f"{on_device['ms']:.0f}, cpu {on_cpu['ms']:.0f}; path {on_device['path']}; "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
    for variant in ("inverse", "u_txx", "u_xxxx", "biharmonic"):
        j = variant_jacobian(variant, args.device, args.points)
        reference = variant_jacobian(variant, "cpu", args.points)
        j_gap = float((j - reference).abs().max() / reference.abs().max())
        good = j_gap <= 1e-10 and float(reference[:, 0].abs().max()) > 0
        ok = ok and good
        print(f"{variant} (taylor): {'PASS' if good else 'FAIL'}  J {args.device} vs cpu "
              f"{j_gap:.1e} (≤ 1e-10); first column up to "
              f"{float(reference[:, 0].abs().max()):.2e}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
