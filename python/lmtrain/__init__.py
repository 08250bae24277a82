"""lmtrain: neural networks trained with the Levenberg–Marquardt algorithm.

The same C++ library as the ``lmtrain`` command:

* :func:`fit` trains a network on arrays and returns a :class:`Model` and a :class:`Summary`;
* :func:`load` reads a ``model.safetensors`` (``lmtrain fit``'s, or one saved from Python);
* :class:`LMRegressor` and :class:`LMClassifier` are scikit-learn estimators
  (``lmtrain.sklearn``; they need scikit-learn).
"""

from __future__ import annotations

import importlib.util
from typing import Any

from . import _openmp

_openmp.load_core()  # before anything imports lmtrain._core

from ._model import Model, load  # noqa: E402
from ._summary import EpochRecord, PenaltyGroup, Summary  # noqa: E402
from ._training import describe_options, fit, option_names as _option_names  # noqa: E402

__version__ = "0.1.0"
_ESTIMATORS = ("LMClassifier", "LMRegressor")
# The estimators are part of the package's names only where scikit-learn is installed: without
# it `from lmtrain import *` must still work (and `lmtrain.LMRegressor` says what to install).
_HAVE_SKLEARN = importlib.util.find_spec("sklearn") is not None
__all__ = ["EpochRecord", *(_ESTIMATORS if _HAVE_SKLEARN else ()), "Model", "PenaltyGroup",
           "Summary", "describe_options", "fit", "load", "option_names"]


def option_names() -> list[str]:
    """Names of the library options :func:`fit` accepts as keyword arguments."""
    return sorted(_option_names())


def __getattr__(name: str) -> Any:
    # The estimators import scikit-learn, which `import lmtrain` does not need.
    if name in _ESTIMATORS:
        if not _HAVE_SKLEARN:
            raise ModuleNotFoundError(
                f"lmtrain.{name} needs scikit-learn, which is not installed: "
                "pip install 'lmtrain[sklearn]' (or pip install scikit-learn)", name="sklearn")
        from . import sklearn

        return getattr(sklearn, name)
    raise AttributeError(f"module 'lmtrain' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
