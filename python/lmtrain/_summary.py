"""What happened during training: lmtrain's ``Summary`` as plain Python data."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class EpochRecord:
    """One epoch of training.

    Attributes
    ----------
    epoch : int
        1-based epoch number.
    training_loss : float
        Reported loss (PyTorch's mean reduction) on all training samples after the epoch.
    validation_loss : float
        The same on the validation samples; NaN without validation data.
    lambda_ : float
        The damping parameter λ at the end of the epoch.
    accepted, rejected, invalid : int
        LM attempts of the epoch: accepted steps, trials that did not lower the loss, and
        failed factorizations or non-finite steps.
    gradient_max_norm : float
        ‖Jᵀr‖∞ of the epoch's last step.
    step_norm : float
        ‖δ‖₂ of the epoch's last accepted step.
    seconds : float
        Wall-clock seconds since training started.
    """

    epoch: int
    training_loss: float
    validation_loss: float
    lambda_: float
    accepted: int
    rejected: int
    invalid: int
    gradient_max_norm: float
    step_norm: float
    seconds: float


@dataclass(frozen=True)
class PenaltyGroup:
    """One relevance group of ``regularization="ard"`` (``bayesian`` has one ρ and no groups).

    Attributes
    ----------
    name : str
        ``"input 3 (age)"``, ``"layer 2 (dense) weights"``, ``"layer 0 (dense) bias"``.
    size : int
        Parameters in the group.
    weight_decay : float
        The group's penalty ρ at the end of training: large when the data do not support the
        group (an input switched off).
    effective_parameters : float
        γ, how many of the group's parameters the data determine (0 … size).
    """

    name: str
    size: int
    weight_decay: float
    effective_parameters: float


@dataclass(frozen=True)
class Summary:
    """lmtrain's training summary: sizes, choices given and used, losses, counts, timings.

    ``full_report()`` is the text ``lmtrain fit`` prints and writes to ``summary.txt``; every
    figure in it is also a field here.  Losses are PyTorch's definitions (mean squared error,
    mean cross-entropy).
    """

    model: str
    loss: str
    precision: str
    precision_reason: str
    device: str
    num_params: int
    training_samples: int
    validation_samples: int
    batch_size: int
    batches_per_epoch: int
    linear_solver_given: str
    linear_solver_used: str
    linear_solver_reason: str
    damping: str
    regularization: str
    initial_loss: float
    final_loss: float
    initial_validation_loss: float
    final_validation_loss: float
    best_validation_loss: float
    best_epoch: int
    restored_best: bool
    epochs: int
    steps: int
    accepted_steps: int
    rejected_steps: int
    invalid_steps: int
    final_lambda: float
    final_weight_decay: float
    effective_parameters: float
    penalty_groups: tuple[PenaltyGroup, ...]
    termination: str
    converged: bool
    message: str
    history: tuple[EpochRecord, ...]
    times: dict[str, float]
    total_seconds: float
    planned_peak_bytes: int
    peak_device_bytes: int
    report: str = field(repr=False)
    brief: str = field(repr=False)

    def full_report(self) -> str:
        """The full report, as ``lmtrain fit`` prints it."""
        return self.report

    def brief_report(self) -> str:
        """One line: epochs, initial and final loss, termination."""
        return self.brief

    def __str__(self) -> str:
        return self.brief

    @property
    def loss_curve(self) -> list[float]:
        """Training loss after each epoch."""
        return [e.training_loss for e in self.history]

    @property
    def validation_curve(self) -> list[float]:
        """Validation loss after each epoch (empty without validation data)."""
        return [e.validation_loss for e in self.history if not math.isnan(e.validation_loss)]

    @classmethod
    def _from_fields(cls, fields: dict[str, Any]) -> Summary:
        values = dict(fields)
        values["history"] = tuple(EpochRecord(**e) for e in values["history"])
        values["penalty_groups"] = tuple(PenaltyGroup(**g) for g in values["penalty_groups"])
        return cls(**values)
