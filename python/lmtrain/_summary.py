"""What happened during training: the library's own ``Summary``, ``EpochRecord`` and
``PenaltyGroup`` classes (lmtrain._core; src/python/summary.cpp).

``Summary.full_report()`` is the text ``lmtrain fit`` prints and writes to ``summary.txt``;
``Summary.to_json()`` is its ``summary.json``.  Every figure of the report is an attribute.  A
Summary pickles (as that JSON), so estimators holding one pickle too.
"""

from __future__ import annotations

from . import _core

Summary = _core.Summary
EpochRecord = _core.EpochRecord
PenaltyGroup = _core.PenaltyGroup
TerminationReason = _core.TerminationReason

__all__ = ["EpochRecord", "PenaltyGroup", "Summary", "TerminationReason"]
