"""Arrays on their way into the library: checked, and converted at most once.

A C-contiguous float32 or float64 array is passed to the extension as it is (the library reads
it in place); anything else — integers, another order, a DataFrame — is converted once, to
C-contiguous float64.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray


def _describe_dtype(a: NDArray[Any]) -> str:
    return f"dtype {a.dtype}"


def _first_non_finite(a: NDArray[Any]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argwhere(~np.isfinite(a))[0])


def _numeric(values: ArrayLike, name: str) -> NDArray[Any]:
    try:
        a = np.asarray(values)
    except Exception as error:  # ragged lists and the like
        raise ValueError(f"{name}: cannot be read as an array ({error})") from error
    if a.dtype == object:
        try:
            a = a.astype(np.float64)
        except (TypeError, ValueError) as error:
            raise TypeError(f"{name}: expected numbers, got objects that are not ({error})") \
                from error
    if np.issubdtype(a.dtype, np.complexfloating):
        raise TypeError(f"{name}: expected real numbers, got complex {_describe_dtype(a)}")
    if not (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_):
        raise TypeError(f"{name}: expected a numeric array, got {_describe_dtype(a)}")
    return a


def _library_array(a: NDArray[Any]) -> NDArray[Any]:
    """``a`` itself when it is C-contiguous float32/float64, else one converted copy."""
    if a.dtype in (np.float32, np.float64) and a.flags.c_contiguous:
        return a
    dtype = a.dtype if a.dtype in (np.float32, np.float64) else np.float64
    return np.ascontiguousarray(a, dtype=dtype)


def check_finite(a: NDArray[Any], name: str) -> None:
    """Raises ValueError naming the first NaN or infinity of ``a``."""
    if not np.isfinite(a).all():
        where = _first_non_finite(a)
        position = f"row {where[0]}" + (f", column {where[1]}" if len(where) > 1 else "")
        raise ValueError(f"{name} contains NaN or infinity (first at {position}: "
                         f"{a[where]}); remove or impute non-finite values")


def feature_names(X: Any) -> list[str] | None:
    """The column names of a DataFrame-like ``X`` (as strings), else None."""
    columns = getattr(X, "columns", None)
    if columns is None:
        return None
    return [str(c) for c in columns]


def as_input_matrix(X: ArrayLike, name: str = "X") -> tuple[NDArray[Any], list[str] | None]:
    """``X`` as the library reads it, and its column names when it is a DataFrame.

    Raises
    ------
    TypeError
        For a non-numeric or complex dtype.
    ValueError
        For a shape other than (n_samples, n_features) with n_samples ≥ 1, or NaN/infinity.
    """
    names = feature_names(X)
    a = _numeric(X, name)
    if a.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D array of shape (n_samples, n_features), got "
                         f"shape {a.shape}; reshape a single feature with X.reshape(-1, 1)")
    if a.shape[0] < 1 or a.shape[1] < 1:
        raise ValueError(f"{name}: expected at least 1 row and 1 column, got shape {a.shape}")
    check_finite(a, name)
    return _library_array(a), names


def as_regression_targets(y: ArrayLike, rows: int, name: str = "y") -> NDArray[Any]:
    """Regression targets as an (n_samples, n_outputs) float matrix (1-D y is one output)."""
    a = _numeric(y, name)
    if a.ndim == 1:
        a = a.reshape(-1, 1)
    if a.ndim != 2:
        raise ValueError(f"{name}: expected shape (n_samples,) or (n_samples, n_outputs), got "
                         f"shape {a.shape}")
    if a.shape[0] != rows:
        raise ValueError(f"{name} has {a.shape[0]} rows but X has {rows}; give one target per "
                         "sample")
    if a.shape[1] < 1:
        raise ValueError(f"{name}: expected at least one target column, got shape {a.shape}")
    check_finite(a, name)
    return _library_array(a)


def as_class_indices(y: ArrayLike, rows: int, name: str = "y",
                     classes: NDArray[Any] | None = None) -> tuple[NDArray[np.int64], NDArray[Any]]:
    """Class labels as int64 indices into the sorted distinct labels (or into ``classes``).

    Returns
    -------
    indices : ndarray of int64, shape (n_samples,)
    classes : ndarray
        The labels, index k being ``classes[k]``.
    """
    a = np.asarray(y)
    if a.ndim == 2 and a.shape[1] == 1:
        a = a.ravel()
    if a.ndim != 1:
        raise ValueError(f"{name}: expected class labels of shape (n_samples,), got shape "
                         f"{a.shape}")
    if a.shape[0] != rows:
        raise ValueError(f"{name} has {a.shape[0]} labels but X has {rows} rows")
    if np.issubdtype(a.dtype, np.floating):
        check_finite(a, name)
    if classes is None:
        classes, indices = np.unique(a, return_inverse=True)
    else:
        indices = np.searchsorted(classes, a)
        indices = np.clip(indices, 0, len(classes) - 1)
        unknown = classes[indices] != a
        if unknown.any():
            raise ValueError(f"{name}: label {a[unknown][0]!r} is not one of the training "
                             f"classes {list(classes)}")
    return np.ascontiguousarray(indices, dtype=np.int64).ravel(), classes
