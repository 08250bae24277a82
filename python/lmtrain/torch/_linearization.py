"""What the library's LM step asks of a torch model: residuals and Jacobian slices.

``TorchLinearization`` is the object ``lmtrain._core.ForeignStep`` calls back (its protocol is in
src/python/foreign_source.h).  It computes numbers only — F and r at the linearization point,
rows of J, F and r at trial points, Jᵀu by one reverse pass — and decides nothing: damping, the
ratio test, the solvers, penalties and termination are the library's.

Units: a built-in loss linearizes samples (R residual rows each); a ``residual_fn`` linearizes its
residual rows (R = 1), whose count it learns by evaluating the function once per step.

A ``residual_fn``'s J (without its own ``jacobian_slice``): with ``jacobian="auto"``, per-point
parameter copies (``_per_point.py``, O(m·n)) where each row depends on one point, found on the
first step's batch; otherwise — rows mixing points, or ``jacobian="autograd"`` — batched reverse
mode through the batch's graph (O(m²·n)), which warns at the first step when slow, with why.

Residual blocks: a ``residual_fn`` with a ``residual_blocks()`` method (lmtrain.torch.pinn's
``Problem``) names blocks of its rows, ``[(name, first_row, rows, scale), …]`` with loss
scale·Σ r² over the block; ``linearize`` hands them to the library with r, whose step reports
each block's loss (``StepReport.block_losses``, the fit's history and Summary).  A residual_fn
without the method costs nothing more.

Memory: the library's plan, not this object, sizes the slices; ``use_memory_plan(bytes)`` (called
by the library whenever it plans them) hands the bytes of one slice to a ``residual_fn`` with
such a method, so that its own work (pinn's chunks of J, its draws' evaluations) fits the plan.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from torch.nn.utils.stateless import _reparametrize_module

from ._jacobian import (BatchedReverseJacobian, PerSampleJacobian, _rows, batch_size,
                        call_model, resolve_mode)
from ._losses import Loss, sampled_uniforms
from ._per_point import NotPerPoint, PerPointJacobian, PerPointRoute


def _checked_slice(j: Any, rows: int, n: int, dtype: torch.dtype) -> torch.Tensor:
    """A residual_fn's jacobian_slice result, checked: a rows × n tensor of the model's dtype
    (the library would otherwise fold a wrong-shaped slice or fail far from its cause)."""
    if not isinstance(j, torch.Tensor) or tuple(j.shape) != (rows, n) or j.dtype != dtype:
        got = (f"{tuple(j.shape)} {j.dtype}" if isinstance(j, torch.Tensor)
               else type(j).__name__)
        raise ValueError(f"residual_fn.jacobian_slice returned {got}; expected ({rows}, {n}) "
                         f"{dtype}: the slice's rows × the parameters")
    return j


class TorchLinearization:
    """Residuals and Jacobian slices of ``model`` on the batch set by ``set_batch``."""

    def __init__(self, model: torch.nn.Module, names: Sequence[str],
                 params: Sequence[torch.Tensor], loss: Loss | None, residual_fn: Any,
                 jacobian_mode: str) -> None:
        self.model, self.names, self.params = model, list(names), list(params)
        self.loss, self.residual_fn = loss, residual_fn
        self.dtype = self.params[0].dtype
        self.jacobian_mode = jacobian_mode
        self.jacobian_choice: dict[str, Any] = {}
        self.path = "autograd" if residual_fn is not None else "torch.func"
        if hasattr(residual_fn, "jacobian_slice"):  # its own rows (a pinn.Problem): its name
            self.path = getattr(residual_fn, "jacobian_path", "residual_fn.jacobian_slice")
        # cross_entropy_sampled's draws: the key of the last linearization (incremented by each,
        # as in the native engine), the row of this rank's first sample in the whole batch, and
        # the linearization's uniforms, which its residuals at trial points reuse.
        self.draw_key = 0
        self.draw_first = 0
        self._u: torch.Tensor | None = None
        self._x: Any = None
        self._y: Any = None
        self._targets: torch.Tensor | None = None
        self.outputs = 1
        self._model_outputs: int | None = None
        self.units = 0
        self._pending: tuple[float, torch.Tensor] | None = None
        self._graph: torch.Tensor | None = None  # r at θ with its autograd graph (Jᵀu, J rows)
        self._jacobian: Any = None
        # A residual_fn's route to J: per point while its rows are each of one point (None once
        # refused, with the reason in jacobian_choice), else the batch's graph, which warns once.
        self._per_point = (PerPointRoute(model, names, params, residual_fn)
                           if residual_fn is not None and jacobian_mode == "auto" else None)
        self._slow_warned = False

    # ---- the batch ------------------------------------------------------------------------------
    def set_batch(self, x: Any, y: Any) -> int:
        """Takes the step's batch; returns its units (samples, or residual rows of a
        residual_fn, which is evaluated here once at θ with its graph — the linearization's own
        forward pass)."""
        self._x, self._y = x, y
        self._graph = self._jacobian = self._pending = None
        if self.residual_fn is not None:
            before = self._buffers()
            with torch.enable_grad():
                r = self._residual_vector(x, y, None)
            self._check_buffers(before)
            m = r.numel()
            if not bool(torch.isfinite(r.detach()).all()):
                bad = int((~torch.isfinite(r.detach())).sum())
                raise ValueError(f"residual_fn returned {bad} non-finite residual(s) of {m}; "
                                 "parameters are unchanged")
            self._graph = r
            rd = r.detach().contiguous()
            self._pending = (0.5 * float((rd.double() ** 2).sum()), rd)
            self.units, self.outputs = m, 1
            return m
        x = self._x = self.model_data(x, y)
        b = batch_size(x)
        if self._model_outputs is None:  # once: the model's output width (R, the targets)
            before = self._buffers()
            with torch.no_grad():
                z = call_model(self.model, x)
            self._check_buffers(before)
            if z.dim() != 2:
                raise ValueError(f"the model's output has shape {tuple(z.shape)}; a built-in "
                                 "loss needs batch × outputs (use a residual_fn for other shapes)")
            self._model_outputs = int(z.shape[1])
        self.outputs = self._model_outputs
        self._targets = self.loss.targets(y, self.outputs, self.dtype)
        if getattr(self.loss, "checks_target_shape", True) and \
                self._targets.shape != (b, self.outputs):
            raise ValueError(f"y has shape {tuple(y.shape)} but the model's output is "
                             f"({b}, {self.outputs})")
        self.units = b
        return b

    def model_data(self, x: Any, y: Any, what: str = "") -> Any:
        """A built-in loss's inputs as the model computes with them: floating tensors in the
        model's dtype (converted, as the fast path converts them; the loss converts y), x and y
        finite (a ValueError naming the first bad sample otherwise, before anything changes;
        `what` prefixes the names: "validation ")."""
        def converted(t: Any) -> Any:
            if isinstance(t, (tuple, list)):
                return type(t)(converted(v) for v in t)
            if isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != self.dtype:
                return t.to(self.dtype)
            return t

        x = converted(x)
        for name, t in (("x", x), ("y", y)):
            for v in t if isinstance(t, (tuple, list)) else [t]:
                if not (isinstance(v, torch.Tensor) and v.is_floating_point()):
                    continue
                bad = ~torch.isfinite(v)
                if bool(bad.any()):
                    rows = bad.reshape(v.shape[0], -1).any(1) if v.dim() > 0 else bad.reshape(1)
                    raise ValueError(f"{what}{name} holds {int(bad.sum())} NaN or inf value(s), the "
                                     f"first in sample {int(rows.nonzero()[0, 0])}; remove or "
                                     "impute those samples (parameters are unchanged)")
        return x

    def residuals_per_unit(self) -> int:
        if self.loss is None:
            return 1
        return self.loss.residuals_per_sample(self.outputs)

    # ---- what ForeignStep calls -----------------------------------------------------------------
    def linearize(self, theta: torch.Tensor) -> tuple[Any, ...]:
        """F and r at θ, the model's own parameters (θ aliases them), and the residual_fn's
        blocks when it declares them (``residual_blocks()``)."""
        if self._pending is not None:
            f, r = self._pending
            self._pending = None
            blocks = getattr(self.residual_fn, "residual_blocks", None)
            return (f, r) if blocks is None else (f, r, blocks())
        if self.residual_fn is not None:  # a second linearization on the same batch
            self.set_batch(self._x, self._y)
            return self.linearize(theta)
        before = self._buffers()
        b = self.units
        self.draw_key += 1
        self._u = (sampled_uniforms(self.draw_key, self.draw_first, b)
                   if self.loss.kind == "cross_entropy_sampled"
                   else torch.zeros(b, dtype=torch.float64)).to(self.params[0].device)
        f, r = self._objective_and_residuals(True)
        self._check_buffers(before)
        self._graph = self._jacobian = None
        return f, r.contiguous()

    def use_memory_plan(self, slice_bytes: int) -> None:
        """The library's memory plan sized the step's slices: `slice_bytes` for one (its rows of
        J and what computing them takes).  Handed on to a residual_fn that sizes its own work by
        it (``use_memory_plan``: lmtrain.torch.pinn.Problem's chunks and draws)."""
        hook = getattr(self.residual_fn, "use_memory_plan", None)
        if hook is not None:
            hook(int(slice_bytes))

    def jacobian(self, theta: torch.Tensor, first: int, count: int) -> torch.Tensor:
        """Rows of units [first, first + count) of J at θ: (count·R) × n."""
        params = {name: p.detach() for name, p in zip(self.names, self.params)}
        if self.residual_fn is not None:
            hook = getattr(self.residual_fn, "jacobian_slice", None)
            if hook is not None:  # lmtrain.torch.pinn.Problem / Pointwise: O(m·n) routes
                j = _checked_slice(hook(self.model, params, self._x, self._y, first,
                                        first + count), count, sum(params[k].numel()
                                                                   for k in self.names),
                                   self.dtype)
                self.path = getattr(self.residual_fn, "jacobian_path", self.path)
                return j.contiguous()
            return self._whole_batch_slice(first, first + count).contiguous()
        if self._jacobian is None:
            mode = self._choose_mode(params)
            self.path = f"torch.func {mode}"
            self._jacobian = PerSampleJacobian(self.model, self.names, self.loss, mode)
        stop = first + count
        return self._jacobian.slice(params, _rows(self._x, first, stop),
                                    self._targets[first:stop], self._u[first:stop]).contiguous()

    def _whole_batch_slice(self, start: int, stop: int) -> torch.Tensor:
        """Rows start:stop of a whole-batch residual_fn's J: per point where its rows allow,
        else through the batch's graph (the module's doc)."""
        if self._jacobian is None and self._per_point is not None:
            try:
                self._jacobian = self._per_point.engine(self._x, self._y, self._graph)
            except NotPerPoint as why:
                self._refuse_per_point(str(why))
        if isinstance(self._jacobian, PerPointJacobian):
            try:
                j = self._jacobian.slice(start, stop)
            except NotPerPoint as why:
                self._refuse_per_point(str(why))
            else:
                point_map = self._per_point.point_map
                self.path = "autograd per point"
                self.jacobian_choice = {"mode": "per point", "by": "forward-mode row → point map",
                                        "rows_per_point": point_map.rows_per_point,
                                        "points": sum(point_map.calls)}
                return j
        if self._jacobian is None:
            self._jacobian = BatchedReverseJacobian(
                self._graph, self.params, why=self.jacobian_choice.get("why"),
                warn=not self._slow_warned)
            self.path = "autograd"
        j = self._jacobian.slice(start, stop)
        self._slow_warned = self._slow_warned or self._jacobian.warned
        return j

    def _refuse_per_point(self, why: str) -> None:
        """The batch's graph from now on, for the reason `why` (the warning will say it)."""
        self._per_point, self._jacobian = None, None
        self.jacobian_choice = {"mode": "batch graph", "by": "rows not per point", "why": why}

    def objective(self, theta: torch.Tensor) -> float:
        with self._at(theta):
            return self._objective_and_residuals(False)[0]

    def residuals_at(self, theta: torch.Tensor) -> torch.Tensor:
        with self._at(theta):
            return self._objective_and_residuals(True)[1].contiguous()

    def jacobian_transpose_times(self, theta: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Jᵀu by one backward pass through the residuals' graph at θ (built once per step for
        a built-in loss; a residual_fn's is the linearization's)."""
        if self._graph is None:
            with torch.enable_grad():
                z = call_model(self.model, self._x)
                self._graph = self.loss.residuals(z, self._targets, self._u).reshape(-1)
        grads = torch.autograd.grad(self._graph, self.params, grad_outputs=u.to(self.dtype),
                                    retain_graph=True, allow_unused=True)
        return torch.cat([(g if g is not None else torch.zeros_like(p)).reshape(-1)
                          for g, p in zip(grads, self.params)])

    # ---- evaluation -----------------------------------------------------------------------------
    def evaluate(self, x: Any, y: Any) -> tuple[float, int, int]:
        """(F, units, outputs per unit) of (x, y) at the current parameters: samples and the
        model's outputs for a built-in loss, residual rows and 1 for a residual_fn."""
        self._x, self._y = x, y
        if self.residual_fn is not None:
            with torch.enable_grad():
                r = self._residual_vector(x, y, None).detach()
            return 0.5 * float((r.double() ** 2).sum()), r.numel(), 1
        x = self._x = self.model_data(x, y)
        with torch.no_grad():
            z = call_model(self.model, x)
            targets = self.loss.targets(y, z.shape[1], z.dtype)
            f = self.loss.objective(z, targets)
        return f, int(z.shape[0]), int(z.shape[1])

    def reset_step(self) -> None:
        """Drops the step's graph, Jacobian engine and batch (nothing stays borrowed)."""
        self._graph = self._jacobian = self._pending = None

    # ---- helpers --------------------------------------------------------------------------------
    def _at(self, flat: torch.Tensor) -> Any:
        """The module computing with the parameters `flat` (a trial point, a view of the
        library's buffer) instead of its own, which stay untouched."""
        params, offset = {}, 0
        for name, p in zip(self.names, self.params):
            params[name] = flat[offset:offset + p.numel()].view_as(p)
            offset += p.numel()
        return _reparametrize_module(self.model, params)

    def _objective_and_residuals(self, need_residuals: bool) -> tuple[float, torch.Tensor]:
        if self.residual_fn is not None:
            with torch.enable_grad():
                r = self._residual_vector(self._x, self._y, self.units).detach()
            return 0.5 * float((r.double() ** 2).sum()), r
        with torch.no_grad():
            z = call_model(self.model, self._x)
            f = self.loss.objective(z, self._targets)
            r = self.loss.residuals(z, self._targets, self._u).reshape(-1) if need_residuals \
                else None
        return f, r

    def _residual_vector(self, x: Any, y: Any, rows: int | None) -> torch.Tensor:
        r = self.residual_fn(self.model, x, y)
        if not isinstance(r, torch.Tensor):
            raise ValueError(f"residual_fn returned {type(r).__name__}; expected a tensor")
        if r.dim() != 1 or r.numel() == 0:
            raise ValueError(f"residual_fn returned shape {tuple(r.shape)}; expected a non-empty "
                             "vector (m,) of residuals — flatten blocks and torch.cat them")
        if r.dtype != self.dtype:
            raise ValueError(f"residual_fn returned {r.dtype}; the model is {self.dtype}")
        if rows is not None and r.numel() != rows:
            raise ValueError(f"residual_fn returned {r.numel()} residuals at a trial point but "
                             f"{rows} at the linearization point; the count must not depend on "
                             "the parameters")
        return r

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

    def _choose_mode(self, params: dict[str, torch.Tensor]) -> str:
        """jacrev or jacfwd, once per optimizer (cuPyLMA's rule): by shape when one mode is
        clearly cheaper — reverse mode costs one pass per residual row of a sample, forward mode
        one per parameter, so a factor of 10 between R and n decides — and otherwise by timing
        both on the first samples of the batch (each called twice, the second call timed: the
        first includes torch.func's start-up).  The outcome is in ``jacobian_choice``."""
        per_sample = self.residuals_per_unit()
        n = sum(p.numel() for p in self.params)
        if self.jacobian_mode != "auto":
            return resolve_mode(self.jacobian_mode, None, per_sample, n)
        if self.jacobian_choice:
            return self.jacobian_choice["mode"]
        if 10 * per_sample <= n or 10 * n <= per_sample:
            self.jacobian_choice = {"mode": resolve_mode("auto", None, per_sample, n),
                                    "by": "shape"}
            return self.jacobian_choice["mode"]
        import time

        count = min(self.units, 16)
        xs, ys, us = _rows(self._x, 0, count), self._targets[:count], self._u[:count]
        seconds = {}
        for mode in ("jacrev", "jacfwd"):
            engine = PerSampleJacobian(self.model, self.names, self.loss, mode)
            engine.slice(params, xs, ys, us)
            t = time.perf_counter()
            engine.slice(params, xs, ys, us)
            seconds[mode] = time.perf_counter() - t
        self.jacobian_choice = {"mode": min(seconds, key=seconds.get), "by": "measurement",
                                "seconds": seconds}
        return self.jacobian_choice["mode"]

