"""cuPyLMA's interface on lmtrain's engine: ``lmtrain.torch.LMA(model, devices, loss_fn,
residual_fn)`` and ``lma.step(x, y, slice_size) -> (loss, terminated)``, so that a cuPyLMA script
switches by its import lines (``import lmtrain.torch as cuPyLMA``, ``from lmtrain.torch import
configuration``) and its device list.  docs/torch.md maps each argument.

cuPyLMA's ``residual_fn(outputs, targets)`` acts on the model's outputs.  It is checked once on
the first batch: when it is ``flatten(outputs − targets)`` and ``loss_fn`` is ``nn.MSELoss`` the
problem is lmtrain's ``mse`` (an ``nn.Sequential`` of lmtrain's layers then runs on the native
engine); otherwise, when its rows are per sample (r of a batch is the concatenation of each
sample's r), its Jacobian is taken per sample with torch.func; otherwise as one function of the
batch (``jacobian_slice`` of the whole residual vector, slower).
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Sequence

import torch

from ._optimizer import LevenbergMarquardt


class Configuration:
    """cuPyLMA's ``configuration``: the damping's clamp and the attempts per step are used
    (lambda_max, lambda_min, max_attempts); the overlap and dispatch switches are accepted and
    have no effect (lmtrain never copies J through the host); FORCED_JACOBIAN_MODE with
    JACOBIAN_MODE 'forward' or 'reverse' picks jacfwd or jacrev."""

    def __init__(self) -> None:
        self.DAMPING_MAX: float = 1e10
        self.DAMPING_MIN: float = 1e-10
        self.UPDATE_ATTEMPTS: int = 10
        self.OPTIM_OVERLAP_H2D: bool = True
        self.OPTIM_OVERLAP_D2H_H2D: bool = True
        self.OPTIM_CYCLIC_DISPATCH: bool = True
        self.VERBOSE_MODEL: bool = False
        self.VERBOSE_OPTIM: bool = False
        self.FORCED_JACOBIAN_MODE: bool = False
        self.JACOBIAN_MODE: str = "forward"

    def jacobian(self) -> str:
        if not self.FORCED_JACOBIAN_MODE:
            return "auto"
        modes = {"forward": "jacfwd", "reverse": "jacrev"}
        if self.JACOBIAN_MODE not in modes:
            raise ValueError(f"configuration.JACOBIAN_MODE = {self.JACOBIAN_MODE!r}: lmtrain "
                             "takes 'forward' or 'reverse'")
        return modes[self.JACOBIAN_MODE]


configuration = Configuration()


class RowResiduals:
    """A residual function of (outputs, targets) whose rows are per sample, as a loss of the
    torch path: each sample's R rows are ``residual_fn(z_b, y_b)``, the objective ½‖r‖²."""

    kind = "mse"  # F = ½‖r‖²: the library's rules for a least-squares residual

    def __init__(self, residual_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                 rows_per_sample: int) -> None:
        self.residual_fn = residual_fn
        self.rows_per_sample = rows_per_sample
        self.checks_target_shape = False

    def residuals_per_sample(self, outputs: int) -> int:
        return self.rows_per_sample

    def targets(self, y: torch.Tensor, outputs: int, dtype: torch.dtype) -> torch.Tensor:
        return y.to(dtype) if torch.is_floating_point(y) else y

    def residuals(self, z: torch.Tensor, y: torch.Tensor, u: Any = None) -> torch.Tensor:
        if z.dim() == 1:  # one sample inside vmap
            return self.residual_fn(z.unsqueeze(0), y.unsqueeze(0)).reshape(-1)
        return self.residual_fn(z, y).reshape(z.shape[0], -1)

    def objective(self, z: torch.Tensor, y: torch.Tensor) -> float:
        r = self.residual_fn(z.detach(), y).detach().double()
        return 0.5 * float((r ** 2).sum())


class _BatchResiduals:
    """A residual function of (outputs, targets) that mixes samples: lmtrain's residual_fn of
    (model, x, y), whose Jacobian is taken over the whole batch."""

    def __init__(self, residual_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
        self.residual_fn = residual_fn

    def __call__(self, model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.residual_fn(model(x), y).reshape(-1)


class LMA:
    """cuPyLMA's optimizer on lmtrain's engine, with cuPyLMA's algorithm by default.

    cuPyLMA (``cupylma/lma.py``) solves (JᵀJ/B + λI)δ = Jᵀr/B over the step's B samples — λ is
    per sample —, lowers λ by ``damping_down`` (not below ``DAMPING_MIN``) when the trial lowers
    the loss, raises it by ``damping_up`` otherwise, gives the step up after ``UPDATE_ATTEMPTS``
    attempts, and reports ``terminated`` when a raise reaches ``DAMPING_MAX``, starting the next
    step from ``damping_start`` again.  ``schedule="cupylma"`` (the default) is exactly that on
    the library's step (multiplicative damping, ``damping_per_sample``,
    ``restart_lambda_at_max``, no geodesic acceleration).  ``schedule="lmtrain"`` is lmtrain's own:
    Nielsen's gain-ratio damping with geodesic acceleration, λ on JᵀJ (docs/torch.md has what it
    gains on W7).

    Parameters
    ----------
    model : torch.nn.Module
        On ``devices[0]``.
    devices : list of torch.device
        The devices this process drives, as cuPyLMA's: the batch is split over them, each
        computes its shard's Jacobian slices on a replica of the model, and the library sums the
        devices' A and g (NCCL on distinct GPUs) and keeps every replica the same
        (``LevenbergMarquardt(devices=…)``).  A device may repeat.  Under torchrun, give each
        process its own device instead.
    loss_fn : callable
        ``loss_fn(outputs, targets)``, the loss ``step`` returns (e.g. ``nn.MSELoss()``).
    residual_fn : callable
        ``residual_fn(outputs, targets) -> r``, what LM squares.
    solver : ignored
        cuPyLMA's dense solver; lmtrain's linear solver is ``linear_solver=`` (cholesky by
        default).
    learning_rate : ignored
        cuPyLMA stores it but applies the whole update; so does lmtrain (learning_rate 1).
    damping_start, damping_up, damping_down : float
        λ₀ and the factors of multiplicative damping (cuPyLMA's schedule).  With
        ``schedule="lmtrain"``, ``damping_start`` is λ₀ on JᵀJ and the factors are unused.
    dtype : numpy or torch dtype, optional
        The system's precision: float32 (a float32 system, as cuPyLMA's default) or float64
        (mixed precision for a float32 model).  Unset: lmtrain's ``precision="auto"``.
    schedule : str
        ``"cupylma"`` (default) or ``"lmtrain"``, as above.
    **options
        Any other option of ``lmtrain.torch.LevenbergMarquardt`` (``linear_solver``,
        ``geodesic_acceleration``, …); they override the schedule's.
    """

    def __init__(self, model: torch.nn.Module, devices: Sequence[torch.device],
                 loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                 residual_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                 solver: Any = None, learning_rate: float = 0.1, damping_start: float = 1e-3,
                 damping_up: float = 10.0, damping_down: float = 0.1, dtype: Any = None,
                 schedule: str = "cupylma", **options: Any) -> None:
        devices = [torch.device(d) for d in devices]
        if not devices:
            raise ValueError("LMA got no device; list at least the model's")
        device = next(model.parameters()).device
        if device != devices[0] and not (device.type == devices[0].type == "cpu"):
            raise ValueError(f"the model is on {device} but devices[0] is {devices[0]}; move it "
                             f"with model.to({str(devices[0])!r})")
        self.model, self.devices = model, devices
        self.loss_fn, self.residual_fn = loss_fn, residual_fn
        if solver is not None:
            warnings.warn("LMA(solver=...) is cuPyLMA's dense solver; lmtrain solves with "
                          "linear_solver= (cholesky by default) and ignores it", stacklevel=2)
        self._options = _schedule_options(schedule, damping_start, damping_up, damping_down)
        self._options.update(options)
        self._precision = _precision(dtype, next(model.parameters()).dtype)
        self._optimizer: LevenbergMarquardt | None = None
        self._slice: int | None = None
        self._kind_of_residuals: str | int | None = None

    @property
    def optimizer(self) -> LevenbergMarquardt | None:
        """The lmtrain.torch optimizer doing the steps (after the first)."""
        return self._optimizer

    def step(self, h_inputs: torch.Tensor, h_targets: torch.Tensor,
             slice_size: int | None = None) -> tuple[float, bool]:
        """One LM step on (inputs, targets); returns (loss, terminated) as cuPyLMA does: the
        loss of ``loss_fn`` after the step (before it, when every attempt failed), and
        terminated when a raise of λ reached ``DAMPING_MAX`` (or one of lmtrain's stops held)."""
        x, y = h_inputs, h_targets
        dtype = next(self.model.parameters()).dtype
        if x.is_floating_point() and x.dtype != dtype:  # as LevenbergMarquardt converts it
            x = x.to(dtype)
        if len(self.devices) == 1:  # several devices: each takes its shard where it lies
            x, y = x.to(self.devices[0]), y.to(self.devices[0])
        if self._optimizer is None or slice_size != self._slice:
            self._make_optimizer(x, y, slice_size)
        report = self._optimizer.step(x, y)
        return self._loss_after(report, x, y, slice_size), bool(report.termination)

    def _loss_after(self, report: Any, x: torch.Tensor, y: torch.Tensor,
                    slice_size: int | None) -> float:
        """cuPyLMA's returned loss: loss_fn over the batch's slices, weighted by their rows.
        For MSELoss with r = outputs − targets that is the step's own reported loss (the mean of
        r², computed by the library in the trial it accepted, or before the step)."""
        if self._kind_of_residuals == "mse":
            return float(report.loss_after)
        rows = int(x.shape[0])
        size = rows if slice_size is None or slice_size > rows else int(slice_size)
        total, device = 0.0, self.devices[0]
        with torch.no_grad():
            for start in range(0, rows, size):
                stop = min(start + size, rows)
                part = float(self.loss_fn(self.model(x[start:stop].to(device)),
                                          y[start:stop].to(device)))
                total += part * (stop - start)
        return total / rows

    def _make_optimizer(self, x: torch.Tensor, y: torch.Tensor, slice_size: int | None) -> None:
        state = self._optimizer.state_dict() if self._optimizer is not None else None
        options = dict(self._options)
        kind = self._kind_of_residuals = self._kind(x, y)
        if kind == "mse":
            loss: Any = "mse"
        elif isinstance(kind, int):
            loss = RowResiduals(self.residual_fn, kind)
            options["fast_path"] = False
        else:
            loss = None
            options["residual_fn"] = _BatchResiduals(self.residual_fn)
            options["jacobian"] = "autograd"
        if loss is not None:
            options["loss"] = loss
        if len(self.devices) > 1:
            options["devices"] = self.devices
        self._optimizer = LevenbergMarquardt(self.model, precision=self._precision,
                                             slice_size=slice_size, **options)
        if state is not None:
            self._optimizer.load_state_dict(state)
        self._slice = slice_size

    def _kind(self, x: torch.Tensor, y: torch.Tensor) -> str | int | None:
        """'mse' for MSELoss with r = outputs − targets; R for a residual per sample (R rows
        each); None for one that mixes samples.  Checked on the batch's first rows."""
        rows = min(int(x.shape[0]), 4)
        x, y = x[:rows].to(self.devices[0]), y[:rows].to(self.devices[0])
        with torch.no_grad():
            z = self.model(x)
            r = self.residual_fn(z, y).reshape(-1)
            if isinstance(self.loss_fn, torch.nn.MSELoss) and self.loss_fn.reduction == "mean" \
                    and r.shape == (z - y).reshape(-1).shape \
                    and torch.equal(r, (z - y.to(z.dtype)).reshape(-1)):
                return "mse"
            per = [self.residual_fn(z[i:i + 1], y[i:i + 1]).reshape(-1) for i in range(rows)]
        if r.numel() % rows == 0 and all(p.numel() == r.numel() // rows for p in per) and \
                torch.equal(torch.cat(per), r):
            return r.numel() // rows
        return None


def _schedule_options(schedule: str, damping_start: float, damping_up: float,
                      damping_down: float) -> dict[str, Any]:
    """The library's options of ``LMA(schedule=...)``; cuPyLMA's configuration supplies the
    bounds and the attempts per step either way."""
    common = dict(lambda_initial=damping_start, lambda_max=configuration.DAMPING_MAX,
                  lambda_min=configuration.DAMPING_MIN,
                  max_attempts=configuration.UPDATE_ATTEMPTS, jacobian=configuration.jacobian())
    if schedule == "cupylma":
        return dict(common, damping="multiplicative", lambda_increase=damping_up,
                    lambda_decrease=damping_down, damping_per_sample=True,
                    restart_lambda_at_max=True, geodesic_acceleration=False)
    if schedule == "lmtrain":
        return dict(common, damping="nielsen")
    raise ValueError(f"schedule = {schedule!r}: expected 'cupylma' (cuPyLMA's algorithm) or "
                     "'lmtrain' (Nielsen damping with geodesic acceleration)")


def _precision(dtype: Any, model_dtype: torch.dtype) -> str | None:
    """LevenbergMarquardt's precision for cuPyLMA's ``dtype``: None (auto) when unset."""
    if dtype is None:
        return None
    name = getattr(dtype, "__name__", str(dtype))
    if "float64" in name or dtype is torch.float64:
        return "float64"
    if "float32" in name or dtype is torch.float32:
        return "float32" if model_dtype == torch.float32 else "float64"
    raise ValueError(f"dtype = {dtype!r}: expected float32 or float64")
