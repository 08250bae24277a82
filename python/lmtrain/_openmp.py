"""Loads the extension with idle OpenMP threads that sleep instead of spinning.

libgomp, the OpenMP runtime lmtrain's extension uses, reads ``OMP_WAIT_POLICY`` once, when it
is loaded.  Unless the user chose a policy (``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT``), lmtrain
asks for ``passive`` while the extension loads, as the ``lmtrain`` command does before its own
start: threads waiting for work then sleep rather than spin ~300 000 times on cores that other
processes need (docs/design.md, "CPU performance notes").  The variable is removed again
afterwards, so other OpenMP runtimes loaded later (PyTorch's own libgomp) keep their defaults.
Nothing is changed when libgomp was loaded before lmtrain, for instance by NumPy built against
an OpenMP OpenBLAS: the Summary then names the runtime's default.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType


def _libgomp_loaded() -> bool:
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            return any(line.rstrip().endswith("/libgomp.so.1") for line in maps)
    except OSError:
        return True  # cannot tell: leave the runtime's settings alone


def load_core() -> ModuleType:
    """Imports ``lmtrain._core``, with ``OMP_WAIT_POLICY=passive`` when nothing was chosen."""
    choose = ("OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ
              and not _libgomp_loaded())
    if choose:
        os.environ["OMP_WAIT_POLICY"] = "passive"
    try:
        core = importlib.import_module("lmtrain._core")
    finally:
        if choose:
            del os.environ["OMP_WAIT_POLICY"]
    if choose:
        core.note_passive_openmp_wait_set_by_lmtrain()
    return core
