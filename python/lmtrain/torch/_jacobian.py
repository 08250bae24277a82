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
  slice is ``autograd.grad(r, θ, grad_outputs=I[rows], is_grads_batched=True)``.  O(m²·n): it
  warns with its measured rate when slow.  A residual_fn whose rows each depend on one point
  takes per-point parameter copies instead (``_per_point.py``), O(m·n).
* For residuals pointwise in their points (``pinn.py``, issue 29): ``PointwiseJacobian`` (vmap
  over the points of jacrev/jacfwd in θ of a one-point residual) and ``TaylorMLP`` (forward
  Taylor propagation of u and its input derivatives through an MLP, one reverse sweep seeded by
  the PDE's partials), both O(m·n).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import time
import warnings
import weakref
from typing import Any, Callable, Iterator, Mapping, Sequence, Union

import torch
from torch.func import functional_call, jacfwd, jacrev, jvp, vmap

from ._losses import Loss

JACOBIAN_MODES = ("auto", "jacrev", "jacfwd", "autograd")


def _load_forward_ad_decompositions() -> None:
    """torch loads its forward-mode decompositions at the first dual level (the first jvp of a
    process), and torch 2.15 builds them with torch.jit.script, which warns that it is
    deprecated (FutureWarning) — about torch's own internals, which a user of this library can
    do nothing about, on every run of a PINN.  Loaded here, once, with that warning alone
    silenced; any other warning of the import still shows."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"`torch\.jit\.script` is deprecated",
                                category=FutureWarning)
        try:
            from torch._decomp import decompositions_for_jvp  # noqa: F401
        except Exception:  # noqa: BLE001 — a torch without it (or where it fails) is left to
            pass  # load it, or fail, at its first dual level, as it would without this


_load_forward_ad_decompositions()


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


class SlowJacobianWarning(UserWarning):
    """J is built by a route whose cost grows with the square of the residual rows."""


class BatchedReverseJacobian:
    """Slices J[rows start..stop) of a residual vector r(θ) built once with autograd.

    Each row's backward pass runs through the whole batch's graph, so J costs O(m²·n).  Unless
    told not to warn, the first slice begins with a probe of ``probe_rows`` rows, timed, and when
    the whole J would take more than ``warn_seconds`` a SlowJacobianWarning says so before the
    rest is built: the measured rate, the projected seconds per step, ``why`` this route (the
    reason the per-point route was refused, ``_per_point.py``) and the fast forms."""

    warn_seconds = 1.0
    probe_rows = 16

    def __init__(self, residuals: torch.Tensor, params: Sequence[torch.Tensor],
                 why: str | None = None, warn: bool = True):
        self.residuals, self.params, self.why = residuals, list(params), why
        self._timed = not warn
        self.warned = False

    def slice(self, start: int, stop: int) -> torch.Tensor:
        if self._timed:
            return self._slice(start, stop)
        self._timed = True
        probe = min(stop, start + self.probe_rows)
        t = time.perf_counter()
        head = self._slice(start, probe)
        seconds = time.perf_counter() - t
        m = self.residuals.numel()
        projected = seconds * m / (probe - start)
        if projected > self.warn_seconds:
            self.warned = True
            because = (f"its rows are not each of one point: {self.why}" if self.why else
                       "jacobian = 'autograd' asks for the batch's graph")
            warnings.warn(
                f"lmtrain.torch: this residual_fn's Jacobian is built by batched reverse mode "
                f"over its {m} rows ({because}), measured {(probe - start) / seconds:.0f} "
                f"rows/s: about {projected:.1f} s per LM step, and the cost grows with the square "
                "of the rows (each row's backward pass runs through the whole batch's graph).  "
                "Fast forms, O(rows × parameters): a residual_fn each of whose rows depends on "
                "one point — one row of the model's inputs — is built per point by itself "
                "(jacobian='auto'); a PDE written pointwise, lmtrain.torch.pinn.Problem, is "
                "fastest; a torch.func residual_fn whose rows are pointwise in x may be "
                "declared so, lmtrain.torch.pinn.Pointwise; or a residual_fn may bring its own "
                "jacobian_slice (docs/pinn.md)",
                SlowJacobianWarning, stacklevel=4)
        return head if probe == stop else torch.cat([head, self._slice(probe, stop)])

    def _slice(self, start: int, stop: int) -> torch.Tensor:
        m = self.residuals.numel()
        seeds = torch.zeros(stop - start, m, dtype=self.residuals.dtype,
                            device=self.residuals.device)
        seeds[torch.arange(stop - start), torch.arange(start, stop)] = 1
        grads = torch.autograd.grad(self.residuals, self.params, grad_outputs=seeds,
                                    is_grads_batched=True, retain_graph=True, allow_unused=True)
        return torch.cat([(g if g is not None else torch.zeros(
            stop - start, *p.shape, dtype=p.dtype, device=p.device)).reshape(stop - start, -1)
            for g, p in zip(grads, self.params)], dim=1)


class PointwiseJacobian:
    """Rows of J for residuals that are pointwise in their points (PINNs, ``pinn.py``).

    ``point_residual(params, point) → (k,)`` is the residual of one point as a function of the
    parameters (name → tensor, as ``functional_call`` takes them); it may take derivatives of the
    network with respect to the point inside (forward mode, ``torch.func.jvp``).  The rows of the
    points ``P`` (c × d) are ``vmap`` over the points of ``jacrev`` (one reverse pass per residual
    row of a point, k ≪ n) or ``jacfwd`` (one forward pass per parameter) in θ: O(c·k·n) work and
    memory, against O(m²·n) for row-batched reverse mode over a whole batch's graph.  Points are
    taken ``chunk`` at a time, so the vmapped intermediates (about a few rows of J per point)
    stay within the memory plan.
    """

    def __init__(self, names: Sequence[str], point_residual: Any, mode: str, chunk: int):
        if mode not in ("jacrev", "jacfwd"):
            raise ValueError(f"pointwise Jacobian mode {mode!r}: expected 'jacrev' or 'jacfwd'")
        self.names, self.mode, self.chunk = list(names), mode, max(1, int(chunk))
        transform = jacrev if mode == "jacrev" else jacfwd
        self._jacobian = vmap(transform(point_residual), in_dims=(None, 0))

    def rows(self, params: dict[str, torch.Tensor], points: torch.Tensor) -> torch.Tensor:
        """J of the points' residual rows, (c·k) × n, point-major."""
        parts = []
        for s in range(0, points.shape[0], self.chunk):
            blocks = self._jacobian(params, points[s:s + self.chunk])  # name → c × k × shape
            parts.append(torch.cat([blocks[name].reshape(
                blocks[name].shape[0] * blocks[name].shape[1], -1) for name in self.names],
                dim=1))
        return parts[0] if len(parts) == 1 else torch.cat(parts)


def _sigmoid_derivatives(h: torch.Tensor, order: int) -> list[Any]:
    """σ(h) = 1/(1 + e⁻ʰ) and σ′ … σ⁽ᵒʳᵈᵉʳ⁾ (order ≤ 5), each from the ones before."""
    s = torch.sigmoid(h)
    s1 = s * (1 - s)
    s2 = s1 * (1 - 2 * s)
    s3 = s2 * (1 - 2 * s) - 2 * s1 * s1 if order >= 3 else None
    s4 = s3 * (1 - 2 * s) - 6 * s1 * s2 if order >= 4 else None
    s5 = s4 * (1 - 2 * s) - 8 * s1 * s3 - 6 * s2 * s2 if order >= 5 else None
    return [s, s1, s2, s3, s4, s5]


def _activation_derivatives(layer: torch.nn.Module, h: torch.Tensor,
                            order: int) -> tuple[torch.Tensor, ...]:
    """σ(h) and its derivatives σ′ … σ⁽ᵒʳᵈᵉʳ⁾ (order 2 … 5) for the activations the Taylor
    route knows (TAYLOR_ACTIVATIONS, pinn.Sin)."""
    kind = type(layer).__name__
    if kind == "Tanh":
        s = torch.tanh(h)
        s1 = 1 - s * s
        s2 = -2 * s * s1
        s3 = -2 * (s1 * s1 + s * s2) if order >= 3 else None
        s4 = -2 * (3 * s1 * s2 + s * s3) if order >= 4 else None
        s5 = -2 * (3 * s2 * s2 + 4 * s1 * s3 + s * s4) if order >= 5 else None
    elif kind == "Sigmoid":
        s, s1, s2, s3, s4, s5 = _sigmoid_derivatives(h, order)
    elif kind == "SiLU":  # h·σ(h): the n-th derivative is h·σ⁽ⁿ⁾ + n·σ⁽ⁿ⁻¹⁾
        g = _sigmoid_derivatives(h, order)
        s1, s2, s3, s4, s5 = [h * g[n] + n * g[n - 1] if g[n] is not None else None
                              for n in range(1, 6)]
        s = torch.nn.functional.silu(h)  # torch's values, exactly
    elif kind == "Softplus":  # log(1 + e^(βh))/β: the n-th derivative is β^(n−1)·σ⁽ⁿ⁻¹⁾(βh)
        beta = float(layer.beta)
        g = _sigmoid_derivatives(beta * h, order - 1)
        s = torch.nn.functional.softplus(h, beta, layer.threshold)  # torch's values, exactly
        s1, s2, s3, s4, s5 = [beta ** n * g[n] if g[n] is not None else None for n in range(5)]
    elif kind == "GELU":  # h·Φ(h): the n-th derivative is a polynomial in h times φ(h), n ≥ 2
        phi = torch.exp(-0.5 * h * h) / math.sqrt(2 * math.pi)
        hh = h * h
        s = torch.nn.functional.gelu(h)
        s1 = 0.5 * (1 + torch.erf(h / math.sqrt(2))) + h * phi
        s2 = (2 - hh) * phi
        s3 = (hh - 4) * h * phi if order >= 3 else None
        s4 = (-hh * hh + 7 * hh - 4) * phi if order >= 4 else None
        s5 = (hh * hh - 11 * hh + 18) * h * phi if order >= 5 else None
    elif kind == "Sin":
        s, s1 = torch.sin(h), torch.cos(h)
        s2, s3, s4, s5 = -s, -s1, s, s1
    else:  # Identity
        zero = torch.zeros_like(h)
        s, s1, s2, s3, s4, s5 = h, torch.ones_like(h), zero, zero, zero, zero
    return (s, s1, s2, s3, s4, s5)[:order + 1]


def _taylor_knows(layer: torch.nn.Module) -> bool:
    """An activation layer the Taylor route propagates: TAYLOR_ACTIVATIONS of torch.nn (GELU
    exact, not its tanh approximation), or pinn.Sin."""
    if isinstance(layer, Sin):
        return True
    if type(layer).__name__ not in TAYLOR_ACTIVATIONS or \
            not type(layer).__module__.startswith("torch.nn"):
        return False
    return getattr(layer, "approximate", "none") == "none"


TAYLOR_ACTIVATIONS = ("Tanh", "Sigmoid", "SiLU", "Softplus", "GELU", "Identity")


class Sin(torch.nn.Module):
    """sin as a layer (torch.nn has none): after a Linear layer, trainable Fourier features
    sin(Wp + b) — a cosine is a phase of π/2 in b.  The Taylor route knows it."""

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return torch.sin(h)


class PeriodicInput(torch.nn.Module):
    """An input map that makes the model periodic in some coordinates, exactly, with every
    derivative: each periodic coordinate x of period L becomes cos(kωx), k = 1 … harmonics, then
    sin(kωx), ω = 2π/L; the others pass through, in the problem's order.  A PDE on a periodic
    domain then needs no boundary condition (a condition is the residual at one point and cannot
    pair u(x) with u(x + L)); more harmonics let the first layer make steep fronts (Fourier
    features).  ``features`` is the first Linear layer's ``in_features``.  The Taylor route
    takes it (a parameter-free input map).

    ``PeriodicInput("tx", {"x": 2.0})``: (t, x) → (t, cos πx, sin πx)."""

    def __init__(self, coordinates: str, periods: Mapping[str, float],
                 harmonics: int = 1) -> None:
        super().__init__()
        if not isinstance(coordinates, str) or not coordinates:
            raise ValueError(f"PeriodicInput(coordinates={coordinates!r}): expected the "
                             "problem's coordinates, a string such as \"tx\"")
        unknown = sorted(set(periods) - set(coordinates))
        if not periods or unknown:
            raise ValueError(f"PeriodicInput(periods={dict(periods)!r}): expected periods of "
                             f"some of the coordinates {list(coordinates)}")
        for name, period in periods.items():
            if not isinstance(period, (int, float)) or not math.isfinite(period) or period <= 0:
                raise ValueError(f"PeriodicInput: the period of {name!r} is {period!r}; "
                                 "expected a positive number")
        if not isinstance(harmonics, int) or harmonics < 1:
            raise ValueError(f"PeriodicInput(harmonics={harmonics!r}): expected a positive "
                             "integer")
        self.coordinates, self.harmonics = coordinates, harmonics
        self.periods = {c: float(periods[c]) for c in coordinates if c in periods}
        self.features = len(coordinates) + (2 * harmonics - 1) * len(self.periods)

    def forward(self, p: torch.Tensor) -> torch.Tensor:
        if p.dim() != 2 or p.shape[1] != len(self.coordinates):
            raise ValueError(f"PeriodicInput: points of shape {tuple(p.shape)}; expected "
                             f"(points, {len(self.coordinates)}) in the order "
                             f"{self.coordinates!r}")
        k = torch.arange(1, self.harmonics + 1, dtype=p.dtype, device=p.device)
        parts = []
        for i, name in enumerate(self.coordinates):
            if name not in self.periods:
                parts.append(p[:, i:i + 1])
                continue
            angle = (2 * math.pi / self.periods[name]) * p[:, i:i + 1] * k
            parts += [torch.cos(angle), torch.sin(angle)]
        return torch.cat(parts, dim=1)

    def taylor_components(self, p: torch.Tensor, first: Sequence[int],
                          second: Sequence[tuple[int, int]],
                          third: Sequence[int | tuple[int, int, int]],
                          fourth: Sequence[int | tuple[int, ...]] = ()
                          ) -> tuple[torch.Tensor, ...]:
        """The features at the points p and their derivatives in closed form (TaylorMLP's
        input map): along the axes `first` (P × A × w), the pairs `second` (P × S × w) and the
        triples `third` (P × T × w; an axis alone: its pure third derivative) and the
        quadruples `fourth` (P × F × w; likewise).  A feature depends on one coordinate, so a mixed
        derivative is 0; the m-th derivative of cos(kωx) is (kω)ᵐ cos(kωx + mπ/2),
        of sin(kωx) (kω)ᵐ sin(kωx + mπ/2) — for odd m ± its partner feature, for even m ± the
        feature itself.  Six operators where nested forward mode through ``forward`` issued
        hundreds (on a GPU, each a launch)."""
        z = self(p)
        partner, c1, k1, c2, c3, c4 = self._taylor_tables(
            p.dtype, p.device, tuple(first), tuple(second), tuple(third), tuple(fourth))
        swapped = z[:, partner]
        return (z, swapped.unsqueeze(1) * c1 + k1, z.unsqueeze(1) * c2,
                swapped.unsqueeze(1) * c3, z.unsqueeze(1) * c4)

    def _taylor_tables(self, dtype: torch.dtype, device: torch.device, first: tuple,
                       second: tuple, third: tuple,
                       fourth: tuple = ()) -> tuple[torch.Tensor, ...]:
        """taylor_components' constants, made once per dtype, device and derivatives: each
        feature's partner column (cos kωx ↔ sin kωx; a coordinate passed through is its own),
        and per derivative the factor of the partner (odd orders) or of the feature (even),
        with the constant 1 of a passed-through coordinate's first derivative."""
        key = (dtype, str(device), first, second, third, fourth)
        tables = getattr(self, "_tables", {})
        if key in tables:
            return tables[key]
        partner, owner, rate, kind = [], [], [], []  # kind: 0 passed through, 1 cos, 2 sin
        for i, name in enumerate(self.coordinates):
            base = len(partner)
            if name not in self.periods:
                partner.append(base), owner.append(i), rate.append(1.0), kind.append(0)
                continue
            h = self.harmonics
            for k in range(1, h + 1):
                partner.append(base + h + k - 1), owner.append(i)
                rate.append(2 * math.pi / self.periods[name] * k), kind.append(1)
            for k in range(1, h + 1):
                partner.append(base + k - 1), owner.append(i)
                rate.append(2 * math.pi / self.periods[name] * k), kind.append(2)
        # The m-th derivative's sign: cos → −sin, −cos, sin, cos (m = 1 … 4); sin → cos, −sin,
        # −cos, sin.
        signs = {1: (-1.0, 1.0), 2: (-1.0, -1.0), 3: (1.0, -1.0), 4: (1.0, 1.0)}

        def factors(axis: int, m: int) -> list[float]:
            return [0.0 if o != axis or c == 0 else signs[m][c - 1] * r ** m
                    for o, r, c in zip(owner, rate, kind)]

        def table(rows: list[list[float]]) -> torch.Tensor:
            return torch.tensor(rows, dtype=dtype, device=device).reshape(len(rows), len(owner))

        made = (torch.tensor(partner, device=device),
                table([factors(a, 1) for a in first]),
                table([[1.0 if o == a and c == 0 else 0.0 for o, c in zip(owner, kind)]
                       for a in first]),
                table([factors(a, 2) if a == b else [0.0] * len(owner) for a, b in second]),
                table([factors(t, 3) if isinstance(t, int) else
                       factors(t[0], 3) if t[0] == t[1] == t[2] else [0.0] * len(owner)
                       for t in third]),
                table([factors(f, 4) if isinstance(f, int) else
                       factors(f[0], 4) if len(set(f)) == 1 else [0.0] * len(owner)
                       for f in fourth]))
        self._tables = {**tables, key: made}
        return made

    def extra_repr(self) -> str:
        return f"{self.coordinates!r}, periods={self.periods}, harmonics={self.harmonics}"


class HardConstrained(torch.nn.Module):
    """u(p) = offset(p) + factor(p)·network(p): initial or boundary values imposed exactly by
    the form of the model (Lagaris, Likas & Fotiadis 1998; e.g. u = u₀(x) + t·N(t, x) makes
    u(0, x) = u₀(x) whatever N is), so that they need no condition of their own.

    ``offset`` and ``factor`` are functions of the points (P × d → P × q, or P × 1 for every
    output; None: 0 and 1) without parameters; ``network`` is the trained module.  Every
    Jacobian route of lmtrain.torch.pinn takes it, and where ``network`` is a plain MLP (an
    ``nn.Sequential`` the Taylor route knows) the Taylor route does: the network's derivatives
    are propagated as for a plain MLP and combined with the offset's and the factor's by the
    product rule (their derivatives taken once per set of points, by nested forward mode)."""

    def __init__(self, network: torch.nn.Module,
                 offset: Callable[[torch.Tensor], torch.Tensor] | None = None,
                 factor: Callable[[torch.Tensor], torch.Tensor] | None = None) -> None:
        super().__init__()
        for name, fn in (("offset", offset), ("factor", factor)):
            if fn is not None and not callable(fn):
                raise ValueError(f"HardConstrained({name}={fn!r}): expected a function of the "
                                 "points or None")
            if isinstance(fn, torch.nn.Module) and list(fn.parameters()):
                raise ValueError(f"HardConstrained({name}=…) has parameters: the offset and the "
                                 "factor are fixed functions of the points; put what is "
                                 "trained into the network")
        self.network = network
        self.offset, self.factor = offset, factor
        # Their derivatives at recent sets of points (TaylorMLP): they do not depend on θ, and a
        # step evaluates the same points several times (J, the trial, the geodesic correction).
        self.taylor_cache: dict[tuple, list] = {}

    def forward(self, points: torch.Tensor) -> torch.Tensor:
        u = self.network(points)
        if self.factor is not None:
            u = _column(self.factor(points)) * u
        if self.offset is not None:
            u = _column(self.offset(points)) + u
        return u


class WithCoefficients(torch.nn.Module):
    """A network and the unknown coefficients of an inverse problem: u(p) = network(p), and
    each keyword a scalar (or tensor) parameter that only the residuals read, as
    ``model.<name>`` — ν in Burgers', k in u″ + k²u = 0.  LM trains them with the network.

    Every Jacobian route of lmtrain.torch.pinn takes it; where ``network`` is a model the
    Taylor route knows (a plain MLP, or a HardConstrained one), the Taylor route does: the
    network's columns of J by its propagation, a coefficient's column as ∂F/∂coefficient at
    each point (vmap of jacrev of the residual, beside its ∂F/∂(u, uᵃ, …)).  A module of one's
    own with the same two parts takes the jacrev route, 2.5–3× the Taylor route's cost of J on
    Burgers with ν unknown (bench/pinn_jacobian.py)."""

    def __init__(self, network: torch.nn.Module, /, **coefficients: Any) -> None:
        super().__init__()
        if not isinstance(network, torch.nn.Module):
            raise ValueError(f"WithCoefficients(network={network!r}): expected the network, a "
                             "torch.nn.Module")
        if not coefficients:
            raise ValueError("WithCoefficients(network): no coefficient given; name each with "
                             "its starting value, e.g. WithCoefficients(network, nu=0.05)")
        self.network = network
        first = next(network.parameters(), None)
        dtype = first.dtype if first is not None else torch.get_default_dtype()
        device = first.device if first is not None else None
        for name, value in coefficients.items():
            if not name.isidentifier():
                raise ValueError(f"WithCoefficients: the coefficient name {name!r} is not a "
                                 "Python identifier; the residuals read it as model.<name>")
            if hasattr(self, name):
                raise ValueError(f"WithCoefficients: the coefficient {name!r} would hide the "
                                 "module's attribute of that name; choose another name")
            try:
                tensor = torch.as_tensor(value, dtype=dtype, device=device).detach().clone()
            except (TypeError, ValueError, RuntimeError) as error:
                raise ValueError(f"WithCoefficients({name}={value!r}): expected a number or a "
                                 f"tensor: {error}") from None
            if not bool(torch.isfinite(tensor).all()):
                raise ValueError(f"WithCoefficients({name}={value!r}): the starting value must "
                                 "be finite")
            setattr(self, name, torch.nn.Parameter(tensor))

    @property
    def coefficient_names(self) -> list[str]:
        """The coefficients' names, in the order of ``named_parameters()``."""
        return [name for name, _ in self.named_parameters(recurse=False)]

    def forward(self, points: torch.Tensor) -> torch.Tensor:
        return self.network(points)


def _column(values: Any) -> torch.Tensor:
    """A function's values at P points as P × q (a P-vector as P × 1)."""
    values = torch.as_tensor(values)
    return values.unsqueeze(-1) if values.ndim == 1 else values


Place = Union[slice, list]  # places along a dimension: consecutive ones as a slice


def _place(indices: list[int]) -> Place:
    """`indices` as a slice where they are consecutive and ascending, else the list."""
    if not indices:
        return slice(0, 0)
    start = indices[0]
    return slice(start, start + len(indices)) if indices == list(
        range(start, start + len(indices))) else indices


def _add_at(target: torch.Tensor, place: Place, values: torch.Tensor) -> torch.Tensor:
    """target with values added at `place` along dimension 1 (index_add, repeated places
    summed); in place where `place` is a slice — target is the caller's own fresh tensor."""
    if isinstance(place, slice):
        target[:, place].add_(values)
        return target
    return target.index_add(1, torch.tensor(place, dtype=torch.long, device=target.device), values)


# The ways a quadruple's positions (0, 1, 2, 3) split, for u_abcd's propagation: a pair and
# the two left ((0, 1), (2, 3)); a pairing into two pairs; one and the three left.
_PAIRS_AND_RESTS = [(pair, tuple(i for i in range(4) if i not in pair))
                    for pair in itertools.combinations(range(4), 2)]
_PAIRINGS = [((0, 1), (2, 3)), ((0, 2), (1, 3)), ((0, 3), (1, 2))]
_ONES_AND_RESTS = [(i, tuple(j for j in range(4) if j != i)) for i in range(4)]
# Every part of the positions and the rest: the product rule's sixteen terms.
_PARTS_AND_RESTS = [(part, tuple(i for i in range(4) if i not in part))
                    for order in range(5) for part in itertools.combinations(range(4), order)]

# TaylorMLP's derivatives of a parameter-free input map, per map: {key: [(points, parts)]}.
_INPUT_MAP_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_CACHING = [True]  # off while points are seen once (a residual-adaptive draw's candidates)


@contextlib.contextmanager
def uncached() -> Iterator[None]:
    """Evaluations of points seen once: nothing to keep (and on a GPU each lookup of a cache
    compares the points, a read of the device)."""
    before, _CACHING[0] = _CACHING[0], False
    try:
        yield
    finally:
        _CACHING[0] = before


def _cached(cache: dict[tuple, list], key: tuple, points: torch.Tensor,
            compute: Callable[[], Any]) -> Any:
    """compute()'s value for these points from `cache` when they were seen.  Keyed by the
    points' values, not their storage: a fresh draw may reuse the memory of the last one."""
    if not _CACHING[0]:
        return compute()
    for seen, parts in reversed(cache.get(key, [])):  # the latest first: one compare, mostly
        if torch.equal(seen, points):
            return parts
    parts = compute()
    entries = cache.setdefault(key, [])
    entries.append((points.detach().clone(), parts))
    del entries[:-8]  # a step's sets of points (chunks, conditions), not every draw's
    return parts


def _derivative_sets(first: Sequence[int], second: Sequence[tuple[int, int]],
                     third: Sequence[int | tuple[int, ...]],
                     fourth: Sequence[int | tuple[int, ...]]) -> tuple[list, list, list, list]:
    """The derivatives a Taylor propagation carries, each order's sorted: the fourth ones as
    quadruples of axes and the third as triples (an axis a alone: the pure u_aaaa, u_aaa), and
    what each needs below it — u_abcd its four third derivatives, u_abc its u_bc, u_ac, u_ab,
    a pair its two axes."""
    fourths = sorted({(f,) * 4 if isinstance(f, int) else tuple(sorted(f)) for f in fourth})
    thirds = sorted({(t,) * 3 if isinstance(t, int) else tuple(sorted(t)) for t in third} |
                    {tuple(f[i] for i in kept) for f in fourths
                     for kept in itertools.combinations(range(4), 3)})
    seconds = sorted({tuple(sorted(p)) for p in second} |
                     {pair for a, b, c in thirds for pair in ((b, c), (a, c), (a, b))})
    firsts = sorted(set(first) | {a for pair in seconds for a in pair})
    return firsts, seconds, thirds, fourths


class TaylorMLP:
    """u, its first derivatives along `first`, second derivatives along the pairs `second` and
    third derivatives along the triples `third` (u_xxx, u_txx; an axis alone means its pure
    third derivative) and fourth ones along the quadruples `fourth` (u_xxxx, u_xxyy; likewise;
    pure: z⁗ = σ⁗ḣ⁴ + 6σ‴ḣ²ḧ + 3σ″ḧ² + 4σ″ḣh⃛ + σ′h⁗, mixed: _mixed_fourth) of the inputs, with
    their exact parameter Jacobians, for an ``nn.Sequential`` of ``Linear`` layers and smooth
    activations (TAYLOR_ACTIVATIONS, Sin), optionally after a parameter-free input map (a
    periodic embedding, say).

    Forward-mode Taylor propagation (DESIGN.md §10), batched over the points: a Linear layer
    maps value and derivatives alike, h = Wz + b, ḣᵃ = Wżᵃ, ḧᵃᵇ = Wz̈ᵃᵇ, h⃛ᵃᵇᶜ = Wz⃛ᵃᵇᶜ; an
    activation gives σ(h), σ′(h)ḣᵃ, σ″(h)ḣᵃḣᵇ + σ′(h)ḧᵃᵇ and σ‴(h)ḣᵃḣᵇḣᶜ + σ″(h)(ḣᵃḧᵇᶜ +
    ḣᵇḧᵃᶜ + ḣᶜḧᵃᵇ) + σ′(h)h⃛ᵃᵇᶜ (pure: σ‴ḣ³ + 3σ″ḣḧ + σ′h⃛, the form used when every triple
    is pure).  The parameter Jacobian of a pointwise combination F(u, uᵃ, uᵃᵇ, uᵃᵇᶜ) is one
    reverse sweep through those formulas seeded with ∂F/∂(u, uᵃ, uᵃᵇ, uᵃᵇᶜ) (the chain rule
    Σₖ ∂F/∂Dₖu · ∂Dₖu/∂θ); a Linear layer's block of J is, per point, the sum over the
    C = 1 + |first| + |second| + |third| + |fourth| components of (adjoint of h) ⊗ (input): one
    batched matrix product writes it.  About C times a forward and backward pass per point, no
    nested transforms — the fast route for PINNs of plain MLPs.
    """

    def __init__(self, model: torch.nn.Module, dimensions: int, first: Sequence[int],
                 second: Sequence[tuple[int, int]],
                 third: Sequence[int | tuple[int, int, int]] = (),
                 fourth: Sequence[int | tuple[int, int, int, int]] = ()):
        if not self.supports(model):
            raise ValueError("the Taylor route needs an nn.Sequential of Linear layers and "
                             f"{', '.join(TAYLOR_ACTIVATIONS)} (after an optional "
                             "parameter-free input map), or a HardConstrained one, alone or "
                             "in WithCoefficients")
        # Coefficients beside the network: their columns come from the residual alone
        # (pinn.Problem's seeds), the network's from this propagation.
        self.wrapper = model if isinstance(model, WithCoefficients) else None
        self.coefficients = self.wrapper.coefficient_names if self.wrapper is not None else []
        self.prefix = "network." if self.wrapper is not None else ""
        model = model.network if self.wrapper is not None else model
        # u = offset + factor·network: the network's propagation, then the product rule.
        self.outer = model if isinstance(model, HardConstrained) else None
        self.prefix += "network." if self.outer is not None else ""
        model = model.network if self.outer is not None else model
        self.model, self.d = model, dimensions
        self.first, self.second, self.third, self.fourth = _derivative_sets(first, second, third,
                                                                            fourth)
        self.pure_third = all(a == b == c for a, b, c in self.third)
        self.pure_fourth = all(len(set(f)) == 1 for f in self.fourth)
        # The mixed ones' places, made once (each layer of each pass reads them).
        self._third_places = self._third_indices()
        self._quadruple_places = self._quadruple_indices()
        modules = list(model)
        self.input_map = None if isinstance(modules[0], torch.nn.Linear) else modules[0]
        start = 0 if self.input_map is None else 1
        self.layers = [(str(i), m) for i, m in enumerate(modules) if i >= start]

    @staticmethod
    def supports(model: torch.nn.Module) -> bool:
        if isinstance(model, WithCoefficients):
            return TaylorMLP.supports(model.network)
        if isinstance(model, HardConstrained):
            return TaylorMLP.supports(model.network)
        if not isinstance(model, torch.nn.Sequential) or len(model) == 0:
            return False
        modules = list(model)
        if not isinstance(modules[0], torch.nn.Linear):
            if list(modules[0].parameters()):  # constants (buffers) are part of the map
                return False
            modules = modules[1:]
        if not (modules and isinstance(modules[0], torch.nn.Linear) and all(
                isinstance(m, torch.nn.Linear) or _taylor_knows(m) for m in modules)):
            return False
        # Every parameter one of its Linear layers': a parameter registered beside them (an
        # inverse problem's coefficient, read by a residual) has no column on this route.
        layers = sum(p.numel() for m in modules for p in m.parameters())
        return layers == sum(p.numel() for p in model.parameters())

    def _inputs(self, points: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """z₀ (P × w), ż₀ (P × A × w), z̈₀ (P × S × w), z⃛₀ (P × T × w) of the points, through
        the input map."""
        p = points.shape[0]
        if self.input_map is None:
            basis = torch.eye(self.d, dtype=points.dtype, device=points.device)
            dz = basis[self.first].unsqueeze(0).expand(p, -1, -1)
            ddz = points.new_zeros(p, len(self.second), self.d)
            dddz = points.new_zeros(p, len(self.third), self.d)
            ddddz = points.new_zeros(p, len(self.fourth), self.d)
            return points, dz, ddz, dddz, ddddz
        if points.requires_grad:  # derivatives with respect to the points asked for: no cache
            return self._derivatives_of(self.input_map, points)
        # The map has no parameters: its derivatives at a set of points are the same for every
        # evaluation of a step (the Jacobian, the trials, the geodesic correction) and cost
        # most of the operators of a forward pass (nested forward mode: 1 121 of 1 382 aten
        # operators for Burgers' five harmonics), so they are kept per set of points, by value.
        # A map with its derivatives in closed form (PeriodicInput) costs a few operators: on a
        # device, fewer than the cache's lookup, which reads the device (torch.equal); on the
        # CPU its sines and cosines still cost more than the lookup.
        closed_form = getattr(self.input_map, "taylor_components", None)
        if callable(closed_form):
            def compute() -> tuple[torch.Tensor, ...]:
                return closed_form(points, self.first, self.second, self.third, self.fourth)
            if points.device.type != "cpu":
                return compute()
        else:
            def compute() -> tuple[torch.Tensor, ...]:
                return self._derivatives_of(self.input_map, points)
        return _cached(_INPUT_MAP_CACHE.setdefault(self.input_map, {}), self._key(points),
                       points, compute)

    def _key(self, points: torch.Tensor) -> tuple:
        return (tuple(points.shape), points.dtype, str(points.device), tuple(self.first),
                tuple(self.second), tuple(self.third), tuple(self.fourth))

    def _derivatives_of(self, f: Callable[[torch.Tensor], torch.Tensor],
                        points: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """A parameter-free function of the points and its derivatives along `first`,
        `second`, `third` and `fourth` (P × w, P × A × w, P × S × w, P × T × w, P × F × w), by
        nested forward mode."""
        p = points.shape[0]
        basis = torch.eye(self.d, dtype=points.dtype, device=points.device)

        def along(g: Callable, a: int) -> Callable:
            return lambda q: jvp(g, (q,), (basis[a].expand(p, -1),))[1]

        z = f(points)
        dz = [along(f, a)(points) for a in self.first]
        ddz = [along(along(f, a), b)(points) for a, b in self.second]
        dddz = [along(along(along(f, a), b), c)(points) for a, b, c in self.third]
        ddddz = [along(along(along(along(f, a), b), c), d)(points)
                 for a, b, c, d in self.fourth]
        stack = (lambda xs: torch.stack(xs, 1) if xs else z.new_zeros(p, 0, z.shape[1]))
        return z, stack(dz), stack(ddz), stack(dddz), stack(ddddz)

    def _constraint(self, points: torch.Tensor) -> tuple[Any, Any]:
        """The offset's and the factor's values and derivatives at `points` (None where the
        HardConstrained model has none), from its cache when these points were seen."""
        outer = self.outer

        def compute() -> tuple[Any, Any]:
            with torch.no_grad():
                return tuple(None if fn is None else self._derivatives_of(
                    lambda q, fn=fn: _column(fn(q)).to(points.dtype), points)
                    for fn in (outer.offset, outer.factor))

        return _cached(outer.taylor_cache, self._key(points), points, compute)

    def _combine(self, n: tuple[torch.Tensor, ...], offset: Any,
                 factor: Any) -> tuple[torch.Tensor, ...]:
        """u = offset + factor·n and its derivatives from n's (the product rule: (bn)ᵃ =
        bᵃn + bnᵃ, (bn)ᵃᵇ = bᵃᵇn + bᵃnᵇ + bᵇnᵃ + bnᵃᵇ, (bn)ᵃᵇᶜ = bᵃᵇᶜn + bᵃᵇnᶜ + bᵃᶜnᵇ +
        bᵇᶜnᵃ + bᵃnᵇᶜ + bᵇnᵃᶜ + bᶜnᵃᵇ + bnᵃᵇᶜ; pure, bᵃᵃᵃn + 3bᵃᵃnᵃ + 3bᵃnᵃᵃ + bnᵃᵃᵃ;
        (bn)ᵃᵃᵃᵃ = bᵃᵃᵃᵃn + 4bᵃᵃᵃnᵃ + 6bᵃᵃnᵃᵃ + 4bᵃnᵃᵃᵃ + bnᵃᵇᶜᵈ)."""
        v, dv, ddv, dddv, ddddv = n
        if factor is not None:
            ia, ib, ta, tp = self._indices()
            b, db, ddb, dddb, ddddb = factor
            value = v.unsqueeze(1)
            if self.pure_third:
                third = (dddb * value + 3 * ddb[:, tp] * dv[:, ta] + 3 * db[:, ta] * ddv[:, tp] +
                         b.unsqueeze(1) * dddv)
            else:
                t1, t2, t3, p1, p2, p3 = self._third_places
                third = (dddb * value + ddb[:, p3] * dv[:, t3] + ddb[:, p2] * dv[:, t2] +
                         ddb[:, p1] * dv[:, t1] + db[:, t1] * ddv[:, p1] +
                         db[:, t2] * ddv[:, p2] + db[:, t3] * ddv[:, p3] + b.unsqueeze(1) * dddv)
            if self.pure_fourth:
                f1, f2, f3 = self._fourth_indices()
                fourth = (ddddb * value + 4 * dddb[:, f3] * dv[:, f1] +
                          6 * ddb[:, f2] * ddv[:, f2] + 4 * db[:, f1] * dddv[:, f3] +
                          b.unsqueeze(1) * ddddv)
            else:  # (bn)ᵃᵇᶜᵈ = Σ over the parts A of {a, b, c, d} of b^A·n^(the rest)
                bs = self._by_positions(factor)
                ns = self._by_positions((v, dv, ddv, dddv, ddddv))
                fourth = sum(bs[part] * ns[rest] for part, rest in _PARTS_AND_RESTS)
            v, dv, ddv, dddv, ddddv = (
                b * v, db * value + b.unsqueeze(1) * dv,
                ddb * value + db[:, ia] * dv[:, ib] + db[:, ib] * dv[:, ia] + b.unsqueeze(1) * ddv,
                third, fourth)
        if offset is not None:
            v, dv, ddv, dddv, ddddv = (v + offset[0], dv + offset[1], ddv + offset[2],
                                       dddv + offset[3], ddddv + offset[4])
        return v, dv, ddv, dddv, ddddv

    def _seeds_through_factor(self, factor: Any, seeds: tuple[torch.Tensor, ...]
                              ) -> tuple[torch.Tensor, ...]:
        """∂F/∂(n, nᵃ, nᵃᵇ, nᵃᵇᶜ, nᵃᵇᶜᵈ) from ∂F/∂(u, uᵃ, uᵃᵇ, uᵃᵇᶜ, uᵃᵇᶜᵈ): the transpose of
        _combine's linear map from n's components to u's."""
        su, sdu, sddu, sdddu, sddddu = seeds
        if factor is None:
            return seeds
        ia, ib, ta, tp = self._indices()
        b, db, ddb, dddb, ddddb = factor
        sn = (b * su + (db * sdu).sum(1) + (ddb * sddu).sum(1) + (dddb * sdddu).sum(1) +
              (ddddb * sddddu).sum(1))
        sdn = _add_at(b.unsqueeze(1) * sdu, ib, db[:, ia] * sddu)
        sdn = _add_at(sdn, ia, db[:, ib] * sddu)
        if self.pure_third:
            sdn = _add_at(sdn, ta, 3 * ddb[:, tp] * sdddu)
            sddn = _add_at(b.unsqueeze(1) * sddu, tp, 3 * db[:, ta] * sdddu)
        else:
            t1, t2, t3, p1, p2, p3 = self._third_places
            sdn = _add_at(_add_at(_add_at(sdn, t3, ddb[:, p3] * sdddu), t2, ddb[:, p2] * sdddu),
                          t1, ddb[:, p1] * sdddu)
            sddn = _add_at(_add_at(_add_at(b.unsqueeze(1) * sddu, p1, db[:, t1] * sdddu), p2,
                                   db[:, t2] * sdddu), p3, db[:, t3] * sdddu)
        sdddn = b.unsqueeze(1) * sdddu
        if self.fourth and not self.pure_fourth:  # the transpose of Σ b^A·n^(the rest)
            bs, places = self._by_positions(factor), self._quadruple_places
            for part, rest in _PARTS_AND_RESTS:
                if len(rest) in (0, 4):  # b^abcd·n: in sn's sum above; b·n^abcd: returned below
                    continue
                seed = bs[part] * sddddu
                if len(rest) == 1:
                    sdn = _add_at(sdn, places[rest], seed)
                elif len(rest) == 2:
                    sddn = _add_at(sddn, places[rest], seed)
                else:
                    sdddn = _add_at(sdddn, places[rest], seed)
        elif self.fourth:
            f1, f2, f3 = self._fourth_indices()
            sdn = _add_at(sdn, f1, 4 * dddb[:, f3] * sddddu)
            sddn = _add_at(sddn, f2, 6 * ddb[:, f2] * sddddu)
            sdddn = _add_at(sdddn, f3, 4 * db[:, f1] * sddddu)
        return sn, sdn, sddn, sdddn, b.unsqueeze(1) * sddddu

    def _mixed_fourth_transpose(self, s, dh, ddh, dddh, ddddh, zbar4, dhbar, ddhbar, dddzbar,
                                hbar) -> tuple[torch.Tensor, ...]:
        """_mixed_fourth's transpose: its seeds zbar4 (P × F × w) added to those of h (hbar),
        ḣ (dhbar), ḧ (ddhbar) and h⃛ (dddzbar, already σ′ times the third order's)."""
        d = self._pieces(dh, ddh, dddh)
        places = self._quadruple_places
        s2, s3, s4, s5 = (x.unsqueeze(1) for x in s[2:6])
        ones = d[(0,)] * d[(1,)] * d[(2,)] * d[(3,)]
        term3 = sum(d[pair] * d[rest[:1]] * d[rest[1:]] for pair, rest in _PAIRS_AND_RESTS)
        term2 = (sum(d[pair] * d[rest] for pair, rest in _PAIRINGS) +
                 sum(d[(i,)] * d[rest] for i, rest in _ONES_AND_RESTS))
        hbar = hbar + (zbar4 * (s5 * ones + s4 * term3 + s3 * term2 + s2 * ddddh)).sum(1)
        for i in range(4):  # ∂/∂ḣ_i: the products it is a factor of
            others = [j for j in range(4) if j != i]
            product = d[(others[0],)] * d[(others[1],)] * d[(others[2],)]
            with_pair = sum(d[pair] * d[tuple(j for j in rest if j != i)]
                            for pair, rest in _PAIRS_AND_RESTS if i in rest)
            dhbar = _add_at(dhbar, places[(i,)], zbar4 * (
                s4 * product + s3 * with_pair + s2 * d[tuple(others)]))
        for pair, rest in _PAIRS_AND_RESTS:  # ∂/∂ḧ_pair
            ddhbar = _add_at(ddhbar, places[pair], zbar4 * (
                s3 * d[rest[:1]] * d[rest[1:]] + s2 * d[rest]))
        for i, rest in _ONES_AND_RESTS:  # ∂/∂h⃛_rest
            dddzbar = _add_at(dddzbar, places[rest], zbar4 * s2 * d[(i,)])
        return dhbar, ddhbar, dddzbar, hbar

    def _indices(self) -> tuple[Place, Place, Place, Place]:
        """For the pairs (a, b): a's and b's places among the first derivatives; for pure third
        derivatives along a: a's place among the first and (a, a)'s among the pairs — each a
        slice where the places are consecutive (a view; a list gathers, and on a GPU the list
        is copied to the device first).  (Where a third derivative is mixed, the last two are
        unused: _third_indices.)"""
        pure = self.third if self.pure_third else []
        return (_place([self.first.index(a) for a, _ in self.second]),
                _place([self.first.index(b) for _, b in self.second]),
                _place([self.first.index(a) for a, _, _ in pure]),
                _place([self.second.index((a, a)) for a, _, _ in pure]))

    def _fourth_indices(self) -> tuple[Place, Place, Place]:
        """For the pure fourth derivatives along a: a's place among the first derivatives,
        (a, a)'s among the pairs and (a, a, a)'s among the triples (empty where one is
        mixed: _quadruple_indices)."""
        pure = [f[0] for f in self.fourth] if self.pure_fourth else []
        return (_place([self.first.index(a) for a in pure]),
                _place([self.second.index((a, a)) for a in pure]),
                _place([self.third.index((a, a, a)) for a in pure]))

    def _quadruple_indices(self) -> dict[tuple[int, ...], Place]:
        """For the quadruples (a, b, c, d), by the positions i < j < … of a sub-multiset
        within them: its places among the derivatives of its order — (i,) among the first,
        (i, j) among the pairs, (i, j, k) among the triples."""
        where = {1: lambda axes: self.first.index(axes[0]), 2: self.second.index,
                 3: self.third.index}
        return {kept: _place([where[len(kept)](tuple(f[i] for i in kept))
                              for f in self.fourth])
                for order in (1, 2, 3) for kept in itertools.combinations(range(4), order)}

    def _third_indices(self) -> tuple[Place, ...]:
        """For the triples (a, b, c): a's, b's and c's places among the first derivatives, and
        (b, c)'s, (a, c)'s and (a, b)'s among the pairs."""
        first, pairs = self.first.index, self.second.index
        return (_place([first(a) for a, _, _ in self.third]),
                _place([first(b) for _, b, _ in self.third]),
                _place([first(c) for _, _, c in self.third]),
                _place([pairs((b, c)) for _, b, c in self.third]),
                _place([pairs((a, c)) for a, _, c in self.third]),
                _place([pairs((a, b)) for a, b, _ in self.third]))

    def forward(self, points: torch.Tensor, params: Mapping[str, torch.Tensor] | None = None,
                keep: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                             torch.Tensor, torch.Tensor, list]:
        """u (P × q), uᵃ (P × A × q), uᵃᵇ (P × S × q), uᵃᵇᶜ (P × T × q) and uᵃᵇᶜᵈ (P × F × q);
        with `keep`, what the reverse sweep needs.  ``params`` by name (the module's own when
        None, so autograd sees them)."""
        # The C = 1 + A + S + T + F components stacked, P × C × width: a Linear layer maps them
        # all with one product (on a GPU a step's cost is the operators issued, not their size).
        stacked = torch.cat([c.unsqueeze(1) if i == 0 else c
                             for i, c in enumerate(self._inputs(points))], 1)
        tape = []
        ia, ib, ta, tp = self._indices()
        a, s_, t_ = len(self.first), len(self.second), len(self.third)
        f1, f2, f3 = self._fourth_indices()
        # σ's derivatives up to the highest the forward pass (and, with `keep`, its reverse
        # sweep, one more) needs.
        order = (4 if self.fourth else 3 if self.third else 2) + (1 if keep else 0)
        for name, layer in self.layers:
            if isinstance(layer, torch.nn.Linear):
                w = layer.weight if params is None else params[f"{self.prefix}{name}.weight"]
                b = layer.bias if params is None else params.get(f"{self.prefix}{name}.bias")
                if keep:
                    tape.append(("linear", name, w, b is not None, stacked))
                stacked = stacked @ w.T
                if b is not None:
                    stacked.select(1, 0).add_(b)
                continue
            z, dh, ddh, dddh, ddddh = self._split(stacked)
            s = _activation_derivatives(layer, z, order)
            parts = [s[0].unsqueeze(1), s[1].unsqueeze(1) * dh]
            if self.second:
                parts.append(s[2].unsqueeze(1) * dh[:, ia] * dh[:, ib] + s[1].unsqueeze(1) * ddh)
            if self.third and self.pure_third:
                da = dh[:, ta]
                parts.append(s[3].unsqueeze(1) * da ** 3 + 3 * s[2].unsqueeze(1) * da *
                             ddh[:, tp] + s[1].unsqueeze(1) * dddh)
            elif self.third:
                # z⃛ᵃᵇᶜ = σ‴ḣᵃḣᵇḣᶜ + σ″(ḣᵃḧᵇᶜ + ḣᵇḧᵃᶜ + ḣᶜḧᵃᵇ) + σ′h⃛ᵃᵇᶜ
                t1, t2, t3, p1, p2, p3 = self._third_places
                da, db, dc = dh[:, t1], dh[:, t2], dh[:, t3]
                parts.append(s[3].unsqueeze(1) * da * db * dc + s[2].unsqueeze(1) * (
                    da * ddh[:, p1] + db * ddh[:, p2] + dc * ddh[:, p3]) +
                    s[1].unsqueeze(1) * dddh)
            if self.fourth and self.pure_fourth:
                # z⁗ = σ⁗ḣ⁴ + 6σ‴ḣ²ḧ + 3σ″ḧ² + 4σ″ḣh⃛ + σ′h⁗ along each axis of `fourth`.
                da, dda, ddda = dh[:, f1], ddh[:, f2], dddh[:, f3]
                s1, s2, s3, s4 = (x.unsqueeze(1) for x in s[1:5])
                parts.append(s4 * da ** 4 + 6 * s3 * da * da * dda + 3 * s2 * dda * dda +
                             4 * s2 * da * ddda + s1 * ddddh)
            elif self.fourth:
                parts.append(self._mixed_fourth(s, dh, ddh, dddh, ddddh))
            if keep:
                tape.append(("activation", s, dh, ddh, dddh, ddddh))
            stacked = torch.cat(parts, 1)
        components = self._split(stacked)
        if self.outer is not None:
            offset, factor = self._constraint(points)
            if keep:
                tape.append(("constraint", factor))
            components = self._combine(components, offset, factor)
        return (*components, tape)

    def _by_positions(self, components: Sequence[torch.Tensor]) -> dict[tuple[int, ...], Any]:
        """A function's value and derivatives (P × q, P × A × q, …, P × F × q) as its parts for
        the quadruples: by positions within them, () the value (P × 1 × q), (0, 1, 2, 3) the
        fourth derivative itself."""
        value, first, second, third, fourth = components
        pieces = self._pieces(first, second, third)
        pieces[()] = value.unsqueeze(1)
        pieces[(0, 1, 2, 3)] = fourth
        return pieces

    def _pieces(self, dh: torch.Tensor, ddh: torch.Tensor,
                dddh: torch.Tensor) -> dict[tuple[int, ...], torch.Tensor]:
        """For the quadruples (a, b, c, d): the lower derivatives of their sub-multisets, by
        positions within them — (i,): ḣ along its axis, (i, j): ḧ, (i, j, k): h⃛ (P × F × w)."""
        below = {1: dh, 2: ddh, 3: dddh}
        return {kept: below[len(kept)][:, place]
                for kept, place in self._quadruple_places.items()}

    def _mixed_fourth(self, s: Sequence[torch.Tensor], dh: torch.Tensor, ddh: torch.Tensor,
                      dddh: torch.Tensor, ddddh: torch.Tensor) -> torch.Tensor:
        """z⁗ᵃᵇᶜᵈ = σ⁗ḣᵃḣᵇḣᶜḣᵈ + σ‴Σ₆ ḧ·ḣḣ + σ″(Σ₃ ḧ·ḧ + Σ₄ ḣ·h⃛) + σ′h⁗ᵃᵇᶜᵈ (the sums over the
        ways of splitting a, b, c, d into those parts)."""
        d = self._pieces(dh, ddh, dddh)
        s1, s2, s3, s4 = (x.unsqueeze(1) for x in s[1:5])
        term3 = sum(d[pair] * d[rest[:1]] * d[rest[1:]] for pair, rest in _PAIRS_AND_RESTS)
        term2 = (sum(d[pair] * d[rest] for pair, rest in _PAIRINGS) +
                 sum(d[(i,)] * d[rest] for i, rest in _ONES_AND_RESTS))
        return s4 * d[(0,)] * d[(1,)] * d[(2,)] * d[(3,)] + s3 * term3 + s2 * term2 + s1 * ddddh

    def _split(self, stacked: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The C stacked components (P × C × width) as value, first, second, third and fourth
        derivatives (views)."""
        a, s_, t_ = len(self.first), len(self.second), len(self.third)
        return (stacked[:, 0], stacked[:, 1:1 + a], stacked[:, 1 + a:1 + a + s_],
                stacked[:, 1 + a + s_:1 + a + s_ + t_], stacked[:, 1 + a + s_ + t_:])

    def jacobian(self, tape: list, seed: torch.Tensor, seed_d: torch.Tensor,
                 seed_dd: torch.Tensor, seed_ddd: torch.Tensor, seed_dddd: torch.Tensor,
                 names: Sequence[str], out: torch.Tensor | None = None,
                 coefficients: Mapping[str, torch.Tensor] | None = None) -> torch.Tensor:
        """Rows Σ_c seed_c·∂(component c of u)/∂θ, P × n, columns in the order of `names`
        (the model's parameter names); seeds shaped like forward's u, uᵃ, uᵃᵇ, uᵃᵇᶜ, uᵃᵇᶜᵈ.
        `out`: a P × n tensor (any row stride) the blocks are written into, instead of a new
        one joined from them (a PINN's J is the largest tensor of its step: one pass over it,
        not two).
        `coefficients`: the columns of a WithCoefficients model's coefficients (P × size each,
        by name), which u does not depend on."""
        ia, ib, ta, tp = self._indices()
        f1, f2, f3 = self._fourth_indices()
        zbar, dzbar, ddzbar, dddzbar, ddddzbar = seed, seed_d, seed_dd, seed_ddd, seed_dddd
        blocks: dict[str, torch.Tensor] = {}
        for entry in reversed(tape):
            if entry[0] == "constraint":
                zbar, dzbar, ddzbar, dddzbar, ddddzbar = self._seeds_through_factor(
                    entry[1], (zbar, dzbar, ddzbar, dddzbar, ddddzbar))
                continue
            if entry[0] == "linear":
                _, name, w, has_bias, inputs = entry  # inputs: P × C × in
                hbar = torch.cat([zbar.unsqueeze(1), dzbar, ddzbar, dddzbar, ddddzbar],
                                 1)  # P × C × out
                blocks[f"{self.prefix}{name}.weight"] = torch.bmm(
                    hbar.transpose(1, 2), inputs).reshape(inputs.shape[0], -1)
                if has_bias:
                    blocks[f"{self.prefix}{name}.bias"] = zbar
                zbar, dzbar, ddzbar, dddzbar, ddddzbar = self._split(hbar @ w)
                continue
            _, s, dh, ddh, dddh, ddddh = entry
            s1, s2, s3 = (x.unsqueeze(1) for x in s[1:4])
            hbar = s[1] * zbar + (s2 * dh * dzbar).sum(1)
            dhbar = s1 * dzbar
            ddhbar = s1 * ddzbar
            if self.second:
                da, db = dh[:, ia], dh[:, ib]
                hbar = hbar + (ddzbar * (s3 * da * db + s2 * ddh)).sum(1)
                weighted = ddzbar * s2
                dhbar = _add_at(_add_at(dhbar, ia, weighted * db), ib, weighted * da)
            if self.third and self.pure_third:
                # z⃛ = σ‴ḣ³ + 3σ″ḣḧ + σ′h⃛ along each axis of `third`.
                s4 = s[4].unsqueeze(1)
                da, dda = dh[:, ta], ddh[:, tp]
                hbar = hbar + (dddzbar * (s4 * da ** 3 + 3 * s3 * da * dda + s2 * dddh)).sum(1)
                dhbar = _add_at(dhbar, ta, dddzbar * (3 * s3 * da * da + 3 * s2 * dda))
                ddhbar = _add_at(ddhbar, tp, dddzbar * 3 * s2 * da)
                dddzbar = s1 * dddzbar
            elif self.third:
                # The transpose of z⃛ᵃᵇᶜ = σ‴ḣᵃḣᵇḣᶜ + σ″(ḣᵃḧᵇᶜ + ḣᵇḧᵃᶜ + ḣᶜḧᵃᵇ) + σ′h⃛ᵃᵇᶜ.
                s4 = s[4].unsqueeze(1)
                t1, t2, t3, p1, p2, p3 = self._third_places
                da, db, dc = dh[:, t1], dh[:, t2], dh[:, t3]
                ddbc, ddac, ddab = ddh[:, p1], ddh[:, p2], ddh[:, p3]
                hbar = hbar + (dddzbar * (s4 * da * db * dc + s3 * (
                    da * ddbc + db * ddac + dc * ddab) + s2 * dddh)).sum(1)
                dhbar = _add_at(dhbar, t1, dddzbar * (s3 * db * dc + s2 * ddbc))
                dhbar = _add_at(dhbar, t2, dddzbar * (s3 * da * dc + s2 * ddac))
                dhbar = _add_at(dhbar, t3, dddzbar * (s3 * da * db + s2 * ddab))
                weighted = dddzbar * s2
                ddhbar = _add_at(_add_at(_add_at(ddhbar, p1, weighted * da), p2, weighted * db),
                                 p3, weighted * dc)
                dddzbar = s1 * dddzbar
            if self.fourth and not self.pure_fourth:
                dhbar, ddhbar, dddzbar, hbar = self._mixed_fourth_transpose(
                    s, dh, ddh, dddh, ddddh, ddddzbar, dhbar, ddhbar, dddzbar, hbar)
                ddddzbar = s1 * ddddzbar
            elif self.fourth:
                # The transpose of z⁗ = σ⁗ḣ⁴ + 6σ‴ḣ²ḧ + 3σ″ḧ² + 4σ″ḣh⃛ + σ′h⁗.
                s5 = s[5].unsqueeze(1)
                da, dda, ddda = dh[:, f1], ddh[:, f2], dddh[:, f3]
                hbar = hbar + (ddddzbar * (s5 * da ** 4 + 6 * s4 * da * da * dda +
                                           3 * s3 * dda * dda + 4 * s3 * da * ddda +
                                           s2 * ddddh)).sum(1)
                dhbar = _add_at(dhbar, f1, ddddzbar * (4 * s4 * da ** 3 + 12 * s3 * da * dda +
                                                       4 * s2 * ddda))
                ddhbar = _add_at(ddhbar, f2, ddddzbar * (6 * s3 * da * da + 6 * s2 * dda))
                dddzbar = _add_at(dddzbar, f3, ddddzbar * 4 * s2 * da)
                ddddzbar = s1 * ddddzbar
            zbar, dzbar, ddzbar = hbar, dhbar, ddhbar
        blocks.update(coefficients or {})
        if out is None:
            return torch.cat([blocks[name] for name in names], dim=1)
        column = 0
        for name in names:
            width = blocks[name].shape[1]
            out[:, column:column + width].copy_(blocks[name])
            column += width
        return out
