"""deploy/slurm/lmtrain.sbatch, run as Slurm would run it but with srun replaced by
tests/deploy/stub/srun (OpenMPI's mpirun with the per-task Slurm variables): its rank, thread and
device mapping (with a probe in place of lmtrain), W1 on two ranks equal to `mpirun -np 2`, and a
rank killed mid-training restarting from the last checkpoint to the uninterrupted result."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, STUB, base_env, lmtrain_cli, run
from model_params import compare

SBATCH = ROOT / "deploy" / "slurm" / "lmtrain.sbatch"


def job_env(nodes: int, per_node: int, cpus: int, gpus_per_task: int = 0,
            **extra: str) -> dict[str, str]:
    """The variables sbatch sets for `--nodes N --ntasks-per-node P --cpus-per-task C
    [--gpus-per-task G]`, and the stub srun first on PATH."""
    env = base_env()
    env.pop("OMP_NUM_THREADS")  # the script must set it
    env.update(SLURM_JOB_ID="4242", SLURM_JOB_NUM_NODES=str(nodes),
               SLURM_NTASKS_PER_NODE=str(per_node), SLURM_NTASKS=str(nodes * per_node),
               SLURM_CPUS_PER_TASK=str(cpus), PATH=f"{STUB}:{env['PATH']}")
    if gpus_per_task:
        env["SLURM_GPUS_PER_TASK"] = str(gpus_per_task)
    env.update(extra)
    return env


def sbatch(env: dict[str, str], *args: str, cwd: Path | None = None):
    return run(["bash", str(SBATCH), *args], env, cwd=cwd)


def probe(tmp_path: Path, **job: int) -> tuple[list[dict[str, str]], list[str], str]:
    """Runs the script with probe-rank as lmtrain; returns each rank's record, the srun lines
    and the script's output."""
    probes = tmp_path / "probes"
    probes.mkdir()
    log = tmp_path / "srun.log"
    env = job_env(**job, LMTRAIN=str(STUB / "probe-rank"), PROBE_DIR=str(probes),
                  SRUN_STUB_LOG=str(log))
    result = sbatch(env, "run.toml", "out", "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    records = []
    for rank in range(job["nodes"] * job["per_node"]):
        lines = (probes / f"rank-{rank}.env").read_text().splitlines()
        records.append(dict(line.split("=", 1) for line in lines))
    return records, log.read_text().splitlines(), result.stdout


def test_the_script_parses() -> None:
    assert subprocess.run(["bash", "-n", str(SBATCH)]).returncode == 0


def test_cpu_nodes_get_one_rank_per_task_with_its_threads(tmp_path: Path) -> None:
    records, srun_lines, out = probe(tmp_path, nodes=2, per_node=2, cpus=3)
    assert "4 ranks, 3 thread(s) each, device cpu" in out
    assert srun_lines == [f"--mpi=pmix --kill-on-bad-exit=1 --cpus-per-task=3 --cpu-bind=cores -- "
                          f"{STUB / 'probe-rank'} fit run.toml --set output_dir={tmp_path / 'out'}"
                          " --set device=cpu --quiet"]
    for rank, r in enumerate(records):
        assert (r["SLURM_PROCID"], r["OMPI_COMM_WORLD_RANK"]) == (str(rank), str(rank))
        assert (r["SLURM_LOCALID"], r["SLURM_NODEID"]) == (str(rank % 2), str(rank // 2))
        assert r["OMPI_COMM_WORLD_SIZE"] == "4"
        assert r["OMP_NUM_THREADS"] == "3" == r["SLURM_CPUS_PER_TASK"]
        assert r["CUDA_VISIBLE_DEVICES"] == ""
        assert "--resume" not in r["ARGS"]


def test_gpu_nodes_give_each_rank_of_a_node_its_own_gpu(tmp_path: Path) -> None:
    records, _, out = probe(tmp_path, nodes=2, per_node=4, cpus=2, gpus_per_task=1)
    assert "8 ranks, 2 thread(s) each, device cuda" in out
    for node in range(2):
        on_node = [r for r in records if r["SLURM_NODEID"] == str(node)]
        # one GPU per task, a different one for each task of the node: with device = "cuda" each
        # rank trains on cuda:(local rank mod 1) = the one GPU it sees (backend/device.h)
        assert sorted(r["CUDA_VISIBLE_DEVICES"] for r in on_node) == ["0", "1", "2", "3"]
        assert [r["CUDA_VISIBLE_DEVICES"] for r in on_node] == [r["SLURM_LOCALID"] for r in on_node]
    assert all("--set device=cuda" in r["ARGS"] and r["OMP_NUM_THREADS"] == "2" for r in records)


def test_a_checkpoint_in_the_run_directory_makes_the_job_resume(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "checkpoint.safetensors").write_bytes(b"")
    records, _, out = probe(tmp_path, nodes=1, per_node=2, cpus=1)
    assert f"resuming from {tmp_path / 'out' / 'checkpoint.safetensors'}" in out
    assert all(r["ARGS"].endswith(f"--resume {tmp_path / 'out'} --quiet") for r in records)


def test_w1_through_srun_equals_mpirun(w1: Path, reference: Path) -> None:
    out = w1 / "sbatch"
    env = job_env(nodes=1, per_node=2, cpus=1, LMTRAIN=str(lmtrain_cli()))
    result = sbatch(env, str(w1 / "run.toml"), str(out), "--set", "trainer.checkpoint_every=1",
                    "--quiet")
    assert result.returncode == 0, result.stdout + result.stderr
    summary = (out / "summary.txt").read_text()
    assert "Ranks                             2 (mpi" in summary
    equal, largest, count = compare(out / "model.safetensors", reference)
    print(f"W1 through lmtrain.sbatch + srun stub vs mpirun -np 2: {count} parameters, "
          f"largest difference {largest:.3e}")
    assert equal


def test_a_killed_rank_restarts_from_the_last_checkpoint(w1: Path, reference: Path,
                                                         tmp_path: Path) -> None:
    out = tmp_path / "run"
    env = job_env(nodes=1, per_node=2, cpus=1, LMTRAIN=str(STUB / "lmtrain-fault"),
                  LMTRAIN_REAL=str(lmtrain_cli()), FAULT_DIR=str(tmp_path), FAULT_RANK="1",
                  FAULT_RUN_DIR=str(out), FAULT_AFTER_EPOCHS="10")
    result = sbatch(env, str(w1 / "run.toml"), str(out), "--set", "trainer.checkpoint_every=1",
                    "--quiet")
    log = result.stdout + result.stderr
    assert result.returncode == 0, log
    killed_after = int((tmp_path / "killed").read_text())
    assert 10 <= killed_after < 50, log  # the kill came mid-training
    assert "restart 1 of 2" in log and log.count("resuming from") == 1, log
    epochs = (out / "epochs.csv").read_text().splitlines()
    assert [line.split(",")[0] for line in epochs[1:]] == [str(e) for e in range(1, 51)]
    equal, largest, count = compare(out / "model.safetensors", reference)
    failed = [line for line in log.splitlines() if "the step failed" in line]
    print(f"rank 1 killed after epoch {killed_after} ({failed[0].strip()}); "
          "restarted from the checkpoint: "
          f"{count} parameters, largest difference from the uninterrupted run {largest:.3e}")
    assert equal


def test_an_error_of_the_run_is_not_restarted(w1: Path, tmp_path: Path) -> None:
    log = tmp_path / "srun.log"
    env = job_env(nodes=1, per_node=2, cpus=1, LMTRAIN=str(lmtrain_cli()),
                  SRUN_STUB_LOG=str(log))
    result = sbatch(env, str(w1 / "run.toml"), str(tmp_path / "out"), "--set",
                    "trainer.max_epoch=5")
    assert result.returncode == 2
    assert "max_epoch" in result.stderr and "max_epochs" in result.stderr  # the suggestion
    assert len(log.read_text().splitlines()) == 1  # one attempt


@pytest.mark.parametrize("args", [[], ["run.toml"]])
def test_missing_arguments_get_the_usage(args: list[str]) -> None:
    result = sbatch(job_env(nodes=1, per_node=1, cpus=1), *args)
    assert result.returncode == 2 and "usage: sbatch" in result.stderr
    assert os.path.basename(str(SBATCH)) in result.stderr
