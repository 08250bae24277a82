#!/usr/bin/env python3
"""LMRegressor against scikit-learn's MLPRegressor(solver="lbfgs") on FANN's regression sets.

Issue 14's comparison: the same network (one hidden layer of 16 tanh units, W6 of
shared/WORKLOADS.md), the same standardized inputs, the FANN split (.train / .test of Debian's
libfann-doc), test MSE in the targets' units and fit wall time, the median over seeds.  Both
estimators use their defaults otherwise: LMRegressor max_epochs=100 (its default) and
MLPRegressor max_iter=200 (its default); LMRegressor also with regularization="bayesian" and
with early_stopping (10 % of the training rows held out); the linear least-squares fit is the
reference a network must beat.

usage: bench/python_sklearn.py [--seeds 5] [--sets kin32fm pumadyn-32fm bank32nh]
       [--datasets /usr/share/doc/libfann-dev/examples/datasets] [--hidden 16]
Prints a Markdown table and the machine's load (/proc/loadavg) before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import lmtrain
from lmtrain import LMRegressor

FANN = Path("/usr/share/doc/libfann-dev/examples/datasets")


def read_fann(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """FANN's text format: "samples inputs outputs", then per sample an input and an output line."""
    values = path.read_text().split()
    samples, inputs, outputs = (int(v) for v in values[:3])
    table = np.array(values[3:], dtype=np.float64).reshape(samples, inputs + outputs)
    return table[:, :inputs], table[:, inputs:].ravel() if outputs == 1 else table[:, inputs:]


class LinearLeastSquares:
    """The closed-form linear model (numpy lstsq with an intercept): the reference row."""

    def fit(self, X: np.ndarray, y: np.ndarray) -> LinearLeastSquares:
        self.w = np.linalg.lstsq(np.column_stack([X, np.ones(len(X))]), y, rcond=None)[0]
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.column_stack([X, np.ones(len(X))]) @ self.w


def estimators(hidden: int, seed: int) -> dict[str, Any]:
    layers = (hidden,)
    return {
        "LMRegressor": LMRegressor(hidden_layer_sizes=layers, random_state=seed),
        "LMRegressor bayesian": LMRegressor(hidden_layer_sizes=layers, regularization="bayesian",
                                            random_state=seed),
        "LMRegressor bayesian early_stopping": LMRegressor(
            hidden_layer_sizes=layers, regularization="bayesian", early_stopping=True,
            random_state=seed),
        "linear least squares": LinearLeastSquares(),
        "MLPRegressor lbfgs": make_pipeline(
            StandardScaler(), MLPRegressor(hidden_layer_sizes=layers, activation="tanh",
                                           solver="lbfgs", random_state=seed)),
    }


def measure(name: str, make: Any, X: np.ndarray, y: np.ndarray, X_test: np.ndarray,
            y_test: np.ndarray) -> tuple[float, float]:
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # lbfgs stopping at max_iter
        fitted = make.fit(X, y)
    seconds = time.perf_counter() - started
    return float(np.mean((fitted.predict(X_test) - y_test) ** 2)), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--sets", nargs="+", default=["kin32fm", "pumadyn-32fm", "bank32nh"])
    parser.add_argument("--datasets", type=Path, default=FANN)
    parser.add_argument("--hidden", type=int, default=16)
    args = parser.parse_args()

    load_before = Path("/proc/loadavg").read_text().strip()
    print(f"lmtrain {lmtrain.__version__}, scikit-learn {__import__('sklearn').__version__}, "
          f"numpy {np.__version__}, {os.cpu_count()} CPUs; load before: {load_before}")
    print()
    print("| set | train / test rows | estimator | test MSE (median) | test MSE (min–max) "
          "| fit seconds (median) |")
    print("|---|---|---|---|---|---|")
    for name in args.sets:
        X, y = read_fann(args.datasets / f"{name}.train")
        X_test, y_test = read_fann(args.datasets / f"{name}.test")
        results: dict[str, list[tuple[float, float]]] = {}
        for seed in range(args.seeds):
            for label, estimator in estimators(args.hidden, seed).items():
                results.setdefault(label, []).append(
                    measure(label, estimator, X, y, X_test, y_test))
        for label, runs in results.items():
            mse = [r[0] for r in runs]
            seconds = [r[1] for r in runs]
            print(f"| {name} | {len(y)} / {len(y_test)} | {label} | "
                  f"{statistics.median(mse):.5f} | {min(mse):.5f}–{max(mse):.5f} | "
                  f"{statistics.median(seconds):.2f} |", flush=True)
    print()
    print(f"load after: {Path('/proc/loadavg').read_text().strip()}")


if __name__ == "__main__":
    main()
