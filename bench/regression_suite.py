#!/usr/bin/env python3
"""ARD's defaults on the classic regression suite, against plain LM, FANN's RPROP and MLPRegressor.

The suite (issue 28 §4): Friedman #1, #2 and #3 (scikit-learn's generators; 1 000 training and
2 000 test samples drawn per seed, noise σ = 1, 125 and 0.1 — #2 and #3 at the 3:1
signal-to-noise ratio of Friedman (1991) and Breiman's bagging paper), diabetes (scikit-learn's
CSV: 442 rows split 75/25 per seed) and FANN's kin32fm, pumadyn-32fm and bank32nh (Debian
libfann-doc, their own .train / .test split; the seed varies the initialization only).  `--sets
W6` is shared/WORKLOADS.md's FANN suite instead (those three and building, census-house,
thyroid).  Every estimator gets the same network, one hidden layer of `--hidden` tanh units:

* ard, bayesian, none: lmtrain with regularization = ard, bayesian or none (plain LM), every
  other parameter at its default (plus `--option name=value` for a candidate default under
  measurement), inputs and targets standardized.  Through LMRegressor, or with `--cli` through
  `lmtrain fit` and a run TOML written as a user writes one (examples/fann-kin32fm/run.toml's:
  float64, 100 epochs, full batch).  `--early-stopping`: the lmtrain rows hold out 15 % of the
  training rows and stop after 6 epochs without a better validation loss, best model restored
  (that example's setting, and where issue 38's loss showed: ARD stopped where plain LM stops);
* mlp: MLPRegressor(solver="lbfgs", activation="tanh") in a StandardScaler pipeline, its targets
  standardized by TransformedTargetRegressor; every other parameter its default (alpha = 1e-4,
  max_iter = 200);
* rprop, rprop-raw: FANN's batch RPROP (bench/peers/fann_train.cpp, W6's peer: FANN's defaults,
  linear outputs) for `--rprop-budget` seconds of wall clock (W6's 5), on standardized inputs
  (W6's headline setting) or on the inputs as they are (FANN users' setup).  A FANN set is given
  as its files (targets in the files' units, as in W6); any other set is written in FANN's format
  with standardized targets, and its test MSE scaled back to the targets' units.  The figure
  depends on how many epochs the budget buys on the machine: compare within one run.

Reported per set and estimator: test MSE in the targets' units (median, min and max over the
seeds), the median wall time of fit (with --cli, of the command: reading, reports and plots
included), γ, and on Friedman #1 (10 inputs, x₀…x₄ relevant) the seeds
on which ARD's relevances rank the five relevant inputs first, with each input's median
relevance.  Then ARD's median over every other row's, per set, and the rows ARD is not ahead of:
a change of a default that loses somewhere shows there.  The load average before and after is
printed: times on a shared machine are indicative only.

usage: bench/regression_suite.py [--seeds 5] [--first-seed 0] [--sets suite|W6|friedman1 …]
       [--hidden 10] [--estimators ard bayesian none mlp rprop rprop-raw] [--option name=value …]
       [--cli] [--lmtrain build/release/bin/lmtrain] [--early-stopping]
       [--fann-train build/release/bench/fann_train] [--rprop-budget 5] [--json FILE]
Run in the venv of scripts/test-python.sh, one thread per library for comparable times:
  OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 build/py-venv/bin/python bench/regression_suite.py
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
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

ROOT = Path(__file__).resolve().parent.parent
FANN = Path("/usr/share/doc/libfann-dev/examples/datasets")
SUITE = ["friedman1", "friedman2", "friedman3", "diabetes", "kin32fm", "pumadyn-32fm", "bank32nh"]
W6 = ["kin32fm", "pumadyn-32fm", "bank32nh", "building", "census-house", "thyroid"]
SETS = SUITE + [name for name in W6 if name not in SUITE]
FANN_SETS = set(W6)
LMTRAIN = ("ard", "bayesian", "none")
# Friedman #1's relevant inputs: y = 10 sin(π x₀x₁) + 20 (x₂ − ½)² + 10 x₃ + 5 x₄ + noise.
FRIEDMAN1_RELEVANT = 5
# examples/fann-kin32fm/run.toml's early stopping: 15 % held out, 6 epochs without improvement.
EARLY_STOPPING = {"validation_fraction": 0.15, "n_iter_no_change": 6}

Split = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


class Settings:
    """How the lmtrain and RPROP rows run (the command line's --cli, --early-stopping, …)."""

    def __init__(self, cli: bool = False, lmtrain_cli: Path | None = None,
                 early_stopping: bool = False, fann_train: Path | None = None,
                 rprop_budget: float = 5.0, name: str = "", datasets: Path = FANN) -> None:
        self.cli = cli
        self.lmtrain_cli = lmtrain_cli or ROOT / "build/release/bin/lmtrain"
        self.early_stopping = early_stopping
        self.fann_train = fann_train or ROOT / "build/release/bench/fann_train"
        self.rprop_budget = rprop_budget
        self.name = name  # the data set's, for the FANN files
        self.datasets = datasets


def read_fann(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """FANN's text format: "samples inputs outputs", then per sample an input and an output line."""
    values = path.read_text().split()
    samples, inputs, outputs = (int(v) for v in values[:3])
    table = np.array(values[3:], dtype=np.float64).reshape(samples, inputs + outputs)
    return table[:, :inputs], table[:, inputs:].ravel() if outputs == 1 else table[:, inputs:]


def write_fann(path: Path, X: np.ndarray, y: np.ndarray) -> None:
    Y = y.reshape(len(y), -1)
    lines = [f"{len(X)} {X.shape[1]} {Y.shape[1]}"]
    for x_row, y_row in zip(X, Y):
        lines.append(" ".join(repr(float(v)) for v in x_row))
        lines.append(" ".join(repr(float(v)) for v in y_row))
    path.write_text("\n".join(lines) + "\n")


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


def split_options(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """An LMRegressor parameter (weight_decay, max_epochs, …) by itself, the rest by name."""
    from lmtrain import LMRegressor
    own = set(LMRegressor().get_params())
    return ({k: v for k, v in options.items() if k in own},
            {k: v for k, v in options.items() if k not in own})


def estimator(kind: str, hidden: int, seed: int, options: dict[str, Any],
              early_stopping: bool = False) -> Any:
    if kind in LMTRAIN:
        from lmtrain import LMRegressor
        params, extra = split_options(options)
        if early_stopping:
            params = {"early_stopping": True, **EARLY_STOPPING, **params}
        return LMRegressor(hidden_layer_sizes=(hidden,), regularization=kind, random_state=seed,
                           solver_options=extra or None, **params)
    if kind == "mlp":
        mlp = MLPRegressor(hidden_layer_sizes=(hidden,), activation="tanh", solver="lbfgs",
                           random_state=seed)
        return TransformedTargetRegressor(regressor=make_pipeline(StandardScaler(), mlp),
                                          transformer=StandardScaler())
    raise ValueError(f"unknown estimator {kind!r}: expected ard, bayesian, none or mlp")


LABELS = {"ard": "lmtrain ard", "bayesian": "lmtrain bayesian",
          "none": "lmtrain (no regularization)", "mlp": "MLPRegressor lbfgs",
          "rprop": "FANN RPROP", "rprop-raw": "FANN RPROP, raw inputs"}

# The run TOML of --cli: examples/fann-kin32fm/run.toml with the suite's network and files.
RUN_TOML = """seed = {seed}
precision = "float64"
output_dir = "{out}"

[model]
layers = [
  {{ type = "dense", units = {hidden} }},
  {{ type = "tanh" }},
  {{ type = "dense", units = {outputs} }},
]

[data]
validation_fraction = {validation}
normalize_inputs = "standardize"
normalize_targets = "standardize"

[data.train]
path = "{train}"
targets = [{targets}]

[data.test]
path = "{test}"
targets = [{targets}]

[solver]
regularization = "{regularization}"

[trainer]
max_epochs = {epochs}
max_validation_failures = {failures}
"""


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value) if isinstance(value, str) else repr(value)


def write_csv(path: Path, X: np.ndarray, y: np.ndarray) -> list[str]:
    Y = y.reshape(len(y), -1)
    targets = [f"y{k}" for k in range(Y.shape[1])]
    header = ",".join([f"x{i}" for i in range(X.shape[1])] + targets)
    np.savetxt(path, np.c_[X, Y], delimiter=",", header=header, comments="", fmt="%.17g")
    return targets


def fit_cli(kind: str, hidden: int, seed: int, options: dict[str, Any], split: Split,
            settings: Settings) -> dict[str, Any]:
    """`lmtrain fit` on the split written as CSV, with --set for every option."""
    X, y, X_test, y_test = split
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        targets = write_csv(d / "train.csv", X, y)
        write_csv(d / "test.csv", X_test, y_test)
        toml = RUN_TOML.format(
            seed=seed, out=d / "run", hidden=hidden, outputs=len(targets), train=d / "train.csv",
            test=d / "test.csv", targets=", ".join(f'"{t}"' for t in targets),
            validation=EARLY_STOPPING["validation_fraction"] if settings.early_stopping else 0.0,
            regularization=kind, epochs=options.get("max_epochs", 100),
            failures=EARLY_STOPPING["n_iter_no_change"])
        (d / "run.toml").write_text(toml)
        command = [str(settings.lmtrain_cli), "fit", str(d / "run.toml")]
        for name, value in options.items():
            if name != "max_epochs":
                command += ["--set", f"solver.{name}={toml_value(value)}"]
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout[-2000:]}{done.stderr}")
    report = done.stdout
    result = {"mse": float(re.search(r"MSE ([-+0-9.eE]+)", report.split("Test set:")[1]).group(1)),
              "seconds": seconds}
    # From the report, which every version of the command prints (summary.json came later).
    if kind == "ard":
        groups = re.findall(r"^  \S.*?\s+(\d+)\s+[-+0-9.eE]+\s+([0-9.]+)$",
                            report.split("effective parameters γ")[1], re.M)
        result["relevances"] = [float(g) / int(size) for size, g in groups[:X.shape[1]]]
    if kind in ("ard", "bayesian"):
        result["gamma"] = float(re.search(r"effective parameters γ = ([0-9.]+)", report).group(1))
    return result


def fit_rprop(kind: str, hidden: int, seed: int, split: Split,
              settings: Settings) -> dict[str, Any]:
    """fann_train on the set's files (a FANN set) or on the split with standardized targets."""
    X, y, X_test, y_test = split
    scale = 1.0
    with tempfile.TemporaryDirectory() as tmp:
        if settings.name in FANN_SETS:
            train = settings.datasets / f"{settings.name}.train"
            test = settings.datasets / f"{settings.name}.test"
        else:
            mean, std = float(np.mean(y)), float(np.std(y))
            scale = std * std
            train, test = Path(tmp) / "train", Path(tmp) / "test"
            write_fann(train, X, (y - mean) / std)
            write_fann(test, X_test, (y_test - mean) / std)
        command = [str(settings.fann_train), "--train", str(train), "--test", str(test),
                   "--hidden", str(hidden), "--budget", str(settings.rprop_budget),
                   "--seed", str(seed), "--algorithm", "rprop"]
        if kind == "rprop":
            command.append("--standardize-inputs")
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr}")
    result = next(json.loads(line) for line in done.stdout.splitlines()
                  if line.startswith('{"type":"result"'))
    return {"mse": result["test_loss"] * scale, "seconds": time.perf_counter() - started,
            "epochs": result["epochs"]}


def fit_one(kind: str, hidden: int, seed: int, options: dict[str, Any], split: Split,
            settings: Settings | None = None) -> dict[str, Any]:
    settings = settings or Settings()
    if kind.startswith("rprop"):
        return fit_rprop(kind, hidden, seed, split, settings)
    if kind in LMTRAIN and settings.cli:
        return fit_cli(kind, hidden, seed, options, split, settings)
    X, y, X_test, y_test = split
    model = estimator(kind, hidden, seed, options, settings.early_stopping and kind in LMTRAIN)
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


def report_table(results: dict[str, dict[str, list[dict[str, Any]]]],
                 sizes: dict[str, str]) -> None:
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


def report_ranking(results: dict[str, dict[str, list[dict[str, Any]]]]) -> None:
    ard = results.get("friedman1", {}).get("ard")
    if not ard:
        return
    ranked = sum(ranks_relevant_first(r["relevances"]) for r in ard)
    relevance = np.median(np.array([r["relevances"] for r in ard]), axis=0)
    print()
    print(f"Friedman #1, ARD: the 5 relevant inputs ranked first on {ranked} of {len(ard)} "
          "seeds; median relevance per input (x₀…x₉; x₀…x₄ relevant): "
          + " ".join(f"{v:.2f}" for v in relevance))


def report_against_ard(results: dict[str, dict[str, list[dict[str, Any]]]]) -> None:
    """ARD's median test MSE over every other row's, and where ARD is not ahead."""
    others = [k for k in LABELS if k != "ard" and any(k in r for r in results.values())]
    if not others or not all("ard" in r for r in results.values()):
        return
    print()
    print("ARD's median test MSE over each row's (< 1: ARD ahead):")
    print()
    print("| set | " + " | ".join(LABELS[k] for k in others) + " |")
    print("|---|" + "---|" * len(others))
    behind = []
    for name, by_kind in results.items():
        ard = statistics.median(r["mse"] for r in by_kind["ard"])
        cells = []
        for kind in others:
            if kind not in by_kind:
                cells.append("")
                continue
            ratio = ard / statistics.median(r["mse"] for r in by_kind[kind])
            cells.append(f"{ratio:.3f}")
            if ratio >= 1:
                behind.append(f"{name} ({LABELS[kind]}, {ratio:.3f})")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print()
    print("ARD not ahead: " + ("; ".join(behind) if behind else "none"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--sets", nargs="+", default=["suite"], choices=SETS + ["suite", "W6"])
    parser.add_argument("--datasets", type=Path, default=FANN)
    parser.add_argument("--hidden", type=int, default=10)
    parser.add_argument("--estimators", nargs="+", default=["ard", "bayesian", "none", "mlp",
                                                            "rprop", "rprop-raw"],
                        choices=list(LABELS))
    parser.add_argument("--option", type=parse_option, action="append", default=[],
                        help="an lmtrain option for the lmtrain rows, e.g. weight_decay=1e-3")
    parser.add_argument("--cli", action="store_true",
                        help="the lmtrain rows through `lmtrain fit` instead of LMRegressor")
    parser.add_argument("--lmtrain", type=Path, default=ROOT / "build/release/bin/lmtrain")
    parser.add_argument("--early-stopping", action="store_true",
                        help="the lmtrain rows hold out 15 %% and stop after 6 failures")
    parser.add_argument("--fann-train", type=Path, default=ROOT / "build/release/bench/fann_train")
    parser.add_argument("--rprop-budget", type=float, default=5.0)
    parser.add_argument("--json", type=Path, help="also write every run's figures here")
    args = parser.parse_args()
    options = dict(args.option)
    names = [s for name in args.sets for s in {"suite": SUITE, "W6": W6}.get(name, [name])]
    seeds = range(args.first_seed, args.first_seed + args.seeds)

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=ROOT).stdout.strip() or "unknown"
    print(f"command: {' '.join(sys.argv)} (commit {commit})")
    versions = f"scikit-learn {__import__('sklearn').__version__}, numpy {np.__version__}"
    print(f"{versions}, {os.cpu_count()} CPUs, OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS', '(unset)')}; load before: "
          f"{Path('/proc/loadavg').read_text().strip()}")
    front = f"`{args.lmtrain} fit`" if args.cli else "LMRegressor"
    print(f"hidden layer: {args.hidden} tanh units; seeds {seeds[0]}–{seeds[-1]}; lmtrain rows "
          f"through {front}{', early stopping on 15 %' if args.early_stopping else ''}; options: "
          f"{options or 'the defaults'}; RPROP: {args.rprop_budget:g} s per fit")
    print()
    results: dict[str, dict[str, list[dict[str, Any]]]] = {}
    sizes: dict[str, str] = {}
    for name in names:
        make_split = data_set(name, args.datasets)
        settings = Settings(args.cli, args.lmtrain, args.early_stopping, args.fann_train,
                            args.rprop_budget, name, args.datasets)
        results[name] = {kind: [] for kind in args.estimators}
        for seed in seeds:
            split = make_split(seed)
            sizes[name] = f"{len(split[1])} / {len(split[3])}"
            for kind in args.estimators:
                results[name][kind].append(
                    fit_one(kind, args.hidden, seed, options, split, settings))
    report_table(results, sizes)
    report_ranking(results)
    report_against_ard(results)
    print()
    print(f"load after: {Path('/proc/loadavg').read_text().strip()}")
    if args.json:
        args.json.write_text(json.dumps({"options": options, "results": results}, indent=1))


if __name__ == "__main__":
    main()
