"""Model.evaluate: `lmtrain eval --json`'s figures from Python, against numpy on the model's own
predictions (accuracy, confusion, MSE, R²) and against the fit's own final loss."""

from __future__ import annotations

import numpy as np
import pytest

import lmtrain


def test_regression_figures_are_numpys_on_the_predictions() -> None:
    rng = np.random.default_rng(11)
    x = rng.normal(size=(150, 2)) * [2.0, 0.5] + [1.0, -3.0]
    y = np.column_stack([np.sin(x[:, 0]) + x[:, 1], np.cos(x[:, 1]) * 4 + 10])
    model, summary = lmtrain.fit([8, "tanh", 2], x, y, max_epochs=6, precision="float64", seed=1)
    figures = model.evaluate(x, y)
    p = model.predict(x)
    assert figures["samples"] == 150 and figures["loss_name"] == "mse"
    # The library and numpy sum 300 squares in other orders: they may differ by about 300 ulps
    # of the sum, 7e-14 relative; 1e-12 is that bound with room, far below any wrong formula.
    assert figures["mse"] == pytest.approx(np.mean((p - y) ** 2), rel=1e-12)
    r2 = 1 - np.sum((p - y) ** 2) / np.sum((y - y.mean(axis=0)) ** 2)
    assert figures["r2"] == pytest.approx(r2, rel=1e-12)
    # The loss is the one training reports, on standardized targets: full batch, the fit's own.
    assert figures["loss_on_standardized_targets"] is True
    assert figures["loss"] == pytest.approx(summary.final_loss, rel=1e-9)
    with pytest.raises(ValueError, match=r"y: expected shape \(150, 2\)"):
        model.evaluate(x, y[:, :1])


def test_classifier_figures_count_the_predictions_and_name_the_classes() -> None:
    rng = np.random.default_rng(12)
    names = np.array(["virginica", "setosa", "versicolor"])
    codes = rng.integers(0, 3, 200)
    x = np.array([[0, 0], [2, 1], [-1, 2.5]])[codes] + rng.normal(0, 0.9, (200, 2))
    labels = names[codes]
    model, _ = lmtrain.fit([5, "tanh", 3], x, labels, task="classification", max_epochs=5,
                           precision="float64", seed=3)
    figures = model.evaluate(x, labels)
    predicted = model.predict(x)
    classes = list(model.classes)
    assert figures["classes"] == classes == ["setosa", "versicolor", "virginica"]
    assert figures["accuracy"] == np.count_nonzero(predicted == labels) / 200  # one division
    confusion = np.zeros((3, 3), dtype=int)
    for truth, guess in zip(labels, predicted):
        confusion[classes.index(truth), classes.index(guess)] += 1
    np.testing.assert_array_equal(np.array(figures["confusion"]), confusion)
    # Cross-entropy of the softmax, in PyTorch's mean reduction: numpy on the probabilities.
    p = model.predict_proba(x)
    ce = -np.mean(np.log(p[np.arange(200), [classes.index(t) for t in labels]]))
    assert figures["loss"] == pytest.approx(ce, rel=1e-9)
    with pytest.raises(ValueError, match=r"'daisy' is not one of the 3 classes the model was "
                                         r"trained on \(setosa, versicolor, virginica\)"):
        model.evaluate(x[:2], np.array(["setosa", "daisy"]))
