"""lmtrain: neural networks trained with the Levenberg–Marquardt algorithm.

The same C++ library as the ``lmtrain`` command:

* :func:`fit` trains a network on arrays and returns a :class:`Model` and a :class:`Summary`;
* :func:`load` reads a ``model.safetensors`` (``lmtrain fit``'s, or one saved from Python);
* :class:`LMRegressor` and :class:`LMClassifier` are scikit-learn estimators
  (``lmtrain.sklearn``; they need scikit-learn).
"""

from __future__ import annotations

from typing import Any

from . import _openmp

_openmp.load_core()  # before anything imports lmtrain._core

from ._model import Model, load  # noqa: E402
from ._summary import EpochRecord, PenaltyGroup, Summary  # noqa: E402
from ._training import fit, option_names as _option_names  # noqa: E402

__version__ = "0.1.0"
__all__ = ["EpochRecord", "LMClassifier", "LMRegressor", "Model", "PenaltyGroup", "Summary",
           "fit", "load", "option_names"]


def option_names() -> list[str]:
    """Names of the library options :func:`fit` accepts as keyword arguments."""
    return sorted(_option_names())


def __getattr__(name: str) -> Any:
    # The estimators import scikit-learn, which `import lmtrain` does not need.
    if name in ("LMRegressor", "LMClassifier"):
        from . import sklearn

        return getattr(sklearn, name)
    raise AttributeError(f"module 'lmtrain' has no attribute {name!r}")
