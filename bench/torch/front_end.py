"""lmtrain.torch on W1 and W2 (shared/WORKLOADS.md) beside torch-levenberg-marquardt, in the
JSON-line schema of bench/peers/torch_lm.py (whose data, network, batches and epoch loop it
reuses): W1's float32 data, 1-20-1 tanh network, shuffled batches of 1 000 and 50 epochs; W2's
100 000 points, 1-256-1 tanh, batches of 10 000 and 10 epochs.  The result line also carries
`phases`: the library's seconds per phase of the step, summed over the steps (StepReport's
phase_seconds), so that the torch path's Jacobian can be read beside the library's SYRK.

  --variant native       lmtrain.torch's fast path (the library's own step on the nn.Sequential)
  --variant torch        the torch path (torch.func Jacobian slices, the library's A, g, solve)
  --damping same         multiplicative λ₀ = 1e-3, ×10 up, ×0.1 down, no geodesic acceleration:
                         torch-levenberg-marquardt's configuration in torch_lm.py
  --damping default      lmtrain's defaults (nielsen, geodesic acceleration)

usage: bench/peers/.venv/bin/python bench/torch/front_end.py [W1|W2] [--variant native|torch]
           [--damping same|default] [--epochs N] [--seed 0] [--device cpu|cuda]
       (with lmtrain installed in that environment, or PYTHONPATH naming an install of it)
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "peers"))
import torch_lm  # noqa: E402  (bench/peers/torch_lm.py)

import lmtrain.torch as lt  # noqa: E402


# StepReport.phase_seconds' keys → the Summary's phase names (core/timer.h phase_name), which
# bench/report.py's phase table uses for lmtrain_workloads' rows.
PHASE_NAMES = {"forward": "forward", "jacobian": "jacobian",
               "normal_equations": "normal equations (syrk)",
               "factorization": "factorization + solve", "trial_evaluation": "trial evaluation",
               "geodesic": "geodesic acceleration", "validation": "epoch evaluation",
               "communication": "communication", "records": "checkpoints and records",
               "other": "other"}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("workload", nargs="?", choices=["W1", "W2"], default="W1")
    p.add_argument("--variant", choices=["native", "torch"], default="torch")
    p.add_argument("--damping", choices=["same", "default"], default="same")
    p.add_argument("--epochs", type=int, default=0, help="0: the workload's (W1 50, W2 10)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    args = p.parse_args()
    w1 = args.workload == "W1"
    n, hidden, batch = (20000, 20, 1000) if w1 else (100000, 256, 10000)
    epochs = args.epochs if args.epochs > 0 else (50 if w1 else 10)
    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    x, y, xt, yt = (t.to(device) for t in torch_lm.sinc_data(n, torch.float32))
    model = torch_lm.mlp([1, hidden, 1]).to(device)
    options = dict(damping="multiplicative", geodesic_acceleration=False) \
        if args.damping == "same" else {}
    opt = lt.LevenbergMarquardt(model, fast_path=args.variant == "native", **options)
    phases: dict[str, float] = {}

    def step(xb, yb):
        r = opt.step(xb, yb)
        for name, seconds in r.phase_seconds.items():
            name = PHASE_NAMES.get(name, name)
            phases[name] = phases.get(name, 0.0) + seconds
        return r.loss, r.termination == "lambda_above_max", r.lambda_, r.attempts
    step.damping = lambda: opt.lambda_

    def mse(xs, ys):
        with torch.no_grad():
            return float(torch.mean((model(xs) - ys) ** 2))

    variant = ("sinc-61" if w1 else "sinc-769") + ("" if args.damping == "same" else "-default")
    torch_lm.train_epochs(args, f"lmtrain.torch-{args.variant}", variant, model, step, mse,
                          x, y, xt, yt, batch, epochs, f"1-{hidden}-1 tanh",
                          extra={"path": opt.path, "damping": args.damping, "phases": phases})


if __name__ == "__main__":
    main()
