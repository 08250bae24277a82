"""LMRegressor on FANN's regression sets (Debian libfann-doc), the data of
bench/python_sklearn.py: its test MSE against the closed-form linear least-squares fit on the
same split, and against the bounds measured for bench/README.md (figures, never timings)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from conftest import FANN, ROOT
from lmtrain import LMRegressor

spec = importlib.util.spec_from_file_location("python_sklearn", ROOT / "bench/python_sklearn.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

# Seed 0 of bench/python_sklearn.py's "LMRegressor bayesian early_stopping" row, measured
# (test MSE); the linear fits measure 0.00403, 0.00245 and 0.01481.
MEASURED = {"pumadyn-32fm": 0.00371, "kin32fm": 0.00222, "bank32nh": 0.01400}


@pytest.mark.skipif(not FANN.is_dir(), reason=f"no FANN data sets in {FANN} (libfann-doc)")
@pytest.mark.parametrize("name", list(MEASURED))
def test_lmregressor_beats_the_linear_fit_on_fann_sets(name: str) -> None:
    X, y = bench.read_fann(FANN / f"{name}.train")
    X_test, y_test = bench.read_fann(FANN / f"{name}.test")
    assert X.shape[1] == X_test.shape[1] == 32 and y.ndim == 1
    net = LMRegressor(hidden_layer_sizes=(16,), regularization="bayesian", early_stopping=True,
                      random_state=0).fit(X, y)
    mse = float(np.mean((net.predict(X_test) - y_test) ** 2))
    linear = float(np.mean((bench.LinearLeastSquares().fit(X, y).predict(X_test) - y_test) ** 2))
    print(f"{name}: LMRegressor test MSE {mse:.5f}, linear least squares {linear:.5f}")
    assert mse <= 1.1 * MEASURED[name]
    assert mse < linear
