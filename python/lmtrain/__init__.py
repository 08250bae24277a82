"""lmtrain: neural networks trained with the Levenberg–Marquardt algorithm.

The same C++ library as the ``lmtrain`` command:

* :func:`fit` trains a network on arrays and returns a :class:`Model` and a :class:`Summary`;
* :func:`load` reads a ``model.safetensors`` (``lmtrain fit``'s, or one saved from Python);
* :class:`LMRegressor` and :class:`LMClassifier` are scikit-learn estimators
  (``lmtrain.sklearn``; they need scikit-learn).
"""

from __future__ import annotations

import importlib.util
import numbers
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
           "Summary", "describe_options", "fit", "load", "option_names", "set_cpu_threads"]


def option_names() -> list[str]:
    """Names of the library options :func:`fit` accepts as keyword arguments."""
    return sorted(_option_names())


def set_cpu_threads(threads: int) -> None:
    """Fixes the number of CPU threads lmtrain runs on, as ``OMP_NUM_THREADS`` does.

    ``0`` (the default) lets lmtrain choose each phase's count from its measured times, which
    keeps a machine shared with other processes from slowing the run down; a count ``n >= 1``
    runs every phase on ``n`` threads (at most the processors this process may use).  OpenBLAS
    adds in another order on one thread than on two, so runs whose products exceed 2**28
    multiply-adds are bit-reproducible only with a fixed count.  Applies to fits and optimizers
    created afterwards; the Summary's ``threads`` says what a run used.  torch's own threads are
    ``torch.set_num_threads``'s.
    """
    if isinstance(threads, bool) or not isinstance(threads, numbers.Integral):
        raise TypeError(f"set_cpu_threads: threads must be an int, got {threads!r}")
    if threads < 0:
        raise ValueError(f"set_cpu_threads: threads must be >= 0 (0: lmtrain chooses), "
                         f"got {threads}")
    from . import _core

    _core.set_cpu_threads(int(threads))


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
