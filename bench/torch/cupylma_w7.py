"""W7 in cuPyLMA's call shape (shared/WORKLOADS.md: cuPyLMA's examples/curve_fitting — a
1-256-1 tanh network in a Module of its own, sinc(10x) on 100 000 points, one full-batch
``lma.step`` per epoch, float32 model) on lmtrain.torch.LMA with its two schedules, beside
torch-levenberg-marquardt with its default damping (λ₀ = 1e-3 per sample, ×10/×0.1, cholesky),
all from the same initial weights, in one process.

  cupylma   LMA(model, devices, MSELoss(), residual_fn) as cuPyLMA's script calls it: cuPyLMA's
            algorithm (λ per sample, ×10/×0.1, its stop), the system in float32 (dtype float32,
            cuPyLMA's default) or as lmtrain's auto chooses (--dtype auto)
  lmtrain   the same call with schedule="lmtrain": Nielsen damping with geodesic acceleration
  torch-lm  torch_levenberg_marquardt.training.LevenbergMarquardtModule, solve_method cholesky

Prints one JSON line per run: the loss after each step (cuPyLMA's returned loss, the MSE) and
the median seconds per step after the first.

usage: bench/peers/.venv/bin/python bench/torch/cupylma_w7.py [--steps 20] [--runs cupylma,lmtrain,torch-lm]
                                                           [--devices 1] [--dtype float32|auto]
(with lmtrain importable: PYTHONPATH=build/venv-torch's site-packages, or the venv of
scripts/test-torch.sh: build/venv-torch/bin/python bench/torch/cupylma_w7.py …)
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch


class DNN(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear_tanh_stack = torch.nn.Sequential(
            torch.nn.Linear(1, 256), torch.nn.Tanh(), torch.nn.Linear(256, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_tanh_stack(x)


def data() -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.linspace(-1, 1, 100000, dtype=torch.float32).unsqueeze(1)
    return x, torch.sinc(10 * x)


def run_lma(schedule: str, steps: int, devices: int, dtype: str) -> dict:
    import lmtrain.torch as cuPyLMA

    torch.manual_seed(0)
    model = DNN()
    x, y = data()
    lma = cuPyLMA.LMA(model, ["cpu"] * devices, torch.nn.MSELoss(),
                      lambda a, b: torch.flatten(a - b), schedule=schedule,
                      dtype=torch.float32 if dtype == "float32" else None)
    losses, seconds = [], []
    for _ in range(steps):
        start = time.perf_counter()
        loss, _ = lma.step(x, y)
        seconds.append(time.perf_counter() - start)
        losses.append(loss)
    plan = lma.optimizer.plan
    return {"run": f"lmtrain.torch LMA schedule={schedule}", "devices": devices, "dtype": dtype,
            "losses": losses, "median_step_s": statistics.median(seconds[1:] or seconds),
            "linear_solver": plan.get("linear_solver"), "path": lma.optimizer.path}


def run_torch_lm(steps: int) -> dict:
    from torch_levenberg_marquardt import loss as tloss
    from torch_levenberg_marquardt import training

    torch.manual_seed(0)
    model = DNN()
    x, y = data()
    lm = training.LevenbergMarquardtModule(model=model, loss_fn=tloss.MSELoss(), learning_rate=1.0,
                                           attempts_per_step=10, solve_method="cholesky")
    losses, seconds = [], []
    for _ in range(steps):
        start = time.perf_counter()
        lm.training_step(x, y)
        seconds.append(time.perf_counter() - start)
        with torch.no_grad():
            losses.append(float(torch.mean((model(x) - y) ** 2)))
    return {"run": "torch-levenberg-marquardt cholesky", "losses": losses,
            "median_step_s": statistics.median(seconds[1:] or seconds)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--runs", default="cupylma,lmtrain,torch-lm")
    p.add_argument("--devices", type=int, default=1)
    p.add_argument("--dtype", choices=["float32", "auto"], default="float32")
    a = p.parse_args()
    for name in a.runs.split(","):
        result = run_torch_lm(a.steps) if name == "torch-lm" else run_lma(
            name, a.steps, a.devices, a.dtype)
        result["final_loss"] = result["losses"][-1]
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
