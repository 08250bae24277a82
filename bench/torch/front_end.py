"""lmtrain.torch on W1 (shared/WORKLOADS.md) beside torch-levenberg-marquardt, in the JSON-line
schema of bench/peers/torch_lm.py (whose data, network, batches and epoch loop it reuses): the
same float32 data, 1-20-1 tanh network, shuffled batches of 1 000 and 50 epochs.

  --variant native       lmtrain.torch's fast path (the library's own step on the nn.Sequential)
  --variant torch        the torch path (torch.func Jacobian slices, the library's A, g, solve)
  --damping same         multiplicative λ₀ = 1e-3, ×10 up, ×0.1 down, no geodesic acceleration:
                         torch-levenberg-marquardt's configuration in torch_lm.py
  --damping default      lmtrain's defaults (nielsen, geodesic acceleration)

usage: bench/peers/.venv/bin/python bench/torch/front_end.py [--variant native|torch]
           [--damping same|default] [--epochs 50] [--seed 0]
       (with lmtrain installed in that environment, or PYTHONPATH naming an install of it)
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "peers"))
import torch_lm  # noqa: E402  (bench/peers/torch_lm.py)

import lmtrain.torch as lt  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--variant", choices=["native", "torch"], default="torch")
    p.add_argument("--damping", choices=["same", "default"], default="same")
    p.add_argument("--epochs", type=int, default=50)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    args = p.parse_args()
    args.workload = "W1"
    torch.manual_seed(args.seed)
    x, y, xt, yt = torch_lm.sinc_data(20000, torch.float32)
    model = torch_lm.mlp([1, 20, 1])
    options = dict(damping="multiplicative", geodesic_acceleration=False) \
        if args.damping == "same" else {}
    opt = lt.LevenbergMarquardt(model, fast_path=args.variant == "native", **options)

    def step(xb, yb):
        r = opt.step(xb, yb)
        return r.loss, r.termination == "lambda_above_max", r.lambda_, r.attempts
    step.damping = lambda: opt.lambda_

    def mse(xs, ys):
        with torch.no_grad():
            return float(torch.mean((model(xs) - ys) ** 2))

    torch_lm.train_epochs(args, f"lmtrain.torch-{args.variant}", f"sinc-61-{args.damping}",
                          model, step, mse, x, y, xt, yt, 1000, args.epochs, "1-20-1 tanh",
                          extra={"path": opt.path, "damping": args.damping})


if __name__ == "__main__":
    main()
