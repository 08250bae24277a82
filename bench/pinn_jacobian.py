"""The Jacobian routes of lmtrain.torch for one PINN linearization, timed (issue 29).

Burgers (examples/pinn/burgers.py) on a 2-20-20-20-1 tanh network (921 parameters), m residual
rows (interior, initial, boundary points as in W8), float64, one thread:

* whole batch, autograd: a residual_fn with torch.autograd.grad input derivatives, J by
  BatchedReverseJacobian (row-batched reverse mode through the batch's graph: the optimizer's
  route before issue 39, and still with jacobian="autograd");
* whole batch, autograd, per point: the same residual_fn as the optimizer takes it by default
  since issue 39 — per-point parameter copies (_per_point.py), timed on the first step (which
  finds the row → point map by forward mode) and on a later one (which checks the map kept);
* whole batch, forward mode in θ: the same residuals written with torch.func, J by jvp in θ
  (vmap over chunks of 64 basis tangents) — the route issue 29 suggests for a torch.func
  residual_fn;
* pinn.Pointwise(residual_fn): the autograd residual_fn on slices of 32 points ("sliced") and
  the torch.func one by vmap over points of jacrev ("vmap");
* pinn.Problem: the pointwise form, by vmap of jacrev with nested jvp ("jacrev") and by the
  Taylor route (TaylorMLP); and the inverse problem with ν unknown (pinn.WithCoefficients: the
  pde residual reads the model's ν), by both routes — J with ν's column in front, checked
  against −u_xx/√N; a mixed third derivative (u_t + u_x + u·u_x − u_txx, BBM's form) and a
  fourth one (u_t + u·u_x + u_xx + u_xxxx, Kuramoto–Sivashinsky's form) and a mixed fourth
  one (the biharmonic in (t, x), u_tttt + 2u_ttxx + u_xxxx) by both routes, each checked against
  the other;
* A = JᵀJ, g = Jᵀr of the whole J by torch.mm and torch.mv — what the library's step does with
  J (SYRK and GEMV), and what the Jacobian is compared with (the library's own binding of it,
  DampedNormalEquations64, went with issue 27).

Each is called once untimed (torch.func's start-up), then timed as the median of 5 calls; the slow
whole-batch routes are timed on their full m once.  Checks that every route gives the same J
(to 1e-12 of its largest entry) before printing.

With ``--steps K``: K LM steps (lmtrain.torch.LevenbergMarquardt, the library's step) from the
same network on the same points with each form — the whole-batch autograd residual_fn per point
(the default), the same on the batch's graph (jacobian="autograd", ``--graph-steps`` of them: each
takes tens of seconds), pinn.Problem — and their median seconds per step and per Jacobian (the
step's "jacobian" phase).  The whole-batch residual_fn carries pinn's 1/√N block weights, so the
three minimize the same objective.

With ``--train S``: S seconds of LM on the whole-batch autograd residual_fn as a user writes it
(the default route, per point), with fresh scrambled-Sobol points at every step (docs/pinn.md's
recipe, the count fixed), and the relative L2 error against the Cole–Hopf reference as it goes
(evaluated outside the clock).

usage: build/venv-torch/bin/python bench/pinn_jacobian.py [--points 2000] [--skip-slow]
                                                          [--steps 0] [--graph-steps 2] [--train 0]
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import math
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "pinn"))
import burgers  # noqa: E402
import common  # noqa: E402

import lmtrain.torch as lt  # noqa: E402
from lmtrain.torch import _jacobian, _linearization, pinn  # noqa: E402

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


def per_point_jacobian(model, residual_fn, x: torch.Tensor, m: int, first: bool):
    """J of the whole-batch residual_fn as the optimizer builds it (per-point copies), timed
    on a first step (the map found) or a later one (an optimizer's map kept and checked)."""
    names, params = zip(*model.named_parameters())
    lin = _linearization.TorchLinearization(model, names, params, None, residual_fn, "auto")
    if not first:
        lin.set_batch(x, None)
        lin.jacobian(None, 0, m)
        lin.reset_step()
    lin.set_batch(x, None)
    t = time.perf_counter()
    j = lin.jacobian(None, 0, m)
    seconds = time.perf_counter() - t
    assert lin.path == "autograd per point", lin.jacobian_choice
    return j, seconds


def lm_steps(model, residual_fn, x: torch.Tensor, steps: int, **options) -> tuple[float, float,
                                                                                 str]:
    """Median seconds per LM step and per Jacobian over `steps` steps of a copy of `model`,
    and the optimizer's path."""
    model = copy.deepcopy(model)
    optimizer = lt.LevenbergMarquardt(model, residual_fn=residual_fn, **options)
    step_seconds, jacobian_seconds = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", _jacobian.SlowJacobianWarning)
        for _ in range(steps):
            t = time.perf_counter()
            report = optimizer.step(x)
            step_seconds.append(time.perf_counter() - t)
            jacobian_seconds.append(report.phase_seconds["jacobian"])
    return statistics.median(step_seconds), statistics.median(jacobian_seconds), optimizer.path


def train(seconds: float, points: int) -> None:
    """LM on the whole-batch autograd residual_fn (pinn's block weights passed as y) with fresh
    Sobol points every step; prints the relative L2 error at 30, 60, 120, 300 and 600 s."""
    problem, model, error = burgers.build(0, points=points, points_max=points, grow_every=1,
                                          edge_points=points // 5, method="sobol", width=20,
                                          depth=3, weights=(1.0, 1.0))
    kinds = torch.cat([torch.full((c,), float(i)) for i, c in enumerate(problem.counts)])
    scale = torch.cat([torch.full((c,), 1 / math.sqrt(c)) for c in problem.counts]).double()

    def residual_fn(model, x, y):
        return autograd_residuals(model, x, y) * y

    optimizer = lt.LevenbergMarquardt(model, residual_fn=residual_fn)
    marks = [mark for mark in (30, 60, 120, 300, 600) if mark < seconds] + [seconds]
    clock, step = 0.0, 0
    print()
    print("| seconds | LM steps | relative L2 | path |")
    print("|---|---|---|---|")
    while marks:
        if step > 0:
            problem.resample(step)
        x = torch.cat([problem.points, kinds.double()[:, None]], 1)
        t = time.perf_counter()
        optimizer.step(x, scale)
        clock += time.perf_counter() - t
        step += 1
        if clock >= marks[0]:
            print(f"| {clock:.0f} | {step} | {error(model):.2g} | {optimizer.path} |", flush=True)
            while marks and clock >= marks[0]:
                marks.pop(0)


def timed(fn, twice: bool = True, repeats: int = 5):
    """fn's result and its seconds: with `twice`, the median of `repeats` calls after a first
    (torch.func's start-up; on a shared machine one call is noise); else one call."""
    if not twice:
        t = time.perf_counter()
        out = fn()
        return out, time.perf_counter() - t
    out = fn()
    seconds = []
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        seconds.append(time.perf_counter() - t)
    return out, statistics.median(seconds)


def pde_variants(problem, model, params: dict, reference: torch.Tensor, scale: torch.Tensor,
                 by_route) -> None:
    """The same points and network with the pde residual changed, each by both routes
    (by_route times them into the table): the inverse problem with ν unknown
    (pinn.WithCoefficients; J is `reference`, the forward problem's, with ν's column in front,
    −u_xx/√N), and higher derivatives — BBM's mixed third (u_txx), Kuramoto–Sivashinsky's pure
    fourth (u_xxxx) and the biharmonic Δ²u in (t, x) (mixed fourth), the routes against each
    other."""
    x, m, count = problem.points, reference.shape[0], problem.counts[0]
    inverse = pinn.WithCoefficients(model, nu=burgers.NU)
    pde, *others = problem.conditions
    inverse_problem = pinn.Problem("tx", [dataclasses.replace(
        pde, residual=lambda u, u_t, u_x, u_xx: u_t + u * u_x - inverse.nu * u_xx), *others])
    inverse_params = {k: v.detach() for k, v in inverse.named_parameters()}
    assert list(inverse_params)[0] == "nu"
    p = x[:count].clone().requires_grad_(True)
    u_x = torch.autograd.grad(model(p).sum(), p, create_graph=True)[0][:, 1]
    u_xx = torch.autograd.grad(u_x.sum(), p)[0][:, 1]
    nu_column = torch.zeros(m, dtype=torch.float64)
    nu_column[:count] = -u_xx * scale[:count]
    for route, j in by_route(inverse_problem, inverse, inverse_params,
                             ", ν unknown (WithCoefficients)").items():
        difference = max(float((j[:, 0] - nu_column).abs().max() / nu_column.abs().max()),
                         float((j[:, 1:] - reference).abs().max() / reference.abs().max()))
        assert difference < 1e-12, ("ν unknown", route, difference)
    higher = {
        "u_txx": lambda u, u_t, u_x, u_txx: u_t + u_x + u * u_x - u_txx,
        "u_xxxx": lambda u, u_t, u_x, u_xx, u_xxxx: u_t + u * u_x + u_xx + u_xxxx,
        "u_tttt + 2u_ttxx + u_xxxx": lambda u_tttt, u_ttxx, u_xxxx: u_tttt + 2 * u_ttxx + u_xxxx}
    for label, residual in higher.items():
        higher_problem = pinn.Problem("tx", [dataclasses.replace(pde, residual=residual),
                                             *others])
        both = by_route(higher_problem, model, params, f", {label} in the pde residual")
        difference = float((both["taylor"] - both["jacrev"]).abs().max() /
                           both["jacrev"].abs().max())
        assert difference < 1e-12, (label, difference)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=2000, help="interior points")
    parser.add_argument("--skip-slow", action="store_true",
                        help="skip the two whole-batch routes (tens of seconds each)")
    parser.add_argument("--steps", type=int, default=0,
                        help="LM steps timed per form (0: the Jacobian routes only)")
    parser.add_argument("--graph-steps", type=int, default=2,
                        help="of those, on the batch's graph (jacobian='autograd')")
    parser.add_argument("--train", type=float, default=0.0,
                        help="then seconds of LM on the whole-batch residual_fn (0: none)")
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

    def by_route(form: pinn.Problem, module, values: dict, label: str) -> dict:
        """J of `form` by the Taylor and the jacrev route, each timed into rows."""
        out = {}
        for route in ("taylor", "jacrev"):
            form.jacobian, form.jacobian_choice = route, {}
            out[route], rows[f"pinn.Problem{label}, {route}"] = timed(
                lambda: form.jacobian_slice(module, values, x, None, 0, m))
        return out

    for route, j in by_route(problem, model, params, "").items():
        jacobians[f"pinn.Problem, {route}"] = j
    pde_variants(problem, model, params, jacobians["pinn.Problem, taylor"], scale, by_route)
    for route in ("vmap", "sliced"):
        fn = func_residuals if route == "vmap" else autograd_residuals
        wrapped = pinn.Pointwise(fn, route=route)
        j, s = timed(lambda: wrapped.jacobian_slice(model, params, xk, None, 0, m))
        jacobians[f"pinn.Pointwise, {route}"], rows[f"pinn.Pointwise, {route}"] = \
            j * scale[:, None], s
    def weighted(model, x, y):  # pinn's 1/√N block weights: the objective of pinn.Problem
        return autograd_residuals(model, x, y) * scale

    for first, label in ((True, "first step"), (False, "later step")):
        name = f"whole batch, autograd, per point ({label})"
        j, rows[name] = per_point_jacobian(model, autograd_residuals, xk, m, first)
        jacobians[name] = j * scale[:, None]
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
    r = problem(model, x).detach().contiguous()
    j = reference.contiguous()

    def normal_equations():  # what the library's step does with J: A = JᵀJ by SYRK, g = Jᵀr
        return torch.mm(j.T, j), torch.mv(j.T, r)

    _, rows["A = JᵀJ, g = Jᵀr (torch.mm, torch.mv)"] = timed(normal_equations)
    print(f"Burgers, m = {m} rows × n = {n} parameters, float64, 1 thread; load "
          f"{open('/proc/loadavg').read().split()[0]}")
    print("| route | seconds | × JᵀJ |")
    print("|---|---|---|")
    base = rows["A = JᵀJ, g = Jᵀr (torch.mm, torch.mv)"]
    for name, s in rows.items():
        print(f"| {name} | {s:.3f} | {s / base:.2f} |")
    if args.steps:
        forms = [("whole-batch autograd residual_fn (default: per point)", weighted, {},
                  args.steps),
                 ("whole-batch autograd residual_fn, jacobian='autograd' (the batch's graph)",
                  weighted, {"jacobian": "autograd"}, min(args.steps, args.graph_steps)),
                 ("pinn.Problem", problem, {}, args.steps)]
        print()
        print("| form | path | steps | seconds per LM step | seconds per Jacobian |")
        print("|---|---|---|---|---|")
        for name, residual_fn, options, steps in forms:
            if steps == 0:
                continue
            points = x if residual_fn is problem else xk
            step, jacobian, path = lm_steps(model, residual_fn, points, steps, **options)
            print(f"| {name} | {path} | {steps} | {step:.3f} | {jacobian:.3f} |")
    if args.train:
        train(args.train, args.points)


if __name__ == "__main__":
    main()
