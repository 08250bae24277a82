"""What LevenbergMarquardt.fit(problem.draws(model)) costs against the hand-written loop it
replaces (docs/pinn.md, "Training with fit"): Burgers on fresh uniform draws (4 000 interior,
200 initial, 200 boundary points), 2-20-20-20-1 tanh (921 parameters), float64, the same steps
both ways (checked: the same parameters to the bit), ms per LM step of each, `--rounds` rounds
(the first includes the process's warm-up).

usage: OMP_NUM_THREADS=1 build/venv-torch/bin/python bench/pinn_fit_cost.py [--steps 40]
           [--rounds 2]
"""

from __future__ import annotations

import argparse
import math
import time

import torch

import lmtrain.torch as lt
from lmtrain.torch import pinn

NU = 0.01 / math.pi


def make() -> tuple[pinn.Problem, torch.nn.Module]:
    problem = pinn.Problem("tx", [
        pinn.Condition("pde", lambda u, u_t, u_x, u_xx: u_t + u * u_x - NU * u_xx,
                       pinn.Uniform(4000, t=(0, 1), x=(-1, 1), method="sobol")),
        pinn.Condition("initial", lambda x, u: u + torch.sin(math.pi * x),
                       pinn.Uniform(200, t=0, x=(-1, 1))),
        pinn.Condition("boundary", lambda u: u, pinn.Uniform(200, t=(0, 1), x=[-1, 1]))])
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(2, 20), torch.nn.Tanh(), torch.nn.Linear(20, 20),
                                torch.nn.Tanh(), torch.nn.Linear(20, 20), torch.nn.Tanh(),
                                torch.nn.Linear(20, 1)).double()
    return problem, model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    for round_ in range(args.rounds):
        problem, model = make()
        optimizer = lt.LevenbergMarquardt(model, residual_fn=problem)
        start = time.perf_counter()
        for step in range(args.steps):
            if step > 0:
                problem.resample(step, model)
            optimizer.step(problem.points)
        loop = (time.perf_counter() - start) / args.steps
        drawn, fitted = make()
        start = time.perf_counter()
        lt.LevenbergMarquardt(fitted, residual_fn=drawn).fit(drawn.draws(fitted),
                                                             epochs=args.steps)
        fit = (time.perf_counter() - start) / args.steps
        same = all(torch.equal(a, b) for a, b in zip(model.parameters(), fitted.parameters()))
        print(f"round {round_ + 1}: loop {loop * 1e3:.1f} ms per step, fit(draws) "
              f"{fit * 1e3:.1f} ms per step, the same parameters: {same}")


if __name__ == "__main__":
    main()
