"""pytest configuration of the Python package's tests (scripts/test.sh runs them in a venv).

test_model_file.py and test_predict_cli.py are scripts that ctest runs with Debian's numpy and
the C++ test binaries; pytest leaves them to ctest.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

collect_ignore = ["test_model_file.py", "test_predict_cli.py"]

ROOT = Path(__file__).resolve().parents[2]
FANN = Path("/usr/share/doc/libfann-dev/examples/datasets")
FASHION = Path("/usr/share/datasets/fashion-mnist")


def lmtrain_cli() -> str | None:
    """The `lmtrain` command: $LMTRAIN_CLI, else the release build's, else none."""
    path = os.environ.get("LMTRAIN_CLI") or str(ROOT / "build/release/bin/lmtrain")
    return path if os.access(path, os.X_OK) else shutil.which("lmtrain")


@pytest.fixture(scope="session")
def cli() -> str:
    """The `lmtrain` command; the test is skipped without one, unless LMTRAIN_CLI names it."""
    path = lmtrain_cli()
    if path is None:
        if os.environ.get("LMTRAIN_CLI"):
            pytest.fail(f"LMTRAIN_CLI={os.environ['LMTRAIN_CLI']} is not an executable")
        pytest.skip("no lmtrain command (build it, or set LMTRAIN_CLI)")
    return path


def pytest_configure(config: pytest.Config) -> None:
    # Also here, as the tests run from tests/python without the project's pyproject.toml.
    config.addinivalue_line("markers", "cuda: needs a CUDA device and lmtrain's CUDA backend "
                            "(skips without them)")
