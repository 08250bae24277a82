"""The Python package against the `lmtrain` command on the same data and seed.

* lmtrain.fit gives the CLI's parameters (float64: to 1e-6) — full batch and mini-batch, with the
  CLI's validation split, standardization and ard;
* lmtrain.load reads a CLI model (with its normalization) and predicts what `lmtrain predict`
  writes; `lmtrain predict` reads a model saved from Python and predicts what Python does.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from spread import one_ulp, within

import lmtrain

# The same library on the same doubles (%.17g): bit for bit on the kernel paths of
# scripts/measure-spread.sh; with Python's data one ulp off, 8 epochs carry it to ≤ 4.8e-12 in the
# parameters and ≤ 5.6e-12 (relative) in the final loss.  The bounds are ≥ 1 000 times that.
PARAMETER_TOLERANCE = 1e-6


def regression_data(rows: int = 300) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(20261123)
    x = np.column_stack([rng.uniform(2, 6, rows), rng.normal(-3, 0.5, rows),
                         rng.uniform(-100, 100, rows), rng.normal(0, 1, rows)])
    y = np.column_stack([50 + 10 * np.sin(x[:, 0]) + x[:, 1] * x[:, 2] / 20,
                         np.exp(-0.5 * (x[:, 1] + 3) ** 2) + 0.01 * x[:, 2]])
    return x, y


def write_csv(path: Path, x: np.ndarray, y: np.ndarray, label: bool = False) -> None:
    header = [f"x{i}" for i in range(x.shape[1])] + (["label"] if label else
                                                     [f"y{i}" for i in range(y.shape[1])])
    table = np.column_stack([x, y])
    # %.17g: the CLI parses exactly the doubles Python holds.
    np.savetxt(path, table, delimiter=",", header=",".join(header), comments="", fmt="%.17g")


def three_blobs(rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Class codes 0-2 and 2-D points around three centres, for the classifier tests."""
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 3, rows)
    return codes, np.array([[0, 0], [2, 1], [-1, 2.5]])[codes] + rng.normal(0, 0.8, (rows, 2))


def fit_on_named_labels(cli: str, tmp: Path, name: str, x: np.ndarray, labels: np.ndarray,
                        units: int, seed: int) -> lmtrain.Model:
    """`lmtrain fit` (float64, full batch) on NAME.csv: x0, x1 and the text labels."""
    lines = ["x0,x1,label"] + [f"{a:.17g},{b:.17g},{k}" for (a, b), k in zip(x, labels)]
    (tmp / f"{name}.csv").write_text("\n".join(lines) + "\n")
    return cli_fit(cli, tmp, name, task="classification", precision="float64",
                   layers=f'[{{ type = "dense", units = {units} }}, {{ type = "tanh" }}, '
                          '{ type = "dense", units = 3 }]',
                   inputs='["x0", "x1"]', targets='["label"]', seed=seed)


def run_cli(cli: str, *args: str) -> str:
    result = subprocess.run([cli, *args], capture_output=True, text=True)
    assert result.returncode == 0, f"lmtrain {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def cli_fit(cli: str, tmp: Path, name: str, *, layers: str, task: str = "regression",
            precision: str = "float64", extra_data: str = "", solver: str = "",
            trainer: str = "max_epochs = 8\nbatch_size = 0\n", targets: str,
            inputs: str, seed: int = 3, extra_source: str = "") -> lmtrain.Model:
    config = tmp / f"{name}.toml"
    config.write_text(
        f'seed = {seed}\nprecision = "{precision}"\noutput_dir = "{name}"\n'
        f"[model]\nlayers = {layers}\n"
        f'[data]\ntask = "{task}"\n{extra_data}'
        f'[data.train]\npath = "{name}.csv"\ninputs = {inputs}\ntargets = {targets}\n'
        f"{extra_source}"
        f"[solver]\n{solver}[trainer]\n{trainer}")
    run_cli(cli, "fit", str(config), "--quiet")
    return lmtrain.load(tmp / name / "model.safetensors")


def worst_relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-3 * np.max(np.abs(b)))))


REGRESSION_LAYERS = ('[{ type = "dense", units = 8 }, { type = "tanh" }, '
                     '{ type = "dense", units = 2 }]')
INPUTS = '["x0", "x1", "x2", "x3"]'
TARGETS = '["y0", "y1"]'


@pytest.mark.parametrize("case", ["full_batch", "mini_batch_validation", "ard",
                                  "weighted_split"])
def test_fit_gives_the_cli_parameters_in_float64(cli: str, tmp_path: Path, case: str) -> None:
    x, y = regression_data()
    options: dict = {"max_epochs": 8}
    extra_data, solver, trainer = "", "", "max_epochs = 8\nbatch_size = 0\n"
    extra_source = ""
    if case == "weighted_split":  # a weight column, split with its rows into the validation set
        w = np.random.default_rng(5).uniform(0, 3, len(x))
        write_csv(tmp_path / f"{case}.csv", np.column_stack([x, w]), y)
        extra_source = 'weights = "x4"\n'
        extra_data = "validation_fraction = 0.25\n"
        options.update(sample_weight=one_ulp(w), validation_fraction=0.25)
    else:
        write_csv(tmp_path / f"{case}.csv", x, y)
    if case == "mini_batch_validation":
        extra_data = "validation_fraction = 0.2\n"
        trainer = "max_epochs = 8\nbatch_size = 64\n"
        options.update(batch_size=64, validation_fraction=0.2)
    if case == "ard":
        solver = 'regularization = "ard"\n'
        options.update(regularization="ard")
    cli_model = cli_fit(cli, tmp_path, case, layers=REGRESSION_LAYERS, extra_data=extra_data,
                        solver=solver, trainer=trainer, inputs=INPUTS, targets=TARGETS,
                        extra_source=extra_source)
    model, summary = lmtrain.fit([8, "tanh", 2], one_ulp(x), one_ulp(y), precision="float64",
                                 seed=3, **options)
    difference = np.max(np.abs(model.parameters - cli_model.parameters))
    print(f"{case}: max |θ_python − θ_cli| = {difference:.3e} over {model.parameters.size} "
          f"parameters; final loss {summary.final_loss:.6e}")
    within("parameters", model.parameters, cli_model.parameters, PARAMETER_TOLERANCE)
    within("final loss", summary.final_loss, cli_model.provenance["final_loss"], 1e-8,
           relative=True)
    assert summary.epochs == cli_model.provenance["epochs"]
    # The statistics of the same doubles (measure-spread.sh's one ulp makes them other ones).
    if os.environ.get("LMTRAIN_SPREAD_ULP") != "1":
        np.testing.assert_allclose(model.input_mean, cli_model.input_mean, rtol=1e-15)
        np.testing.assert_allclose(model.target_std, cli_model.target_std, rtol=1e-15)


def test_load_reads_a_cli_model_and_predicts_as_lmtrain_predict(cli: str, tmp_path: Path) -> None:
    x, y = regression_data()
    write_csv(tmp_path / "reg.csv", x, y)
    model = cli_fit(cli, tmp_path, "reg", layers=REGRESSION_LAYERS, precision="float32",
                    inputs=INPUTS, targets=TARGETS)
    assert model.parameter_dtype == "float32" and model.input_mean is not None
    run_cli(cli, "predict", str(tmp_path / "reg/model.safetensors"), "--data",
            str(tmp_path / "reg.csv"), "--out", str(tmp_path / "pred.npy"))
    expected = np.load(tmp_path / "pred.npy")
    assert worst_relative(model.predict(x), expected) <= 1e-6


def test_lmtrain_predict_reads_a_python_model(cli: str, tmp_path: Path) -> None:
    x, y = regression_data()
    model, _ = lmtrain.fit([8, "tanh", 2], x, y, precision="float64", max_epochs=5)
    model.save(tmp_path / "model.safetensors")
    write_csv(tmp_path / "inputs.csv", x, y)
    run_cli(cli, "predict", str(tmp_path / "model.safetensors"), "--data",
            str(tmp_path / "inputs.csv"), "--columns", "x0,x1,x2,x3",
            "--out", str(tmp_path / "pred.npy"))
    expected = np.load(tmp_path / "pred.npy")
    assert worst_relative(model.predict(x), expected) <= 1e-12
    info = run_cli(cli, "info", str(tmp_path / "model.safetensors"))
    assert "4-8-2 tanh" in info


def test_lmtrain_predict_reads_a_python_models_columns_by_name(cli: str, tmp_path: Path) -> None:
    # A DataFrame's column names travel in the model file: `lmtrain predict` finds them in a CSV
    # whose columns are in another order, with the targets first.
    pd = pytest.importorskip("pandas")
    x, y = regression_data()
    frame = pd.DataFrame(x, columns=["a", "b", "c", "d"])
    model, _ = lmtrain.fit([8, "tanh", 2], frame, y, precision="float64", max_epochs=5)
    assert model.input_names == ["a", "b", "c", "d"]
    model.save(tmp_path / "model.safetensors")
    table = np.column_stack([y, x[:, ::-1]])
    np.savetxt(tmp_path / "reordered.csv", table, delimiter=",", header="y0,y1,d,c,b,a",
               comments="", fmt="%.17g")
    run_cli(cli, "predict", str(tmp_path / "model.safetensors"), "--data",
            str(tmp_path / "reordered.csv"), "--out", str(tmp_path / "pred.npy"))
    assert worst_relative(model.predict(frame), np.load(tmp_path / "pred.npy")) <= 1e-12
    assert lmtrain.load(tmp_path / "model.safetensors").input_names == ["a", "b", "c", "d"]


def test_classifier_files_go_both_ways(cli: str, tmp_path: Path) -> None:
    labels, x = three_blobs(300, 5)
    x = x + [10, -4]
    write_csv(tmp_path / "cls.csv", x, labels[:, None], label=True)
    cli_model = cli_fit(cli, tmp_path, "cls", task="classification", precision="float64",
                        layers='[{ type = "dense", units = 6 }, { type = "tanh" }, '
                               '{ type = "dense", units = 3 }]',
                        extra_data="classes = 3\n", inputs='["x0", "x1"]',
                        targets='["label"]', solver="", seed=1)
    model, _ = lmtrain.fit([6, "tanh", 3], one_ulp(x), labels, task="classification",
                           precision="float64", seed=1, max_epochs=8)
    within("parameters", model.parameters, cli_model.parameters, PARAMETER_TOLERANCE)
    model.save(tmp_path / "py.safetensors")
    run_cli(cli, "predict", str(tmp_path / "py.safetensors"), "--data", str(tmp_path / "cls.csv"),
            "--columns", "x0,x1", "--out", str(tmp_path / "pred.npy"))
    expected = np.load(tmp_path / "pred.npy")
    np.testing.assert_array_equal(model.predict(x).astype(float), expected[:, 0])
    np.testing.assert_allclose(model.predict_proba(x), expected[:, 1:], rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(cli_model.predict(x), expected[:, 0])


def test_text_class_labels_name_the_same_classes_in_both(cli: str, tmp_path: Path) -> None:
    # `lmtrain fit` on a CSV of names sorts them as np.unique does: lmtrain.fit on the same names
    # gives the CLI's parameters, the loaded model's classes are the names, and `lmtrain predict`
    # writes the name Python predicts.
    names = np.array(["virginica", "setosa", "versicolor"])
    codes, x = three_blobs(240, 8)
    cli_model = fit_on_named_labels(cli, tmp_path, "iris", x, names[codes], units=5, seed=2)
    assert list(cli_model.classes) == ["setosa", "versicolor", "virginica"]
    model, _ = lmtrain.fit([5, "tanh", 3], one_ulp(x), names[codes], task="classification",
                           precision="float64", seed=2, max_epochs=8)
    within("parameters", model.parameters, cli_model.parameters, PARAMETER_TOLERANCE)
    run_cli(cli, "predict", str(tmp_path / "iris" / "model.safetensors"), "--data",
            str(tmp_path / "iris.csv"), "--out", str(tmp_path / "pred.csv"))
    written = [line.split(",")[0] for line in (tmp_path / "pred.csv").read_text().splitlines()]
    assert written[0] == "class"
    assert written[1:] == list(cli_model.predict(x))
    assert (cli_model.predict(x) == names[codes]).mean() > 0.8


def test_evaluate_gives_the_figures_of_cli_eval_json(cli: str, tmp_path: Path) -> None:
    names = np.array(["b", "a", "c"])
    codes, x = three_blobs(180, 9)
    model = fit_on_named_labels(cli, tmp_path, "abc", x, names[codes], units=4, seed=4)
    printed = json.loads(run_cli(cli, "eval", str(tmp_path / "abc" / "model.safetensors"),
                                 "--data", str(tmp_path / "abc.csv"), "--json"))
    figures = model.evaluate(x, names[codes])
    assert figures.pop("description") == "180 samples"
    assert printed.pop("description").startswith(str(tmp_path / "abc.csv"))
    assert figures == printed
