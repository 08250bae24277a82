"""Jacobian slices of a torch model's residuals with respect to its parameters.

Two sources, one slice layout: rows are residuals (sample-major, R per sample for a built-in
loss), columns the parameters in ``model.named_parameters()`` order, each flattened row-major —
the flat order of lmtrain's own models (a Linear's weight, (out, in), then its bias).

* Per sample, with torch.func (a built-in loss): ``vmap`` over the slice's samples of ``jacrev``
  (reverse mode, one pass per residual row) or ``jacfwd`` (forward mode, one per parameter) of
  ``functional_call(model, θ, x_b) → r_b``.  jacrev when a sample has fewer residual rows than
  the model has parameters (the usual case), jacfwd otherwise, as cuPyLMA chooses.
* Row-batched reverse mode on the residual vector of a ``residual_fn`` (which may differentiate
  the model with respect to its inputs, as PINNs do): one forward pass builds the graph, then each
  slice is ``autograd.grad(r, θ, grad_outputs=I[rows], is_grads_batched=True)``.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from torch.func import functional_call, jacfwd, jacrev, vmap

from ._losses import Loss

JACOBIAN_MODES = ("auto", "jacrev", "jacfwd", "autograd")


def resolve_mode(mode: str, residual_fn: Any, residuals_per_sample: int, n: int) -> str:
    if mode not in JACOBIAN_MODES:
        raise ValueError(f"jacobian = {mode!r}: expected one of {', '.join(JACOBIAN_MODES)}")
    if residual_fn is not None:
        if mode in ("jacrev", "jacfwd"):
            raise ValueError(f"jacobian = {mode!r} needs per-sample residuals of a built-in loss; "
                             "a residual_fn's residuals are differentiated with jacobian="
                             "'autograd' (or 'auto')")
        return "autograd"
    if mode == "auto":
        return "jacrev" if residuals_per_sample <= n else "jacfwd"
    return mode


def _unsqueezed(x: Any) -> Any:
    if isinstance(x, (tuple, list)):
        return type(x)(_unsqueezed(v) for v in x)
    return x.unsqueeze(0)


def model_inputs(x: Any) -> tuple:
    """The positional arguments of forward: a tuple or list of tensors is several inputs."""
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def call_model(model: torch.nn.Module, x: Any) -> torch.Tensor:
    return model(*model_inputs(x))


def _rows(x: Any, start: int, stop: int) -> Any:
    if isinstance(x, (tuple, list)):
        return type(x)(_rows(v, start, stop) for v in x)
    return x[start:stop]


def batch_size(x: Any) -> int:
    if isinstance(x, (tuple, list)):
        if not x:
            raise ValueError("x is an empty tuple; give the model's input tensors")
        sizes = {batch_size(v) for v in x}
        if len(sizes) != 1:
            raise ValueError(f"the model's inputs have different numbers of rows: {sorted(sizes)}")
        return sizes.pop()
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a tensor or a tuple of tensors, not {type(x).__name__}")
    if x.dim() == 0:
        raise ValueError("x is a scalar; give one row per sample")
    return int(x.shape[0])


class PerSampleJacobian:
    """Slices J[rows of samples start..stop) of a built-in loss's residuals (torch.func)."""

    def __init__(self, model: torch.nn.Module, names: Sequence[str], loss: Loss, mode: str):
        self.model, self.names, self.loss = model, list(names), loss
        self.buffers = dict(model.named_buffers())

        def residuals(params: dict[str, torch.Tensor], x: Any, y: torch.Tensor,
                      u: torch.Tensor) -> torch.Tensor:
            z = functional_call(model, (params, self.buffers),
                                model_inputs(_unsqueezed(x))).squeeze(0)
            return loss.residuals(z, y, u)

        transform = jacrev if mode == "jacrev" else jacfwd
        self._jacobian = vmap(transform(residuals), in_dims=(None, 0, 0, 0))

    def slice(self, params: dict[str, torch.Tensor], x: Any, y: torch.Tensor,
              u: torch.Tensor) -> torch.Tensor:
        """J of samples x (b rows) with targets y (b × C) and the samples' draws u (b; see
        sampled_uniforms, zeros for the losses that draw nothing): (b·R) × n."""
        blocks = self._jacobian(params, x, y, u)  # name → b × R × shape(θ_name)
        return torch.cat([blocks[name].reshape(blocks[name].shape[0] * blocks[name].shape[1], -1)
                          for name in self.names], dim=1)


class BatchedReverseJacobian:
    """Slices J[rows start..stop) of a residual vector r(θ) built once with autograd."""

    def __init__(self, residuals: torch.Tensor, params: Sequence[torch.Tensor]):
        self.residuals, self.params = residuals, list(params)

    def slice(self, start: int, stop: int) -> torch.Tensor:
        m = self.residuals.numel()
        seeds = torch.zeros(stop - start, m, dtype=self.residuals.dtype,
                            device=self.residuals.device)
        seeds[torch.arange(stop - start), torch.arange(start, stop)] = 1
        grads = torch.autograd.grad(self.residuals, self.params, grad_outputs=seeds,
                                    is_grads_batched=True, retain_graph=True, allow_unused=True)
        return torch.cat([(g if g is not None else torch.zeros(
            stop - start, *p.shape, dtype=p.dtype, device=p.device)).reshape(stop - start, -1)
            for g, p in zip(grads, self.params)], dim=1)

