"""W1 (sinc(10x), 1-20-1 tanh) trained by lmtrain.torch on the ranks of torchrun, with a
checkpoint after every epoch and a resume from it on restart: the job of
deploy/kubernetes/pytorchjob.yaml.

    torchrun --nproc_per_node 2 deploy/torch/train_sinc.py --data sinc.csv --run-dir RUN_DIR

Each rank reads the whole data set and takes, in every step, its contiguous share of the batch
(LevenbergMarquardt(shard=True)); one all-reduce per step sums A and g, so all ranks hold the same
parameters.  The epoch's order is a permutation drawn from (seed, epoch) alone, so a resumed run
visits the batches the uninterrupted one visits.  RUN_DIR/checkpoint.pt (written by rank 0,
atomically: temporary file, fsync, rename) holds the parameters, the optimizer's state_dict (λ and
the damping schedule's state) and the epochs done; every rank loads it at start when it exists,
so a restarted job (torchrun --max-restarts, or a PyTorchJob's restarted pods) ends with the
parameters of an uninterrupted run.  RUN_DIR must be shared by the ranks (one volume).  At the end
rank 0 writes RUN_DIR/model.pt (the state_dict) and RUN_DIR/result.json (losses per epoch).

--device cuda puts each rank on the GPU of its node-local rank (cuda:LOCAL_RANK, modulo the GPUs
it sees); the ranks then sum A and g through NCCL, or through gloo where ranks share a GPU.  The
checkpoint is loaded onto the rank's device (map_location).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

import lmtrain.torch as lt


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, type=Path, help="CSV with columns x,y "
                   "(examples/sinc/make_data.py)")
    p.add_argument("--run-dir", required=True, type=Path, help="shared directory of the "
                   "checkpoint and the results")
    p.add_argument("--epochs", type=int, default=50)
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="cpu, or cuda: each rank on cuda:(LOCAL_RANK mod the visible devices), "
                   "the ranks summing A and g through NCCL when each has a GPU of its own, "
                   "else through gloo")
    return p.parse_args(argv)


def rank_device(choice: str) -> torch.device:
    """This rank's device: the CPU, or the GPU of its node-local rank."""
    if choice == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise SystemExit("train_sinc.py: --device cuda, but this process sees no CUDA device "
                         "(torch.cuda.is_available() is False): give the pod its GPUs "
                         "(nvidia.com/gpu = nprocPerNode in deploy/kubernetes/pytorchjob.yaml) "
                         "and an image whose torch is a CUDA build, or run with --device cpu")
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))
                          % torch.cuda.device_count())
    torch.cuda.set_device(device)
    return device


def process_group_backend(device: torch.device) -> str:
    """NCCL when every rank of this node has a GPU of its own (A and g summed on the devices),
    gloo otherwise (CPU tensors, or ranks sharing a GPU, which NCCL refuses)."""
    ranks_here = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    if device.type == "cuda" and torch.cuda.device_count() >= ranks_here:
        return "nccl"
    return "gloo"


def read_data(path: Path) -> tuple[torch.Tensor, torch.Tensor]:
    try:
        table = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    except (OSError, ValueError) as error:
        raise SystemExit(f"train_sinc.py: cannot read {path} as a CSV of x,y: {error}") from None
    if table.shape[1] != 2 or table.shape[0] == 0:
        raise SystemExit(f"train_sinc.py: {path}: expected rows of two columns x,y, found "
                         f"{table.shape[0]} rows of {table.shape[1]}")
    x = torch.from_numpy(table[:, :1].astype(np.float32))
    y = torch.from_numpy(table[:, 1:].astype(np.float32))
    return x, y


def epoch_order(seed: int, epoch: int, rows: int) -> torch.Tensor:
    """The same permutation on every rank and in every attempt."""
    return torch.randperm(rows, generator=torch.Generator().manual_seed(seed * 1_000_003 + epoch))


def save_atomically(obj: object, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    device = rank_device(args.device)
    ranks = int(os.environ.get("WORLD_SIZE", "1"))
    if ranks > 1:
        # The store under a prefix per torchrun attempt: after a restart, torch 2.15's elastic
        # agent serves the same store to the new ranks, and the process group's keys of the
        # attempt before (the dead ranks' addresses) left the new ranks waiting for each other
        # or connecting to a dead port.  Each attempt now meets only its own keys.
        store, rank, world = next(dist.rendezvous("env://"))
        attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        dist.init_process_group(process_group_backend(device),
                                store=dist.PrefixStore(f"lmtrain/attempt_{attempt}", store),
                                rank=rank, world_size=world)
    rank = dist.get_rank() if ranks > 1 else 0
    x, y = (t.to(device) for t in read_data(args.data))

    torch.manual_seed(args.seed)
    model = torch.nn.Sequential(torch.nn.Linear(1, 20), torch.nn.Tanh(),
                                torch.nn.Linear(20, 1)).to(device)
    opt = lt.LevenbergMarquardt(model, loss="mse")
    checkpoint = args.run_dir / "checkpoint.pt"
    start, losses = 0, []
    if checkpoint.exists():
        state = torch.load(checkpoint, weights_only=True, map_location=device)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        start, losses = int(state["epochs_done"]), list(state["losses"])
        if rank == 0:
            print(f"train_sinc.py: resuming from {checkpoint} after epoch {start}", flush=True)
    elif rank == 0:
        args.run_dir.mkdir(parents=True, exist_ok=True)

    rows = x.shape[0]
    for epoch in range(start + 1, args.epochs + 1):
        order = epoch_order(args.seed, epoch, rows).to(device)
        for first in range(0, rows, args.batch_size):
            batch = order[first:first + args.batch_size]
            opt.step(x[batch], y[batch])
        with torch.no_grad():
            loss = float(torch.mean((model(x) - y) ** 2))
        losses.append(loss)
        if rank == 0:
            save_atomically({"model": model.state_dict(), "optimizer": opt.state_dict(),
                             "epochs_done": epoch, "losses": losses}, checkpoint)
            print(f"epoch {epoch}: mse {loss:.6e}, lambda {opt.lambda_:.3e}", flush=True)
        if ranks > 1:
            dist.barrier()  # the checkpoint of this epoch exists before any rank goes on
    if rank == 0:
        save_atomically(model.state_dict(), args.run_dir / "model.pt")
        (args.run_dir / "result.json").write_text(json.dumps(
            {"ranks": ranks, "epochs": len(losses), "losses": losses, "path": opt.path}))
    # The optimizer before the process group (docs/torch.md, "Several ranks").
    del opt
    gc.collect()
    if ranks > 1:
        dist.barrier()
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
