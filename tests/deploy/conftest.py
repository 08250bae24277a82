"""Shared pieces of the deployment tests (scripts/test-deploy.sh runs them with pytest):
the lmtrain command under test, W1's data, and the uninterrupted two-rank run that the job
templates' runs are compared with."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STUB = Path(__file__).resolve().parent / "stub"
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "deploy"))


def lmtrain_cli() -> Path:
    cli = Path(os.environ.get("LMTRAIN_CLI", ROOT / "build" / "release" / "bin" / "lmtrain"))
    if not cli.is_file():
        pytest.fail(f"{cli} is missing: build the release preset, or set LMTRAIN_CLI")
    return cli


def base_env() -> dict[str, str]:
    """This environment with one thread per rank, mpirun allowed as root (CI runs as root), and
    no launcher variables of an outer job."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "OMPI_", "PMIX_", "PMI_"))}
    env.update(OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env


def run(command: list[str], env: dict[str, str], timeout: float = 240,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="session")
def w1(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with W1's sinc.csv and run.toml (examples/sinc), checkpointing every epoch."""
    folder = tmp_path_factory.mktemp("w1")
    subprocess.run([sys.executable, str(ROOT / "examples" / "sinc" / "make_data.py"),
                    str(folder / "sinc.csv")], check=True)
    shutil.copy(ROOT / "examples" / "sinc" / "run.toml", folder / "run.toml")
    return folder


@pytest.fixture(scope="session")
def reference(w1: Path) -> Path:
    """W1 on two ranks, uninterrupted: `mpirun -np 2 lmtrain fit run.toml`."""
    out = w1 / "reference"
    result = run(["mpirun", "-np", "2", "--bind-to", "none", str(lmtrain_cli()), "fit",
                  str(w1 / "run.toml"), "--set", f"output_dir={out}",
                  "--set", "trainer.checkpoint_every=1", "--quiet"], base_env())
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return out / "model.safetensors"
