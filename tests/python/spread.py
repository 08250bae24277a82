"""Bounds on what rounding does to two runs that should agree, and the hooks with which
scripts/measure-spread.sh measures it (issue 35).

Two LM runs that compute the same thing by other kernels — the fast path and the torch path,
lmtrain.fit and lmtrain.torch, several ranks and one — agree only to rounding, ~1e-16 per
operation, and every step amplifies what it is given by up to cond(A + λD).  How far the runs
part depends on the CPU's kernels (OpenBLAS's, MKL's, ATen's and lmtrain's SIMD paths), so a
bound taken from the one CPU at hand fails on another.  A comparison of two such runs asserts

    within(check, actual, expected, bound)          (relative=True: over max |expected|)

with a bound that is at least MARGIN times the largest gap that measure-spread.sh saw, over
every kernel path this machine can run and with the data of one side moved by one ulp
(`one_ulp`), and a comment beside it saying so.  Under the script:

    LMTRAIN_SPREAD_LOG=FILE   within() appends {"check", "gap", "bound"} to FILE (JSON lines)
                              and raises nothing: the script reports the margins
    LMTRAIN_SPREAD_ULP=1      one_ulp(v) is v·(1 + ε): every element moves by about one ulp, as
                              scripts/gpu-run.sh's header perturbs W1's targets by 2e-16
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

# The factor between the largest gap measured and a bound (scripts/gpu-run.sh takes ≥ 1000 too).
MARGIN = 1000.0


def _as_array(v: Any) -> np.ndarray:
    if hasattr(v, "detach"):  # a torch tensor, without importing torch here
        v = v.detach().cpu().double().numpy()
    return np.asarray(v, dtype=np.float64)


def one_ulp(v: Any) -> Any:
    """v (a float array, tensor or number) times 1 + ε of its type under LMTRAIN_SPREAD_ULP=1,
    else v: every nonzero element moves by about one ulp.  Integer data (class labels) are
    returned as they are."""
    if os.environ.get("LMTRAIN_SPREAD_ULP") != "1":
        return v
    if hasattr(v, "is_floating_point"):  # a torch tensor
        return v * (1 + {8: 2.0 ** -52, 4: 2.0 ** -23}[v.element_size()]) if \
            v.is_floating_point() else v
    if isinstance(v, np.ndarray):
        return v * v.dtype.type(1 + np.finfo(v.dtype).eps) if \
            np.issubdtype(v.dtype, np.floating) else v
    if isinstance(v, float):
        return v * (1 + 2.0 ** -52)
    return v


def gap(actual: Any, expected: Any, relative: bool = False) -> float:
    """max |actual − expected|, over max |expected| when relative."""
    a, b = _as_array(actual), _as_array(expected)
    assert a.shape == b.shape, (a.shape, b.shape)
    difference = float(np.max(np.abs(a - b))) if a.size else 0.0
    if relative:
        scale = float(np.max(np.abs(b))) if b.size else 0.0
        return difference / scale if scale > 0 else difference
    return difference


def within(check: str, actual: Any, expected: Any, bound: float, relative: bool = False) -> None:
    """Asserts gap(actual, expected, relative) ≤ bound; under LMTRAIN_SPREAD_LOG records it
    instead, named by the test and `check`."""
    measured = gap(actual, expected, relative)
    log = os.environ.get("LMTRAIN_SPREAD_LOG")
    if log:
        test = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" (", 1)[0]
        with open(log, "a", encoding="utf-8") as f:
            f.write(json.dumps({"check": f"{test} {check}", "gap": measured, "bound": bound,
                                "relative": relative}) + "\n")
        return
    assert measured <= bound, (f"{check}: {'relative ' if relative else ''}gap {measured:.3g} "
                               f"exceeds {bound:.3g} (scripts/measure-spread.sh measures it)")
