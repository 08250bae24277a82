"""What reaches the library: NumPy input read in place when it can be (the C++ side reports the
buffer it read), converted once otherwise (to the same numbers), and bad input refused with
ValueError or TypeError naming the argument — before anything is trained or written."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
import pytest

import lmtrain
from lmtrain import LMClassifier, LMRegressor, _core


def data(rows: int = 60, dtype: Any = np.float64) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(11)
    X = rng.normal(size=(rows, 3)).astype(dtype)
    y = (np.sin(X[:, 0]) + X[:, 1] * X[:, 2]).astype(dtype)
    return X, y


def address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_c_contiguous_float_input_is_read_in_place(dtype: Any) -> None:
    X, y = data(dtype=dtype)
    y2 = np.column_stack([y, -y])
    lmtrain.fit([4, "tanh", 2], X, y2, max_epochs=1)
    assert _core.last_input_addresses() == (address(X), address(y2))
    # A 1-D y is a (n, 1) view of the same buffer.
    lmtrain.fit([4, "tanh", 1], X, y, max_epochs=1)
    assert _core.last_input_addresses() == (address(X), address(y))
    # The estimator's validation (scikit-learn's) keeps the buffer too.
    LMRegressor(hidden_layer_sizes=(4,), max_epochs=1, random_state=0).fit(X, y)
    assert _core.last_input_addresses()[0] == address(X)


@pytest.mark.parametrize("variant", ["fortran", "strided", "int64", "dataframe", "list"])
def test_other_input_is_converted_once_to_the_same_numbers(variant: str) -> None:
    X, y = data()
    X = np.round(X * 4)  # integer-valued, so that the int64 variant holds the same numbers
    reference, _ = lmtrain.fit([4, "tanh", 1], X, y, precision="float64", max_epochs=3)
    given: Any = {"fortran": np.asfortranarray(X),
                  "strided": np.repeat(X, 2, axis=1)[:, ::2],
                  "int64": X.astype(np.int64),
                  "dataframe": pd.DataFrame(X, columns=["a", "b", "c"]),
                  "list": X.tolist()}[variant]
    model, _ = lmtrain.fit([4, "tanh", 1], given, y, precision="float64", max_epochs=3)
    if isinstance(given, np.ndarray):
        assert _core.last_input_addresses()[0] != address(given)
    np.testing.assert_array_equal(model.parameters, reference.parameters)


X_, y_ = data()
NAN_X = np.where(X_ > 1.5, np.nan, X_)
INF_Y = np.where(y_ > 1.0, np.inf, y_)


def fit(**changes: Any) -> Callable[[], Any]:
    arguments: dict[str, Any] = {"layers": [3, "tanh", 1], "X": X_, "y": y_, "max_epochs": 2}
    arguments.update(changes)
    return lambda: lmtrain.fit(arguments.pop("layers"), arguments.pop("X"), arguments.pop("y"),
                               **arguments)


BAD = {
    "NaN in X": (fit(X=NAN_X), ValueError, ["X contains NaN or infinity", "row"]),
    "inf in y": (fit(y=INF_Y), ValueError, ["y contains NaN or infinity"]),
    "NaN in validation": (fit(validation=(NAN_X, y_)), ValueError, ["validation X"]),
    "1-D X": (fit(X=X_[:, 0]), ValueError, ["X: expected a 2-D array", "reshape"]),
    "3-D X": (fit(X=X_[:, :, None]), ValueError, ["X: expected a 2-D array"]),
    "rows differ": (fit(y=y_[:-5]), ValueError, ["y has 55 rows but X has 60"]),
    "no rows": (fit(X=X_[:0], y=y_[:0]), ValueError, ["X: expected at least 1 row"]),
    "strings": (fit(X=X_.astype(str)), TypeError, ["X: expected a numeric array"]),
    "complex": (fit(y=y_ + 1j), TypeError, ["y: expected real numbers"]),
    "objects": (fit(X=np.array([[{}, 1, 2]] * 60, dtype=object)), TypeError, ["X: expected numbers"]),
    "unknown option": (fit(max_epoch=3), TypeError, ["'max_epoch'", "did you mean 'max_epochs'"]),
    "option type": (fit(max_epochs="3"), TypeError, ["max_epochs: expected int"]),
    "option range": (fit(max_epochs=0), ValueError, ["max_epochs", "≥ 1"]),
    "option choice": (fit(damping="levenberg"), ValueError, ["damping", "nielsen"]),
    "precision": (fit(precision="half"), ValueError, ["precision", "float64"]),
    "device": (fit(device="tpu"), ValueError, ["device", "cpu"]),
    "outputs": (fit(layers=[3, "tanh", 2]), ValueError, ["gives 2 outputs", "1 target"]),
    "activation": (fit(layers=[3, "tahn", 1]), ValueError, ["layers[1]", "did you mean 'tanh'"]),
    "one class": (fit(layers=[3, "tanh", 2], y=np.zeros(60), task="classification"),
                  ValueError, ["y: classification needs at least 2 classes"]),
    "validation split": (fit(X=X_[:5], y=y_[:5], validation_fraction=0.1), ValueError,
                         ["validation_fraction", "holds out no row"]),
    "seed": (fit(seed=-1), ValueError, ["seed = -1", "[0, 2**64)"]),
    "seed type": (fit(seed=1.5), TypeError, ["seed: expected a non-negative int"]),
    "seed range": (fit(seed=2**64), ValueError, ["seed = 18446744073709551616"]),
    "checkpoint cadence": (fit(checkpoint="c.safetensors", checkpoint_every=-1), ValueError,
                           ["checkpoint_every = -1", "≥ 0"]),
    "validation twice": (fit(validation=(X_, y_), validation_fraction=0.2), ValueError,
                         ["validation and validation_fraction = 0.2 both given"]),
    "bce targets": (fit(loss="bce"), ValueError, ["training data: target of sample",
                                                  "\"bce\" takes targets in [0, 1]"]),
    "estimator bce": (lambda: LMRegressor(loss="bce").fit(X_, y_ > 0), ValueError,
                      ["loss = 'bce': LMRegressor takes 'mse', 'huber', 'l1'", "LMClassifier"]),
    "non-finite loss": (fit(y=y_ * 1e200, standardize_targets=False, precision="float64"),
                        ValueError, ["training stopped after 0 epochs", "not finite",
                                     ".model and .summary"]),
    "checkpoint folder": (fit(checkpoint="/nonexistent/folder/c.safetensors"),
                          FileNotFoundError, ["checkpoint", "/nonexistent/folder"]),
    "resume file": (fit(resume="/nonexistent/c.safetensors"), FileNotFoundError, ["resume"]),
    "estimator option": (lambda: LMRegressor(solver_options={"lamda_initial": 1}).fit(X_, y_),
                         TypeError, ["solver_options", "'lamda_initial'"]),
    "estimator seed option": (lambda: LMRegressor(solver_options={"seed": 3}).fit(X_, y_),
                              TypeError, ["'seed' is the estimator's parameter 'random_state'"]),
    "estimator renamed option": (
        lambda: LMRegressor(solver_options={"max_validation_failures": 2}).fit(X_, y_),
        TypeError, ["'max_validation_failures' is the estimator's parameter 'n_iter_no_change'"]),
    "estimator standardize": (lambda: LMRegressor(standardize="no").fit(X_, y_), TypeError,
                              ["standardize: expected a bool, got 'no'"]),
    "estimator random_state": (lambda: LMRegressor(random_state=2**64).fit(X_, y_), ValueError,
                               ["random_state = 18446744073709551616"]),
    "estimator non-finite loss": (
        lambda: LMRegressor(standardize=False, max_epochs=3).fit(X_, y_ * 1e200), ValueError,
        ["training stopped after 0 epochs"]),
    "estimator layers": (lambda: LMRegressor(hidden_layer_sizes=(4, 0)).fit(X_, y_),
                         ValueError, ["hidden_layer_sizes[1] = 0"]),
    "estimator fraction": (lambda: LMRegressor(early_stopping=True,
                                               validation_fraction=1.5).fit(X_, y_),
                           ValueError, ["validation_fraction = 1.5"]),
    "estimator features": (lambda: LMRegressor(max_epochs=1).fit(X_, y_).predict(X_[:, :2]),
                           ValueError, ["X has 2 features", "3"]),
    "classifier NaN": (lambda: LMClassifier().fit(NAN_X, y_ > 0), ValueError, ["NaN"]),
    "model file": (lambda: lmtrain.load("/nonexistent/model.safetensors"), FileNotFoundError,
                   ["/nonexistent/model.safetensors"]),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_raises_naming_the_argument(case: str, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    call, error, fragments = BAD[case]
    with pytest.raises(error) as raised:
        call()
    for fragment in fragments:
        assert fragment in str(raised.value)
    assert os.listdir(tmp_path) == []  # nothing written


def test_a_failed_save_leaves_no_partial_file(tmp_path: Path) -> None:
    model, _ = lmtrain.fit([3, "tanh", 1], X_, y_, max_epochs=1)
    (tmp_path / "model.safetensors").mkdir()  # the rename onto it fails
    with pytest.raises(RuntimeError, match="model.safetensors"):
        model.save(tmp_path / "model.safetensors")
    assert os.listdir(tmp_path) == ["model.safetensors"]


def test_a_garbage_model_file_is_a_value_error(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    path.write_bytes(b"\x08\0\0\0\0\0\0\0{}garbage")
    with pytest.raises(ValueError, match="not a valid safetensors file"):
        lmtrain.load(path)


def test_a_stopped_run_keeps_its_network_and_report() -> None:
    # `lmtrain fit` exits with code 3 here; lmtrain.fit raises, the last finite network attached.
    start = np.random.default_rng(5).normal(size=16)  # 3-3-1: 12 + 3 + 1 parameters
    with pytest.raises(ValueError) as raised:
        lmtrain.fit([3, "tanh", 1], X_, y_ * 1e200, standardize_targets=False,
                    precision="float64", max_epochs=3, initial_parameters=start)
    assert raised.value.summary.termination == "non_finite_objective"
    assert raised.value.summary.epochs == 0
    np.testing.assert_array_equal(raised.value.model.parameters, start)  # nothing accepted


@pytest.mark.parametrize("labels, expected", [
    (np.array([0, 1]), np.array([0, 1])),
    (np.array([0.0, 0.5]), np.array([0.0, 0.5])),
    (np.array([False, True]), np.array([False, True])),
    (np.array(["01", "2"]), np.array(["01", "2"])),
    (np.array(["cat", "dog"]), np.array(["cat", "dog"])),
])
def test_a_models_labels_keep_their_type(labels: np.ndarray, expected: np.ndarray,
                                         tmp_path: Path) -> None:
    y = labels[(y_ > 0.2).astype(int)]
    model, _ = lmtrain.fit([4, "tanh", 2], X_, y, task="classification", max_epochs=20)
    model.save(tmp_path / "model.safetensors")
    for m in (model, lmtrain.load(tmp_path / "model.safetensors")):
        assert m.classes.dtype.kind == expected.dtype.kind
        np.testing.assert_array_equal(m.classes, expected)
        # The labels compare equal to the training labels: accuracy as a user computes it.
        assert (m.predict(X_) == y).mean() > 0.9


def test_bce_trains_on_probabilities_and_predicts_them() -> None:
    # bce's targets are never standardized (they would leave [0, 1]); predict is the sigmoid of
    # the logits, as `lmtrain predict` writes it.
    p = 1.0 / (1.0 + np.exp(-3.0 * X_[:, 0]))
    labels = (np.random.default_rng(3).uniform(size=len(p)) < p).astype(float)
    model, summary = lmtrain.fit([6, "tanh", 1], X_, labels, loss="bce", precision="float64",
                                 max_epochs=30)
    assert model.target_mean is None and model.loss == "bce"
    probabilities = model.predict(X_)
    np.testing.assert_allclose(probabilities, 1.0 / (1.0 + np.exp(-model.outputs(X_)[:, 0])),
                               rtol=1e-15)
    assert np.all((probabilities > 0) & (probabilities < 1))
    # The reported loss is the mean binary cross-entropy of those probabilities.
    bce = -np.mean(labels * np.log(probabilities) + (1 - labels) * np.log1p(-probabilities))
    assert summary.final_loss == pytest.approx(bce, rel=1e-9)
    assert bce < 0.6 * np.log(2)  # well below the constant predictor's log 2


def test_describe_options_gives_each_option_its_default_and_meaning() -> None:
    rows = lmtrain.describe_options()
    assert sorted(r["name"] for r in rows) == lmtrain.option_names()
    assert all(r["doc"] and r["group"] in ("solver", "trainer", "loss") for r in rows)
    # Passing an option its described default trains exactly as leaving it out.
    reference, _ = lmtrain.fit([3, "tanh", 1], X_, y_, max_epochs=2, precision="float64")
    for row in rows:
        if row["name"] == "max_epochs":
            continue
        model, _ = lmtrain.fit([3, "tanh", 1], X_, y_, max_epochs=2, precision="float64",
                               **{row["name"]: row["default"]})
        np.testing.assert_array_equal(model.parameters, reference.parameters, err_msg=row["name"])
