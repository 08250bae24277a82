"""Sample weights (scikit-learn's ``sample_weight``) in ``lmtrain.fit`` and the estimators.

The reference is the second way to say the same thing: a sample of integer weight w is the row
repeated w times (weight 0: left out).  The engine weighs each sample's residuals by √w (its loss
by w) and the standardization's statistics by w; the repeated rows are summed in another order,
so the two fits agree to rounding, after every LM step, in float64.
"""

from __future__ import annotations

import numpy as np
import pytest

import lmtrain
from lmtrain import LMClassifier, LMRegressor
from spread import one_ulp, within

# Bounds ≥ 1 000 × the gaps scripts/measure-spread.sh measured (python suite, the 4 kernel
# configurations of this AMD EPYC, the repeated rows one ulp off): parameters ≤ 2.7e-12 and loss
# curve ≤ 8.7e-13 (12 float64 epochs of a 6-unit regression), predictions and probabilities
# ≤ 2.2e-14; one evaluation summed in another order ≤ 1.3e-15 (bound 2e-12).
PARAMETERS = 5e-9


def _data(rows: int = 48, seed: int = 2):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, 3)) * [1.0, 2.0, 0.5] + [0.3, -1.0, 4.0]
    y = np.sin(x[:, 0]) + 0.3 * x[:, 1] + 0.05 * rng.normal(size=rows)
    w = rng.integers(0, 4, size=rows).astype(np.float64)
    return x, y, w


def _repeat(w, *arrays):
    counts = w.astype(int)
    return [np.repeat(a, counts, axis=0) for a in arrays]


def test_integer_weights_train_as_repeated_rows():
    x, y, w = _data()
    xr, yr = _repeat(w, x, y)
    assert len(xr) != len(x)  # Σw is not the count: weights are not normalized away
    opts = dict(precision="float64", max_epochs=12, seed=3)
    model, summary = lmtrain.fit([6, "tanh", 1], x, y, sample_weight=w, **opts)
    reference, ref_summary = lmtrain.fit([6, "tanh", 1], one_ulp(xr), one_ulp(yr), **opts)
    # The weighted standardization is the repeated rows' (numpy's weighted mean and
    # population standard deviation on the given rows, a third reference).
    np.testing.assert_allclose(model.input_mean, np.average(x, axis=0, weights=w), rtol=1e-13)
    var = np.average((x - np.average(x, axis=0, weights=w)) ** 2, axis=0, weights=w)
    np.testing.assert_allclose(model.input_std, np.sqrt(var), rtol=1e-13)
    within("input mean", model.input_mean, reference.input_mean, 1e-12, relative=True)
    within("target std", model.target_std, reference.target_std, 1e-12, relative=True)
    assert summary.steps == ref_summary.steps
    assert summary.training_weight == w.sum() and ref_summary.training_weight == 0
    within("parameters", model.parameters, reference.parameters, PARAMETERS, relative=True)
    within("loss curve", summary.loss_curve, ref_summary.loss_curve, PARAMETERS, relative=True)
    # Without the weights the fit is another one.
    plain, _ = lmtrain.fit([6, "tanh", 1], x, y, **opts)
    assert np.max(np.abs(plain.parameters - model.parameters)) > 1e-3


def test_weighted_validation_reads_as_its_repeated_rows():
    x, y, _ = _data(40, 5)
    xv, yv, wv = _data(25, 9)
    xr, yr = _repeat(wv, xv, yv)
    opts = dict(precision="float64", max_epochs=6, seed=1)
    _, weighted = lmtrain.fit([5, "tanh", 1], x, y, validation=(xv, yv, wv), **opts)
    _, repeated = lmtrain.fit([5, "tanh", 1], x, y, validation=(one_ulp(xr), one_ulp(yr)), **opts)
    np.testing.assert_array_equal(weighted.loss_curve, repeated.loss_curve)
    within("validation curve", weighted.validation_curve, repeated.validation_curve, 2e-12,
           relative=True)


def test_classification_weights_are_repeated_rows():
    rng = np.random.default_rng(7)
    x = rng.normal(size=(45, 2))
    labels = np.array(["a", "b", "c"])[(x[:, 0] > 0.3).astype(int) + (x[:, 1] > 0).astype(int)]
    w = rng.integers(0, 4, size=45).astype(np.float64)
    xr, lr = _repeat(w, x, labels)
    opts = dict(task="classification", precision="float64", max_epochs=8, seed=2)
    model, _ = lmtrain.fit([5, "tanh", 3], x, labels, sample_weight=w, **opts)
    reference, _ = lmtrain.fit([5, "tanh", 3], one_ulp(xr), lr, **opts)
    within("parameters", model.parameters, reference.parameters, PARAMETERS, relative=True)
    within("probabilities", model.predict_proba(x), reference.predict_proba(x), PARAMETERS)


@pytest.mark.parametrize("weights, error, says", [
    ("negative", ValueError, "sample_weight[4] = -1"),
    ("nan", ValueError, "sample_weight[2] = nan"),
    ("zeros", ValueError, "every weight is 0"),
    ("short", ValueError, "expected shape (48,)"),
    ("text", TypeError, "expected an array of numbers"),
])
def test_bad_weights_are_refused_by_name(weights, error, says):
    x, y, w = _data()
    given = {"negative": np.where(np.arange(48) == 4, -1.0, w),
             "nan": np.where(np.arange(48) == 2, np.nan, w),
             "zeros": np.zeros(48), "short": w[:-1], "text": ["heavy"] * 48}[weights]
    with pytest.raises(error, match=__import__("re").escape(says)):
        lmtrain.fit([4, "tanh", 1], x, y, sample_weight=given, max_epochs=2)


def test_estimators_take_sample_weight_as_repeated_rows():
    x, y, w = _data(36, 4)
    xr, yr = _repeat(w, x, y)
    est = LMRegressor(hidden_layer_sizes=(5,), max_epochs=10, random_state=0)
    weighted = est.fit(x, y, sample_weight=w).predict(x)
    repeated = LMRegressor(hidden_layer_sizes=(5,), max_epochs=10, random_state=0).fit(
        one_ulp(xr), one_ulp(yr)).predict(x)
    within("predictions", weighted, repeated, PARAMETERS, relative=True)
    labels = (y > np.median(y)).astype(int)
    lr = np.repeat(labels, w.astype(int))
    clf = LMClassifier(hidden_layer_sizes=(4,), max_epochs=6, random_state=0)
    p = clf.fit(x, labels, sample_weight=w).predict_proba(x)
    q = LMClassifier(hidden_layer_sizes=(4,), max_epochs=6, random_state=0).fit(
        one_ulp(xr), lr).predict_proba(x)
    within("probabilities", p, q, PARAMETERS)
    with pytest.raises(ValueError, match="[Nn]egative"):
        est.fit(x, y, sample_weight=-w)


def test_class_weight_is_sample_weight_per_class():
    """LMClassifier(class_weight=…) trains as fit's sample_weight set to each sample's class
    weight (times the given sample_weight); "balanced" is n / (classes · count)."""
    from sklearn.datasets import make_blobs
    x, y = make_blobs(n_samples=60, centers=3, random_state=1, cluster_std=2.5)
    w = np.random.default_rng(0).uniform(0.5, 2, 60)
    weights = {0: 2.0, 1: 0.5, 2: 1.25}
    params = dict(hidden_layer_sizes=(4,), max_epochs=5, random_state=0)
    a = LMClassifier(class_weight=weights, **params).fit(x, y, sample_weight=w)
    b = LMClassifier(**params).fit(x, y, sample_weight=w * np.array([weights[k] for k in y]))
    np.testing.assert_array_equal(a.model_.parameters, b.model_.parameters)
    counts = np.bincount(y)
    balanced = LMClassifier(class_weight="balanced", **params).fit(x, y)
    by_hand = LMClassifier(**params).fit(x, y, sample_weight=60 / (3 * counts[y]))
    np.testing.assert_array_equal(balanced.model_.parameters, by_hand.model_.parameters)
    with pytest.raises(ValueError, match="class_weight = 'heavy'"):
        LMClassifier(class_weight="heavy", **params).fit(x, y)
    # The weights act: on scikit-learn's noisy two-blob check, class 0 at weight 1000 against
    # 1e-4 takes every test point after 10 epochs (50 % unweighted).
    x2, y2 = make_blobs(centers=2, random_state=0, cluster_std=20)
    heavy = LMClassifier(class_weight={0: 1000, 1: 1e-4}, max_epochs=10, random_state=0)
    plain = LMClassifier(max_epochs=10, random_state=0)
    assert np.mean(heavy.fit(x2[:50], y2[:50]).predict(x2[50:]) == 0) == 1.0
    assert np.mean(plain.fit(x2[:50], y2[:50]).predict(x2[50:]) == 0) < 0.8
