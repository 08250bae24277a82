"""lmtrain.torch: Levenberg–Marquardt training of any torch.nn.Module with lmtrain's engine.

>>> opt = lmtrain.torch.LevenbergMarquardt(model, loss="mse")
>>> report = opt.step(x, y)            # one LM step; the parameters are updated in place
>>> history = opt.fit((x, y), epochs=50)

Jacobian slices come from torch (torch.func per sample, or batched autograd for a residual_fn
that may differentiate the model with respect to its inputs, as PINNs do); lmtrain folds each
slice into A = JᵀJ and g = Jᵀr, and solves the damped system with A reused across λ retries.
An nn.Sequential of layers lmtrain implements runs on the library's own engine instead
(``report.path == "native"``).  On the CPU and on CUDA devices (docs/torch.md, "On CUDA").
"""

from __future__ import annotations

from ._cupylma import LMA, configuration
from ._losses import LOSSES
from ._optimizer import LevenbergMarquardt, StepReport, TerminationReason

__all__ = ["LMA", "LOSSES", "LevenbergMarquardt", "StepReport", "TerminationReason",
           "configuration"]
