"""What the lmtrain.torch tests share: torch itself (skipped without it, unless
LMTRAIN_REQUIRE_TORCH=1 makes a missing torch an error, as CI's torch stage does) and reference
Jacobians from torch.autograd.functional.jacobian."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

if os.environ.get("LMTRAIN_REQUIRE_TORCH") == "1":
    import torch  # noqa: F401  (an ImportError fails the run)
else:
    torch = pytest.importorskip("torch", reason="lmtrain.torch needs torch "
                                "(bench/peers/install.sh installs it)")

import torch  # noqa: E402,F811

import lmtrain.torch as lt  # noqa: E402


def flat_parameters(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def reference_jacobian(model: torch.nn.Module, residuals) -> torch.Tensor:
    """J (m × n) of residuals(model) → r (m,) with respect to the flat parameters, by
    torch.autograd.functional.jacobian on a function of the flat vector."""
    names = [name for name, _ in model.named_parameters()]
    shapes = [p.shape for p in model.parameters()]
    theta = flat_parameters(model).clone()

    def of_flat(flat: torch.Tensor) -> torch.Tensor:
        params, offset = {}, 0
        for name, shape in zip(names, shapes):
            k = int(torch.tensor(shape).prod()) if len(shape) else 1
            params[name] = flat[offset:offset + k].reshape(shape)
            offset += k
        return residuals(lambda *x: torch.func.functional_call(model, params, x))

    return torch.autograd.functional.jacobian(of_flat, theta)


__all__ = ["flat_parameters", "load_distributed_worker", "lt", "reference_jacobian",
           "run_distributed_worker", "torch"]


# torch_distributed_worker.py, alone (1 rank) or under torchrun (test_torch_distributed.py, and
# test_torch_cuda.py with device="cuda"): it saves params-R-r.pt and reports-R-r.json.
WORKER = Path(__file__).resolve().with_name("torch_distributed_worker.py")


def run_distributed_worker(tmp_path: Path, ranks: int, mode: str = "train",
                           device: str = "cpu") -> None:
    env = dict(os.environ, OMP_NUM_THREADS="1", LMTRAIN_TEST_DEVICE=device)
    if ranks == 1:
        command = [sys.executable, str(WORKER), str(tmp_path), mode]
    else:
        # torchrun; --standalone: a local rendezvous on a free port.
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   "--nproc_per_node", str(ranks), str(WORKER), str(tmp_path), mode]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def load_distributed_worker(tmp_path: Path, ranks: int, rank: int):
    params = torch.load(tmp_path / f"params-{ranks}-{rank}.pt")
    reports = json.loads((tmp_path / f"reports-{ranks}-{rank}.json").read_text())
    return params, reports
