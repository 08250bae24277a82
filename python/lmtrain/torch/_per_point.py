"""J of a whole-batch residual_fn whose rows each depend on one point: per-point copies of θ.

A ``residual_fn(model, x, y)`` written over the whole batch — the PINN of the users of
torch-levenberg-marquardt and cuPyLMA: input derivatives by
``torch.autograd.grad(…, create_graph=True)``, blocks (interior, initial, boundary) cut out of x
or evaluated on points of their own, ``torch.cat``'ed — has one graph for all its rows, and
row-batched reverse mode through it costs O(m²·n) (``BatchedReverseJacobian``).  torch.func
cannot transform such a function (it refuses ``torch.autograd.grad`` and ``requires_grad_``
inside a transform), so the pointwise routes of lmtrain.torch.pinn do not apply to it as
written.

What applies instead: a PDE residual's rows each depend on the network at one point.  Evaluate the
residual_fn with each call of the model routed through ``vmap`` over the rows of its inputs, row
q (a "point") computed with its own copy θ_q of the parameters, all equal to θ, so that r and its
input derivatives are unchanged.  Then J_j = Σ_q ∂r_j/∂θ_q, and ∂r_j/∂θ_q = 0 unless row j
depends on point q.  When every row depends on one point, one reverse pass seeded with rows that
share no point (a colour) gives each of those rows of J as the gradient of its point's copy: K
passes for K rows per point — Curtis, Powell & Reid's grouping of columns (J. Inst. Maths Applics
13, 1974), applied to rows with the points as groups — O(K·m·n) in all, where the batch's graph
needs one pass per row.

The row → point map comes from forward mode, which (unlike torch.func) runs through
torch.autograd.grad: with tangent c_q·d on copy q (d random), row j's tangent is
Σ_q c_q·∂r_j/∂θ_q·d, so the ratio of the tangents for c_q = (a digit of q) + 1 and for c_q = 1
is an integer for a row of one point, that digit plus one.  Every slice of J is then checked
against J·d from one forward-mode pass through the residual_fn as written, and its residuals
against the linearization's: a row of several points, of parameters used outside ``model(…)``,
or a model that mixes its rows fails, and lmtrain.torch goes back to the batch's graph, saying
why.  Each slice evaluates the residual_fn on the whole batch once (its blocks may be cut out of
x by position, so it cannot be evaluated on part of it), with copies for the slice's points only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch
import torch.autograd.forward_ad as fwAD
from torch.func import vmap
from torch.nn.utils.stateless import _reparametrize_module
from torch.utils._pytree import tree_map


class NotPerPoint(Exception):
    """The residual_fn's rows are not each a function of one point; the message says why."""


# Model rows whose parameter copies one pass may hold: chunk × n values, a few times over (the
# copies' tangents or gradients and vmap's intermediates).
CHUNK_BYTES = 256 << 20


@dataclass
class PointMap:
    """Which point (row of a model call's inputs, numbered over the calls in order) each residual
    row depends on, −1 for a row that depends on none (J's row is zero), and the colours."""

    calls: list[int]  # rows of each model call, in call order
    point: torch.Tensor  # (m,) long
    colours: list[torch.Tensor] = field(default_factory=list)  # rows of each colour, sorted

    @property
    def rows_per_point(self) -> int:
        return len(self.colours)

    @classmethod
    def of(cls, calls: list[int], point: torch.Tensor) -> PointMap:
        """The colours: a row's colour is its rank among the rows of its point."""
        rows = torch.nonzero(point >= 0).reshape(-1)
        order = torch.argsort(point[rows], stable=True)
        ranked = point[rows][order]
        first = torch.ones_like(ranked, dtype=torch.bool)
        first[1:] = ranked[1:] != ranked[:-1]
        starts = torch.nonzero(first).reshape(-1)
        group = torch.cumsum(first.long(), 0) - 1
        rank = torch.arange(ranked.numel(), device=point.device) - starts[group]
        colour_of = torch.empty_like(rank)
        colour_of[order] = rank
        k = int(rank.max()) + 1 if rank.numel() else 0
        return cls(calls, point, [rows[colour_of == c] for c in range(k)])


class _RoutedCalls:
    """During one evaluation of the residual_fn: each call of the model computes the rows that
    ``copies_of(call, rows)`` names — (row indices or None for all of them, parameters by name
    with those rows as their first dimension) — by vmap over the rows, each with its own copy;
    the other rows (or the whole call, when it returns None) by the model's own forward with
    ``plain``.  ``calls`` records each call's rows."""

    def __init__(self, model: torch.nn.Module, plain: dict[str, torch.Tensor],
                 copies_of: Callable[[int, int], tuple[torch.Tensor | None,
                                                       dict[str, torch.Tensor]] | None]) -> None:
        self.model, self.plain, self.copies_of = model, plain, copies_of
        self.calls: list[int] = []
        self._own_forward = "forward" in model.__dict__

    def __enter__(self) -> _RoutedCalls:
        self._forward = self.model.forward
        self.model.forward = self._routed
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._own_forward:
            self.model.forward = self._forward
        else:
            del self.model.forward

    def _routed(self, *inputs: Any, **kwargs: Any) -> Any:
        rowed = [i for i, v in enumerate(inputs) if isinstance(v, torch.Tensor)]
        sizes = {int(inputs[i].shape[0]) if inputs[i].dim() else 0 for i in rowed}
        if len(sizes) != 1 or 0 in sizes:
            raise NotPerPoint(f"the model is called with inputs of {sorted(sizes)} rows; a point "
                              "is a row of its positional tensor inputs")
        rows = sizes.pop()
        call = len(self.calls)
        self.calls.append(rows)
        forward = self._forward
        route = self.copies_of(call, rows)
        if route is None:
            with _reparametrize_module(self.model, self.plain):
                return forward(*inputs, **kwargs)
        index, copies = route

        def one(theta: dict[str, torch.Tensor], *row: torch.Tensor) -> Any:
            args = list(inputs)
            for i, v in zip(rowed, row):
                args[i] = v.unsqueeze(0)
            with _reparametrize_module(self.model, theta):
                out = forward(*args, **kwargs)
            return tree_map(lambda t: t.squeeze(0), out)

        if index is None:
            return vmap(one)(copies, *[inputs[i] for i in rowed])
        part = vmap(one)(copies, *[inputs[i].index_select(0, index) for i in rowed])
        with _reparametrize_module(self.model, self.plain):
            whole = forward(*inputs, **kwargs)
        return tree_map(lambda w, p: w.index_copy(0, index, p), whole, part)


def _same_count(r: torch.Tensor, m: int) -> torch.Tensor:
    """r, refused — the user's error, as at a trial point — when the residual_fn returned
    another count than at the linearization: the route evaluates it again at the same θ."""
    if r.numel() != m:
        raise ValueError(f"residual_fn returned {r.numel()} residuals when evaluated again for "
                         f"its Jacobian but {m} at the linearization point; the count must not "
                         "depend on the parameters, nor change from one call to the next")
    return r


def _tangent(r: torch.Tensor) -> torch.Tensor:
    t = fwAD.unpack_dual(r).tangent
    return torch.zeros_like(r) if t is None else t.detach()


def _code_base(dtype: torch.dtype) -> int:
    """The largest code the tangent ratio resolves, a power of 2 (2²⁴ in float64, 64 in
    float32, 0: none, in 16-bit types): codes up to it keep the ratio's rounding — about
    code × eps × the pass's amplification, taken as 10³ — below 10⁻², against the 0.5 that
    separates two codes."""
    resolved = 1e-2 / (1e3 * torch.finfo(dtype).eps)
    return int(min(2 ** 24, 2 ** math.floor(math.log2(resolved)))) if resolved >= 4 else 0


def _ratio_tolerance(dtype: torch.dtype, base: int) -> float:
    """How far from an integer a row of one point lets the ratio of its tangents be: ten times
    the rounding above, at most 0.05."""
    return min(0.05, 1e4 * torch.finfo(dtype).eps * base)


class PerPointRoute:
    """Finds a residual_fn's row → point map on a batch and builds J's slices by per-point
    parameter copies (the module's doc).  One per optimizer: the map is kept across steps and
    checked on every slice."""

    def __init__(self, model: torch.nn.Module, names: Sequence[str],
                 params: Sequence[torch.Tensor], residual_fn: Any) -> None:
        self.model, self.names, self.params = model, list(names), list(params)
        self.residual_fn = residual_fn
        self.point_map: PointMap | None = None

    def _evaluate(self, x: Any, y: Any, outside: dict[str, torch.Tensor],
                  plain: dict[str, torch.Tensor], copies_of: Callable[..., Any]) -> tuple[
                      torch.Tensor, list[int]]:
        """r with the model's calls routed (_RoutedCalls) and ``outside`` as the parameters
        the residual_fn sees outside them, and the calls' rows.  The residual_fn ran as it is
        at the linearization, so what fails here is the routing: it says so."""
        try:
            with torch.enable_grad(), _reparametrize_module(self.model, outside), \
                    _RoutedCalls(self.model, plain, copies_of) as routed:
                r = self.residual_fn(self.model, x, y)
        except NotPerPoint:
            raise
        except Exception as error:  # noqa: BLE001 - a model vmap cannot run row by row
            raise NotPerPoint("its model cannot be evaluated row by row (torch.func.vmap over "
                              f"the rows: {type(error).__name__}: "
                              f"{str(error).splitlines()[0][:200]})") from error
        return r.reshape(-1), routed.calls

    def engine(self, x: Any, y: Any, r: torch.Tensor) -> PerPointJacobian:
        """The slices of J on the batch (x, y) whose residuals at θ are r; raises NotPerPoint
        with the reason when forward mode cannot run through the residual_fn."""
        m = r.numel()
        theta = {name: p.detach() for name, p in zip(self.names, self.params)}
        if _code_base(self.params[0].dtype) == 0:
            raise NotPerPoint(f"the row → point map needs float32 or float64, not "
                              f"{self.params[0].dtype}")
        generator = torch.Generator().manual_seed(m)
        d = {k: torch.randn(v.shape, generator=generator, dtype=v.dtype).to(v.device)
             for k, v in theta.items()}
        try:
            with fwAD.dual_level(), torch.enable_grad():
                duals = {k: fwAD.make_dual(v, d[k]) for k, v in theta.items()}
                with _reparametrize_module(self.model, duals):
                    r_dual = self.residual_fn(self.model, x, y).reshape(-1)
                jd = _tangent(r_dual)  # the tangent lives as long as the dual level
        except Exception as error:  # noqa: BLE001 - whatever forward mode cannot run through
            raise NotPerPoint("forward mode (torch.autograd.forward_ad) cannot run through it: "
                              f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
                              ) from error
        _same_count(jd, m)
        return PerPointJacobian(self, x, y, r.detach(), theta, d, jd)

    def find_map(self, x: Any, y: Any, theta: dict[str, torch.Tensor],
                 d: dict[str, torch.Tensor], m: int) -> PointMap:
        """The row → point map by forward mode, in chunks of points (the module's doc)."""
        n = sum(v.numel() for v in theta.values())
        dtype = self.params[0].dtype
        base = _code_base(dtype)
        chunk = max(1, CHUNK_BYTES // (4 * n * torch.finfo(dtype).bits // 8))
        tolerance = _ratio_tolerance(dtype, base)
        point = torch.full((m,), -1, dtype=torch.long, device=self.params[0].device)
        calls: list[int] | None = None
        lo = 0
        while calls is None or lo < sum(calls):
            hi = lo + chunk
            ones, calls = self._chunk_tangent(x, y, theta, d, m, lo, hi, torch.ones_like)
            found = ones != 0
            digits = max(1, math.ceil(math.log(max(2, min(hi, sum(calls)) - lo), base)))
            local = torch.zeros(m, dtype=torch.long, device=point.device)
            for k in range(digits):
                tangent, again = self._chunk_tangent(
                    x, y, theta, d, m, lo, hi,
                    lambda q, k=k: (q // base ** k % base + 1).to(dtype))
                if again != calls:
                    raise NotPerPoint(f"its model calls changed between evaluations ({calls}, "
                                      f"then {again})")
                ratio = tangent / torch.where(found, ones, 1)
                digit = torch.round(ratio)
                several = (found & (((ratio - digit).abs() > tolerance) | (digit < 1) |
                                    (digit > base))) | (~found & (tangent != 0))
                if bool(several.any()):
                    raise NotPerPoint(f"its row {int(torch.nonzero(several)[0])} depends on "
                                      "several points (rows of the model's inputs)")
                local += (digit.long() - 1).clamp(min=0) * base ** k
            twice = found & (point >= 0)
            if bool(twice.any()):
                raise NotPerPoint(f"its row {int(torch.nonzero(twice)[0])} depends on several "
                                  "points (rows of the model's inputs)")
            point = torch.where(found, lo + local, point)
            lo = hi
        return PointMap.of(calls, point)

    def _chunk_tangent(self, x: Any, y: Any, theta: dict[str, torch.Tensor],
                       d: dict[str, torch.Tensor], m: int, lo: int, hi: int,
                       code: Callable[[torch.Tensor], torch.Tensor]) -> tuple[torch.Tensor,
                                                                             list[int]]:
        """The tangent of the residual's m rows with tangent code(q)·d on the copy of each
        point q in [lo, hi) (numbered over the calls) and none on the rest."""
        offsets = [0]

        def copies_of(call: int, rows: int) -> Any:
            start = offsets[-1]
            offsets.append(start + rows)
            a, b = max(lo, start), min(hi, start + rows)
            if a >= b:
                return None
            q = torch.arange(a, b, device=self.params[0].device) - lo
            c = code(q)
            copies = {k: fwAD.make_dual(v.unsqueeze(0).expand(b - a, *v.shape).clone(),
                                        c.reshape(-1, *[1] * v.dim()) * d[k])
                      for k, v in theta.items()}
            index = None if (a, b) == (start, start + rows) else \
                torch.arange(a - start, b - start, device=q.device)
            return index, copies

        with fwAD.dual_level():
            r, calls = self._evaluate(x, y, theta, theta, copies_of)
            return _tangent(_same_count(r, m)), calls


class PerPointJacobian:
    """Slices of J on one batch by per-point parameter copies, each checked against J·d."""

    def __init__(self, route: PerPointRoute, x: Any, y: Any, r: torch.Tensor,
                 theta: dict[str, torch.Tensor], d: dict[str, torch.Tensor],
                 jd: torch.Tensor) -> None:
        self.route, self.x, self.y, self.r, self.theta, self.jd = route, x, y, r, theta, jd
        self.d = torch.cat([d[k].reshape(-1) for k in route.names])
        self._d = d
        self.found_map = False  # this batch's map found (not an earlier batch's kept)

    def slice(self, start: int, stop: int) -> torch.Tensor:
        route, m = self.route, self.jd.numel()
        if not self.found_map and route.point_map is not None and \
                route.point_map.point.numel() == m:  # an earlier batch's map, if it holds
            try:
                j = self._slice(route.point_map, start, stop)
                if self._matches(j, start, stop):
                    return j
            except NotPerPoint:
                pass
        if not self.found_map:
            route.point_map = route.find_map(self.x, self.y, self.theta, self._d, m)
            self.found_map = True
        j = self._slice(route.point_map, start, stop)
        if self._matches(j, start, stop):
            return j
        raise NotPerPoint("J from per-point copies differs from J·d by forward mode on its rows "
                          f"{start}:{stop} (a row of several points, or a model that mixes its "
                          "rows)")

    def _matches(self, j: torch.Tensor, start: int, stop: int) -> bool:
        tol = torch.finfo(j.dtype).eps ** 0.5
        jd = self.jd[start:stop]
        scale = (j.abs() @ self.d.abs()) + jd.abs()
        return bool(((j @ self.d - jd).abs() <= tol * scale).all())

    def _slice(self, point_map: PointMap, start: int, stop: int) -> torch.Tensor:
        route, theta = self.route, self.theta
        device = self.jd.device
        points = point_map.point[start:stop]
        active = torch.unique(points[points >= 0])  # sorted
        offsets = [0]
        for rows in point_map.calls:
            offsets.append(offsets[-1] + rows)
        leaves: list[dict[str, torch.Tensor]] = []

        def copies_of(call: int, rows: int) -> Any:
            if call >= len(point_map.calls) or rows != point_map.calls[call]:
                raise NotPerPoint("its model calls changed between evaluations")
            a = int(torch.searchsorted(active, offsets[call]))
            b = int(torch.searchsorted(active, offsets[call + 1]))
            if a >= b:
                return None
            index = active[a:b] - offsets[call]
            copies = {k: v.unsqueeze(0).expand(b - a, *v.shape).requires_grad_(True)
                      for k, v in theta.items()}
            leaves.append(copies)
            return (None if b - a == rows else index), copies

        outside = {k: v.clone().requires_grad_(True) for k, v in theta.items()}
        r, calls = route._evaluate(self.x, self.y, outside, theta, copies_of)
        if calls != point_map.calls:
            raise NotPerPoint(f"its model calls changed between evaluations "
                              f"({point_map.calls}, then {calls})")
        tol = torch.finfo(r.dtype).eps ** 0.5
        if bool(((_same_count(r, self.r.numel()).detach() - self.r).abs() >
                 tol * float(self.r.abs().max())).any()):
            raise NotPerPoint("evaluated row by row, its model gives other residuals (a model "
                              "that mixes its rows, or a residual_fn that draws at random)")
        n = self.d.numel()
        j = torch.zeros(stop - start, n, dtype=self.jd.dtype, device=device)
        inputs = [v for copies in leaves for v in copies.values()] + list(outside.values())
        colours = [c[(c >= start) & (c < stop)] for c in point_map.colours]
        colours = [c for c in colours if c.numel()]
        for i, rows in enumerate(colours):
            seed = torch.zeros_like(r)
            seed[rows] = 1
            grads = torch.autograd.grad(r, inputs, grad_outputs=seed,
                                        retain_graph=i + 1 < len(colours), allow_unused=True)
            if any(g is not None for g in grads[len(grads) - len(outside):]):
                used = [k for k, g in zip(outside, grads[len(grads) - len(outside):])
                        if g is not None]
                raise NotPerPoint(f"it uses the parameters {used} outside model(…), a call of "
                                  "the model itself")
            per_point, at = [], 0
            for copies in leaves:
                block = grads[at:at + len(copies)]
                at += len(copies)
                rows_in_call = next(iter(copies.values())).shape[0]
                per_point.append(torch.cat([
                    (g if g is not None else torch.zeros(rows_in_call, *v.shape[1:],
                                                          dtype=v.dtype, device=device)
                     ).reshape(rows_in_call, -1) for g, v in zip(block, copies.values())], 1))
            g = torch.cat(per_point)  # rows: the active points, in order
            j[rows - start] = g[torch.searchsorted(active, point_map.point[rows])]
        return j
