"""What the lmtrain.torch tests share: torch itself (skipped without it, unless
LMTRAIN_REQUIRE_TORCH=1 makes a missing torch an error, as CI's torch stage does) and reference
Jacobians from torch.autograd.functional.jacobian."""

from __future__ import annotations

import os

import pytest

if os.environ.get("LMTRAIN_REQUIRE_TORCH") == "1":
    import torch  # noqa: F401  (an ImportError fails the run)
else:
    torch = pytest.importorskip("torch", reason="lmtrain.torch needs torch "
                                "(bench/peers/install.sh installs it)")

import torch  # noqa: E402,F811

import lmtrain.torch as lt  # noqa: E402


def flat_parameters(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def reference_jacobian(model: torch.nn.Module, residuals) -> torch.Tensor:
    """J (m × n) of residuals(model) → r (m,) with respect to the flat parameters, by
    torch.autograd.functional.jacobian on a function of the flat vector."""
    names = [name for name, _ in model.named_parameters()]
    shapes = [p.shape for p in model.parameters()]
    theta = flat_parameters(model).clone()

    def of_flat(flat: torch.Tensor) -> torch.Tensor:
        params, offset = {}, 0
        for name, shape in zip(names, shapes):
            k = int(torch.tensor(shape).prod()) if len(shape) else 1
            params[name] = flat[offset:offset + k].reshape(shape)
            offset += k
        return residuals(lambda *x: torch.func.functional_call(model, params, x))

    return torch.autograd.functional.jacobian(of_flat, theta)


__all__ = ["flat_parameters", "lt", "reference_jacobian", "torch"]
