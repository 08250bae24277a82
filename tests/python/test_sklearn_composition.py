"""LMRegressor and LMClassifier inside scikit-learn's machinery: Pipeline, GridSearchCV,
cross_val_score.  A fixed random_state makes every fit deterministic, so each result is checked
against the same estimators fitted by hand on the same folds."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.metrics import accuracy_score, r2_score
from sklearn.model_selection import GridSearchCV, KFold, StratifiedKFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import PolynomialFeatures, StandardScaler

from lmtrain import LMClassifier, LMRegressor


def regression(rows: int = 150) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    X = rng.uniform(-2, 2, size=(rows, 2))
    return X, np.tanh(2 * X[:, 0]) * X[:, 1] + 0.02 * rng.normal(size=rows)


def test_cross_val_score_is_the_r2_of_each_fold_fitted_by_hand() -> None:
    X, y = regression()
    net = LMRegressor(hidden_layer_sizes=(6,), max_epochs=15, random_state=0)
    folds = KFold(n_splits=3, shuffle=True, random_state=1)
    scores = cross_val_score(net, X, y, cv=folds)
    by_hand = [r2_score(y[test], clone(net).fit(X[train], y[train]).predict(X[test]))
               for train, test in folds.split(X)]
    np.testing.assert_allclose(scores, by_hand, rtol=1e-12)
    assert scores.min() > 0.9


def test_grid_search_picks_the_network_that_fits() -> None:
    X, y = regression()
    search = GridSearchCV(LMRegressor(max_epochs=15, random_state=0),
                          {"hidden_layer_sizes": [(1,), (6,)], "damping": ["nielsen"]}, cv=3)
    search.fit(X, y)
    assert search.best_params_["hidden_layer_sizes"] == (6,)
    best = cross_val_score(LMRegressor(hidden_layer_sizes=(6,), max_epochs=15, random_state=0),
                           X, y, cv=3).mean()
    assert search.best_score_ == pytest.approx(best, rel=1e-12)
    assert search.best_estimator_.n_iter_ == 15


def test_pipeline_is_the_steps_fitted_one_after_another() -> None:
    X, y = regression()
    steps = [PolynomialFeatures(2), StandardScaler(),
             LMRegressor(hidden_layer_sizes=(4,), standardize=False, max_epochs=10,
                         random_state=0)]
    pipeline = make_pipeline(*[clone(s) for s in steps]).fit(X, y)
    features = steps[1].fit_transform(steps[0].fit_transform(X))
    by_hand = steps[2].fit(features, y)
    np.testing.assert_array_equal(pipeline.predict(X), by_hand.predict(features))
    assert pipeline.score(X, y) == pytest.approx(r2_score(y, by_hand.predict(features)))


def test_classifier_in_a_pipeline_under_cross_validation() -> None:
    rng = np.random.default_rng(8)
    labels = rng.integers(0, 3, 180)
    X = np.array([[0, 0], [2, 2], [-2, 2]])[labels] + rng.normal(scale=0.7, size=(180, 2))
    pipeline = make_pipeline(StandardScaler(),
                             LMClassifier(hidden_layer_sizes=(4,), max_epochs=10, random_state=0))
    folds = StratifiedKFold(n_splits=3, shuffle=True, random_state=0)
    scores = cross_val_score(pipeline, X, labels, cv=folds)
    by_hand = [accuracy_score(labels[test],
                              clone(pipeline).fit(X[train], labels[train]).predict(X[test]))
               for train, test in folds.split(X, labels)]
    np.testing.assert_allclose(scores, by_hand, rtol=1e-12)
    assert scores.min() > 0.8
