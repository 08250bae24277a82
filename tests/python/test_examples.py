"""Each script of examples/python, run as a user runs it, and what it prints checked against an
independent reference: the noise floor and the data's known structure (ARD), scikit-learn's
metrics on the printed predictions' counts (Fashion-MNIST), `lmtrain predict` (the CLI model)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import FASHION, ROOT

EXAMPLES = ROOT / "examples/python"


def run_example(name: str, *args: str, cwd: Path) -> str:
    result = subprocess.run([sys.executable, str(EXAMPLES / name), *args], capture_output=True,
                            text=True, cwd=cwd, timeout=600)
    assert result.returncode == 0, f"{name}:\n{result.stdout}\n{result.stderr}"
    print(result.stdout)
    return result.stdout


def test_regression_ard_finds_the_inputs_friedman1_uses(tmp_path: Path) -> None:
    out = run_example("regression_ard.py", cwd=tmp_path)
    relevance = {name: float(value) for name, value in
                 re.findall(r"^\s+(x\d_\w+)\s+([0-9.]+)$", out, flags=re.M)}
    # The relevances are named by the DataFrame's columns, all ten of them.
    assert len(relevance) == 10
    used = [v for n, v in relevance.items() if not n.endswith("unused")]
    unused = [v for n, v in relevance.items() if n.endswith("unused")]
    # Measured (seed 0): used inputs 0.68–0.94, unused ones 0.00–0.07.
    assert min(used) >= 0.5 and max(unused) <= 0.15
    mse = float(re.search(r"test MSE (\S+)", out).group(1))
    # The noise variance (0.25) is the floor; measured 0.269 (seeds 0–2: 0.269–0.270).
    assert 0.2 <= mse <= 0.32
    effective, total = map(float, re.search(r"effective parameters (\S+) of (\d+)", out).groups())
    assert 0 < effective < total == 10 * 8 + 8 + 8 + 1


@pytest.mark.skipif(not FASHION.is_dir(), reason=f"no Fashion-MNIST in {FASHION} "
                    "(Debian package dataset-fashion-mnist)")
def test_classification_fashion_mnist(tmp_path: Path) -> None:
    out = run_example("classification_fashion.py", "--train", "3000", "--epochs", "3",
                      cwd=tmp_path)
    accuracy = float(re.search(r"test accuracy (\S+)", out).group(1))
    rows = re.findall(r"^  \S.{11}((?:\s+\d+){10})$", out, flags=re.M)
    confusion = np.array([[int(n) for n in row.split()] for row in rows])
    assert confusion.shape == (10, 10)
    # The confusion matrix counts the 10 000 test images, 1 000 per class; its diagonal is the
    # printed accuracy.
    assert confusion.sum() == 10000 and list(confusion.sum(axis=1)) == [1000] * 10
    assert np.trace(confusion) / 10000 == pytest.approx(accuracy, abs=1e-4)
    # Measured 0.781 (3 000 images, 3 epochs; 0.784 with 5 000); chance is 0.1.
    assert accuracy >= 0.70
    epochs = int(re.search(r"(\d+) epochs", out).group(1))
    scores = re.search(r"validation loss per epoch: (.*)$", out, flags=re.M).group(1).split()
    assert 1 <= epochs <= 3 and len(scores) == epochs


def test_load_cli_model_predicts_as_lmtrain_predict(cli: str, tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(ROOT / "examples/sinc/make_data.py"),
                    str(tmp_path / "sinc.csv"), "2000"], check=True)
    subprocess.run([cli, "fit", str(ROOT / "examples/sinc/run.toml"), "--quiet",
                    "--set", f"data.train.path={tmp_path / 'sinc.csv'}",
                    "--set", f"output_dir={tmp_path / 'run'}",
                    "--set", "trainer.max_epochs=20"], check=True)
    model = tmp_path / "run/model.safetensors"
    out = run_example("load_cli_model.py", str(model), cwd=tmp_path)
    assert "20 epochs" in out and "61 parameters" in out
    printed = float(re.search(r"MSE against sinc\(10x\) on 1001 points: (\S+)", out).group(1))

    x = np.linspace(-1, 1, 1001)
    np.savetxt(tmp_path / "grid.csv", x[:, None], header="x", comments="", fmt="%.17g")
    subprocess.run([cli, "predict", str(model), "--data", str(tmp_path / "grid.csv"),
                    "--out", str(tmp_path / "grid.npy")], check=True, capture_output=True)
    reference = np.mean((np.load(tmp_path / "grid.npy").ravel() - np.sinc(10 * x)) ** 2)
    assert printed == pytest.approx(reference, rel=1e-5)
    # 20 float32 epochs of W1 on 2 000 samples: measured 6.7e-4 (the variance of y is 0.05).
    assert printed < 1e-2
