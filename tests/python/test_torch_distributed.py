"""`torchrun --nproc_per_node 2` (gloo) gives the parameters of one process, identical on both
ranks, and a rank that fails makes every rank raise (torch_distributed_worker.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from torch_support import torch

WORKER = Path(__file__).resolve().with_name("torch_distributed_worker.py")


def _run(tmp_path: Path, ranks: int, mode: str = "train", device: str = "cpu") -> None:
    env = dict(os.environ, OMP_NUM_THREADS="1", LMTRAIN_TEST_DEVICE=device)
    if ranks == 1:
        command = [sys.executable, str(WORKER), str(tmp_path), mode]
    else:
        # torchrun; --standalone: a local rendezvous on a free port.
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   "--nproc_per_node", str(ranks), str(WORKER), str(tmp_path), mode]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def _load(tmp_path: Path, ranks: int, rank: int):
    params = torch.load(tmp_path / f"params-{ranks}-{rank}.pt")
    reports = json.loads((tmp_path / f"reports-{ranks}-{rank}.json").read_text())
    return params, reports


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch without distributed")
@pytest.mark.parametrize("mode", ["train", "sampled"])
def test_two_ranks_equal_one_process(tmp_path: Path, mode: str) -> None:
    # "sampled": each rank draws cross_entropy_sampled's rows for its shard under the samples'
    # rows in the whole batch, so the two ranks' steps are the one process's.
    _run(tmp_path, 1, mode)
    _run(tmp_path, 2, mode)
    one, one_reports = _load(tmp_path, 1, 0)
    rank0, reports0 = _load(tmp_path, 2, 0)
    rank1, reports1 = _load(tmp_path, 2, 1)
    assert reports0["path"] == one_reports["path"] == "torch.func jacrev"
    torch.testing.assert_close(rank0, rank1, rtol=0, atol=0)  # bit for bit
    torch.testing.assert_close(rank0, one, rtol=0, atol=1e-10)
    for a, b in zip(reports0["reports"], one_reports["reports"]):
        assert a[3] == b[3] and a[4] == b[4]  # attempts, geodesic corrections
        assert a[1] == pytest.approx(b[1], rel=1e-10)
    assert one_reports["reports"][-1][1] < one_reports["reports"][0][0]


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch without distributed")
def test_a_failing_rank_fails_every_rank(tmp_path: Path) -> None:
    _run(tmp_path, 2, "fail")
    before = _load(tmp_path, 2, 0)[0]
    _, reports0 = _load(tmp_path, 2, 0)
    _, reports1 = _load(tmp_path, 2, 1)
    assert "other rank(s) failed" in reports0["reports"][-1]
    assert reports1["reports"][-1].startswith("ValueError: x has 90 rows but y has 89")
    assert torch.isfinite(before).all()
