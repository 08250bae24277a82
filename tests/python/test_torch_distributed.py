"""`torchrun --nproc_per_node 2` (gloo) gives the parameters of one process, identical on both
ranks, and a rank that fails makes every rank raise (torch_distributed_worker.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from spread import within
from torch_support import load_distributed_worker, run_distributed_worker, torch


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch without distributed")
@pytest.mark.parametrize("mode", ["train", "sampled"])
def test_two_ranks_equal_one_process(tmp_path: Path, mode: str) -> None:
    # "sampled": each rank draws cross_entropy_sampled's rows for its shard under the samples'
    # rows in the whole batch, so the two ranks' steps are the one process's.
    run_distributed_worker(tmp_path, 1, mode)
    run_distributed_worker(tmp_path, 2, mode)
    one, one_reports = load_distributed_worker(tmp_path, 1, 0)
    rank0, reports0 = load_distributed_worker(tmp_path, 2, 0)
    rank1, reports1 = load_distributed_worker(tmp_path, 2, 1)
    assert reports0["path"] == one_reports["path"] == "torch.func jacrev"
    torch.testing.assert_close(rank0, rank1, rtol=0, atol=0)  # bit for bit
    # The ranks sum A and g in another order than one process: float64 rounding, amplified by
    # 5 steps.  Measured (scripts/measure-spread.sh: kernel paths, the ranks' data one ulp off):
    # parameters ≤ 7.2e-13, losses ≤ 6.3e-14 relative; bounds ≥ 1 000 times that.
    within("parameters after 5 steps", rank0, one, 1e-9)
    for k, (a, b) in enumerate(zip(reports0["reports"], one_reports["reports"], strict=True)):
        assert a[3] == b[3] and a[4] == b[4]  # attempts, geodesic corrections
        within(f"step {k + 1} loss after", a[1], b[1], 1e-10, relative=True)
    assert one_reports["reports"][-1][1] < one_reports["reports"][0][0]


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch without distributed")
def test_a_failing_rank_fails_every_rank(tmp_path: Path) -> None:
    run_distributed_worker(tmp_path, 2, "fail")
    before = load_distributed_worker(tmp_path, 2, 0)[0]
    _, reports0 = load_distributed_worker(tmp_path, 2, 0)
    _, reports1 = load_distributed_worker(tmp_path, 2, 1)
    assert "other rank(s) failed" in reports0["reports"][-1]
    assert reports1["reports"][-1].startswith("ValueError: x has 90 rows but y has 89")
    assert torch.isfinite(before).all()
