"""A trained network: what ``lmtrain.fit`` returns and ``lmtrain.load`` reads."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from . import _core
from ._validation import as_input_matrix


def _labels(names: list[str]) -> NDArray[Any]:
    """Class names as numbers when the text round-trips exactly (so "01" stays a string)."""
    if set(names) <= {"False", "True"}:
        return np.array([n == "True" for n in names])
    for kind in (np.int64, np.float64):
        try:
            values = np.array([kind(n) for n in names])
        except (ValueError, OverflowError):
            continue
        if [str(v) for v in values] == list(names):
            return values
    return np.asarray(names)


class Model:
    """A trained network with its normalization, as ``model.safetensors`` holds it.

    Files go both ways: ``lmtrain.load`` reads what ``lmtrain fit`` wrote, and ``lmtrain
    predict`` reads what :meth:`save` writes.  A model pickles as its file's bytes.

    Parameters
    ----------
    file : lmtrain._core.ModelFile
        The library's model file object (use :func:`lmtrain.load` or :func:`lmtrain.fit`).
    """

    def __init__(self, file: _core.ModelFile) -> None:
        self._file = file

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Model:
        """Reads a model file.

        Parameters
        ----------
        path : str or os.PathLike
            A ``model.safetensors`` of ``lmtrain fit`` or one written by :meth:`save`.

        Raises
        ------
        FileNotFoundError
            When there is no such file.
        ValueError
            When the file is not a valid lmtrain model (the message names the problem).
        """
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: no such model file; give the model.safetensors "
                                    "of a run directory or a file written by Model.save")
        return cls(_core.ModelFile.read(path))

    def save(self, path: str | os.PathLike[str]) -> None:
        """Writes the model file atomically: a reader sees the old file or the complete new one.

        Parameters
        ----------
        path : str or os.PathLike
            Destination, conventionally ``model.safetensors``.
        """
        self._file.save(os.fspath(path))

    # -- what the file holds ------------------------------------------------------------------
    @property
    def parameters(self) -> NDArray[np.float64]:
        """The flat parameter vector in the library's order (per layer: W row-major, then b)."""
        return self._file.parameters

    @property
    def parameter_dtype(self) -> str:
        """``"float32"`` or ``"float64"``: the precision the network was trained in."""
        return self._file.parameter_dtype

    @property
    def architecture(self) -> dict[str, Any]:
        """The architecture as the model file stores it (``input_shape`` and ``layers``)."""
        return json.loads(self._file.architecture)

    @property
    def description(self) -> str:
        """One line, e.g. ``"32-16-1 tanh (545 parameters)"``."""
        return self._file.description

    @property
    def n_inputs(self) -> int:
        """Input features per sample."""
        return self._file.inputs

    @property
    def n_outputs(self) -> int:
        """Network outputs per sample (the number of classes for classification)."""
        return self._file.outputs

    @property
    def task(self) -> str:
        """``"regression"`` or ``"classification"``."""
        return self._file.task

    @property
    def loss(self) -> str:
        """The training loss (``"mse"``, ``"cross_entropy"``, ...)."""
        return self._file.loss

    @property
    def classes(self) -> NDArray[Any]:
        """Classification: the class labels, output k being ``classes[k]``.

        The file stores class names as text; they come back as ints when every name is an
        integer's text as numpy writes it, else as floats when every name is a float's, as
        bools for "False"/"True", else as strings (``lmtrain.fit`` on labels 0/1 predicts the
        ints 0/1, on 0.0/0.5 the floats).  0 … n_classes−1 when the file names none.
        """
        names = self._file.class_names
        if names:
            return _labels(names)
        return np.arange(self._file.num_classes)

    @property
    def input_names(self) -> list[str]:
        """The training data's column names, one per input (a DataFrame's columns or
        ``feature_names``; a CSV header's for ``lmtrain fit``), or ``[]`` when it had none.
        ``lmtrain predict`` and ``eval`` read a CSV's inputs by these names."""
        return list(self._file.input_names)

    @property
    def input_mean(self) -> NDArray[np.float64] | None:
        """Mean of each input in the training data (None: inputs not standardized)."""
        return self._file.input_mean

    @property
    def input_std(self) -> NDArray[np.float64] | None:
        """Standard deviation of each input in the training data."""
        return self._file.input_std

    @property
    def target_mean(self) -> NDArray[np.float64] | None:
        """Regression: mean of each target in the training data (None: not standardized)."""
        return self._file.target_mean

    @property
    def target_std(self) -> NDArray[np.float64] | None:
        """Regression: standard deviation of each target in the training data."""
        return self._file.target_std

    @property
    def provenance(self) -> dict[str, Any]:
        """lmtrain version, date, seed, epochs, final losses and termination of the run."""
        return json.loads(self._file.provenance)

    # -- running it ---------------------------------------------------------------------------
    def outputs(self, X: ArrayLike, device: str = "cpu") -> NDArray[np.float64]:
        """Raw network outputs, samples × outputs.

        Regression outputs are in the targets' units (the stored standardization undone);
        classification outputs, and those of a network trained with ``loss="bce"``, are
        logits.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_inputs)
            Inputs in the units of the training data; standardized as in training.
        device : str, default="cpu"
            ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"auto"``.
        """
        return self._outputs(X, device, probabilities=False)

    def _outputs(self, X: ArrayLike, device: str, probabilities: bool) -> NDArray[np.float64]:
        # probabilities: the engine's output link (a classifier's softmax, bce's sigmoid), as
        # `lmtrain predict` applies it.
        x, _ = as_input_matrix(X, "X")
        if x.shape[1] != self.n_inputs:
            raise ValueError(f"X has {x.shape[1]} features, but the model {self.description} "
                             f"takes {self.n_inputs}")
        return self._file.predict(x, device, probabilities)

    def predict(self, X: ArrayLike, device: str = "cpu") -> NDArray[Any]:
        """Predictions for ``X``.

        Returns
        -------
        ndarray
            Regression: shape (n_samples,) for a one-output network, else
            (n_samples, n_outputs), in the targets' units; with ``loss="bce"`` the
            probabilities (the logits' sigmoid), as ``lmtrain predict`` writes them.
            Classification: the predicted class labels (``classes``), shape (n_samples,): the
            first most probable class, as ``lmtrain predict``'s ``class`` column.
        """
        z = self._outputs(X, device, probabilities=True)
        if self.task == "classification":
            return self.classes[np.argmax(z, axis=1)]
        return z[:, 0] if z.shape[1] == 1 else z

    def evaluate(self, X: ArrayLike, y: ArrayLike, device: str = "cpu") -> dict[str, Any]:
        """The figures ``lmtrain eval --json`` reports, on ``X`` and its targets ``y``.

        Returns a dict: ``loss`` (as training reported it; ``loss_on_standardized_targets``
        says whether on standardized targets), ``loss_name``, ``samples`` and, for a
        classifier, ``accuracy``, ``confusion`` (rows: true class, columns: predicted, in
        ``classes`` order) and ``classes``; for a regression model ``mse`` and ``r2`` in the
        targets' units.  ``y``: class labels (of ``classes``) for a classifier, else targets of
        shape (n_samples,) or (n_samples, n_outputs).
        """
        x, _ = as_input_matrix(X, "X")
        if x.shape[1] != self.n_inputs:
            raise ValueError(f"X has {x.shape[1]} features, but the model {self.description} "
                             f"takes {self.n_inputs}")
        labels = np.asarray(y)
        if self.task == "classification":
            if labels.ndim != 1 or labels.shape[0] != x.shape[0]:
                raise ValueError(f"y: expected {x.shape[0]} class labels (one per row of X), "
                                 f"got shape {labels.shape}")
            index = {c.item() if hasattr(c, "item") else c: k for k, c in enumerate(self.classes)}
            codes = []
            for label in labels.tolist():
                if label not in index:
                    raise ValueError(f"y: {label!r} is not one of the {len(index)} classes the "
                                     f"model was trained on ({', '.join(map(str, index))})")
                codes.append(index[label])
            targets = np.eye(len(index))[codes]
        else:
            targets = np.asarray(labels, dtype=np.float64)
            targets = targets.reshape(x.shape[0], -1) if targets.ndim == 1 else targets
            if targets.shape != (x.shape[0], self.n_outputs):
                raise ValueError(f"y: expected shape ({x.shape[0]}, {self.n_outputs}) or "
                                 f"({x.shape[0]},) for one output, got {np.shape(y)}")
        return json.loads(self._file.evaluate(x, np.ascontiguousarray(targets), device))

    def predict_proba(self, X: ArrayLike, device: str = "cpu") -> NDArray[np.float64]:
        """Classification: class probabilities (softmax of the outputs), n_samples × n_classes."""
        if self.task != "classification":
            raise AttributeError("predict_proba: this model is a regression model")
        return self._outputs(X, device, probabilities=True)

    def __reduce__(self) -> tuple[Any, tuple[bytes]]:
        return (_model_from_bytes, (bytes(self._file.encode()),))

    def __repr__(self) -> str:
        return f"lmtrain.Model({self.description}, {self.task}, {self.parameter_dtype})"


def _model_from_bytes(data: bytes) -> Model:
    return Model(_core.ModelFile.parse(data, "pickled lmtrain.Model"))


def load(path: str | os.PathLike[str]) -> Model:
    """Reads a model file (``lmtrain fit``'s ``model.safetensors`` or one saved from Python).

    Parameters
    ----------
    path : str or os.PathLike
        The file.

    Returns
    -------
    Model
        The network with its normalization; ``predict`` applies both.
    """
    return Model.load(path)
