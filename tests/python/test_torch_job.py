"""The PyTorchJob of deploy/kubernetes/pytorchjob.yaml, run here: its container command
(torchrun and deploy/torch/train_sinc.py) with the PET_* variables the Training Operator sets, on
two ranks of this machine.  A rank killed mid-training makes torchrun restart both ranks, which
resume from the checkpoint and end with the parameters of an uninterrupted run, bit for bit."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from torch_support import torch  # skips this module where torch is missing

yaml = pytest.importorskip("yaml")  # PyYAML comes with torch-levenberg-marquardt's requirements

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "deploy" / "kubernetes" / "pytorchjob.yaml"
EPOCHS = 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def job_command(data: Path, run_dir: Path) -> tuple[list[str], dict[str, str]]:
    """The Worker container's command and environment, with the pod's paths moved here and the
    variables the operator sets for one pod of nprocPerNode ranks."""
    job = yaml.safe_load(JOB.read_text())
    container = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    command = list(container["command"])
    assert command[0] == "torchrun"
    assert command[1] == "/opt/lmtrain/share/deploy/torch/train_sinc.py"
    assert command[2:] == ["--data=/data/sinc.csv", "--run-dir=/checkpoints/lmtrain-torch-sinc"]
    command = [sys.executable, "-m", "torch.distributed.run",
               str(ROOT / "deploy" / "torch" / "train_sinc.py"), f"--data={data}",
               f"--run-dir={run_dir}", f"--epochs={EPOCHS}"]
    env = dict(os.environ)
    env.update({e["name"]: e["value"] for e in container.get("env", [])})
    env.update(OMP_NUM_THREADS="1", PET_NNODES="1",
               PET_NPROC_PER_NODE=str(job["spec"]["nprocPerNode"]),
               PET_RDZV_BACKEND=job["spec"]["elasticPolicy"]["rdzvBackend"],
               PET_RDZV_ENDPOINT=f"127.0.0.1:{free_port()}", PET_MAX_RESTARTS="1")
    return command, env


def epochs_done(run_dir: Path) -> int:
    try:
        return int(torch.load(run_dir / "checkpoint.pt", weights_only=True)["epochs_done"])
    except (OSError, RuntimeError, EOFError, KeyError):
        return 0


def rank_process(parent: int, rank: str) -> int | None:
    """The pid of the worker of `rank` among the descendants of `parent`."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if f"RANK={rank}".encode() in environ and b"LOCAL_RANK" in b"".join(environ):
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            seen = ppid
            while seen > 1:
                if seen == parent:
                    return int(entry.name)
                try:
                    seen = int((Path("/proc") / str(seen) / "stat").read_text()
                               .rsplit(")", 1)[1].split()[1])
                except OSError:
                    break
    return None


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("torch-job") / "sinc.csv"
    subprocess.run([sys.executable, str(ROOT / "examples" / "sinc" / "make_data.py"), str(path)],
                   check=True)
    return path


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch without distributed")
def test_a_killed_rank_resumes_to_the_uninterrupted_parameters(data: Path,
                                                               tmp_path: Path) -> None:
    command, env = job_command(data, tmp_path / "whole")
    whole = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert whole.returncode == 0, whole.stdout[-3000:] + whole.stderr[-3000:]

    run_dir = tmp_path / "killed"
    command, env = job_command(data, run_dir)
    # A session of its own, so that a failure below leaves no rank behind (os.killpg).
    job = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, start_new_session=True)
    try:
        killed_after = 0
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and job.poll() is None:
            done = epochs_done(run_dir)
            if done >= 3:
                pid = rank_process(job.pid, "1")
                if pid is not None:
                    os.kill(pid, signal.SIGKILL)
                    killed_after = done
                    break
            time.sleep(0.02)
        out, _ = job.communicate(timeout=300)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    assert 3 <= killed_after < EPOCHS, f"rank 1 was not killed mid-training\n{out[-3000:]}"
    assert job.returncode == 0, out[-3000:]
    assert f"resuming from {run_dir / 'checkpoint.pt'}" in out, out[-3000:]
    a = torch.load(tmp_path / "whole" / "model.pt", weights_only=True)
    b = torch.load(run_dir / "model.pt", weights_only=True)
    assert a.keys() == b.keys()
    largest = max(float((a[k] - b[k]).abs().max()) for k in a)
    print(f"torchrun job: rank 1 killed after epoch {killed_after} of {EPOCHS}, restarted and "
          f"resumed; largest parameter difference from the uninterrupted run {largest:.3e}")
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=0)


def test_device_cuda_without_a_visible_gpu_is_refused_before_anything_is_written(
        data: Path, tmp_path: Path) -> None:
    # --device cuda where the process sees no GPU (CUDA_VISIBLE_DEVICES empty, so this runs on a
    # GPU machine too): one line saying what is missing and the two ways out, exit status 1, and
    # no run directory (a job that cannot run leaves nothing a restart would resume from).
    run_dir = tmp_path / "run"
    result = subprocess.run(
        [sys.executable, str(ROOT / "deploy" / "torch" / "train_sinc.py"), f"--data={data}",
         f"--run-dir={run_dir}", "--device=cuda"],
        env=dict(os.environ, CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1"),
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    assert "--device cuda, but this process sees no CUDA device" in result.stderr
    assert "nvidia.com/gpu" in result.stderr and "--device cpu" in result.stderr
    assert "Traceback" not in result.stderr
    assert not run_dir.exists()
