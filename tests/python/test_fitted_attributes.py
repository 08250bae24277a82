"""The estimators' fitted attributes and lmtrain.fit's Summary, against numpy on the
predictions: losses are mean squared errors in standardized units (y's mean and population
standard deviation), the validation curve is that of the held-out rows, the best epoch's model is
the one returned, and the evidence's effective parameters add up over ARD's groups."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pandas as pd
import pytest

import lmtrain
from lmtrain import LMClassifier, LMRegressor


def data(rows: int = 200, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, 3)) * [1.0, 3.0, 0.2] + [0.0, 5.0, -1.0]
    y = np.sin(X[:, 0]) + 0.1 * (X[:, 1] - 5) * (X[:, 2] + 1) * 5 + 0.05 * rng.normal(size=rows)
    return X, y


def standardized_mse(predicted: np.ndarray, y: np.ndarray, reference: np.ndarray) -> float:
    return float(np.mean((predicted - y) ** 2) / np.var(reference))


def test_loss_curve_and_n_iter_are_the_training_mse_per_epoch() -> None:
    X, y = data()
    net = LMRegressor(hidden_layer_sizes=(6,), max_epochs=12, random_state=0).fit(X, y)
    assert net.n_iter_ == 12 == len(net.loss_curve_) == net.summary_.epochs
    assert net.loss_curve_[-1] == net.summary_.final_loss
    assert net.loss_curve_[-1] == pytest.approx(standardized_mse(net.predict(X), y, y), rel=1e-9)
    # LM accepts only steps that lower the loss (full batch).
    assert all(b <= a for a, b in zip(net.loss_curve_, net.loss_curve_[1:]))
    assert net.loss_curve_[-1] < 0.05 * net.summary_.initial_loss
    assert net.validation_scores_ is None and net.effective_parameters_ is None
    assert not hasattr(net, "feature_relevances_")


def test_summary_is_the_report_and_its_fields() -> None:
    X, y = data()
    net = LMRegressor(hidden_layer_sizes=(5,), max_epochs=4, random_state=0).fit(X, y)
    report = net.summary_.full_report()
    assert report.lstrip().startswith("lmtrain report")
    assert "3-5-1 tanh (26 parameters)" in report and net.summary_.num_params == 26
    assert f"{net.summary_.final_loss:.6e}" in report
    lines = {line.split("  ")[0]: line for line in report.splitlines()}
    assert lines["Epochs"].split()[-1] == "4"
    assert net.summary_.training_samples == 200 and net.summary_.termination == "max_epochs"
    # One rank: the whole batch is its share, A is not distributed, no per-rank peaks.
    summary = net.summary_
    assert summary.ranks == 1 and summary.balance == "equal" and summary.batch_shares == (1.0,)
    assert summary.distribution == "" and summary.rank_peak_bytes == ()
    back = pickle.loads(pickle.dumps(summary))
    assert back.batch_shares == (1.0,) and back.full_report() == report


def test_early_stopping_holds_out_validation_fraction_and_scores_it() -> None:
    X, y = data(rows=120)
    net = LMRegressor(hidden_layer_sizes=(30,), max_epochs=200, early_stopping=True,
                      validation_fraction=0.25, n_iter_no_change=2, random_state=0).fit(X, y)
    summary = net.summary_
    assert summary.validation_samples == 30 and summary.training_samples == 90
    assert len(net.validation_scores_) == net.n_iter_ < 200
    assert summary.termination == "validation_max_fail"
    assert net.best_validation_loss_ == min(net.validation_scores_)
    # Stopped n_iter_no_change epochs after the best one, and restored it.
    assert net.validation_scores_.index(net.best_validation_loss_) == net.n_iter_ - 3
    assert summary.restored_best


def test_the_restored_model_has_the_best_validation_loss() -> None:
    # With explicit validation data the held-out rows are known: numpy recomputes the loss.
    X, y = data(rows=40, seed=2)
    X_val, y_val = data(rows=60, seed=3)
    model, summary = lmtrain.fit([30, "tanh", 1], X, y, precision="float64", max_epochs=100,
                                 validation=(X_val, y_val), max_validation_failures=2)
    assert summary.restored_best and summary.epochs < 100
    assert summary.validation_curve[-1] > summary.best_validation_loss
    assert summary.best_validation_loss == pytest.approx(
        standardized_mse(model.predict(X_val), y_val, y), rel=1e-9)


def test_bayesian_effective_parameters() -> None:
    X, y = data()
    net = LMRegressor(hidden_layer_sizes=(8,), regularization="bayesian", max_epochs=30,
                      random_state=0).fit(X, y)
    assert 1 < net.effective_parameters_ < net.summary_.num_params == 41
    assert net.effective_parameters_ == net.summary_.effective_parameters
    assert net.summary_.final_weight_decay > 0
    # One ρ for all parameters: no per-group breakdown (that is ard's).
    assert net.summary_.penalty_groups == ()


def test_ard_relevances_name_dataframe_columns_and_match_the_groups() -> None:
    X, y = data()
    columns = ["sine", "product_a", "product_b"]
    frame = pd.DataFrame(X, columns=columns)
    net = LMRegressor(hidden_layer_sizes=(6,), regularization="ard", weight_decay=1e-3,
                      max_epochs=30, random_state=0).fit(frame, y)
    relevances = net.feature_relevances_
    assert isinstance(relevances, pd.Series) and list(relevances.index) == columns
    groups = net.summary_.penalty_groups
    for i, name in enumerate(columns):
        assert name in groups[i].name
        assert relevances[name] == groups[i].effective_parameters / groups[i].size == \
            pytest.approx(groups[i].effective_parameters / 6)
        assert 0 <= relevances[name] <= 1
    assert sum(g.effective_parameters for g in groups) == pytest.approx(
        net.effective_parameters_, rel=1e-12)
    # The same data as an ndarray: the same numbers, unnamed.
    plain = LMRegressor(hidden_layer_sizes=(6,), regularization="ard", weight_decay=1e-3,
                        max_epochs=30, random_state=0).fit(X, y)
    assert isinstance(plain.feature_relevances_, np.ndarray)
    np.testing.assert_allclose(plain.feature_relevances_, relevances.to_numpy(), rtol=1e-12)


def test_classifier_attributes_and_probabilities() -> None:
    rng = np.random.default_rng(4)
    labels = rng.choice(["cat", "dog", "eel"], size=150)
    centers = {"cat": [0, 0], "dog": [3, 0], "eel": [0, 3]}
    X = np.array([centers[k] for k in labels]) + rng.normal(scale=0.8, size=(150, 2))
    net = LMClassifier(hidden_layer_sizes=(5,), max_epochs=15, random_state=0).fit(X, labels)
    assert list(net.classes_) == ["cat", "dog", "eel"]
    proba = net.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1, rtol=1e-12)
    np.testing.assert_array_equal(net.classes_[proba.argmax(axis=1)], net.predict(X))
    # The reported loss is the mean cross-entropy of the predicted probabilities.
    codes = np.searchsorted(net.classes_, labels)
    cross_entropy = -np.mean(np.log(proba[np.arange(150), codes]))
    assert net.loss_curve_[-1] == pytest.approx(cross_entropy, rel=1e-6)
    assert net.score(X, labels) > 0.85


def test_classifier_with_the_sampled_gauss_newton_loss() -> None:
    """loss="cross_entropy_sampled": one sampled Gauss–Newton row per sample.  Its reported loss
    is the mean cross-entropy of its own probabilities, its accuracy that of the exact loss on the
    same data, and a fit repeats exactly for one random_state.  Full batch, its noise does not
    vanish at the minimum: after 25 epochs its loss was 0.226 against the exact loss's 0.172
    (from log 4 = 1.39)."""
    rng = np.random.default_rng(7)
    labels = rng.integers(0, 4, size=400)
    centers = np.array([[0, 0], [2.5, 0], [0, 2.5], [2.5, 2.5]])
    X = centers[labels] + rng.normal(scale=0.7, size=(400, 2))
    kwargs = dict(hidden_layer_sizes=(6,), max_epochs=25, random_state=0)
    sampled = LMClassifier(loss="cross_entropy_sampled", **kwargs).fit(X, labels)
    exact = LMClassifier(loss="cross_entropy", **kwargs).fit(X, labels)
    proba = sampled.predict_proba(X)
    cross_entropy = -np.mean(np.log(proba[np.arange(400), labels]))
    assert sampled.loss_curve_[-1] == pytest.approx(cross_entropy, rel=1e-6)
    assert sampled.score(X, labels) > exact.score(X, labels) - 0.03
    assert sampled.loss_curve_[-1] < 1.5 * exact.loss_curve_[-1]
    again = LMClassifier(loss="cross_entropy_sampled", **kwargs).fit(X, labels)
    np.testing.assert_array_equal(again.predict_proba(X), proba)


def test_tf32_on_the_cpu_is_reported_and_changes_nothing() -> None:
    # solver.tf32 is a CUDA option: on the CPU the fit's parameters are those without it, bit for
    # bit, and the summary says why it was not applied.
    X, y = data(rows=80, seed=4)
    plain, _ = lmtrain.fit([6, "tanh", 1], X, y, precision="float32", max_epochs=3, seed=1)
    asked, summary = lmtrain.fit([6, "tanh", 1], X, y, precision="float32", max_epochs=3, seed=1,
                                 tf32=True)
    assert "tf32: ignored, the CPU has no TF32 arithmetic" in summary.normal_matrix
    assert np.array_equal(asked.parameters, plain.parameters)


def test_cuda_graphs_on_the_cpu_are_reported_and_change_nothing() -> None:
    # solver.cuda_graphs records the cholesky attempts on a CUDA device: on the CPU the fit's
    # parameters are those without it, bit for bit, and the summary says why it was not applied.
    X, y = data(rows=80, seed=4)
    plain, _ = lmtrain.fit([6, "tanh", 1], X, y, max_epochs=3, seed=1)
    asked, summary = lmtrain.fit([6, "tanh", 1], X, y, max_epochs=3, seed=1, cuda_graphs=True)
    assert "cuda_graphs: ignored, the CPU runs work as it is queued" in summary.normal_matrix
    assert np.array_equal(asked.parameters, plain.parameters)


def test_reports_name_options_as_python_writes_them() -> None:
    # The library's text names options as the C++ API does (SolverOptions::lambda_max); Python
    # shows the keyword arguments.  λ ends this run (lambda_max = 1e-3 with ×10 damping).
    X, y = data(rows=80, seed=4)
    _, summary = lmtrain.fit([6, "tanh", 1], X, y, max_epochs=200, seed=1,
                             damping="multiplicative", lambda_initial=1e-3, lambda_max=1e-3,
                             tf32=True)
    assert summary.termination == "lambda_above_max"
    assert "λ at lambda_max = 1.000e-03" in summary.message
    assert summary.normal_matrix.startswith("tf32: ignored")
    for text in (summary.message, summary.full_report(), str(summary), summary.to_json()):
        assert "SolverOptions::" not in text and "solver." not in text


def test_split_k_normal_matrix_follows_syrk() -> None:
    # normal_matrix="split_k" forms A by split-K on the CPU too (the algorithm a GPU may choose):
    # the summary says so, and 4 float64 steps end where SYRK's end, to rounding (measured
    # 6.2e-15 relative with OpenBLAS's Haswell kernels, 5.0e-15 with SkylakeX; bound 1e-9).
    X, y = data(rows=1200, seed=5)
    kwargs = dict(precision="float64", max_epochs=2, batch_size=600, seed=2)
    syrk, _ = lmtrain.fit([8, "tanh", 1], X, y, **kwargs)
    split, summary = lmtrain.fit([8, "tanh", 1], X, y, normal_matrix="split_k", **kwargs)
    assert "600 rows: split-K, 2 blocks of 300 rows" in summary.normal_matrix
    gap = np.max(np.abs(split.parameters - syrk.parameters)) / np.max(np.abs(syrk.parameters))
    assert gap <= 1e-9
    with pytest.raises(ValueError, match="normal_matrix"):
        lmtrain.fit([8, "tanh", 1], X, y, normal_matrix="fast", **kwargs)


def test_an_option_the_run_does_not_use_is_a_warning() -> None:
    # The engine judges it (Summary.options_ignored); lmtrain.fit warns in Python's words.
    X, y = data(rows=80, seed=4)
    with pytest.warns(UserWarning, match=r"^weight_decay = 0.001: ignored, regularization is "
                                         r"none \(l2, bayesian and ard use it\)$"):
        _, summary = lmtrain.fit([6, "tanh", 1], X, y, max_epochs=2, weight_decay=1e-3)
    assert len(summary.options_ignored) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, quiet = lmtrain.fit([6, "tanh", 1], X, y, max_epochs=2, weight_decay=1e-3,
                               regularization="l2")
        LMRegressor(hidden_layer_sizes=(6,), max_epochs=2, random_state=0).fit(X, y)
        LMRegressor(hidden_layer_sizes=(6,), max_epochs=2, random_state=0, early_stopping=True,
                    n_iter_no_change=3).fit(X, y)
    assert quiet.options_ignored == ()
    # The trainer's too, and the estimator names its own parameter.
    with pytest.warns(UserWarning, match=r"^n_iter_no_change = 3: ignored, the run has no "
                                         r"validation data"):
        LMRegressor(hidden_layer_sizes=(6,), max_epochs=2, random_state=0,
                    n_iter_no_change=3).fit(X, y)
    with pytest.warns(UserWarning, match=r"^restore_best is off: ignored"):
        lmtrain.fit([6, "tanh", 1], X, y, max_epochs=2, restore_best=False)


def test_set_cpu_threads_fixes_the_count_and_zero_gives_the_choice_back() -> None:
    X, y = data(rows=80, seed=5)
    lmtrain.set_cpu_threads(1)
    try:
        model, fixed = lmtrain.fit([6, "tanh", 1], X, y, max_epochs=3)
        again, repeated = lmtrain.fit([6, "tanh", 1], X, y, max_epochs=3)
    finally:
        lmtrain.set_cpu_threads(0)
    assert "set_cpu_threads(1)" in fixed.threads, fixed.threads
    np.testing.assert_array_equal(model.predict(X), again.predict(X))  # a fixed count: same bits
    assert repeated.final_loss == fixed.final_loss
    _, chosen = lmtrain.fit([6, "tanh", 1], X, y, max_epochs=3)
    assert "set_cpu_threads" not in chosen.threads, chosen.threads
    with pytest.raises(ValueError, match=r"threads must be >= 0 \(0: lmtrain chooses\), got -1"):
        lmtrain.set_cpu_threads(-1)
    for bad in (1.5, True, "2"):
        with pytest.raises(TypeError, match="threads must be an int"):
            lmtrain.set_cpu_threads(bad)
