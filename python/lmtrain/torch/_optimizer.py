"""lmtrain.torch.LevenbergMarquardt: LM steps on any torch.nn.Module with lmtrain's engine.

One step (the C++ step's order, src/solve/lm_step.cpp):

1. linearize: F at θ; Jacobian slices from torch (``_jacobian.py``), each folded into
   A = JᵀJ and g = Jᵀr by the library (``_core.DampedNormalEquations``, SYRK and GEMV, read in
   place through DLPack);
2. the library's Damping prepares D and its LinearSolver is prepared once;
3. up to ``max_attempts`` times: δ = (A + λD)⁻¹g with the same A; an invalid attempt or a trial
   θ − lr·δ that does not lower F raises λ; the first trial that lowers F is accepted and λ
   lowered by the gain ratio ρ = (F − F_trial)/(F − m(δ)).

An ``nn.Sequential`` made only of layers lmtrain implements takes the fast path instead: the
library's own step (structural Jacobians) on the module's weights (``_native.py``).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

import torch
from torch.nn.utils.stateless import _reparametrize_module

from .. import _core
from ._jacobian import (BatchedReverseJacobian, PerSampleJacobian, _rows, batch_size,
                        call_model, resolve_mode)

batch_size_of = batch_size  # fit() has an argument of that name
from ._losses import Loss, sampled_uniforms
from ._native import NativePath, native_architecture

PHASES = ("forward", "jacobian", "normal_equations", "factorization", "trial_evaluation",
          "geodesic")


@dataclass
class StepReport:
    """What one LM step did (the fields of the C++ StepReport that apply)."""

    loss: float  # the reported loss at the linearization point (PyTorch's mean reduction)
    loss_after: float  # … after the step (= loss when it was not accepted)
    objective: float  # F before the step
    objective_after: float
    lambda_: float  # λ of the last solve
    attempts: int  # solves performed
    rejected: int  # valid trials that did not lower F
    invalid: int  # failed factorizations or non-finite δ
    accepted: bool
    gain_ratio: float
    gradient_max_norm: float
    step_norm: float
    path: str  # "native" or "torch.func jacrev" / "… jacfwd" / "autograd"
    slice_size: int  # samples (or residual rows, for a residual_fn) per Jacobian slice
    termination: str = ""  # why training should stop after this step ("" : it need not)
    geodesic_applied: int = 0  # attempts whose trial included the geodesic correction
    geodesic_refused: int = 0  # attempts whose correction failed the ratio test
    geodesic_skipped: int = 0  # attempts that did not compute it (backoff after refusals)
    phase_seconds: dict[str, float] = field(default_factory=dict)


def _available_bytes() -> int:
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):  # pragma: no cover - not POSIX
        return 1 << 32



def _trainable_parameters(
        model: torch.nn.Module) -> tuple[list[str], list[torch.Tensor], torch.dtype, torch.device]:
    """Names and tensors of the parameters, with their one dtype and device; every one must
    require grad, and the device must be the CPU (a clear error otherwise)."""
    named = list(model.named_parameters())
    if not named:
        raise ValueError("the model has no parameters to train")
    frozen = [name for name, p in named if not p.requires_grad]
    if frozen:
        raise ValueError(f"parameters {frozen} do not require grad; LM trains every parameter "
                         "of the model: set requires_grad=True or wrap the trainable part in "
                         "its own module")
    names = [name for name, _ in named]
    params = [p for _, p in named]
    dtypes = {p.dtype for p in params}
    devices = {p.device for p in params}
    if len(dtypes) != 1 or not params[0].is_floating_point():
        raise ValueError(f"the parameters must share one floating dtype, not {dtypes}")
    if len(devices) != 1:
        raise ValueError(f"the parameters must be on one device, not {devices}")
    dtype, device = dtypes.pop(), devices.pop()
    if device.type != "cpu":
        raise NotImplementedError(f"the model is on {device}; lmtrain.torch runs on the "
                                  "CPU so far (move the model with .cpu())")
    return names, params, dtype, device


def _solver_options(damping: str, memory_budget: int | None, slice_size: int | None,
                    options: dict[str, Any]) -> Any:
    """The library's SolverOptions from the constructor's arguments, validated."""
    o = _core.SolverOptions()
    o.damping = damping
    for name, value in options.items():
        if not hasattr(o, name):
            raise TypeError(f"LevenbergMarquardt() got an unexpected keyword argument "
                            f"{name!r} (not a SolverOptions field)")
        setattr(o, name, value)
    if memory_budget is not None:
        o.memory_budget_bytes = int(memory_budget)
    if slice_size is not None:
        if int(slice_size) < 1:
            raise ValueError(f"slice_size = {slice_size}: expected a positive integer")
        o.max_slice_samples = int(slice_size)
    o.validate()
    return o


def _system_precision(precision: str | None, dtype: torch.dtype) -> str:
    """float32 or float64: the system's precision for `precision` (None: the model's; "mixed":
    lmtrain fit's name for a float32 model with a float64 system)."""
    model_bits = torch.finfo(dtype).bits
    if precision == "mixed":  # lmtrain fit's name: float32 model and J, float64 system
        if model_bits != 32:
            raise ValueError(f"precision = 'mixed' needs a float32 model, not {dtype}")
        precision = "float64"
    resolved = precision or ("float64" if model_bits == 64 else "float32")
    if resolved not in ("float32", "float64"):
        raise ValueError(f"precision = {precision!r}: expected 'float32', 'float64' or "
                         "'mixed'")
    if resolved == "float32" and model_bits == 64:
        raise ValueError("precision = 'float32' with a float64 model: the system is never "
                         "less precise than the model; use 'float64'")
    return resolved


def _checked_slice(j: Any, rows: int, n: int, dtype: torch.dtype) -> torch.Tensor:
    """A residual_fn's jacobian_slice result, checked: a rows × n tensor of the model's dtype."""
    if not isinstance(j, torch.Tensor) or tuple(j.shape) != (rows, n) or j.dtype != dtype:
        raise ValueError(f"residual_fn.jacobian_slice returned "
                         f"{tuple(j.shape) if isinstance(j, torch.Tensor) else type(j).__name__}"
                         f"{' ' + str(j.dtype) if isinstance(j, torch.Tensor) else ''}; expected "
                         f"({rows}, {n}) {dtype}: the slice's rows × the parameters")
    return j


class LevenbergMarquardt:
    """Levenberg–Marquardt training of a torch model with lmtrain's normal-equation engine.

    Parameters
    ----------
    model : torch.nn.Module
        Trained in place.  Every parameter must require grad; buffers must not change in forward.
    loss : str
        ``"mse"``, ``"cross_entropy"`` (exact Gauss–Newton), ``"cross_entropy_sqrt"``,
        ``"cross_entropy_sampled"`` (the Gauss–Newton sampled with one row per sample; both paths
        draw the same rows), ``"bce"``, ``"huber"`` or ``"l1"``:
        the library's losses (include/lmtrain/core/loss_kind.h).
    residual_fn : callable, optional
        ``residual_fn(model, x, y) -> r``, a vector of residuals; the objective is F = ½‖r‖².
        It may differentiate the model with respect to x (PINNs).  Replaces ``loss``.
    damping : str
        ``"nielsen"`` (default) or ``"multiplicative"``.
    precision : str, optional
        Precision of A, g and the solve: ``"float64"`` (for a float32 model: mixed precision,
        also called ``"mixed"``) or ``"float32"``; by default the model's.
    memory_budget : int, optional
        Bytes the step may use; default half the memory available now.  Sizes the slices.
    slice_size : int, optional
        Samples per Jacobian slice (residual rows for a residual_fn); overrides the plan.
    jacobian : str
        ``"auto"``, ``"jacrev"``, ``"jacfwd"`` or ``"autograd"`` (see ``_jacobian.py``).
    fast_path : bool or "auto"
        "auto": an nn.Sequential of lmtrain's layers runs on the library's own engine.
    distributed : bool or "auto"
        "auto": with torch.distributed initialized (torchrun) and several ranks, data-parallel
        steps: each rank builds A and g of its shard of the batch, one all-reduce sums A, g and F
        (gloo on CPUs), and every rank solves the same summed system, so all ranks keep the same
        parameters.  Trial losses and the geodesic right-hand side are summed too.  A rank that
        fails while linearizing or evaluating makes every rank raise.
    shard : bool
        With several ranks: each rank takes its contiguous share of the batch it is given (all
        ranks given the same batch, as fit() does with tensors).  False: each rank's batch is
        already its shard (a DataLoader with a DistributedSampler).
    **options
        Any other field of ``lmtrain._core.SolverOptions`` (``lambda_initial``, ``max_attempts``,
        ``learning_rate``, ``damping_matrix``, ``linear_solver``, the tolerances, …).
    """

    def __init__(self, model: torch.nn.Module, loss: str = "mse",
                 residual_fn: Callable[..., torch.Tensor] | None = None, *,
                 damping: str = "nielsen", precision: str | None = None,
                 memory_budget: int | None = None, slice_size: int | None = None,
                 jacobian: str = "auto", fast_path: bool | str = "auto",
                 distributed: bool | str = "auto", shard: bool = True,
                 **options: Any) -> None:
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, not {type(model).__name__}")
        self.model = model
        self.residual_fn = residual_fn
        self.loss = Loss(loss) if residual_fn is None else None
        self._names, self._params, self.dtype, self.device = _trainable_parameters(model)
        self.n = sum(p.numel() for p in self._params)

        self.options = _solver_options(damping, memory_budget, slice_size, options)
        self.slice_size = slice_size

        model_bits = torch.finfo(self.dtype).bits
        self.precision = _system_precision(precision, self.dtype)
        self.system_dtype = torch.float64 if self.precision == "float64" else torch.float32

        self._dist: Any = None
        self._shard = bool(shard)
        # cross_entropy_sampled's draws: the key of the last linearization (incremented by each,
        # as in the native engine), the row of this rank's first sample in the whole batch, and
        # the linearization's uniforms, which its residuals at trial points reuse.
        self._draw_key = 0
        self._draw_first = 0
        self._draw_u: torch.Tensor | None = None
        if distributed:
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
                self._dist = dist
            elif distributed is True:
                raise ValueError("distributed=True needs torch.distributed initialized (torchrun) "
                                 "with more than one rank")
        if self._dist is not None and fast_path is True:
            raise ValueError("fast_path=True runs one process; with several ranks the torch path "
                             "sums A and g over them (fast_path='auto' chooses it)")

        self._native: NativePath | None = None
        use_native = self._dist is None and residual_fn is None and fast_path in (True, "auto")
        architecture = native_architecture(model) if use_native else None
        if fast_path is True and architecture is None:
            raise ValueError("fast_path=True needs an nn.Sequential of layers lmtrain implements "
                             "(Linear, Conv2d, MaxPool2d, AvgPool2d, Flatten, activations) and a "
                             "built-in loss")
        if architecture is not None and model_bits in (32, 64) and \
                not (model_bits == 64 and self.precision == "float32"):
            self._native = NativePath(model, architecture, loss, self.options, self.precision)
            self.path = "native"
        else:
            if self.options.regularization != "none":
                raise ValueError(f"regularization = {self.options.regularization!r} runs on the "
                                 "fast path only so far (an nn.Sequential of lmtrain's layers); "
                                 "the torch path has no penalty term")
            self._mode = resolve_mode(jacobian, residual_fn, 1, self.n)
            self.path = "autograd" if self._mode == "autograd" else f"torch.func {self._mode}"
            self._system = (_core.DampedNormalEquations64 if self.precision == "float64"
                            else _core.DampedNormalEquations32)(
                self.n, self.options, float32_model=self.dtype == torch.float32)
            self._jacobian_mode = jacobian
        # Geodesic acceleration as the library applies it: asked for (auto resolved by the
        # library's rule for the loss; a residual_fn is least squares) and a direct solver.
        geodesic = _core.geodesic_acceleration_for(
            self.options, "mse" if self.loss is None else self.loss.kind)
        self._geodesic = geodesic and self.options.linear_solver in ("auto", "cholesky", "eigen")
        self._r0: torch.Tensor | None = None
        self._graph_r: torch.Tensor | None = None
        self.jacobian_choice = {}
        self._delta = torch.empty(self.n, dtype=self.system_dtype)
        self.last_report: StepReport | None = None

    # ---- state --------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """λ and the step schedule's state (ν and the learned floor of the damping, where the
        geodesic backoff stands): what a resumed run needs."""
        stepper = self._native if self._native is not None else self._system
        lam, nu, floor, skip, backoff = stepper.state()
        state = {"lambda": lam, "nu": nu, "floor": floor, "geodesic_skip": skip,
                 "geodesic_backoff": backoff, "path": self.path}
        # where cross_entropy_sampled's draws stand
        state["draw_key"] = self._native.draw_key if self._native is not None else self._draw_key
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        stepper = self._native if self._native is not None else self._system
        missing = {"lambda", "nu", "floor"} - set(state)
        if missing:
            raise ValueError(f"state_dict misses {sorted(missing)}")
        # A state_dict from before the geodesic backoff computes the next correction.
        stepper.set_state(float(state["lambda"]), float(state["nu"]), float(state["floor"]),
                          int(state.get("geodesic_skip", 0)), int(state.get("geodesic_backoff", 0)))
        if "draw_key" in state:
            key = int(state["draw_key"])
            if self._native is not None:
                self._native.draw_key = key
            elif key < 0:
                raise ValueError(f"optimizer state draw_key = {key}: expected an integer ≥ 0")
            else:
                self._draw_key = key

    @property
    def lambda_(self) -> float:
        return self.state_dict()["lambda"]

    # ---- parameters ---------------------------------------------------------------------------
    def _flat(self) -> torch.Tensor:
        return torch.cat([p.detach().reshape(-1) for p in self._params])

    def _assign(self, flat: torch.Tensor) -> None:
        with torch.no_grad():
            offset = 0
            for p in self._params:
                k = p.numel()
                p.copy_(flat[offset:offset + k].view_as(p))
                offset += k

    def _check_inputs(self, x: Any, y: Any) -> int:
        tensors = list(x) if isinstance(x, (tuple, list)) else [x]
        if y is not None:
            tensors.append(y)
        for t in tensors:
            if isinstance(t, torch.Tensor) and t.device != self.device:
                raise ValueError(f"an input is on {t.device} but the model is on {self.device}; "
                                 f"move it with .to({str(self.device)!r})")
        b = batch_size(x)
        if b == 0:
            raise ValueError("the batch is empty")
        if self.residual_fn is None:
            if y is None:
                raise ValueError(f"loss = {self.loss.kind!r} needs targets y")
            if batch_size(y) != b:
                raise ValueError(f"x has {b} rows but y has {batch_size(y)}; give one target row "
                                 "per sample")
        return b

    def _buffers(self) -> list[torch.Tensor]:
        return [b.detach().clone() for b in self.model.buffers()]

    def _check_buffers(self, before: list[torch.Tensor]) -> None:
        after = list(self.model.buffers())
        changed = [name for (name, b), b0 in zip(self.model.named_buffers(), before)
                   if b.shape != b0.shape or not torch.equal(b, b0)]
        if changed:
            with torch.no_grad():
                for b, b0 in zip(after, before):
                    b.copy_(b0)
            raise ValueError(f"buffers {changed} change in forward (BatchNorm in training mode?); "
                             "LM evaluates the model many times per step and needs a fixed "
                             "function: call model.eval() or use LayerNorm/GroupNorm")

    # ---- the step -----------------------------------------------------------------------------
    def step(self, x: Any, y: Any = None) -> StepReport:
        """One LM step on the batch (x, y); the model's parameters are updated in place.

        Raises ValueError (parameters unchanged) for inputs on another device, a residual_fn
        whose residuals have the wrong shape or are not finite, or buffers changed by forward.
        """
        try:
            b = self._check_inputs(x, y)
            self._batch_total = b
            if self._dist is not None and self._shard:
                ranks, rank = self._dist.get_world_size(), self._dist.get_rank()
                if b < ranks:
                    raise ValueError(f"a batch of {b} rows cannot be shared by {ranks} ranks")
                start, stop = rank * b // ranks, (rank + 1) * b // ranks
                x = _rows(x, start, stop)
                self._draw_first = start
                y = None if y is None else y[start:stop]
        except Exception as error:
            if self._dist is not None:  # the other ranks wait in the linearization's all-reduce
                self._sum_system(0.0, 0, 0, error)
            raise
        if self._native is not None:
            report = self._native.step(x, y)
        else:
            theta = self._flat()
            try:
                report = self._step(theta, x, y)
            except BaseException:
                self._assign(theta)
                raise
            finally:
                self._r0 = self._graph_r = None  # the step's residuals and graph
        self.last_report = report
        return report

    def normal_equations(self, x: Any, y: Any = None) -> tuple[float, torch.Tensor, torch.Tensor]:
        """F, A = JᵀJ and g = Jᵀr at the current parameters, as the step builds them (slice by
        slice, in the library): for inspection and tests.  Not on the fast path."""
        if self._native is not None:
            raise RuntimeError("normal_equations() is not available on the fast path; construct "
                               "the optimizer with fast_path=False")
        self._check_inputs(x, y)
        f0, _, _ = self._linearize(self._flat(), x, y, dict.fromkeys(PHASES, 0.0))
        return (f0, torch.from_numpy(self._system.normal_matrix()),
                torch.from_numpy(self._system.gradient()))

    def _at(self, flat: torch.Tensor) -> Any:
        """A context in which the module computes with the parameters `flat` (a trial point)
        instead of its own, which stay untouched: autograd graphs built at θ stay valid, and an
        exception leaves the model as it was."""
        flat = flat.to(self.dtype)
        params, offset = {}, 0
        for name, p in zip(self._names, self._params):
            params[name] = flat[offset:offset + p.numel()].view_as(p)
            offset += p.numel()
        return _reparametrize_module(self.model, params)

    def _evaluate_at(self, flat: torch.Tensor, x: Any, y: Any,
                     need_residuals: bool) -> tuple[float, torch.Tensor | None]:
        with self._at(flat):
            return self._objective_and_residuals(x, y, need_residuals)

    def _objective_and_residuals(self, x: Any, y: Any, need_residuals: bool,
                                 graph: bool = False) -> tuple[float, torch.Tensor | None]:
        """F (and the residual vector) at the current parameters."""
        if self.residual_fn is not None:
            with torch.enable_grad() if graph else torch.no_grad():
                r = self._residual_vector(x, y, graph)
            return 0.5 * float((r.detach().double() ** 2).sum()), r
        with torch.no_grad():
            z = call_model(self.model, x)
            targets = self._targets(y, z)
            f = self.loss.objective(z, targets)
            r = self.loss.residuals(z, targets, self._draw_u).reshape(-1) if need_residuals \
                else None
        return f, r

    def _targets(self, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        if z.dim() != 2:
            raise ValueError(f"the model's output has shape {tuple(z.shape)}; a built-in loss needs "
                             "batch × outputs (use a residual_fn for other shapes)")
        t = self.loss.targets(y, z.shape[1], z.dtype)
        if t.shape != z.shape:
            raise ValueError(f"y has shape {tuple(y.shape)} but the model's output is "
                             f"{tuple(z.shape)}")
        return t

    def _residual_vector(self, x: Any, y: Any, graph: bool) -> torch.Tensor:
        if graph:
            r = self.residual_fn(self.model, x, y)
        else:
            # A residual_fn may differentiate with respect to x: autograd stays on, θ's graph
            # is dropped right away.
            with torch.enable_grad():
                r = self.residual_fn(self.model, x, y)
        if not isinstance(r, torch.Tensor):
            raise ValueError(f"residual_fn returned {type(r).__name__}; expected a tensor")
        if r.dim() != 1 or r.numel() == 0:
            raise ValueError(f"residual_fn returned shape {tuple(r.shape)}; expected a non-empty "
                             "vector (m,) of residuals — flatten blocks and torch.cat them")
        if r.dtype != self.dtype:
            raise ValueError(f"residual_fn returned {r.dtype}; the model is {self.dtype}")
        if self._rows is not None and r.numel() != self._rows:
            raise ValueError(f"residual_fn returned {r.numel()} residuals at a trial point but "
                             f"{self._rows} at the linearization point; the count must not "
                             "depend on the parameters")
        return r if graph else r.detach()

    _rows: int | None = None
    _batch_total = 0

    def _linearize(self, theta: torch.Tensor, x: Any, y: Any,
                   times: dict[str, float]) -> tuple[float, int, int]:
        """F, residual rows m and the slice size; A and g are in the system."""
        system = self._system
        system.begin()
        self._rows = None
        t = time.perf_counter()
        before = self._buffers()
        if self.residual_fn is not None:
            f0, r = self._objective_and_residuals(x, y, True, graph=True)
            self._check_buffers(before)
            self._rows = m = r.numel()
            if not math.isfinite(f0) or not bool(torch.isfinite(r).all()):
                bad = int((~torch.isfinite(r)).sum())
                raise ValueError(f"residual_fn returned {bad} non-finite residual(s) of {m}; "
                                 "parameters are unchanged")
            times["forward"] += time.perf_counter() - t
            rows = self._slice_rows(m, 1)
            # A residual_fn may bring its own Jacobian (lmtrain.torch.pinn.Problem):
            # jacobian_slice(model, params, x, y, start, stop) → rows start:stop of J,
            # (stop − start) × n, columns in named_parameters() order; params are the detached
            # parameters by name, as torch.func.functional_call takes them.
            own = getattr(self.residual_fn, "jacobian_slice", None)
            jac = BatchedReverseJacobian(r, self._params) if own is None else None
            params = {name: p.detach() for name, p in zip(self._names, self._params)}
            rd = self._r0 = r.detach()
            self._graph_r = r
            for start in range(0, m, rows):
                stop = min(m, start + rows)
                t = time.perf_counter()
                j = (jac.slice(start, stop) if own is None else
                     _checked_slice(own(self.model, params, x, y, start, stop), stop - start,
                                    self.n, self.dtype)).contiguous()
                times["jacobian"] += time.perf_counter() - t
                t = time.perf_counter()
                system.add_slice(j, rd[start:stop].contiguous())
                times["normal_equations"] += time.perf_counter() - t
            self.path = getattr(self.residual_fn, "jacobian_path", "autograd")
            return f0, m, rows
        b = batch_size(x)
        self._draw_key += 1
        self._draw_u = (sampled_uniforms(self._draw_key, self._draw_first, b)
                        if self.loss.kind == "cross_entropy_sampled"
                        else torch.zeros(b, dtype=torch.float64)).to(self.device)
        f0, r = self._objective_and_residuals(x, y, True)
        self._check_buffers(before)
        self._r0, self._graph_r = r, None
        with torch.no_grad():
            z = call_model(self.model, _rows(x, 0, 1))
        outputs = z.shape[1]
        per_sample = self.loss.residuals_per_sample(outputs)
        params = {name: p.detach() for name, p in zip(self._names, self._params)}
        targets = self.loss.targets(y, outputs, self.dtype)
        mode = self._choose_jacobian(per_sample, params, x, targets)
        self.path = f"torch.func {mode}"
        engine = PerSampleJacobian(self.model, self._names, self.loss, mode)
        times["forward"] += time.perf_counter() - t
        samples = self._slice_rows(b, per_sample)
        for start in range(0, b, samples):
            stop = min(b, start + samples)
            t = time.perf_counter()
            j = engine.slice(params, _rows(x, start, stop), targets[start:stop],
                             self._draw_u[start:stop]).contiguous()
            times["jacobian"] += time.perf_counter() - t
            t = time.perf_counter()
            system.add_slice(j, r[start * per_sample:stop * per_sample].contiguous())
            times["normal_equations"] += time.perf_counter() - t
        return f0, b * per_sample, samples

    def _choose_jacobian(self, per_sample: int, params: dict[str, torch.Tensor], x: Any,
                         targets: torch.Tensor) -> str:
        """jacrev or jacfwd, once per optimizer (cuPyLMA's rule): by shape when one mode is
        clearly cheaper — reverse mode costs one pass per residual row of a sample, forward mode
        one per parameter, so a factor of 10 between R and n decides — and otherwise by timing
        both on the first samples of the batch (each called twice, the second call timed: the
        first includes torch.func's start-up).  The outcome is in ``jacobian_choice``."""
        if self._jacobian_mode != "auto":
            return resolve_mode(self._jacobian_mode, None, per_sample, self.n)
        if self.jacobian_choice:
            return self.jacobian_choice["mode"]
        if 10 * per_sample <= self.n or 10 * self.n <= per_sample:
            self.jacobian_choice = {"mode": resolve_mode("auto", None, per_sample, self.n),
                                    "by": "shape"}
            return self.jacobian_choice["mode"]
        count = min(batch_size(x), 16)
        xs, ys, us = _rows(x, 0, count), targets[:count], self._draw_u[:count]
        seconds = {}
        for mode in ("jacrev", "jacfwd"):
            engine = PerSampleJacobian(self.model, self._names, self.loss, mode)
            engine.slice(params, xs, ys, us)
            t = time.perf_counter()
            engine.slice(params, xs, ys, us)
            seconds[mode] = time.perf_counter() - t
        self.jacobian_choice = {"mode": min(seconds, key=seconds.get), "by": "measurement",
                                "seconds": seconds}
        return self.jacobian_choice["mode"]

    jacobian_choice: dict[str, Any] = {}

    def _slice_rows(self, units: int, rows_per_unit: int) -> int:
        """Units (samples, or residual rows) per slice: the cap given, else the memory plan.

        The plan (DESIGN.md §1): A and its factorization (2·n² of the system's precision) are
        fixed; a slice costs its rows of J about three times (torch.func's per-parameter blocks,
        their concatenation, the widened copy in mixed precision)."""
        if self.slice_size is not None:
            return max(1, min(units, int(self.slice_size)))
        budget = self.options.memory_budget_bytes or int(
            self.options.memory_fraction * _available_bytes())
        system_bytes = torch.finfo(self.system_dtype).bits // 8
        fixed = 2 * self.n * self.n * system_bytes
        per_unit = 3 * rows_per_unit * self.n * max(system_bytes, torch.finfo(self.dtype).bits // 8)
        if budget <= fixed + per_unit:
            raise MemoryError(f"the memory budget of {budget} bytes does not hold A and its "
                              f"factorization for {self.n} parameters ({fixed} bytes) plus one "
                              f"Jacobian slice ({per_unit} bytes); raise memory_budget or use a "
                              "smaller model")
        return max(1, min(units, (budget - fixed) // per_unit))

    def _step(self, theta: torch.Tensor, x: Any, y: Any) -> StepReport:
        times = dict.fromkeys(PHASES, 0.0)
        opts = self.options
        if self._dist is None:
            f0, m, slice_units = self._linearize(theta, x, y, times)
        else:
            f0, m, slice_units = self._linearize_on_ranks(theta, x, y, times)
        t = time.perf_counter()
        finite, gmax = self._system.finish(f0)
        times["factorization"] += time.perf_counter() - t
        report = StepReport(loss=self._reported(f0, x, m), loss_after=0.0, objective=f0,
                            objective_after=f0, lambda_=self._system.current_lambda, attempts=0,
                            rejected=0, invalid=0, accepted=False, gain_ratio=0.0,
                            gradient_max_norm=gmax, step_norm=0.0, path=self.path,
                            slice_size=slice_units, phase_seconds=times)
        report.loss_after = report.loss
        if not finite:
            raise ValueError("the loss or the Jacobian of the batch is not finite; parameters are "
                             "unchanged.  Check the data for extreme values")
        if opts.gradient_tolerance > 0 and gmax <= opts.gradient_tolerance:
            report.termination = "gradient_tolerance"
            return report
        theta_system = theta.to(self.system_dtype)
        lr = opts.learning_rate
        while report.attempts < opts.max_attempts:
            report.attempts += 1
            report.lambda_ = self._system.current_lambda
            t = time.perf_counter()
            valid = self._system.solve(self._delta)
            times["factorization"] += time.perf_counter() - t
            if not valid:
                report.invalid += 1
                if not self._system.invalid():
                    report.termination = "lambda_above_max"
                    return report
                continue
            predicted = self._system.predicted_reduction(lr)
            if self._geodesic and not self._system.geodesic_due():
                report.geodesic_skipped += 1
            elif self._geodesic:
                t = time.perf_counter()
                applied = self._accelerate(theta_system, lr, x, y)
                self._system.geodesic_outcome(applied)
                report.geodesic_applied += applied
                report.geodesic_refused += not applied
                times["geodesic"] += time.perf_counter() - t
            t = time.perf_counter()
            trial = theta_system - lr * self._delta
            if self._dist is None:
                f1, _ = self._evaluate_at(trial, x, y, False)
            else:
                f1 = self._on_ranks(lambda: [self._evaluate_at(trial, x, y, False)[0]])[0]
            times["trial_evaluation"] += time.perf_counter() - t
            report.step_norm = lr * float(self._delta.double().norm())
            if math.isfinite(f1) and f1 < f0:
                self._assign(trial.to(self.dtype))
                report.accepted = True
                report.gain_ratio = (f0 - f1) / predicted if predicted > 0 else 0.0
                self._system.accepted(report.gain_ratio)
                report.objective_after = f1
                report.loss_after = self._reported(f1, x, m)
                param_norm = float(theta.double().norm())
                if opts.function_tolerance > 0 and f0 - f1 <= opts.function_tolerance * f0:
                    report.termination = "function_tolerance"
                elif opts.parameter_tolerance > 0 and report.step_norm <= \
                        opts.parameter_tolerance * (param_norm + opts.parameter_tolerance):
                    report.termination = "parameter_tolerance"
                return report
            report.rejected += 1
            if opts.parameter_tolerance > 0:
                param_norm = float(theta.double().norm())
                if report.step_norm <= opts.parameter_tolerance * (param_norm +
                                                                   opts.parameter_tolerance):
                    report.termination = "parameter_tolerance"
                    return report
            if not self._system.rejected():
                report.termination = "lambda_above_max"
                return report
        return report

    def _accelerate(self, theta: torch.Tensor, lr: float, x: Any, y: Any) -> bool:
        """The geodesic correction of the attempt's δ (GeodesicAcceleration in the library):
        r_vv = (r(θ + hv) − 2r(θ) + r(θ − hv))/h² along v = −lr·δ, Jᵀr_vv by one backward pass
        through the residuals' graph at θ, and the library's solve with the attempt's
        factorization and ratio test."""
        h = self.options.geodesic_step
        _, plus = self._evaluate_at(theta - h * lr * self._delta, x, y, True)
        _, minus = self._evaluate_at(theta + h * lr * self._delta, x, y, True)
        r_vv = (plus + minus - 2 * self._r0) / (h * h)
        if self._graph_r is None:  # a built-in loss: the residuals' graph at θ, once per step
            with torch.enable_grad():
                z = call_model(self.model, x)
                self._graph_r = self.loss.residuals(z, self._targets(y, z.detach()),
                                                    self._draw_u).reshape(-1)
        grads = torch.autograd.grad(self._graph_r, self._params, grad_outputs=r_vv,
                                    retain_graph=True, allow_unused=True)
        rhs = torch.cat([(g if g is not None else torch.zeros_like(p)).reshape(-1)
                         for g, p in zip(grads, self._params)]).to(self.system_dtype)
        if self._dist is not None:
            rhs = self._sum(rhs)
        return self._system.correct_geodesic(rhs.contiguous(), lr, self._delta)

    # ---- several ranks --------------------------------------------------------------------------
    def _sum(self, values: torch.Tensor) -> torch.Tensor:
        """Σ over the ranks, in place (one all-reduce)."""
        self._dist.all_reduce(values)
        return values

    def _on_ranks(self, local: Callable[[], list[float]]) -> list[float]:
        """Σ over the ranks of the values `local` computes, with one all-reduce that also carries
        whether any rank failed: then every rank raises, the failed one with its own error."""
        try:
            values, failure = list(local()), None
        except Exception as error:  # noqa: BLE001 - re-raised below, on every rank
            values, failure = [], error
        width = self._on_ranks_width
        packed = torch.zeros(width + 1, dtype=torch.float64)
        if failure is None:
            packed[:len(values)] = torch.tensor(values, dtype=torch.float64)
        packed[width] = 1.0 if failure is not None else 0.0
        self._sum(packed)
        if failure is not None:
            raise failure
        if packed[width] > 0:
            raise RuntimeError(f"{int(packed[width])} other rank(s) failed in this LM step (their "
                               "output has the error); parameters are unchanged")
        return packed[:len(values)].tolist()

    _on_ranks_width = 4

    def _linearize_on_ranks(self, theta: torch.Tensor, x: Any, y: Any,
                            times: dict[str, float]) -> tuple[float, int, int]:
        """This rank's A, g, F and m, summed over the ranks by one all-reduce."""
        try:
            f0, m, slice_units = self._linearize(theta, x, y, times)
            failure = None
        except Exception as error:  # noqa: BLE001 - re-raised below, on every rank
            f0, m, slice_units, failure = 0.0, 0, 0, error
        t = time.perf_counter()
        f0, m = self._sum_system(f0, m, batch_size(x) if failure is None else 0, failure)
        times["communication"] = times.get("communication", 0.0) + time.perf_counter() - t
        return f0, m, slice_units

    def _sum_system(self, f0: float, m: int, b: int,
                    failure: BaseException | None) -> tuple[float, int]:
        """A, g, F, the residual rows, the batch rows and a failure flag summed over the ranks
        in one all-reduce; every rank raises when any failed (the failed one its own error)."""
        a = torch.from_numpy(self._system.normal_matrix_view())
        g = torch.from_numpy(self._system.gradient_view())
        n = self.n
        packed = torch.empty(n * n + n + 4, dtype=torch.float64)
        packed[:n * n] = a.reshape(-1)
        packed[n * n:n * n + n] = g
        packed[n * n + n:] = torch.tensor([f0, float(m), float(b), 1.0 if failure else 0.0],
                                          dtype=torch.float64)
        self._sum(packed)
        if failure is not None:
            raise failure
        failed = int(packed[-1])
        if failed:
            raise RuntimeError(f"{failed} other rank(s) failed in this LM step (their output has "
                               "the error); parameters are unchanged")
        a.copy_(packed[:n * n].view(n, n))
        g.copy_(packed[n * n:n * n + n])
        self._batch_total = int(packed[-2])
        return float(packed[-4]), int(packed[-3])

    def _reported(self, objective: float, x: Any, m: int) -> float:
        if self.loss is None:
            return 2 * objective / m  # mean of r²
        b = self._batch_total
        # m // b is the outputs for the losses with a row per output; the one-row losses'
        # reported value does not use it.
        return self.loss.reported(objective, b, m // b)

    # ---- training -----------------------------------------------------------------------------
    def fit(self, data: Any, epochs: int = 100, validation: Any = None,
            callbacks: Iterable[Callable[[int, float, float], Any]] = (), *,
            batch_size: int | None = None, loss_goal: float = 0.0,
            max_time_seconds: float = 0.0, max_validation_failures: int = 6,
            restore_best: bool = True, shuffle: bool = True, seed: int = 0,
            verbose: bool = False) -> list[dict[str, float]]:
        """Trains for up to ``epochs`` passes over ``data`` and returns one record per epoch.

        ``data`` is a tuple (x, y) of tensors (split into ``batch_size`` batches, full batch by
        default, the rows reshuffled every epoch when ``shuffle``, seeded by ``seed``) or any
        iterable of (x, y) batches, such as a DataLoader.  It stops, as
        ``lmtrain fit`` does, at the first of: ``epochs``; the training loss ≤ ``loss_goal``;
        ``max_time_seconds``; ``max_validation_failures`` epochs without a better validation
        loss (then the best validation model is restored when ``restore_best``); or a step's own
        stop (λ above lambda_max, or the gradient, function or parameter tolerance).  A callback
        ``cb(epoch, training_loss, validation_loss)`` returning True stops training too.
        """
        from .._progress import EpochProgress

        start = time.perf_counter()
        history: list[dict[str, float]] = []
        best, best_state, failures = math.inf, None, 0
        progress = EpochProgress(epochs) if verbose else None
        generator = torch.Generator().manual_seed(seed)
        try:
            for epoch in range(1, epochs + 1):
                t = time.perf_counter()
                stop = ""
                order = None
                if shuffle and self._is_pair(data) and batch_size:
                    order = torch.randperm(batch_size_of(data[0]), generator=generator)
                for xb, yb in self._batches(data, batch_size, order):
                    report = self.step(xb, yb)
                    if report.termination:
                        stop = report.termination
                        break
                training = self.evaluate(data)
                validation_loss = self.evaluate(validation) if validation is not None else math.nan
                record = {"epoch": epoch, "loss": training, "validation_loss": validation_loss,
                          "lambda": self.lambda_, "seconds": time.perf_counter() - t}
                history.append(record)
                if progress is not None:
                    progress(epoch, training, validation_loss, record["seconds"])
                if any(bool(cb(epoch, training, validation_loss)) for cb in callbacks):
                    stop = stop or "callback"
                if validation is not None:
                    if validation_loss < best:
                        best, failures = validation_loss, 0
                        best_state = [p.detach().clone() for p in self._params]
                    else:
                        failures += 1
                        if failures >= max_validation_failures > 0:
                            stop = stop or "validation_failures"
                if not stop and loss_goal > 0 and training <= loss_goal:
                    stop = "loss_goal"
                if not stop and max_time_seconds > 0 and \
                        time.perf_counter() - start >= max_time_seconds:
                    stop = "max_time"
                if stop:
                    record["termination"] = stop  # type: ignore[assignment]
                    break
        finally:
            if progress is not None:
                progress.close()
        if validation is not None and restore_best and best_state is not None:
            with torch.no_grad():
                for p, b in zip(self._params, best_state):
                    p.copy_(b)
        return history

    @staticmethod
    def _is_pair(data: Any) -> bool:
        return isinstance(data, tuple) and len(data) == 2 and (
            isinstance(data[1], torch.Tensor) or data[1] is None)

    @classmethod
    def _batches(cls, data: Any, size: int | None,
                 order: torch.Tensor | None = None) -> Iterable[tuple[Any, Any]]:
        """(x, y) in batches of `size` rows (all when None), in `order` when given; any other
        iterable as it is."""
        if not cls._is_pair(data):
            return data
        x, y = data
        b = batch_size_of(x)
        size = b if not size else int(size)

        def rows(t: Any, s: int) -> Any:
            if order is None:
                return _rows(t, s, min(b, s + size))
            index = order[s:min(b, s + size)]
            return type(t)(v[index] for v in t) if isinstance(t, (tuple, list)) else t[index]

        return [(rows(x, s), None if y is None else rows(y, s)) for s in range(0, b, size)]

    def evaluate(self, data: Any) -> float:
        """The reported loss (PyTorch's mean reduction) over (x, y) or an iterable of batches."""
        total_f, total_rows, total_b = 0.0, 0, 0
        for xb, yb in self._batches(data, None):
            f, r = self._objective_and_residuals(xb, yb, self.residual_fn is not None)
            total_f += f
            b = batch_size(xb)
            total_b += b
            total_rows += r.numel() if r is not None else 0
        if self.loss is None:
            return 2 * total_f / total_rows
        with torch.no_grad():
            x0 = next(iter(self._batches(data, None)))[0]
            outputs = call_model(self.model, _rows(x0, 0, 1)).shape[1]
        return self.loss.reported(total_f, total_b, outputs)
