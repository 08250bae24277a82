"""scikit-learn estimators trained with Levenberg–Marquardt: ``LMRegressor``, ``LMClassifier``.

They follow scikit-learn's conventions (parameters stored as given, checked in ``fit``;
``n_features_in_``, ``feature_names_in_``, ``classes_``; ``get_params``/``set_params``) and work in
``Pipeline``, ``GridSearchCV`` and ``cross_val_score``.  Training is ``lmtrain.fit``: the library's
Trainer, the GIL released, Ctrl-C stopping after the current step.
"""

from __future__ import annotations

import math
import numbers
import re
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils import check_random_state
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (_check_sample_weight, check_is_fitted, column_or_1d,
                                      validate_data)

from ._model import Model
from ._summary import Summary
from ._training import fit as _fit, option_names

__all__ = ["LMClassifier", "LMRegressor"]

# Estimator parameters that reach lmtrain.fit under another name (messages are translated back).
_RENAMED = {"max_validation_failures": "n_iter_no_change", "seed": "random_state"}


def _renamed(message: str) -> str:
    """lmtrain.fit's words for an option the estimator passed under the library's name."""
    for library, estimator in _RENAMED.items():
        message = re.sub(rf"\b{library}\b", estimator, message)
    return message


def _in_estimator_terms(error: Exception) -> Exception:
    """lmtrain.fit's error about an option the estimator passed under the library's name."""
    translated = type(error)(_renamed(str(error)))
    translated.__dict__.update(error.__dict__)  # a stopped run's .model and .summary
    return translated


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}: expected a bool, got {value!r}")
    return bool(value)


class _LMEstimator(BaseEstimator):
    """Parameters, fitting and fitted attributes shared by the regressor and the classifier."""

    _loss_default = "mse"
    _losses: tuple[str, ...] = ()
    _other_estimator = ""

    def __init__(self, hidden_layer_sizes: Sequence[int] = (10,), activation: str = "tanh", *,
                 loss: str | None = None, damping: str = "nielsen",
                 regularization: str = "none", weight_decay: float = 0.0,
                 precision: str = "float64", max_epochs: int = 100,
                 batch_size: int | None = None, early_stopping: bool = False,
                 validation_fraction: float = 0.1, n_iter_no_change: int = 6,
                 standardize: bool = True, random_state: Any = None, device: str = "cpu",
                 verbose: bool = False, warm_start: bool = False,
                 solver_options: Mapping[str, Any] | None = None) -> None:
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.loss = loss
        self.damping = damping
        self.regularization = regularization
        self.weight_decay = weight_decay
        self.precision = precision
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.standardize = standardize
        self.random_state = random_state
        self.device = device
        self.verbose = verbose
        self.warm_start = warm_start
        self.solver_options = solver_options

    # -- fitting ------------------------------------------------------------------------------
    def _seed(self) -> int:
        # An int is the seed itself (random_state=0 trains as `lmtrain fit` with seed = 0).
        if isinstance(self.random_state, numbers.Integral) and not isinstance(self.random_state,
                                                                               bool):
            if not 0 <= self.random_state < 2**64:
                raise ValueError(f"random_state = {self.random_state}: expected an int in "
                                 "[0, 2**64), a RandomState or None")
            return int(self.random_state)
        return int(check_random_state(self.random_state).randint(0, 2**31 - 1))

    def _layers(self, outputs: int) -> list[int | str]:
        sizes = self.hidden_layer_sizes
        if isinstance(sizes, numbers.Integral):
            sizes = (sizes,)
        if not isinstance(sizes, Sequence) or isinstance(sizes, str):
            raise TypeError("hidden_layer_sizes: expected a sequence of ints such as (10,), got "
                            f"{sizes!r}")
        layers: list[int | str] = []
        for i, units in enumerate(sizes):
            if isinstance(units, bool) or not isinstance(units, numbers.Integral) or units < 1:
                raise ValueError(f"hidden_layer_sizes[{i}] = {units!r}: expected a positive int")
            layers += [int(units), self.activation]
        return [*layers, outputs]

    def _options(self) -> dict[str, Any]:
        if self.batch_size is not None and (isinstance(self.batch_size, bool) or
                                            not isinstance(self.batch_size, numbers.Integral) or
                                            self.batch_size < 1):
            raise ValueError(f"batch_size = {self.batch_size!r}: expected a positive int, or "
                             "None for the full batch")
        loss = self.loss if self.loss is not None else self._loss_default
        if loss not in self._losses:
            raise ValueError(f"loss = {loss!r}: {type(self).__name__} takes "
                             f"{', '.join(map(repr, self._losses))}{self._other_estimator}")
        options: dict[str, Any] = {
            "loss": loss,
            "damping": self.damping,
            "regularization": self.regularization,
            "weight_decay": self.weight_decay,
            "max_epochs": self.max_epochs,
            "batch_size": 0 if self.batch_size is None else self.batch_size,
            "max_validation_failures": self.n_iter_no_change,
        }
        extra = dict(self.solver_options or {})
        known = option_names()
        for name in extra:
            own = _RENAMED.get(name, name if name in options else None)
            if own is not None:
                raise TypeError(f"solver_options: {name!r} is the estimator's parameter "
                                f"{own!r}; set that instead")
            if name not in known:
                raise TypeError(f"solver_options: {name!r} is not an lmtrain option "
                                "(lmtrain.option_names() lists them)")
        options.update(extra)
        return options

    def _warm(self) -> bool:
        """Whether this fit continues from the previous one (warm_start and a fitted model)."""
        return _check_bool("warm_start", self.warm_start) and hasattr(self, "model_")

    def _warm_start(self, layers: list[int | str]) -> NDArray[Any] | None:
        """The previous fit's parameters, where warm_start continues from them: the same
        layers (widths and activations) as this fit's.  The inputs' count and names are
        validate_data's to check (reset=False on a warm refit, as MLP's)."""
        if not self._warm():
            return None
        previous = self.model_
        theirs = [layer.get("units", layer.get("activation"))
                  for layer in previous.architecture["layers"]]
        if theirs != layers:
            raise ValueError(f"warm_start: the previous fit trained {previous.description}, "
                             f"layers {theirs}; this fit's are {layers}; set warm_start=False "
                             "to start again")
        return previous.parameters

    def _train(self, X: NDArray[Any], y: NDArray[Any], task: str, outputs: int,
               start: NDArray[Any] | None, sample_weight: ArrayLike | None) -> None:
        early_stopping = _check_bool("early_stopping", self.early_stopping)
        standardize = _check_bool("standardize", self.standardize)
        verbose = _check_bool("verbose", self.verbose)
        options = self._options()
        fraction = float(self.validation_fraction) if early_stopping else 0.0
        if self.early_stopping and not 0.0 < fraction < 1.0:
            raise ValueError(f"validation_fraction = {self.validation_fraction!r}: expected a "
                             "fraction in (0, 1) with early_stopping=True")
        if self.early_stopping and math.floor(fraction * X.shape[0]) < 1:
            raise ValueError(f"early_stopping with validation_fraction = {fraction} of "
                             f"{X.shape[0]} samples holds out no sample; need at least "
                             f"{math.ceil(1 / fraction)} samples or a larger fraction")
        names = getattr(self, "feature_names_in_", None)
        layers, seed = self._layers(outputs), self._seed()
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                model, summary = _fit(
                    layers, X, y, task=task, precision=self.precision, device=self.device,
                    seed=seed, standardize_inputs=standardize, standardize_targets=standardize,
                    validation_fraction=fraction, verbose=verbose, initial_parameters=start,
                    sample_weight=None if sample_weight is None else
                    _check_sample_weight(sample_weight, X, dtype=np.float64,
                                         ensure_non_negative=True),
                    feature_names=None if names is None else [str(n) for n in names], **options)
        except (TypeError, ValueError) as error:
            raise _in_estimator_terms(error) from error
        for w in caught:  # an option the run did not use, named as the estimator's parameter
            warnings.warn(_renamed(str(w.message)), w.category, stacklevel=3)
        self._set_fitted(model, summary)

    def _set_fitted(self, model: Model, summary: Summary) -> None:
        self.model_ = model
        self.summary_ = summary
        self.n_iter_ = summary.epochs
        self.loss_curve_ = summary.loss_curve
        self.validation_scores_ = summary.validation_curve if self.early_stopping else None
        self.best_validation_loss_ = (summary.best_validation_loss if self.early_stopping
                                      else None)
        evidence = self.regularization in ("bayesian", "ard")
        self.effective_parameters_ = summary.effective_parameters if evidence else None
        if self.regularization == "ard":
            self.feature_relevances_ = self._relevances(summary)

    def _relevances(self, summary: Summary) -> Any:
        # Each input's group of first-layer weights: the fraction γ_i / n_i of its weights that
        # the data determine (0: the evidence switched the input off, 1: fully used).
        groups = summary.penalty_groups[:self.n_features_in_]
        values = np.array([g.effective_parameters / g.size for g in groups])
        names = getattr(self, "feature_names_in_", None)
        if names is None:
            return values
        try:
            import pandas as pd
        except ImportError:
            return dict(zip(names, values))
        return pd.Series(values, index=list(names), name="relevance")

    def _outputs(self, X: ArrayLike, probabilities: bool = False) -> NDArray[np.float64]:
        check_is_fitted(self, "model_")
        X = validate_data(self, X, reset=False, dtype=[np.float64, np.float32], order="C")
        return self.model_._outputs(X, self.device, probabilities)

    def save(self, path: str) -> None:
        """Writes the fitted network as a model file that ``lmtrain predict`` reads."""
        check_is_fitted(self, "model_")
        self.model_.save(path)


class LMRegressor(RegressorMixin, _LMEstimator):
    """Multi-layer perceptron regressor trained with Levenberg–Marquardt.

    Inputs and targets are standardized with the training data's statistics (the model stores
    them); the network is ``hidden_layer_sizes`` dense layers with ``activation``, then a linear
    output per target.

    Parameters
    ----------
    hidden_layer_sizes : sequence of int, default=(10,)
        Units of each hidden layer (MATLAB fitnet's default of one layer of 10).  LM's cost per
        step grows with the parameters squared: it suits networks up to ~10⁴ parameters.
    activation : {"tanh", "sigmoid", "relu", "elu", "gelu", "softplus", "sin", "identity"}, default="tanh"
        Hidden activation.
    loss : {"mse", "huber", "l1"}, optional
        Training loss; default ``"mse"``.
    damping : {"nielsen", "multiplicative"}, default="nielsen"
        λ's schedule: Nielsen's gain-ratio rule, or ×10/×0.1 (MATLAB trainlm).
    regularization : {"none", "l2", "bayesian", "ard"}, default="none"
        ``l2`` adds ½ρ‖θ‖² with ρ = ``weight_decay``; ``bayesian`` re-estimates ρ from the
        evidence after every step (MATLAB trainbr); ``ard`` does so with one ρ per input's
        weights, per layer's weights and per layer's biases, and sets ``feature_relevances_``.
    weight_decay : float, default=0.0
        ρ of ``l2``; the initial ρ of ``bayesian`` and ``ard`` (0: ``bayesian`` from the
        evidence estimate at the initialization; ``ard`` keeps every group's ρ at least at that
        common level, updated as ``bayesian``'s, while each group's own estimate starts far
        below the data's curvature, ``solver_options``' ``ard_initial_scale``, and rises at most
        ``ard_max_factor`` per update).
    precision : {"float64", "auto", "mixed", "float32"}, default="float64"
        Precision of the network and the normal equations; ``auto`` trains a float32 network
        and picks a float32 or float64 system for the problem, as ``lmtrain fit``'s default.
    max_epochs : int, default=100
        Passes over the training data (full batch: one LM step each).
    batch_size : int or None, default=None
        Samples per LM step; None is the full batch.
    early_stopping : bool, default=False
        Hold out ``validation_fraction`` of the rows and stop after ``n_iter_no_change`` epochs
        without a better validation loss, restoring the best network (MATLAB's max_fail).
    validation_fraction : float, default=0.1
        With ``early_stopping``.
    n_iter_no_change : int, default=6
        With ``early_stopping``.
    standardize : bool, default=True
        Standardize inputs and targets with the training rows' mean and standard deviation.
    random_state : int, RandomState or None, default=None
        Initialization, shuffling and the validation split.  An int is used as lmtrain's seed
        (``random_state=0`` trains as ``lmtrain fit`` with ``seed = 0``).
    device : str, default="cpu"
        ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"auto"``.
    verbose : bool, default=False
        Progress per epoch (a tqdm bar when tqdm is installed).
    warm_start : bool, default=False
        ``fit`` starts from the previous fit's parameters instead of a new initialization: the
        same layers and features (``LMClassifier``: the same classes), checked.  λ starts
        again from ``lambda_initial``; ``n_iter_`` and ``loss_curve_`` are the new fit's.  The
        inputs (and targets) are standardized with the new data's statistics: on the same data
        the fit continues exactly where the last one ended; on other data the starting network
        sees its inputs rescaled, and is a start, not the previous function.
    solver_options : dict, optional
        Any other lmtrain option by name (``lmtrain.describe_options()`` lists each with its
        default and meaning), e.g.
        ``{"lambda_initial": 1e-2, "geodesic_acceleration": False}``.

    Attributes
    ----------
    model_ : lmtrain.Model
        The trained network; ``model_.save(path)`` writes a file ``lmtrain predict`` reads.
    summary_ : lmtrain.Summary
        ``summary_.full_report()`` is lmtrain's report; its fields are attributes.
    n_iter_ : int
        Epochs run.
    loss_curve_ : list of float
        Training loss (standardized units) after each epoch.
    validation_scores_ : list of float or None
        With ``early_stopping``: the validation loss after each epoch (lower is better).
    best_validation_loss_ : float or None
        With ``early_stopping``: the best validation loss.
    effective_parameters_ : float or None
        ``bayesian`` and ``ard``: γ, the number of parameters the data determine.
    feature_relevances_ : ndarray or pandas.Series
        ``ard`` only: per input, the fraction of its weights the data determine (0: switched
        off).  A Series indexed by the column names when ``X`` was a DataFrame.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        When ``X`` was a DataFrame with string column names.
    """

    _losses = ("mse", "huber", "l1")
    _other_estimator = " (class labels: LMClassifier)"

    def fit(self, X: ArrayLike, y: ArrayLike,
            sample_weight: ArrayLike | None = None) -> LMRegressor:
        """Trains the network on ``X`` (n_samples, n_features) and ``y`` (n_samples[, n_outputs]).

        ``sample_weight`` (n_samples,): each sample's weight (≥ 0); a sample of weight w counts
        as w copies of itself in the loss and the standardization (``lmtrain.fit``'s).
        """
        X, y = validate_data(self, X, y, dtype=[np.float64, np.float32], order="C",
                             multi_output=True, y_numeric=True, reset=not self._warm())
        outputs = 1 if np.ndim(y) == 1 else y.shape[1]
        self._train(X, y, "regression", outputs, self._warm_start(self._layers(outputs)),
                    sample_weight)
        self._y_ndim = np.ndim(y)
        return self

    def predict(self, X: ArrayLike) -> NDArray[np.float64]:
        """Predictions in the targets' units: shape (n_samples,) for 1-D ``y``, else 2-D."""
        z = self._outputs(X)
        return z.ravel() if self._y_ndim == 1 else z

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        return tags


class LMClassifier(ClassifierMixin, _LMEstimator):
    """Multi-layer perceptron classifier trained with Levenberg–Marquardt.

    A softmax output per class trained on the exact generalized Gauss–Newton of the
    cross-entropy (``loss="cross_entropy"``); inputs are standardized with the training data's
    statistics.  Parameters and attributes are those of :class:`LMRegressor`, with ``loss``
    ``"cross_entropy"`` (default), ``"cross_entropy_sampled"`` (the same Gauss–Newton model
    sampled with one row per sample instead of one per class: cheaper for many classes, and
    stochastic), ``"cross_entropy_sqrt"`` or ``"mse"`` (least squares on one-hot targets, as
    MATLAB's patternnet; ``predict_proba`` is then the softmax of outputs not trained as
    logits), and:

    Parameters
    ----------
    class_weight : dict, "balanced" or None, default=None
        Weights of the classes, scikit-learn's convention (as ``LogisticRegression``'s):
        ``{label: weight}``, or ``"balanced"`` for ``n_samples / (n_classes · count(label))``;
        each sample's weight is its class's, times ``fit``'s ``sample_weight`` when given.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels; output k is ``classes_[k]``.
    """

    _loss_default = "cross_entropy"
    _losses = ("cross_entropy", "cross_entropy_sampled", "cross_entropy_sqrt", "mse")
    _other_estimator = " (numeric targets: LMRegressor)"

    def __init__(self, hidden_layer_sizes: Sequence[int] = (10,), activation: str = "tanh", *,
                 loss: str | None = None, damping: str = "nielsen",
                 regularization: str = "none", weight_decay: float = 0.0,
                 precision: str = "float64", max_epochs: int = 100,
                 batch_size: int | None = None, early_stopping: bool = False,
                 validation_fraction: float = 0.1, n_iter_no_change: int = 6,
                 standardize: bool = True, random_state: Any = None, device: str = "cpu",
                 verbose: bool = False, warm_start: bool = False,
                 solver_options: Mapping[str, Any] | None = None,
                 class_weight: Mapping[Any, float] | str | None = None) -> None:
        super().__init__(hidden_layer_sizes, activation, loss=loss, damping=damping,
                         regularization=regularization, weight_decay=weight_decay,
                         precision=precision, max_epochs=max_epochs, batch_size=batch_size,
                         early_stopping=early_stopping, validation_fraction=validation_fraction,
                         n_iter_no_change=n_iter_no_change, standardize=standardize,
                         random_state=random_state, device=device, verbose=verbose,
                         warm_start=warm_start, solver_options=solver_options)
        self.class_weight = class_weight

    def _sample_weight(self, y: NDArray[Any], sample_weight: ArrayLike | None,
                       X: NDArray[Any]) -> ArrayLike | None:
        """fit's sample_weight times each sample's class weight (none without class_weight)."""
        if self.class_weight is None:
            return sample_weight
        if not (self.class_weight == "balanced" or isinstance(self.class_weight, Mapping)):
            raise ValueError(f"class_weight = {self.class_weight!r}: expected a dict of "
                             "{label: weight}, 'balanced' or None")
        weights = compute_sample_weight(self.class_weight, y)
        if sample_weight is not None:
            weights = weights * _check_sample_weight(sample_weight, X, dtype=np.float64,
                                                     ensure_non_negative=True)
        return weights

    def fit(self, X: ArrayLike, y: ArrayLike,
            sample_weight: ArrayLike | None = None) -> LMClassifier:
        """Trains the network on ``X`` (n_samples, n_features) and class labels ``y``.

        ``sample_weight`` (n_samples,): each sample's weight (≥ 0); a sample of weight w counts
        as w copies of itself in the loss and the standardization (``lmtrain.fit``'s).
        """
        X, y = validate_data(self, X, y, dtype=[np.float64, np.float32], order="C",
                             reset=not self._warm())
        y = column_or_1d(y, warn=True)
        check_classification_targets(y)
        classes = np.unique(y)
        if len(classes) < 2:
            raise ValueError("LMClassifier needs samples of at least 2 classes in y; got 1 "
                             f"class: {classes[0]!r}")
        if self._warm() and not np.array_equal(classes, self.classes_):
            raise ValueError(f"warm_start: y has the classes {classes.tolist()}, the previous "
                             f"fit {self.classes_.tolist()}; set warm_start=False to start again")
        start = self._warm_start(self._layers(len(classes)))
        self._train(X, y, "classification", len(classes), start,
                    self._sample_weight(y, sample_weight, X))
        self.classes_ = classes
        return self

    def decision_function(self, X: ArrayLike) -> NDArray[np.float64]:
        """Scores: for two classes the log-odds of ``classes_[1]`` (output 1 minus output 0),
        shape (n_samples,); otherwise the network's outputs (the logits), shape
        (n_samples, n_classes).  With ``loss="mse"`` the outputs are not trained as logits:
        the scores rank the classes, but are not log-odds."""
        z = self._outputs(X)
        return z[:, 1] - z[:, 0] if z.shape[1] == 2 else z

    def predict_proba(self, X: ArrayLike) -> NDArray[np.float64]:
        """Class probabilities, shape (n_samples, n_classes), columns in ``classes_`` order."""
        return self._outputs(X, probabilities=True)

    def predict(self, X: ArrayLike) -> NDArray[Any]:
        """The most probable class of each sample (a label of ``classes_``)."""
        p = self.predict_proba(X)  # first: it raises NotFittedError before classes_ exists
        return self.classes_[np.argmax(p, axis=1)]
