#!/usr/bin/env python3
"""ARD and bayesian defaults on the classic regression suite, against MLPRegressor (issue 28 §4).

The suite: Friedman #1, #2 and #3 (scikit-learn's generators; 1 000 training and 2 000 test
samples drawn per seed, noise σ = 1, 125 and 0.1 — #2 and #3 at the 3:1 signal-to-noise ratio of
Friedman (1991) and Breiman's bagging paper), diabetes (scikit-learn's CSV: 442 rows split 75/25
per seed) and FANN's kin32fm, pumadyn-32fm and bank32nh (Debian libfann-doc, their own .train /
.test split; the seed varies the initialization only).  Every estimator gets the same network,
one hidden layer of `--hidden` tanh units, and standardized inputs and targets:

* LMRegressor(regularization="ard") and ("bayesian") with every other parameter at its default
  (plus `--option name=value` for a candidate default under measurement);
* MLPRegressor(solver="lbfgs", activation="tanh") in a StandardScaler pipeline, its targets
  standardized by TransformedTargetRegressor; every other parameter its default (alpha = 1e-4,
  max_iter = 200).

Reported per set and estimator: test MSE in the targets' units (median, min and max over the
seeds), the median wall time of fit, and on Friedman #1 (10 inputs, x₀…x₄ relevant) the seeds on
which ARD's feature_relevances_ rank the five relevant inputs first, with each input's median
relevance.  The load average before and after is printed: times on a shared machine are
indicative only.

usage: bench/regression_suite.py [--seeds 5] [--sets friedman1 …] [--hidden 10]
       [--estimators ard bayesian mlp] [--option name=value …] [--json FILE]
Run in the venv of scripts/test-python.sh, one thread per library for comparable times:
  OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 build/py-venv/bin/python bench/regression_suite.py
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np
from sklearn.compose import TransformedTargetRegressor
from sklearn.datasets import load_diabetes, make_friedman1, make_friedman2, make_friedman3
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import lmtrain
from lmtrain import LMRegressor

FANN = Path("/usr/share/doc/libfann-dev/examples/datasets")
SETS = ["friedman1", "friedman2", "friedman3", "diabetes", "kin32fm", "pumadyn-32fm", "bank32nh"]
# Friedman #1's relevant inputs: y = 10 sin(π x₀x₁) + 20 (x₂ − ½)² + 10 x₃ + 5 x₄ + noise.
FRIEDMAN1_RELEVANT = 5

Split = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def read_fann(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """FANN's text format: "samples inputs outputs", then per sample an input and an output line."""
    values = path.read_text().split()
    samples, inputs, outputs = (int(v) for v in values[:3])
    table = np.array(values[3:], dtype=np.float64).reshape(samples, inputs + outputs)
    return table[:, :inputs], table[:, inputs:].ravel() if outputs == 1 else table[:, inputs:]


def friedman(make: Callable[..., Any], noise: float, **kw: Any) -> Callable[[int], Split]:
    def split(seed: int) -> Split:
        X, y = make(n_samples=1000, noise=noise, random_state=seed, **kw)
        X_test, y_test = make(n_samples=2000, noise=noise, random_state=10_000 + seed, **kw)
        return X, y, X_test, y_test
    return split


def diabetes(seed: int) -> Split:
    X, y = load_diabetes(return_X_y=True)
    X, X_test, y, y_test = train_test_split(X, y, test_size=0.25, random_state=seed)
    return X, y, X_test, y_test


def fann(name: str, datasets: Path) -> Callable[[int], Split]:
    def split(seed: int) -> Split:
        del seed  # FANN's fixed split: the seed varies the initialization only
        return (*read_fann(datasets / f"{name}.train"), *read_fann(datasets / f"{name}.test"))
    return split


def data_set(name: str, datasets: Path) -> Callable[[int], Split]:
    if name == "friedman1":
        return friedman(make_friedman1, 1.0, n_features=10)
    if name == "friedman2":
        return friedman(make_friedman2, 125.0)
    if name == "friedman3":
        return friedman(make_friedman3, 0.1)
    if name == "diabetes":
        return diabetes
    return fann(name, datasets)


def estimator(kind: str, hidden: int, seed: int, options: dict[str, Any]) -> Any:
    if kind in ("ard", "bayesian", "none"):
        # An estimator parameter (weight_decay, max_epochs, …) by itself, the rest by name.
        own = set(LMRegressor().get_params())
        params = {k: v for k, v in options.items() if k in own}
        extra = {k: v for k, v in options.items() if k not in own}
        return LMRegressor(hidden_layer_sizes=(hidden,), regularization=kind, random_state=seed,
                           solver_options=extra or None, **params)
    if kind == "mlp":
        mlp = MLPRegressor(hidden_layer_sizes=(hidden,), activation="tanh", solver="lbfgs",
                           random_state=seed)
        return TransformedTargetRegressor(regressor=make_pipeline(StandardScaler(), mlp),
                                          transformer=StandardScaler())
    raise ValueError(f"unknown estimator {kind!r}: expected ard, bayesian, none or mlp")


LABELS = {"ard": "LMRegressor ard", "bayesian": "LMRegressor bayesian",
          "none": "LMRegressor (no regularization)", "mlp": "MLPRegressor lbfgs"}


def fit_one(kind: str, hidden: int, seed: int, options: dict[str, Any],
            split: Split) -> dict[str, Any]:
    X, y, X_test, y_test = split
    model = estimator(kind, hidden, seed, options)
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # lbfgs stopping at max_iter
        model.fit(X, y)
    seconds = time.perf_counter() - started
    result = {"mse": float(np.mean((model.predict(X_test) - y_test) ** 2)), "seconds": seconds}
    if kind == "ard":
        result["relevances"] = [float(v) for v in np.asarray(model.feature_relevances_)]
    if kind in ("ard", "bayesian"):
        result["gamma"] = float(model.effective_parameters_)
    return result


def parse_option(text: str) -> tuple[str, Any]:
    name, _, value = text.partition("=")
    if not name or not value:
        raise argparse.ArgumentTypeError(f"--option {text!r}: expected name=value")
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return name, value  # a string option, e.g. damping=multiplicative


def ranks_relevant_first(relevances: list[float]) -> bool:
    order = np.argsort(-np.asarray(relevances), kind="stable")
    return set(order[:FRIEDMAN1_RELEVANT].tolist()) == set(range(FRIEDMAN1_RELEVANT))


def report(results: dict[str, dict[str, list[dict[str, Any]]]], sizes: dict[str, str]) -> None:
    print("| set | train / test rows | estimator | test MSE median | min | max "
          "| fit s (median) | γ (median) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, by_kind in results.items():
        for kind, runs in by_kind.items():
            mse = [r["mse"] for r in runs]
            seconds = statistics.median(r["seconds"] for r in runs)
            gamma = (f"{statistics.median(r['gamma'] for r in runs):.1f}"
                     if "gamma" in runs[0] else "")
            print(f"| {name} | {sizes[name]} | {LABELS[kind]} | {statistics.median(mse):.4g} "
                  f"| {min(mse):.4g} | {max(mse):.4g} | {seconds:.2f} | {gamma} |")
    ard = results.get("friedman1", {}).get("ard")
    if ard:
        ranked = sum(ranks_relevant_first(r["relevances"]) for r in ard)
        relevance = np.median(np.array([r["relevances"] for r in ard]), axis=0)
        print()
        print(f"Friedman #1, ARD: the 5 relevant inputs ranked first on {ranked} of {len(ard)} "
              "seeds; median relevance per input (x₀…x₉; x₀…x₄ relevant): "
              + " ".join(f"{v:.2f}" for v in relevance))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--sets", nargs="+", default=SETS, choices=SETS)
    parser.add_argument("--datasets", type=Path, default=FANN)
    parser.add_argument("--hidden", type=int, default=10)
    parser.add_argument("--estimators", nargs="+", default=["ard", "bayesian", "mlp"],
                        choices=list(LABELS))
    parser.add_argument("--option", type=parse_option, action="append", default=[],
                        help="an lmtrain option for the LMRegressor rows, e.g. weight_decay=1e-3")
    parser.add_argument("--json", type=Path, help="also write every run's figures here")
    args = parser.parse_args()
    options = dict(args.option)

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=Path(__file__).parent).stdout.strip() or "unknown"
    print(f"command: {' '.join(sys.argv)} (commit {commit})")
    print(f"lmtrain {lmtrain.__version__}, scikit-learn {__import__('sklearn').__version__}, "
          f"numpy {np.__version__}, {os.cpu_count()} CPUs, OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS', '(unset)')}; load before: "
          f"{Path('/proc/loadavg').read_text().strip()}")
    print(f"hidden layer: {args.hidden} tanh units; seeds 0–{args.seeds - 1}; LMRegressor options: "
          f"{options or 'the defaults'}")
    print()
    results: dict[str, dict[str, list[dict[str, Any]]]] = {}
    sizes: dict[str, str] = {}
    for name in args.sets:
        make_split = data_set(name, args.datasets)
        results[name] = {kind: [] for kind in args.estimators}
        for seed in range(args.seeds):
            split = make_split(seed)
            sizes[name] = f"{len(split[1])} / {len(split[3])}"
            for kind in args.estimators:
                results[name][kind].append(fit_one(kind, args.hidden, seed, options, split))
    report(results, sizes)
    print()
    print(f"load after: {Path('/proc/loadavg').read_text().strip()}")
    if args.json:
        args.json.write_text(json.dumps({"options": options, "results": results}, indent=1))


if __name__ == "__main__":
    main()
