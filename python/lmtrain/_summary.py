"""What happened during training: the library's own ``Summary``, ``EpochRecord`` and
``PenaltyGroup`` classes (lmtrain._core; src/python/summary.cpp).

``Summary.full_report()`` is the text ``lmtrain fit`` prints and writes to ``summary.txt``, and
``Summary.to_json()`` its ``summary.json``, with options named as Python's keyword arguments
(``lambda_max``, where the command-line tool says ``solver.lambda_max``).  Every figure of the
report is an attribute.  A
Summary pickles (as that JSON), so estimators holding one pickle too.
"""

from __future__ import annotations

from . import _core

Summary = _core.Summary
EpochRecord = _core.EpochRecord
PenaltyGroup = _core.PenaltyGroup
TerminationReason = _core.TerminationReason

__all__ = ["EpochRecord", "PenaltyGroup", "Summary", "TerminationReason"]
