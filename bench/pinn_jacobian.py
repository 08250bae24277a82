"""The Jacobian routes of lmtrain.torch for one PINN linearization, timed (issue 29).

Burgers (examples/pinn/burgers.py) on a 2-20-20-20-1 tanh network (921 parameters), m residual
rows (interior, initial, boundary points as in W8), float64, one thread:

* whole batch, autograd: a residual_fn with torch.autograd.grad input derivatives, J by the
  optimizer's BatchedReverseJacobian (row-batched reverse mode through the batch's graph);
* whole batch, forward mode in θ: the same residuals written with torch.func, J by jvp in θ
  (vmap over chunks of 64 basis tangents) — the route issue 29 suggests for a torch.func
  residual_fn;
* pinn.Pointwise(residual_fn): the autograd residual_fn on slices of 32 points ("sliced") and
  the torch.func one by vmap over points of jacrev ("vmap");
* pinn.Problem: the pointwise form, by vmap of jacrev with nested jvp ("jacrev") and by the
  Taylor route (TaylorMLP);
* the library's A += JᵀJ, g += Jᵀr of the whole J (DampedNormalEquations64.add_slice: SYRK
  and GEMV) — what the Jacobian is compared with.

Each is called twice and the second call timed (the first includes torch.func's start-up); the
slow whole-batch routes are timed on their full m once.  Checks that every route gives the same J
(to 1e-12 of its largest entry) before printing.

usage: build/venv-torch/bin/python bench/pinn_jacobian.py [--points 2000] [--skip-slow]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "pinn"))
import burgers  # noqa: E402
import common  # noqa: E402

from lmtrain import _core  # noqa: E402
from lmtrain.torch import _jacobian, pinn  # noqa: E402

NU = burgers.NU


def autograd_residuals(model, x, y):
    """Burgers as a new user writes it: autograd input derivatives, block by x's 3rd column."""
    p = x[:, :2].detach().clone().requires_grad_(True)
    kind = x[:, 2]
    u = model(p)[:, 0]
    grad = torch.autograd.grad(u.sum(), p, create_graph=True)[0]
    u_xx = torch.autograd.grad(grad[:, 1].sum(), p, create_graph=True)[0][:, 1]
    pde = grad[:, 0] + u * grad[:, 1] - NU * u_xx
    return torch.where(kind == 0, pde, torch.where(kind == 1, u + torch.sin(math.pi * p[:, 1]),
                                                   u))


def func_residuals(model, x, y):
    """The same residuals with torch.func input derivatives."""
    def u(q):
        return model(q.unsqueeze(0))[0, 0]

    def one(q, kind):
        grad = torch.func.grad(u)(q)
        u_xx = torch.func.hessian(u)(q)[1, 1]
        value = u(q)
        pde = grad[0] + value * grad[1] - NU * u_xx
        return torch.where(kind == 0, pde, torch.where(kind == 1,
                                                       value + torch.sin(math.pi * q[1]), value))

    return torch.func.vmap(one)(x[:, :2], x[:, 2])


def timed(fn, twice: bool = True):
    if twice:
        fn()
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=2000, help="interior points")
    parser.add_argument("--skip-slow", action="store_true",
                        help="skip the two whole-batch routes (tens of seconds each)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    problem, model, _ = burgers.build(0, points=args.points, points_max=args.points,
                                      grow_every=1, edge_points=args.points // 5,
                                      method="random", width=20, depth=3, weights=(1.0, 1.0))
    x = problem.points
    m, n = x.shape[0], common.parameter_count(model)
    # The same points with a block column for the whole-batch forms; pinn's weights (1/√N) are
    # left out there, so J is compared after scaling each block's rows.
    kinds = torch.cat([torch.full((c,), float(i)) for i, c in enumerate(problem.counts)]).double()
    xk = torch.cat([x, kinds[:, None]], 1)
    scale = torch.cat([torch.full((c,), 1 / math.sqrt(c), dtype=torch.float64)
                       for c in problem.counts])
    params = {k: v.detach() for k, v in model.named_parameters()}
    rows: dict[str, float] = {}
    jacobians: dict[str, torch.Tensor] = {}

    for route in ("taylor", "jacrev"):
        problem.jacobian, problem.jacobian_choice = route, {}
        jacobians[f"pinn.Problem, {route}"], rows[f"pinn.Problem, {route}"] = timed(
            lambda: problem.jacobian_slice(model, params, x, None, 0, m))
    for route in ("vmap", "sliced"):
        fn = func_residuals if route == "vmap" else autograd_residuals
        wrapped = pinn.Pointwise(fn, route=route)
        j, s = timed(lambda: wrapped.jacobian_slice(model, params, xk, None, 0, m))
        jacobians[f"pinn.Pointwise, {route}"], rows[f"pinn.Pointwise, {route}"] = \
            j * scale[:, None], s
    if not args.skip_slow:
        def batched_reverse():
            r = autograd_residuals(model, xk, None)
            return _jacobian.BatchedReverseJacobian(r, list(model.parameters()))._slice(0, m)

        j, s = timed(batched_reverse, twice=False)
        jacobians["whole batch, autograd (BatchedReverseJacobian)"] = j * scale[:, None]
        rows["whole batch, autograd (BatchedReverseJacobian)"] = s
        names = list(params)
        shapes = [params[k].shape for k in names]
        sizes = [params[k].numel() for k in names]

        def forward_mode():
            def of(theta):
                with torch.nn.utils.stateless._reparametrize_module(model, theta):
                    return func_residuals(model, xk, None)

            def column(v):
                tangent = {k: t.view(sh) for k, t, sh in zip(names, v.split(sizes), shapes)}
                return torch.func.jvp(of, (params,), (tangent,))[1]

            eye = torch.eye(n, dtype=torch.float64)
            return torch.cat([torch.func.vmap(column)(eye[s:s + 64]) for s in range(0, n, 64)]).T

        j, s = timed(forward_mode, twice=False)
        jacobians["whole batch, forward mode in θ"], rows["whole batch, forward mode in θ"] = \
            j * scale[:, None], s
    reference = jacobians["pinn.Problem, taylor"]
    for name, j in jacobians.items():
        difference = float((j - reference).abs().max() / reference.abs().max())
        assert difference < 1e-12, (name, difference)
    system = _core.DampedNormalEquations64(n, _core.SolverOptions())
    r = problem(model, x).detach().contiguous()
    j = reference.contiguous()

    def syrk():
        system.begin()
        system.add_slice(j, r)

    _, rows["A += JᵀJ, g += Jᵀr (library SYRK + GEMV)"] = timed(syrk)
    print(f"Burgers, m = {m} rows × n = {n} parameters, float64, 1 thread; load "
          f"{open('/proc/loadavg').read().split()[0]}")
    print("| route | seconds | × SYRK |")
    print("|---|---|---|")
    base = rows["A += JᵀJ, g += Jᵀr (library SYRK + GEMV)"]
    for name, s in rows.items():
        print(f"| {name} | {s:.3f} | {s / base:.2f} |")


if __name__ == "__main__":
    main()
