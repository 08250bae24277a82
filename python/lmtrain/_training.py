"""``lmtrain.fit``: train a network on arrays with the library's Trainer."""

from __future__ import annotations

import atexit
import difflib
import os
import sys
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from . import _core
from ._model import Model
from ._progress import EpochProgress
from ._summary import Summary
from ._validation import as_class_indices, as_input_matrix, as_regression_targets

ACTIVATIONS = ("identity", "tanh", "sigmoid", "relu", "elu", "gelu", "softplus", "sin")

# The option classes whose fields are fit's keyword arguments, under the library's names.
_OPTION_CLASSES: dict[str, Any] = {
    "solver": _core.SolverOptions,
    "trainer": _core.TrainerOptions,
    "loss": _core.LossOptions,
}
_PYTHON_TYPES = {"float": (int, float), "int": (int,), "count": (int,), "bool": (bool,),
                 "optional bool": (bool, type(None)), "str": (str,),
                 "float list": (list, tuple, np.ndarray)}


def option_names() -> dict[str, tuple[str, str]]:
    """Every library option fit accepts: name → (options class, kind)."""
    names = {}
    for group, cls in _OPTION_CLASSES.items():
        for name, kind in cls.fields():
            names[name] = (group, kind)
    return names


def describe_options() -> list[dict[str, Any]]:
    """Every library option :func:`fit` accepts, as the library documents it.

    Returns
    -------
    list of dict
        One per option, in the library's order: ``name``, ``group`` (``"solver"``,
        ``"trainer"`` or ``"loss"``: the TOML table of ``lmtrain fit``'s config), ``kind``
        (``"float"``, ``"int"``, ``"count"``, ``"bool"``, ``"optional bool"``, ``"str"`` or
        ``"float list"``), ``default`` and ``doc``.
    """
    rows = []
    for group, cls in _OPTION_CLASSES.items():
        defaults = cls()
        for name, kind in cls.fields():
            prop = cls.__dict__.get(name)
            rows.append({"name": name, "group": group, "kind": kind,
                         "default": getattr(defaults, name),
                         "doc": " ".join((getattr(prop, "__doc__", None) or "").split())})
    return rows


def _unknown_option(name: str, known: Sequence[str], caller: str) -> TypeError:
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return TypeError(f"{caller}() got an unexpected keyword argument {name!r}{hint}")


def _checked_value(name: str, kind: str, value: Any) -> Any:
    types = _PYTHON_TYPES[kind]
    if isinstance(value, (bool, np.bool_)) and kind not in ("bool", "optional bool"):
        raise TypeError(f"{name}: expected {kind}, got bool {value!r}")
    if isinstance(value, np.generic):
        value = value.item()
    if not isinstance(value, types):
        raise TypeError(f"{name}: expected {kind}, got {type(value).__name__} {value!r}")
    if kind == "count" and value < 0:
        raise ValueError(f"{name} = {value}: expected a non-negative integer")
    if kind == "float list":
        return [float(v) for v in value]
    if kind == "float":
        return float(value)
    return value


def apply_options(request: _core.TrainingRequest, options: Mapping[str, Any],
                  caller: str = "fit", known_extra: Sequence[str] = ()) -> None:
    """Sets each library option of ``options`` on the request's option objects.

    Raises
    ------
    TypeError
        For an unknown name (suggesting the closest one) or a value of the wrong type.
    ValueError
        For a value outside its documented range (the library's check, in Python names).
    """
    known = option_names()
    for name, value in options.items():
        if name not in known:
            raise _unknown_option(name, [*known, *known_extra], caller)
        group, kind = known[name]
        target = getattr(request, group)
        setattr(target, name, _checked_value(name, kind, value))
        setattr(request, group, target)
    request.solver.validate()
    request.trainer.validate()


def architecture(layers: Sequence[int | str | Mapping[str, Any]], n_inputs: int,
                 input_shape: Sequence[int] | None = None) -> dict[str, Any]:
    """The model file's architecture for ``layers``.

    Parameters
    ----------
    layers : sequence
        Each entry is an int (a dense layer of that many units), an activation name
        (``"tanh"``, ...), ``"flatten"``, or a dict in the model file's schema, e.g.
        ``{"type": "conv2d", "out_channels": 8, "kernel": 3}``.  The last dense layer gives the
        outputs.
    n_inputs : int
        Features per sample.
    input_shape : sequence of 3 ints, optional
        (channels, height, width) of image inputs; its product must be ``n_inputs``.
    """
    if isinstance(layers, (str, bytes)) or not isinstance(layers, Sequence):
        raise TypeError("layers: expected a sequence such as [16, 'tanh', 1], got "
                        f"{type(layers).__name__}")
    entries: list[dict[str, Any]] = []
    for i, layer in enumerate(layers):
        if isinstance(layer, (bool, np.bool_)):
            raise TypeError(f"layers[{i}]: expected an int, a name or a dict, got bool")
        if isinstance(layer, (int, np.integer)):
            if layer < 1:
                raise ValueError(f"layers[{i}] = {layer}: a dense layer needs at least 1 unit")
            entries.append({"type": "dense", "units": int(layer)})
        elif isinstance(layer, str):
            if layer in ACTIVATIONS:
                entries.append({"type": "activation", "activation": layer})
            elif layer == "flatten":
                entries.append({"type": "flatten"})
            else:
                close = difflib.get_close_matches(layer, [*ACTIVATIONS, "flatten"], n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ValueError(f"layers[{i}] = {layer!r}: expected an activation "
                                 f"({', '.join(ACTIVATIONS)}) or 'flatten'{hint}")
        elif isinstance(layer, Mapping):
            entries.append(dict(layer))
        else:
            raise TypeError(f"layers[{i}]: expected an int (dense units), an activation name or "
                            f"a dict, got {type(layer).__name__}")
    if input_shape is None:
        shape = [n_inputs]
    else:
        shape = [int(s) for s in input_shape]
        if len(shape) != 3 or int(np.prod(shape)) != n_inputs:
            raise ValueError(f"input_shape = {tuple(input_shape)}: expected (channels, height, "
                             f"width) with {n_inputs} values in all, as X has")
    return {"input_shape": shape, "layers": entries}


def fit(layers: Sequence[int | str | Mapping[str, Any]], X: ArrayLike, y: ArrayLike, *,
        task: str = "regression", precision: str = "auto", device: str = "cpu",
        init: str = "torch", seed: int = 0, standardize_inputs: bool = True,
        standardize_targets: bool = True, validation: tuple[ArrayLike, ...] | None = None,
        validation_fraction: float = 0.0, sample_weight: ArrayLike | None = None,
        input_shape: Sequence[int] | None = None,
        checkpoint: str | os.PathLike[str] | None = None, checkpoint_every: int = 1,
        resume: str | os.PathLike[str] | None = None, verbose: bool = False,
        feature_names: Sequence[str] | None = None,
        initial_parameters: ArrayLike | None = None, **options: Any) -> tuple[Model, Summary]:
    """Trains a network with Levenberg–Marquardt, as ``lmtrain fit`` does.

    The same data, options and seed give the same parameters as the command-line tool.

    Parameters
    ----------
    layers : sequence
        The network after the inputs, e.g. ``[16, "tanh", 1]``: ints are dense layers, strings
        activations (or ``"flatten"``), dicts layers in the model file's schema.
    X : array-like of shape (n_samples, n_features)
        Inputs.  C-contiguous float32/float64 arrays are read in place; others are converted
        once.
    y : array-like
        Regression: targets of shape (n_samples,) or (n_samples, n_outputs).  Classification:
        class labels of shape (n_samples,).
    task : {"regression", "classification"}, default="regression"
        Classification trains on one-hot targets with the ``cross_entropy`` loss by default.
    precision : {"auto", "float32", "mixed", "float64"}, default="auto"
        ``auto``, ``float32`` and ``mixed`` train a float32 model: ``mixed`` solves the normal
        equations in float64, ``float32`` in float32, and ``auto`` chooses per problem and device
        (float64 for ``bayesian`` and ``ard``, and when a batch has at least 16 384 residual
        rows on a device with a fast float64 unit; ``summary.precision_reason`` says why), as
        ``lmtrain fit``'s ``precision``.  ``float64``: everything in float64.
    device : str, default="cpu"
        ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"auto"``.
    init : {"torch", "glorot", "he"}, default="torch"
        Parameter initialization.
    initial_parameters : array-like, optional
        The starting parameters instead, in the library's flat order (per layer: W row-major
        in PyTorch's (out, in) layout, then b), e.g. a torch Sequential's flattened
        ``parameters()`` or another ``Model.parameters``.
    seed : int, default=0
        Initialization, shuffling and the validation split.
    standardize_inputs, standardize_targets : bool, default=True
        Standardize inputs (and regression targets) with the training rows' statistics; the
        model stores them and ``predict`` applies them.
    validation : (X_val, y_val) or (X_val, y_val, sample_weight_val), optional
        Validation data for early stopping (``max_validation_failures``), with its samples'
        weights when given (the validation loss is then their weighted mean).
    validation_fraction : float, default=0.0
        Without ``validation``: the fraction of rows held out for it, chosen as ``lmtrain fit``
        chooses them for ``data.validation_fraction`` (with their weights, when weighted).
    sample_weight : array-like of shape (n_samples,), optional
        Each sample's weight (≥ 0, finite, not all 0): a sample of weight w counts as w copies
        of itself — in the loss, its gradient and JᵀJ, and in the standardization's mean and
        standard deviation — so integer weights train as the rows repeated (with the full
        batch; mini-batches split the rows, not the copies).  Reported losses are weighted
        means.
    input_shape : (channels, height, width), optional
        Image inputs for convolutional layers.
    checkpoint : path, optional
        Checkpoint file, written atomically every ``checkpoint_every`` epochs and when
        training is interrupted (Ctrl-C), for ``resume``.
    checkpoint_every : int, default=1
        Epochs between checkpoints (0: only on interruption).
    resume : path, optional
        A checkpoint to continue from.  Its network, seed, batch size, precision and loss must be
        this call's (checked); the data and the other options are yours to keep the same (not
        checked: a resume on other data continues from the checkpoint's parameters).
    verbose : bool, default=False
        Progress per epoch on stderr (a tqdm bar when tqdm is installed).
    feature_names : sequence of str, optional
        Names of X's columns for the report (``ard`` names each input's group); default: the
        columns of a DataFrame X.
    **options
        Any field of lmtrain's ``SolverOptions``, ``TrainerOptions`` or ``LossOptions`` by its
        name, e.g. ``max_epochs=100``, ``batch_size=1000``, ``damping="multiplicative"``,
        ``regularization="ard"``, ``loss="huber"``.  ``lmtrain.option_names()`` lists them,
        ``lmtrain.describe_options()`` with their defaults and meanings.

    Returns
    -------
    model : Model
        The trained network; ``model.parameters`` is the flat parameter vector.
    summary : Summary
        What happened; ``summary.full_report()`` is ``lmtrain fit``'s report.

    Raises
    ------
    TypeError
        For an unknown option name or a value or array of the wrong type.
    ValueError
        For NaN or infinity in the data, mismatched shapes, too few rows, or an option out of
        range; the message names the argument.  Also when the loss or the Jacobian stops being
        finite during training (``lmtrain fit``'s exit code 3; extreme values in unstandardized
        data, say): the error's ``model`` and ``summary`` attributes hold the last finite
        network and the report.
    KeyboardInterrupt
        On Ctrl-C, after the current LM step (the checkpoint, when asked for, is written); on a
        second Ctrl-C, or when the step still runs ``stop_grace_s`` (default 30) seconds after
        the first, at once: the step then finishes in the background without writing anything,
        and the interpreter waits for it before exiting.
    """
    x, names = _inputs(task, X)
    request, targets, x_val, y_val = _targets(task, x, y, validation, options)
    weights = (_sample_weight(sample_weight, x.shape[0], "sample_weight"),
               None if validation is None or len(validation) < 3 else
               _sample_weight(validation[2], x_val.shape[0], "validation sample_weight"))
    _check_split_and_seed(validation_fraction, validation, seed)
    request.architecture = _json(architecture(layers, x.shape[1], input_shape))
    request.feature_names = _feature_names(feature_names, names, x.shape[1])
    _set_run(request, precision, device, init, seed, initial_parameters)
    _set_data(request, standardize_inputs, standardize_targets, validation_fraction)
    _set_files(request, checkpoint, checkpoint_every, resume)
    apply_options(request, options, "fit")
    _check_files(request)
    return _train(request, x, targets, x_val, y_val, verbose, weights)


def _sample_weight(weights: ArrayLike | None, rows: int, what: str) -> np.ndarray | None:
    """Sample weights as the float64 vector the library reads (values checked there)."""
    if weights is None:
        return None
    try:
        w = np.ascontiguousarray(np.asarray(weights, dtype=np.float64))
    except (TypeError, ValueError) as error:
        raise TypeError(f"{what}: expected an array of numbers, one per sample") from error
    if w.ndim != 1 or w.shape[0] != rows:
        raise ValueError(f"{what}: expected shape ({rows},), one weight per sample; got "
                         f"{w.shape}")
    return w


def _inputs(task: str, X: ArrayLike) -> tuple[np.ndarray, list[str] | None]:
    """X as the input matrix, with its column names when it has them, for a known task."""
    if task not in ("regression", "classification"):
        raise ValueError(f"task = {task!r}: expected 'regression' or 'classification'")
    return as_input_matrix(X, "X")


def _check_split_and_seed(validation_fraction: float, validation: Any, seed: Any) -> None:
    if not 0.0 <= validation_fraction < 1.0:
        raise ValueError(f"validation_fraction = {validation_fraction}: expected a fraction in "
                         "[0, 1)")
    if validation is not None and validation_fraction > 0:
        raise ValueError(f"validation and validation_fraction = {validation_fraction} both given: "
                         "give the validation pair or a fraction of X to hold out, not both")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed: expected a non-negative int, got {seed!r}")
    if not 0 <= seed < 2**64:
        raise ValueError(f"seed = {seed}: expected an int in [0, 2**64)")


def _feature_names(given: Sequence[str] | None, from_x: list[str] | None,
                   columns: int) -> list[str]:
    """The names fit was given for X's columns, else a DataFrame's, else none."""
    if given is None:
        return from_x or []
    names = [str(n) for n in given]
    if len(names) != columns:
        raise ValueError(f"feature_names: {len(names)} names for X's {columns} columns")
    return names


def _set_run(request: Any, precision: str, device: str, init: str, seed: Any,
             initial_parameters: ArrayLike | None) -> None:
    """Where and in what precision the network trains, and from which parameters."""
    request.precision = precision
    request.device = device
    request.init = init
    request.seed = int(seed)
    if initial_parameters is not None:
        start = np.asarray(initial_parameters, dtype=np.float64).reshape(-1)
        if not np.isfinite(start).all():
            raise ValueError("initial_parameters holds NaN or infinity")
        request.initial_parameters = start.tolist()


def _set_data(request: Any, standardize_inputs: bool, standardize_targets: bool,
              validation_fraction: float) -> None:
    request.standardize_inputs = bool(standardize_inputs)
    request.standardize_targets = bool(standardize_targets)
    request.validation_fraction = float(validation_fraction)


def _set_files(request: Any, checkpoint: str | os.PathLike[str] | None, checkpoint_every: int,
               resume: str | os.PathLike[str] | None) -> None:
    request.checkpoint = os.fspath(checkpoint) if checkpoint is not None else ""
    if isinstance(checkpoint_every, bool) or not isinstance(checkpoint_every, (int, np.integer)):
        raise TypeError(f"checkpoint_every: expected an int, got {checkpoint_every!r}")
    if checkpoint_every < 0:
        raise ValueError(f"checkpoint_every = {checkpoint_every}: expected epochs ≥ 0 between "
                         "checkpoints (0: only when training is interrupted)")
    request.checkpoint_every = int(checkpoint_every)
    request.resume = os.fspath(resume) if resume is not None else ""


def _train(request: Any, x: np.ndarray, targets: Any, x_val: Any, y_val: Any,
           verbose: bool, weights: tuple[Any, Any] = (None, None)) -> tuple[Model, Summary]:
    """Trains as the request says, with a progress bar when verbose."""
    progress = EpochProgress(request.trainer.max_epochs) if verbose else None
    try:
        file, summary = _core.train(request, x, targets, x_val, y_val, progress, *weights)
    finally:
        if progress is not None:
            progress.close()
    model = Model(file)
    for line in summary.options_ignored:  # the engine's judgment: an option that did nothing
        warnings.warn(line, UserWarning, stacklevel=3)
    if summary.termination == "non_finite_objective":
        # `lmtrain fit` ends such a run with exit code 3 and no model; here the error carries
        # the last finite network and the summary, so that nothing is lost.
        error = ValueError(
            f"training stopped after {summary.epochs} epochs: {summary.message}"
            + ("" if not request.checkpoint else
               f" (the last good checkpoint, if any, is {request.checkpoint})")
            + "; the error's .model and .summary hold the last finite network and the report")
        error.model = model  # type: ignore[attr-defined]
        error.summary = summary  # type: ignore[attr-defined]
        raise error
    return model, summary


def _targets(task: str, x: np.ndarray, y: ArrayLike,
             validation: tuple[ArrayLike, ...] | None,
             options: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
    """The request, with the task's classes; y as the task's targets (class indices or a
    matrix); and the validation pair checked the same way."""
    request = _core.TrainingRequest()
    classes: Any = None
    if task == "classification":
        codes, classes = as_class_indices(y, x.shape[0], "y")
        if len(classes) < 2:
            raise ValueError(f"y: classification needs at least 2 classes, got {len(classes)} "
                             f"({list(classes)})")
        targets: Any = codes
        request.classes = len(classes)
        request.class_names = [str(c) for c in classes]
        options.setdefault("loss", "cross_entropy")
    else:
        targets = as_regression_targets(y, x.shape[0], "y")
    if validation is None:
        return request, targets, None, None
    if not isinstance(validation, (tuple, list)) or len(validation) not in (2, 3):
        raise TypeError("validation: expected a pair (X_val, y_val) or (X_val, y_val, "
                        "sample_weight_val)")
    x_val, _ = as_input_matrix(validation[0], "validation X")
    if task == "classification":
        y_val, _ = as_class_indices(validation[1], x_val.shape[0], "validation y",
                                    classes=classes)
    else:
        y_val = as_regression_targets(validation[1], x_val.shape[0], "validation y")
    return request, targets, x_val, y_val


def _check_files(request: Any) -> None:
    """The resume file exists and the checkpoint's folder does, before any training: the first
    checkpoint is written only after an epoch."""
    if request.resume and not os.path.isfile(request.resume):
        raise FileNotFoundError(f"resume: no checkpoint file {request.resume}")
    if request.checkpoint:
        folder = os.path.dirname(os.path.abspath(request.checkpoint))
        if not os.path.isdir(folder):
            raise FileNotFoundError(f"checkpoint: no directory {folder} to write "
                                    f"{request.checkpoint} in; create it first")


@atexit.register
def _wait_for_abandoned_runs() -> None:
    """At exit: a run abandoned by a second Ctrl-C may still be inside its LM step."""
    if _core.abandoned_runs() == 0:
        return
    print("lmtrain: waiting for an interrupted LM step to finish before exiting "
          "(Ctrl-C: exit at once)", file=sys.stderr, flush=True)
    try:
        while not _core.wait_for_abandoned_runs(0.1):
            pass
    except KeyboardInterrupt:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)


def _json(value: Any) -> str:
    import json

    return json.dumps(value)
