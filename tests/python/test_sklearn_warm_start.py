"""LMRegressor's and LMClassifier's warm_start and LMClassifier.decision_function, each against a
second way to the same numbers: lmtrain.fit from the previous parameters, a cold fit, the
log-odds of predict_proba."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

import lmtrain
from lmtrain import LMClassifier, LMRegressor


def regression(rows: int = 120) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(11)
    X = rng.uniform(-2, 2, size=(rows, 3))
    return X, np.sin(2 * X[:, 0]) * X[:, 1] + 0.3 * X[:, 2] + 0.01 * rng.normal(size=rows)


def classes(rows: int = 150, k: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    X = rng.normal(size=(rows, 2))
    angle = np.arctan2(X[:, 1], X[:, 0]) + np.pi
    return X, np.minimum((angle / (2 * np.pi) * k).astype(int), k - 1)


def test_warm_start_continues_from_the_previous_parameters() -> None:
    X, y = regression()
    net = LMRegressor(hidden_layer_sizes=(8,), max_epochs=4, random_state=0, warm_start=True)
    first = net.fit(X, y).model_.parameters.copy()
    first_loss = net.loss_curve_[-1]
    second = net.fit(X, y)
    # LM accepts only steps that lower the loss, and the second fit starts where the first ended.
    assert second.loss_curve_[-1] < first_loss
    # The same as lmtrain.fit from those parameters, to the bit.
    model, summary = lmtrain.fit([8, "tanh", 1], X, y, seed=0, max_epochs=4, loss="mse",
                                 damping="nielsen", regularization="none", weight_decay=0.0,
                                 batch_size=0, max_validation_failures=6, precision="float64",
                                 initial_parameters=first)
    np.testing.assert_array_equal(second.model_.parameters, model.parameters)
    assert second.loss_curve_ == summary.loss_curve
    # Without it, a refit starts again: the first fit's parameters exactly.
    cold = LMRegressor(hidden_layer_sizes=(8,), max_epochs=4, random_state=0)
    np.testing.assert_array_equal(cold.fit(X, y).fit(X, y).model_.parameters, first)


def test_warm_start_refuses_another_network_or_other_classes() -> None:
    X, y = regression()
    net = LMRegressor(hidden_layer_sizes=(8,), max_epochs=2, random_state=0, warm_start=True)
    before = net.fit(X, y).predict(X)
    # (4, 4) has (8,)'s 41 parameters on 3 inputs: the layers, not the count, must match.
    for change, layers in (({"hidden_layer_sizes": (12,)}, r"\[12, 'tanh', 1\]"),
                           ({"hidden_layer_sizes": (4, 4)}, r"\[4, 'tanh', 4, 'tanh', 1\]"),
                           ({"activation": "relu"}, r"\[8, 'relu', 1\]")):
        with pytest.raises(ValueError, match=r"warm_start: the previous fit trained 3-8-1 tanh "
                                             r"\(41 parameters\), layers \[8, 'tanh', 1\]; "
                                             rf"this fit's are {layers}"):
            net.set_params(**change).fit(X, y)
        net.set_params(hidden_layer_sizes=(8,), activation="tanh")
    with pytest.raises(ValueError, match="X has 2 features, but LMRegressor is expecting 3"):
        net.fit(X[:, :2], y)
    with pytest.raises(ValueError, match=r"\[8, 'tanh', 2\]"):
        net.fit(X, np.column_stack([y, y]))
    # Refused fits change nothing: the estimator predicts as before, 1-D.
    np.testing.assert_array_equal(net.predict(X), before)
    assert net.n_features_in_ == 3

    Xc, yc = classes()
    clf = LMClassifier(hidden_layer_sizes=(6,), max_epochs=2, random_state=0, warm_start=True)
    labels = clf.fit(Xc, yc).predict(Xc)
    for other, listed in ((np.where(yc == 2, 5, yc), r"\[0, 1, 5\]"),
                          (np.minimum(yc, 1), r"\[0, 1\]")):
        with pytest.raises(ValueError, match=rf"warm_start: y has the classes {listed}, the "
                                             r"previous fit \[0, 1, 2\]"):
            clf.fit(Xc, other)
    assert clf.classes_.tolist() == [0, 1, 2]
    np.testing.assert_array_equal(clf.predict(Xc), labels)
    with pytest.raises(TypeError, match="warm_start: expected a bool"):
        LMRegressor(warm_start="yes").fit(X, y)


def test_decision_function_is_the_log_odds_and_the_logits() -> None:
    X, y = classes(k=2)
    clf = LMClassifier(hidden_layer_sizes=(6,), max_epochs=8, random_state=0).fit(X, y)
    p = clf.predict_proba(X)
    d = clf.decision_function(X)
    assert d.shape == (len(X),)
    np.testing.assert_allclose(d, np.log(p[:, 1] / p[:, 0]), rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[(d > 0).astype(int)])
    assert roc_auc_score(y, d) == pytest.approx(roc_auc_score(y, p[:, 1]), abs=1e-12)

    X3, y3 = classes(k=3)
    clf3 = LMClassifier(hidden_layer_sizes=(6,), max_epochs=8, random_state=0).fit(X3, y3)
    z = clf3.decision_function(X3)
    assert z.shape == (len(X3), 3)
    e = np.exp(z - z.max(axis=1, keepdims=True))  # their softmax is predict_proba
    np.testing.assert_allclose(e / e.sum(axis=1, keepdims=True), clf3.predict_proba(X3),
                               rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(clf3.classes_[z.argmax(axis=1)], clf3.predict(X3))
