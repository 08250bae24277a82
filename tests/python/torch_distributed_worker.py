"""Run by test_torch_distributed.py under `torchrun --nproc_per_node 2` (gloo), and once without
torchrun: trains a two-input model for a few LM steps (mse, or cross_entropy_sampled in mode
"sampled") and saves the parameters and reports.  With LMTRAIN_TEST_DEVICE=cuda
(test_torch_cuda.py) the model and data live on cuda:(rank mod devices), and the ranks talk
through NCCL when every rank has a device of its own, else through gloo on CUDA tensors."""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(__file__))
from spread import one_ulp  # noqa: E402
from test_torch_jacobian import _data, _model  # noqa: E402

import lmtrain.torch as lt  # noqa: E402


def main(out_dir: str, mode: str) -> None:
    ranks = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    device = torch.device("cpu")
    if os.environ.get("LMTRAIN_TEST_DEVICE") == "cuda":
        device = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    if ranks > 1:
        own_devices = device.type == "cuda" and torch.cuda.device_count() >= ranks
        dist.init_process_group("nccl" if own_devices else "gloo")
    model = _model(seed=21, outputs=2).to(device)
    # "sampled": cross_entropy_sampled, whose draws are keyed by each sample's row in the whole
    # batch, so that the ranks' shards draw what one process draws.
    loss = "cross_entropy_sampled" if mode == "sampled" else "mse"
    x, y = _data(90, 2, "cross_entropy" if mode == "sampled" else "mse", seed=22)
    x, y = tuple(t.to(device) for t in x), y.to(device)  # x: the model's two inputs
    if ranks > 1:  # scripts/measure-spread.sh: the ranks' data one ulp off the one process's
        x, y = tuple(one_ulp(t) for t in x), one_ulp(y)
    if mode == "fail" and rank == 1:  # this rank's batch is wrong: every rank must raise
        y = y[:-1]
    opt = lt.LevenbergMarquardt(model, loss=loss, slice_size=16)
    reports = []
    try:
        for _ in range(5):
            r = opt.step(x, y)
            reports.append([r.loss, r.loss_after, r.lambda_, r.attempts, r.geodesic_applied])
    except (RuntimeError, ValueError) as error:
        reports.append(f"{type(error).__name__}: {error}")
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).cpu()
    torch.save(flat, os.path.join(out_dir, f"params-{ranks}-{rank}.pt"))
    with open(os.path.join(out_dir, f"reports-{ranks}-{rank}.json"), "w") as f:
        json.dump({"path": opt.path, "reports": reports}, f)
    if ranks > 1:
        # Both ranks have written their results.  The process teardown (destroy_process_group or
        # the interpreter's exit) aborts now and then with "terminate called without an active
        # exception" after both ranks wrote correct outputs (seen in both tests, a few runs in
        # twenty on 2 cores; not understood yet, see the issue-17 note), so the worker leaves
        # without it once both ranks are here.
        dist.barrier()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "train")
