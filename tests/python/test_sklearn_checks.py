"""scikit-learn's own estimator checks on LMRegressor and LMClassifier."""

from __future__ import annotations

from sklearn.utils.estimator_checks import parametrize_with_checks

from lmtrain import LMClassifier, LMRegressor

# Checks that cannot apply, with the reason (none so far).
EXPECTED_FAILED: dict[str, str] = {}


@parametrize_with_checks([LMRegressor(random_state=0), LMClassifier(random_state=0)],
                         expected_failed_checks=lambda estimator: EXPECTED_FAILED)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)
