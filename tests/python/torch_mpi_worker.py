"""Run by test_torch_mpi.py: alone (one process, the replicated A) or under `mpirun -np R`
(lmtrain's MPI communicator; A sharded over the ranks with distributed_cholesky): trains a
2-24-24-1 tanh network in float64 for a few LM steps and saves each rank's parameters, its
reports and the step's plan."""

from __future__ import annotations

import json
import os
import sys

import torch

import lmtrain.torch as lt


def problem() -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(31)
    x = torch.rand(900, 2, generator=g, dtype=torch.float64) * 2 - 1
    y = torch.sin(3 * x[:, :1]) * torch.cos(2 * x[:, 1:]) + 0.1 * x[:, :1]
    torch.manual_seed(31)
    model = torch.nn.Sequential(torch.nn.Linear(2, 24), torch.nn.Tanh(), torch.nn.Linear(24, 24),
                                torch.nn.Tanh(), torch.nn.Linear(24, 1)).double()
    return model, x, y


def main(out_dir: str, mode: str, budget: int) -> None:
    model, x, y = problem()
    # "replicated": one process, the whole A (cholesky); "sharded": A over the ranks; "auto":
    # the library chooses under the per-rank budget.
    options: dict = {"memory_budget": budget} if budget > 0 else {}
    if mode != "auto":
        options["linear_solver"] = "cholesky" if mode == "replicated" else "distributed_cholesky"
    opt = lt.LevenbergMarquardt(model, fast_path=False, geodesic_acceleration=True, **options)
    reports, error = [], None
    try:
        for _ in range(5):
            r = opt.step(x, y)
            reports.append([r.loss, r.loss_after, r.lambda_, r.attempts, r.accepted])
    except MemoryError as e:
        error = str(e)
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    ranks = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    name = f"{mode}-{ranks}-{rank}"
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    torch.save(flat, os.path.join(out_dir, f"params-{name}.pt"))
    plan = {k: v for k, v in opt.plan.items() if isinstance(v, (str, int, float, bool))}
    with open(os.path.join(out_dir, f"reports-{name}.json"), "w") as f:
        json.dump({"reports": reports, "plan": plan, "error": error, "n": opt.n}, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 0)
