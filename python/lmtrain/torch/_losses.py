"""The library's losses as residuals in torch (the formulas of include/lmtrain/core/loss_kind.h).

Each loss gives, per sample with network output z ∈ R^C and target y, the residual rows r (what
LM squares) and the objective F whose gradient is Jᵀr; the step's accept test and gain ratio use
F, exactly as the C++ step does.  Where ∂r/∂z is not the derivative of r's value (the exact
cross-entropy's GGN factor, the square-root losses' guarded derivatives) the residual is written
as ``r0.detach() + S.detach() @ (z − z.detach())``: its value is r0 and its Jacobian S·∂z/∂θ, so
torch.func's jacrev/jacfwd produce exactly the library's Jacobian rows.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

SQRT_GUARD = 1e-30  # kSqrtGuard
PROBABILITY_GUARD = 1e-30  # kProbabilityGuard

LOSSES = ("mse", "cross_entropy", "cross_entropy_sqrt", "cross_entropy_sampled", "bce", "huber",
          "l1")
_GOLDEN = 0x9E3779B97F4A7C15
_MASK = (1 << 64) - 1


def sampled_uniforms(key: int, first: int, count: int) -> torch.Tensor:
    """cross_entropy_sampled's uniforms u ∈ [0, 1) of samples first … first + count − 1 under the
    linearization key: SplitMix64's finalizer of key·φ + index, as the native engine draws them
    (draw_uniform in src/backend/loss_math.h), so both paths draw the same classes."""
    h = np.arange(first, first + count, dtype=np.uint64) + np.uint64((key * _GOLDEN) & _MASK)
    h += np.uint64(_GOLDEN)
    h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    h ^= h >> np.uint64(31)
    return torch.from_numpy((h >> np.uint64(11)).astype(np.float64) * 2.0 ** -53)


def _linear_in_z(r0: torch.Tensor, slope: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """Value r0, derivative slope·∂z (slope: elementwise, or a matrix acting on z's last axis)."""
    dz = z - z.detach()
    if slope.dim() == z.dim() + 1:
        return r0.detach() + (slope.detach() @ dz.unsqueeze(-1)).squeeze(-1)
    return r0.detach() + slope.detach() * dz


class Loss:
    """A built-in loss: ``residuals`` and ``objective`` of a batch (z: B × C, y: B × C targets,
    class indices for the cross-entropies are turned into one-hot rows first)."""

    def __init__(self, kind: str, huber_delta: float = 1.0) -> None:
        if kind not in LOSSES:
            raise ValueError(f"loss = {kind!r}: expected one of {', '.join(LOSSES)}, or give a "
                             "residual_fn")
        self.kind = kind
        self.huber_delta = float(huber_delta)

    def residuals_per_sample(self, outputs: int) -> int:
        return 1 if self.kind in ("cross_entropy_sqrt", "cross_entropy_sampled") else outputs

    def targets(self, y: torch.Tensor, outputs: int, dtype: torch.dtype) -> torch.Tensor:
        """y as B × C floating rows (one-hot for class indices of the cross-entropies)."""
        if self.kind.startswith("cross_entropy") and not torch.is_floating_point(y):
            if y.dim() != 1:
                raise ValueError(f"class labels must be a vector of indices, not of shape "
                                 f"{tuple(y.shape)}")
            if y.numel() and (int(y.min()) < 0 or int(y.max()) >= outputs):
                raise ValueError(f"class labels must lie in [0, {outputs}); the model has "
                                 f"{outputs} outputs")
            return torch.nn.functional.one_hot(y, outputs).to(dtype)
        y = y.to(dtype)
        if y.dim() == 1 and outputs == 1:
            y = y.unsqueeze(-1)
        return y

    # ---- per element ------------------------------------------------------------------------
    def _elementwise(self, z: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """ℓ and ℓ' per element for bce, huber, l1."""
        if self.kind == "bce":
            return torch.nn.functional.softplus(z) - y * z, torch.sigmoid(z) - y
        e = z - y
        if self.kind == "huber":
            d = self.huber_delta
            quadratic = e.abs() <= d
            ell = torch.where(quadratic, 0.5 * e * e, d * (e.abs() - 0.5 * d))
            return ell, torch.where(quadratic, e, d * torch.sign(e))
        return e.abs(), torch.sign(e)  # l1

    def residuals(self, z: torch.Tensor, y: torch.Tensor,
                  u: torch.Tensor | None = None) -> torch.Tensor:
        """Residual rows (… × R) of outputs z (… × C) against targets y (… × C); u (…) are
        cross_entropy_sampled's uniforms (sampled_uniforms), unused by the other losses."""
        if self.kind == "cross_entropy_sampled":
            if u is None:
                raise ValueError("cross_entropy_sampled needs the linearization's uniforms")
            return self._sampled(z, y, u)
        if self.kind == "mse":
            return z - y
        if self.kind == "cross_entropy":
            p = torch.softmax(z.detach(), dim=-1)
            s = p.clamp_min(PROBABILITY_GUARD).sqrt()
            r0 = (p - y) / s
            # L = diag(s)(I − 1pᵀ): LᵀL = diag(p) − ppᵀ, the softmax Hessian of CE.
            eye = torch.eye(z.shape[-1], dtype=z.dtype, device=z.device)
            factor = s.unsqueeze(-1) * (eye - p.unsqueeze(-2))
            return _linear_in_z(r0, factor, z)
        if self.kind == "cross_entropy_sqrt":
            ce = -(y * torch.log_softmax(z.detach(), dim=-1)).sum(-1, keepdim=True)
            r0 = ce.clamp_min(0).sqrt()
            # ∂√CE/∂z = (p − y)/(2√CE), guarded at zero.
            p = torch.softmax(z.detach(), dim=-1)
            row = (p - y) / (2 * ce.clamp_min(SQRT_GUARD).sqrt())
            return _linear_in_z(r0, row.unsqueeze(-2), z)
        ell, dell = self._elementwise(z.detach(), y)
        # r = √(2ℓ) (bce) or sign(e)·√(2ℓ), and ∂r/∂z = ℓ'/r with r guarded away from zero.
        r0 = (2 * ell).clamp_min(0).sqrt()
        slope = dell / (2 * ell).clamp_min(SQRT_GUARD).sqrt()
        if self.kind != "bce":
            sign = torch.sign(z.detach() - y)
            r0, slope = sign * r0, sign * slope
        return _linear_in_z(r0, slope, z)

    @staticmethod
    def _sampled(z: torch.Tensor, y: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """One row per sample: class k drawn from q = (p + y)/2 by u (the first k whose running
        sum of q passes u·Σq, the last class when rounding leaves none), residual
        (p_k − y_k)/√(p_k q_k) and row √(p_k/q_k)·(e_k − p) — in double, as the engine computes
        them (cross_entropy_sampled in src/backend/loss_math.h)."""
        p = torch.softmax(z.detach().double(), dim=-1)
        yd = y.double()
        q = 0.5 * (p + yd)
        below = torch.cumsum(q, dim=-1)
        target = u.double().unsqueeze(-1) * q.sum(-1, keepdim=True)
        k = (below[..., :-1] <= target).sum(-1, keepdim=True)
        pk, yk, qk = p.gather(-1, k), yd.gather(-1, k), q.gather(-1, k)
        weight = torch.where(qk > 0, (pk / qk.clamp_min(PROBABILITY_GUARD)).sqrt(),
                             torch.zeros_like(qk))
        r0 = (pk - yk) / (pk * qk).clamp_min(PROBABILITY_GUARD).sqrt()
        drawn = (torch.arange(p.shape[-1], device=p.device) == k).double()
        row = weight * (drawn - p)
        return _linear_in_z(r0.to(z.dtype), row.to(z.dtype).unsqueeze(-2), z)

    def objective(self, z: torch.Tensor, y: torch.Tensor) -> float:
        """F of a batch, in double."""
        z, y = z.detach().double(), y.double()
        if self.kind == "mse":
            return 0.5 * float(((z - y) ** 2).sum())
        if self.kind.startswith("cross_entropy"):
            ce = -(y * torch.log_softmax(z, dim=-1)).sum()
            return float(ce) * (0.5 if self.kind == "cross_entropy_sqrt" else 1.0)
        return float(self._elementwise(z, y)[0].sum())


ResidualFn = Callable[[torch.nn.Module, object, object], torch.Tensor]
