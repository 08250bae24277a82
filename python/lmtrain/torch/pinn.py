"""lmtrain.torch.pinn: physics-informed residuals written pointwise, with fast Jacobians.

A PDE problem is a list of conditions (the PDE in the interior, initial and boundary
conditions), each a residual written the way a physicist writes it — a function of the point's
coordinates, the network's outputs and their input derivatives, named by their symbols — and a
set of collocation points with a weight::

    import lmtrain.torch as lt
    from lmtrain.torch import pinn

    NU = 0.01 / math.pi
    problem = pinn.Problem(coordinates="tx", conditions=[
        pinn.Condition("pde", lambda u, u_t, u_x, u_xx: u_t + u * u_x - NU * u_xx,
                       pinn.Uniform(8000, t=(0, 1), x=(-1, 1))),
        pinn.Condition("initial", lambda x, u: u + torch.sin(math.pi * x),
                       pinn.Uniform(400, t=0, x=(-1, 1)), weight=10),
        pinn.Condition("boundary", lambda u: u, pinn.Uniform(400, t=(0, 1), x=[-1, 1]),
                       weight=10),
    ])
    opt = lt.LevenbergMarquardt(model, residual_fn=problem)
    for step in range(1000):
        if step % 10 == 0:
            problem.resample(step)           # fresh random points, seeded by (seed, step)
        opt.step(problem.points)

Names a residual may take: each coordinate (``t``, ``x``: single letters), each output (``u``;
``outputs="uv"`` for two), and derivatives ``u_x``, ``u_xx``, ``u_tx``, … (the output, ``_``,
the coordinates of the derivative in any order).

**Rows and weights.** Condition c with N_c points and weight w_c contributes the rows
r = w_c·F(point)/√N_c (k rows per point when F returns k values), so the objective is
F = ½‖r‖² = ½ Σ_c w_c²·mean_c(F²), the usual weighted PINN loss, independent of how many points
a condition has.  ``problem.blocks`` lists (name, slice of residual rows);
``problem.block_losses(r)`` gives each condition's mean F² (its weight and point count divided
out) from a residual vector.  The optimizer's step reports the same figures at the step's
linearization point: ``report.block_losses`` (and ``EpochRecord.block_losses``,
``Summary.block_losses`` after ``fit``), computed by the library from ``residual_blocks()``.

**Jacobian.** lmtrain.torch calls ``problem.jacobian_slice(model, params, x, y, start, stop)``
for the rows start:stop of J, O(m·n) where the row-batched reverse mode of a whole-batch
residual_fn is O(m²·n).  Two routes: for an ``nn.Sequential`` of Linear layers and
Tanh/Sigmoid/SiLU/Softplus/GELU/Identity (after an optional parameter-free input map) and
derivatives of order ≤ 4 (u_xxx, u_txx, u_xxxx, u_xxyy), forward Taylor propagation of u and
its input derivatives through the layers with one reverse sweep seeded by ∂F/∂(u, uᵃ, uᵃᵇ,
uᵃᵇᶜ, uᵃᵇᶜᵈ)
(``_jacobian.TaylorMLP``); for any module, ``vmap`` over
the points of ``jacrev`` in θ of the one-point residual, whose input derivatives are nested
forward-mode ``jvp``\\ s (``_jacobian.PointwiseJacobian``).  ``jacobian="auto"`` times the two
once, on up to 256 points (``jacobian_choice`` says which, and why).

**Resampling** (``resample(step)``): call it *between* steps, before the step that should see
new points, and pass ``problem.points`` to that step; never inside a step (its trial points are
evaluated on the linearization's points, which it is given).  The draws depend only on
(``seed``, step, condition), so a run is reproducible and a resumed run draws what the
uninterrupted one would.  ``Fixed`` points never change.  ``ResidualAdaptive(Uniform(…))``
draws where the residual is large (among candidates, by the model's residual): pass the model,
``resample(step, model)``; its draws depend on the model too.  ``hold(step, model, factor)``
makes one last draw of `factor` times the counts and keeps it (``resample`` returns it from
then on): a last phase on one objective, where LM converges instead of fitting fresh draws.

**Weights of points** (``Condition(…, point_weights=…)``): a factor per point on the
condition's rows, the problem's business, set between steps by ``problem.update_weights(model)``
from the residuals at ``problem.points`` (after ``resample``, before the step) and constant
within a step, so the engine sees an ordinary least-squares problem.  ``CausalWeights`` (time
slabs weighted by exp(−ε·the loss of the earlier slabs)) and ``ResidualBasedAttention``
(λ_i ← γλ_i + η|F_i|/max|F|) are the two given; any object with ``factors(points,
coordinates)`` and ``update(points, squared, coordinates)`` is one.  The held-out check and
``mean_squared`` leave them out (plain mean F²); the step's ``block_losses`` include them.

**State** (a run in parts): ``problem.state_dict()`` / ``load_state_dict()`` keep the points of
the last draw, the counts, whether they are held, the Jacobian route chosen and the point
weights' state; with the model's and the optimizer's state_dicts a resumed run takes the
uninterrupted run's steps.

**Interpolation check.** ``problem.heldout(seed)`` draws fresh points with the same layout, and
``problem.interpolation_ratios(model, problem.points, heldout)`` compares each condition's RMS
residual on them; ``warn_if_interpolating`` warns (``InterpolationWarning``) when the held-out
residual is many times the training residual: the network then fits the collocation points, not
the PDE (too few points per parameter, or no resampling).
"""

from __future__ import annotations

import collections
import inspect
import math
import numbers
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

import torch
from torch.func import jacrev, jvp, vmap

from torch.nn.utils.stateless import _reparametrize_module

from ._jacobian import (BatchedReverseJacobian, HardConstrained, PeriodicInput,
                        PointwiseJacobian, Sin, SlowJacobianWarning, TaylorMLP, WithCoefficients,
                        uncached)

__all__ = ["CausalWeights", "Condition", "Draws", "Fixed", "HardConstrained",
           "InterpolationWarning", "Marching", "PeriodicInput", "Pointwise", "Problem",
           "ResidualAdaptive", "ResidualBasedAttention", "Sin", "SlowJacobianWarning", "Uniform",
           "WithCoefficients"]


class InterpolationWarning(UserWarning):
    """A run fits its collocation points but not fresh ones (held-out residual ≫ training)."""


# ---- collocation points -----------------------------------------------------------------------
class Uniform:
    """``count`` points drawn uniformly; each coordinate is an interval ``(low, high)``, a
    constant (``t=0``) or a list of values drawn among with equal probability (``x=[-1, 1]``:
    both ends of a boundary).  ``method="sobol"``: a scrambled Sobol sequence (seeded like the
    random draws) instead of independent uniforms, for more even coverage.  ``count`` may be
    left out where another sampler gives it (``Fixed(…, heldout=Uniform(x=…))``)."""

    def __init__(self, count: int | None = None, *, method: str = "random",
                 **coordinates: Any) -> None:
        if count is not None and (not isinstance(count, int) or count < 1):
            raise ValueError(f"Uniform(count={count!r}): expected a positive integer")
        if method not in ("random", "sobol"):
            raise ValueError(f"Uniform(method={method!r}): expected 'random' or 'sobol'")
        if not coordinates:
            raise ValueError("Uniform() needs the coordinates' ranges, e.g. Uniform(100, "
                             "x=(0, 1), t=0)")
        for name, spec in coordinates.items():
            if isinstance(spec, tuple):
                if len(spec) != 2 or not spec[0] < spec[1]:
                    raise ValueError(f"Uniform({name}={spec!r}): an interval is (low, high) "
                                     "with low < high")
            elif isinstance(spec, list):
                if not spec:
                    raise ValueError(f"Uniform({name}=[]): give the values to draw among")
            elif not isinstance(spec, (int, float)):
                raise ValueError(f"Uniform({name}={spec!r}): expected (low, high), a number or "
                                 "a list of numbers")
        self.count, self.method, self.coordinates = count, method, dict(coordinates)

    def draw(self, coordinates: str, generator_seed: int, dtype: torch.dtype,
             count: int | None = None) -> torch.Tensor:
        count = count if count is not None else self.count
        if count is None:
            raise ValueError("Uniform() without a count: give one")
        missing = [c for c in coordinates if c not in self.coordinates]
        extra = [c for c in self.coordinates if c not in coordinates]
        if missing or extra:
            raise ValueError(f"Uniform{tuple(self.coordinates)}: the problem's coordinates are "
                             f"{tuple(coordinates)} (missing {missing}, unknown {extra})")
        generator = torch.Generator().manual_seed(generator_seed)
        random_axes = [c for c in coordinates if not isinstance(self.coordinates[c],
                                                                (int, float))]
        if self.method == "sobol" and random_axes:
            engine = torch.quasirandom.SobolEngine(len(random_axes), scramble=True,
                                                   seed=generator_seed % (2 ** 31))
            unit = engine.draw(count, dtype=torch.float64)
        else:
            unit = torch.rand(count, len(random_axes), generator=generator, dtype=torch.float64)
        columns = []
        for name in coordinates:
            spec = self.coordinates[name]
            if isinstance(spec, (int, float)):
                columns.append(torch.full((count,), float(spec), dtype=torch.float64))
                continue
            u = unit[:, random_axes.index(name)]
            if isinstance(spec, tuple):
                columns.append(spec[0] + (spec[1] - spec[0]) * u)
            else:
                values = torch.tensor([float(v) for v in spec], dtype=torch.float64)
                columns.append(values[torch.clamp((u * len(spec)).long(), max=len(spec) - 1)])
        return torch.stack(columns, dim=1).to(dtype)


class Marching:
    """Time marching: ``base``'s points with one coordinate's interval (low, high) cut to
    (low, low + h·(high − low)), the fraction h growing linearly from ``start`` at step 0 to 1
    at step ``steps`` (``Problem.resample(step)`` tells it the step; the held-out points follow
    the last step's h).  The network learns the early times first, as the solution's causality
    asks (Allen–Cahn's and KdV's examples: h from 0.1 to 1 in 200 steps; Wight & Zhao, arXiv
    2007.04542).  ``interval`` defaults to ``base``'s (a ``Uniform``'s interval of
    ``coordinate``)."""

    def __init__(self, base: Any, coordinate: str = "t", *, start: float = 0.1,
                 steps: int = 200, interval: tuple[float, float] | None = None) -> None:
        if not callable(getattr(base, "draw", None)) or isinstance(base, Fixed):
            raise ValueError("Marching(base, …): base must be a sampler that draws fresh "
                             "points, such as Uniform(count, …)")
        if interval is None:
            spec = getattr(base, "coordinates", {}).get(coordinate)
            if not (isinstance(spec, tuple) and len(spec) == 2):
                raise ValueError(f"Marching: base has no interval of {coordinate!r} (a Uniform "
                                 f"with {coordinate}=(low, high)); give interval=(low, high)")
            interval = spec
        if not (isinstance(start, (int, float)) and 0 < start <= 1):
            raise ValueError(f"Marching(start={start!r}): expected a fraction in (0, 1]")
        if not isinstance(steps, int) or steps < 0:
            raise ValueError(f"Marching(steps={steps!r}): expected a non-negative integer")
        self.base, self.coordinate, self.start, self.steps = base, coordinate, start, steps
        self.low, self.high = float(interval[0]), float(interval[1])
        self.fraction = float(start)

    @property
    def count(self) -> int | None:
        return self.base.count

    def at_step(self, step: int) -> None:
        """Sets h for the draws of `step` (Problem calls it before each draw)."""
        self.fraction = min(1.0, self.start + (1 - self.start) * step / max(self.steps, 1))
        if callable(getattr(self.base, "at_step", None)):
            self.base.at_step(step)

    def draw(self, coordinates: str, generator_seed: int, dtype: torch.dtype,
             count: int | None = None) -> torch.Tensor:
        if self.coordinate not in coordinates:
            raise ValueError(f"Marching({self.coordinate!r}): the problem's coordinates are "
                             f"{tuple(coordinates)}")
        # A copy: a sampler may keep the tensor it returns.
        points = self.base.draw(coordinates, generator_seed, dtype, count).clone()
        i = coordinates.index(self.coordinate)
        points[:, i] = self.low + (points[:, i] - self.low) * self.fraction
        return points


class Fixed:
    """The same points at every step (a grid, say): a tensor of shape (count, coordinates).
    ``heldout``: a sampler (``Uniform`` without a count) for the held-out check's fresh points,
    as many as these."""

    def __init__(self, points: Any, heldout: Uniform | None = None) -> None:
        points = torch.as_tensor(points)
        if points.dim() != 2 or points.shape[0] == 0:
            raise ValueError(f"Fixed(points of shape {tuple(points.shape)}): expected "
                             "(count, coordinates) with count ≥ 1")
        self.points, self.heldout_sampler = points, heldout
        self.count = int(points.shape[0])

    def draw(self, coordinates: str, generator_seed: int, dtype: torch.dtype,
             count: int | None = None) -> torch.Tensor:
        if self.points.shape[1] != len(coordinates):
            raise ValueError(f"Fixed points have {self.points.shape[1]} columns but the problem "
                             f"has the coordinates {tuple(coordinates)}")
        return self.points.to(dtype)


class ResidualAdaptive:
    """Points drawn where the residual is large: the residual-based adaptive distribution (RAD;
    Wu, Zhu, Tan, Kartha & Lu, "A comprehensive study of non-adaptive and residual-based
    adaptive sampling for physics-informed neural networks", CMAME 403, 2023, arXiv
    2207.10289).  Each draw takes ``pool`` × count candidates from ``base`` (``Uniform``, or any
    sampler with ``draw``), evaluates the condition's residual F at them with the model of that
    moment, and keeps ``count`` of them, chosen without replacement with probability

        p(x) ∝ |F(x)|^k / mean |F|^k + c,

    so c → ∞ is ``base``'s own draw and c = 0 follows the residual only.  The candidates and the
    choice are seeded by (seed, step, condition) like every draw; the same model gives the same
    points.  ``problem.resample(step, model)`` makes such draws (it needs the model); the
    held-out points and the draw at construction are ``base``'s, so the interpolation check
    still measures the residual on unbiased points.  The rows keep their weight w/√N: the loss
    is the mean of |F|² over points drawn from p, which weights the regions of large residual up
    (the point of the method).  One draw costs an evaluation of the residual at the pool
    (forward only, no Jacobian)."""

    def __init__(self, base: Any, *, pool: int = 8, k: float = 1.0, c: float = 1.0) -> None:
        if not callable(getattr(base, "draw", None)) or isinstance(base, (Fixed,
                                                                       ResidualAdaptive)):
            raise ValueError(f"ResidualAdaptive(base={type(base).__name__}): expected a sampler "
                             "that draws fresh points, such as Uniform(count, …)")
        if not isinstance(pool, int) or pool < 1:
            raise ValueError(f"ResidualAdaptive(pool={pool!r}): expected a positive integer "
                             "(candidates per point kept)")
        for name, value, low in (("k", k, 0.0), ("c", c, 0.0)):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= low):
                raise ValueError(f"ResidualAdaptive({name}={value!r}): expected a finite number "
                                 f"≥ {low:g}")
        if k == 0 and c == 0:
            raise ValueError("ResidualAdaptive(k=0, c=0) gives every point probability 0")
        self.base, self.pool, self.k, self.c = base, pool, float(k), float(c)

    @property
    def count(self) -> int | None:
        return self.base.count

    def draw(self, coordinates: str, generator_seed: int, dtype: torch.dtype,
             count: int | None = None) -> torch.Tensor:
        """``base``'s draw (no model involved): the held-out points, the first draw."""
        return self.base.draw(coordinates, generator_seed, dtype, count)

    def at_step(self, step: int) -> None:
        """Passes the step on to ``base`` (a ``Marching`` one, say)."""
        if callable(getattr(self.base, "at_step", None)):
            self.base.at_step(step)

    def candidates(self, coordinates: str, generator_seed: int, dtype: torch.dtype,
                   count: int) -> torch.Tensor:
        """The pool of one draw: pool × count of ``base``'s points."""
        return self.base.draw(coordinates, generator_seed, dtype, self.pool * count)

    def choose(self, squared: torch.Tensor, count: int, generator_seed: int) -> torch.Tensor:
        """The indices of the `count` candidates kept, from each candidate's |F|²."""
        squared = squared.detach().double().cpu()
        if not bool(torch.isfinite(squared).all()):
            raise ValueError("ResidualAdaptive: the residual is not finite at some candidate "
                             "points (the model has diverged?)")
        magnitude = squared ** (self.k / 2)
        mean = float(magnitude.mean())
        density = (magnitude / mean if mean > 0 else torch.zeros_like(magnitude)) + self.c
        if float(density.sum()) <= 0:  # c = 0 and F = 0 everywhere: nothing to prefer
            density = torch.ones_like(density)
        generator = torch.Generator().manual_seed(generator_seed)
        return torch.multinomial(density, count, replacement=False, generator=generator)


# ---- weights of points ------------------------------------------------------------------------
class CausalWeights:
    """Causal weights for a time-dependent PDE (Wang, Sankaran & Perdikaris, "Respecting
    causality is all you need for training physics-informed neural networks", CMAME 421, 2024,
    arXiv 2203.07404).  The interval of the time coordinate is cut into ``slabs``
    equal slabs; a point in slab i gets the weight

        w_i = exp(−ε · Σ_{k<i} L_k),

    L_k the mean of |F|² over the condition's points in slab k at the last ``update`` (0 for a
    slab without points), so a slab's residual counts only once the earlier slabs are solved.
    A least-squares row carries √w_i (``factors``), so the condition's loss is the mean of
    w_i·|F|².  Larger ε is stricter; the paper raises ε over the training (set ``epsilon``
    between steps)."""

    def __init__(self, epsilon: float, slabs: int = 32, coordinate: str = "t",
                 interval: tuple[float, float] = (0.0, 1.0)) -> None:
        if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon >= 0):
            raise ValueError(f"CausalWeights(epsilon={epsilon!r}): expected a number ≥ 0")
        if not isinstance(slabs, int) or slabs < 1:
            raise ValueError(f"CausalWeights(slabs={slabs!r}): expected a positive integer")
        if len(interval) != 2 or not interval[0] < interval[1]:
            raise ValueError(f"CausalWeights(interval={interval!r}): expected (low, high) with "
                             "low < high")
        self.epsilon, self.slabs, self.coordinate = float(epsilon), slabs, coordinate
        self.interval = (float(interval[0]), float(interval[1]))
        self.slab_losses = torch.zeros(slabs, dtype=torch.float64)  # L_k at the last update

    def _slab(self, points: torch.Tensor, coordinates: str) -> torch.Tensor:
        if self.coordinate not in coordinates:
            raise ValueError(f"CausalWeights(coordinate={self.coordinate!r}): the problem's "
                             f"coordinates are {tuple(coordinates)}")
        low, high = self.interval
        t = points[:, coordinates.index(self.coordinate)].double()
        return torch.clamp(((t - low) / (high - low) * self.slabs).floor().long(), 0,
                           self.slabs - 1)

    @property
    def weights(self) -> torch.Tensor:
        """w_k of each slab, from the losses of the last update."""
        before = torch.cumsum(self.slab_losses, 0) - self.slab_losses
        return torch.exp(-self.epsilon * before)

    def factors(self, points: torch.Tensor, coordinates: str) -> torch.Tensor:
        """√w of each point's slab (the factor on its rows)."""
        root = torch.sqrt(self.weights).to(points.device)
        return root[self._slab(points, coordinates).to(points.device)].to(points.dtype)

    def update(self, points: torch.Tensor, squared: torch.Tensor, coordinates: str) -> None:
        """The slabs' mean |F|² from each point's |F|² (``squared``, without any weight)."""
        slab = self._slab(points, coordinates).cpu()
        squared = squared.detach().double().cpu()
        total = torch.zeros(self.slabs, dtype=torch.float64).index_add_(0, slab, squared)
        count = torch.zeros(self.slabs, dtype=torch.float64).index_add_(
            0, slab, torch.ones_like(squared))
        self.slab_losses = total / count.clamp(min=1)

    def state_dict(self) -> dict[str, Any]:
        """The slabs' losses of the last update (what ``factors`` depends on besides ε)."""
        return {"slab_losses": self.slab_losses.clone()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        losses = torch.as_tensor(state["slab_losses"], dtype=torch.float64)
        if losses.shape != (self.slabs,):
            raise ValueError(f"CausalWeights state: slab_losses of shape {tuple(losses.shape)}, "
                             f"expected ({self.slabs},) for {self.slabs} slabs")
        self.slab_losses = losses.clone()


class ResidualBasedAttention:
    """Residual-based attention (RBA; Anagnostopoulos, Toscano, Stergiopulos & Karniadakis,
    "Residual-based attention in physics-informed neural networks", CMAME 421, 2024,
    doi:10.1016/j.cma.2024.116805, arXiv 2307.00379): each point i carries a multiplier λ_i on its residual, updated between steps by

        λ_i ← γ·λ_i + η·|F_i| / max_j |F_j|,

    |F_i| the norm of the point's residual values (without weights), so λ stays in
    [0, max(initial, η/(1 − γ))] and grows where the residual stays large.  The rows carry λ_i
    (the loss is the mean of (λ_i·|F_i|)²).  The multipliers belong to the points they were
    updated on: points not seen at the last update (a fresh draw, the held-out set) get
    ``initial``, so with ``resample`` every step the memory is one step long — use it with
    ``Fixed`` points or a resampling period of many steps."""

    def __init__(self, gamma: float = 0.999, eta: float = 0.01, initial: float = 1.0) -> None:
        for name, value, low, high in (("gamma", gamma, 0.0, 1.0), ("eta", eta, 0.0, math.inf),
                                       ("initial", initial, 0.0, math.inf)):
            if not (isinstance(value, (int, float)) and low <= value < high):
                raise ValueError(f"ResidualBasedAttention({name}={value!r}): expected a number "
                                 f"in [{low}, {high})")
        if eta == 0 and initial == 0:
            raise ValueError("ResidualBasedAttention(eta=0, initial=0) weights every point 0")
        self.gamma, self.eta, self.initial = float(gamma), float(eta), float(initial)
        self.points: torch.Tensor | None = None
        self.multipliers: torch.Tensor | None = None  # λ of self.points

    def factors(self, points: torch.Tensor, coordinates: str) -> torch.Tensor:
        """λ of each point: the updated ones where `points` are those of the last update,
        ``initial`` otherwise."""
        if self.points is not None and self.points.shape == points.shape and \
                torch.equal(self.points.to(points.device), points):
            return self.multipliers.to(dtype=points.dtype, device=points.device)
        return torch.full((points.shape[0],), self.initial, dtype=points.dtype,
                          device=points.device)

    def update(self, points: torch.Tensor, squared: torch.Tensor, coordinates: str) -> None:
        norm = torch.sqrt(squared.detach().double())
        largest = float(norm.max()) if norm.numel() else 0.0
        previous = self.factors(points, coordinates).double()
        relative = norm / largest if largest > 0 else torch.zeros_like(norm)
        self.multipliers = self.gamma * previous + self.eta * relative
        self.points = points.detach().clone()

    def state_dict(self) -> dict[str, Any]:
        """The multipliers and the points they belong to (None before the first update)."""
        if self.points is None or self.multipliers is None:
            return {"points": None, "multipliers": None}
        return {"points": self.points.cpu().clone(), "multipliers": self.multipliers.cpu().clone()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        points, multipliers = state["points"], state["multipliers"]
        if (points is None) != (multipliers is None) or (points is not None and (
                points.ndim != 2 or multipliers.shape != (points.shape[0],))):
            raise ValueError("ResidualBasedAttention state: expected points (N × d) and N "
                             "multipliers, or both None")
        self.points = None if points is None else points.clone()
        self.multipliers = None if multipliers is None else multipliers.double().clone()


@dataclass
class Condition:
    """One residual block: ``residual(**symbols)`` at every point of ``points``, times
    ``weight``.  ``residual`` names what it needs (see the module's doc) and returns a scalar or
    a vector of k values per point.  ``point_weights``: a factor per point on the rows
    (``CausalWeights``, ``ResidualBasedAttention``), updated by ``Problem.update_weights``."""

    name: str
    residual: Callable[..., Any]
    points: Uniform | Fixed | ResidualAdaptive
    weight: float = 1.0
    point_weights: Any = None


# ---- derivatives of the network at one point ----------------------------------------------------
def _covers(chain: tuple[int, ...], derivative: tuple[int, ...]) -> bool:
    need, have = collections.Counter(derivative), collections.Counter(chain)
    return all(have[axis] >= k for axis, k in need.items())


def _chains(derivatives: set[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """Sequences of directions whose nested jvps give every requested derivative: a chain of
    length L yields the derivatives along every sub-multiset of its directions (2^L values at
    the cost of about 2^L forward passes), so the longest derivatives are taken first and any
    derivative a chain already yields is not taken again."""
    chains: list[tuple[int, ...]] = []
    for derivative in sorted(derivatives, key=len, reverse=True):
        if derivative and not any(_covers(c, derivative) for c in chains):
            chains.append(derivative)
    return chains


def _along_chain(u: Callable[[torch.Tensor], torch.Tensor], point: torch.Tensor,
                 chain: tuple[int, ...], basis: torch.Tensor) -> dict[tuple[int, ...],
                                                                      torch.Tensor]:
    """u and its derivatives along the sub-multisets of `chain` at `point`, by nested
    forward mode: level j+1 is jvp of level j along basis[chain[j]], returning (primals,
    tangents), so value i of the last level is differentiated along chain[j] for each bit j of
    i.  Keys are the sorted directions."""

    def level(j: int) -> Callable[[torch.Tensor], tuple[torch.Tensor, ...]]:
        if j == 0:
            return lambda q: (u(q),)
        inner = level(j - 1)

        def nested(q: torch.Tensor) -> tuple[torch.Tensor, ...]:
            primal, tangent = jvp(inner, (q,), (basis[chain[j - 1]],))
            return tuple(primal) + tuple(tangent)

        return nested

    values = level(len(chain))(point)
    return {tuple(sorted(chain[j] for j in range(len(chain)) if i >> j & 1)): v
            for i, v in enumerate(values)}


class _Symbols:
    """What a condition's residual asks for, by the names of its arguments."""

    def __init__(self, condition: Condition, coordinates: str, outputs: str) -> None:
        try:
            parameters = inspect.signature(condition.residual).parameters
        except (TypeError, ValueError) as error:
            raise ValueError(f"condition {condition.name!r}: cannot read the residual's "
                             f"arguments ({error}); give a function or lambda") from error
        self.arguments: list[tuple[str, str, Any]] = []  # (name, kind, index)
        derivatives: set[tuple[int, ...]] = set()
        for name, parameter in parameters.items():
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                raise ValueError(f"condition {condition.name!r}: the residual takes *{name}; "
                                 "name each symbol it needs instead")
            if name in coordinates:
                self.arguments.append((name, "coordinate", coordinates.index(name)))
            elif name in outputs:
                self.arguments.append((name, "derivative", (outputs.index(name), ())))
            elif "_" in name and name.split("_", 1)[0] in outputs and \
                    name.split("_", 1)[1] and all(c in coordinates for c in name.split("_", 1)[1]):
                out, axes = name.split("_", 1)
                derivative = tuple(sorted(coordinates.index(c) for c in axes))
                derivatives.add(derivative)
                self.arguments.append((name, "derivative", (outputs.index(out), derivative)))
            else:
                derivative_examples = ", ".join(f"{outputs[0]}_{c}" for c in coordinates)
                raise ValueError(
                    f"condition {condition.name!r}: the residual's argument {name!r} is not a "
                    f"symbol of this problem; available: the coordinates {', '.join(coordinates)}, "
                    f"the outputs {', '.join(outputs)} and derivatives such as "
                    f"{derivative_examples}, {outputs[0]}_{coordinates[0] * 2}")
        self.derivatives = derivatives
        self.chains = _chains(derivatives) or [()]

    def taylor_arguments(self, points: torch.Tensor, taylor: TaylorMLP, u: torch.Tensor,
                         du: torch.Tensor, ddu: torch.Tensor, dddu: torch.Tensor,
                         ddddu: torch.Tensor) -> list[torch.Tensor]:
        """The residual's arguments for all points (P each) from the Taylor route's u, uᵃ,
        uᵃᵇ, uᵃᵇᶜ, uᵃᵇᶜᵈ, in the order of the residual's parameters."""
        out = []
        for _, kind, index in self.arguments:
            if kind == "coordinate":
                out.append(points[:, index])
                continue
            o, derivative = index
            if not derivative:
                out.append(u[:, o])
            elif len(derivative) == 1:
                out.append(du[:, taylor.first.index(derivative[0]), o])
            elif len(derivative) == 2:
                out.append(ddu[:, taylor.second.index(derivative), o])
            elif len(derivative) == 3:
                out.append(dddu[:, taylor.third.index(derivative), o])
            else:
                out.append(ddddu[:, taylor.fourth.index(derivative), o])
        return out

    def values(self, u: Callable[[torch.Tensor], torch.Tensor], point: torch.Tensor,
               basis: torch.Tensor) -> dict[str, torch.Tensor]:
        known: dict[tuple[int, ...], torch.Tensor] = {}
        for chain in self.chains:
            known.update(_along_chain(u, point, chain, basis))
        return {name: (point[index] if kind == "coordinate" else known[index[1]][index[0]])
                for name, kind, index in self.arguments}


# ---- the problem ------------------------------------------------------------------------------
def _seed(seed: int, stream: int, step: int, condition: int) -> int:
    """A generator seed from (seed, stream, step, condition): SplitMix64's finalizer of their
    combination, so neighbouring steps draw unrelated points."""
    z = (seed * 0x9E3779B97F4A7C15 + stream * 0xD1B54A32D192ED03 + step * 0x94D049BB133111EB
         + condition * 0xBF58476D1CE4E5B9) % 2 ** 64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % 2 ** 64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % 2 ** 64
    return (z ^ (z >> 31)) % 2 ** 63


_CPU_CHUNK = 256 << 20  # the CPU's chunk of points where nothing smaller bounds it (Problem)


def _chunk_bytes(chunk_bytes: int | None, device: torch.device) -> int:
    """Problem's chunk_bytes: the one given, checked; when none is, 256 MiB on the CPU and on a
    CUDA device an eighth of its free memory, at most 2 GiB (a GPU's evaluation of a chunk is
    bound by the operators the host issues: one chunk of all the points where memory allows)."""
    if chunk_bytes is not None:
        if isinstance(chunk_bytes, bool) or not isinstance(chunk_bytes, numbers.Integral) or \
                chunk_bytes <= 0:
            raise ValueError(f"chunk_bytes = {chunk_bytes!r}: expected a positive number of "
                             "bytes (or None: chosen by the device)")
        return int(chunk_bytes)
    if device.type != "cuda":
        return _CPU_CHUNK
    free, _ = torch.cuda.mem_get_info(device)
    return max(_CPU_CHUNK, min(2 << 30, free // 8))


class Problem:
    """A PINN's residuals: conditions over named coordinates, usable as lmtrain.torch's
    ``residual_fn`` (it computes the residual vector when called and J's row slices through
    ``jacobian_slice``).

    Parameters
    ----------
    coordinates : str or sequence of single letters
        The point's coordinates in the order of the model's input columns, e.g. ``"tx"``.
    conditions : sequence of Condition
    outputs : str or sequence of single letters
        The names of the model's outputs (default ``"u"``).
    seed : int
        Seeds every draw of collocation points (with the step and the condition).
    dtype : torch.dtype
        The points' dtype: the model's (default float64).
    jacobian : str
        ``"auto"`` (timed once), ``"taylor"`` (TaylorMLP), ``"jacrev"`` or ``"jacfwd"`` (the
        transform in θ per point, PointwiseJacobian).
    chunk_bytes : int or None
        Memory for one chunk of points: their rows of J and the intermediates, or a residual
        evaluation of a draw's candidates.  None (the default): the library's memory plan
        decides — from the first step of an optimizer on this problem a chunk takes at most
        the bytes the plan gives one slice of J (``use_memory_plan``), and on a CUDA device
        exactly that: J one slice (the plan's, sized by the measured cost of computing one)
        per pass, a draw's candidates in as few evaluations (a GPU's chunk costs the operators
        issued, not its points); on the CPU at most 256 MiB.  Before the first plan: 256 MiB
        on the CPU, on a CUDA device an eighth of its free memory, at most 2 GiB.  Given: that
        size, whatever the plan.
    device : torch.device or str
        Where ``points`` live: the model's device (a CUDA model needs ``device="cuda"``).
        The draws are made on the CPU and copied, so a run draws the same points on any
        device.
    """

    def __init__(self, coordinates: str | Sequence[str], conditions: Sequence[Condition], *,
                 outputs: str | Sequence[str] = "u", seed: int = 0,
                 dtype: torch.dtype = torch.float64, jacobian: str = "auto",
                 chunk_bytes: int | None = None, device: torch.device | str = "cpu") -> None:
        self.device = torch.device(device)
        self.coordinates = "".join(coordinates)
        self.outputs = "".join(outputs)
        for kind, names in (("coordinate", self.coordinates), ("output", self.outputs)):
            if not names or len(set(names)) != len(names) or not all(
                    c.isidentifier() for c in names):
                raise ValueError(f"{kind}s {names!r}: expected distinct single letters, e.g. "
                                 f"{'tx' if kind == 'coordinate' else 'u'}")
        if set(self.coordinates) & set(self.outputs):
            raise ValueError(f"the letters {sorted(set(self.coordinates) & set(self.outputs))} "
                             "name both a coordinate and an output")
        if not conditions:
            raise ValueError("a Problem needs at least one Condition")
        names = [c.name for c in conditions]
        if len(set(names)) != len(names):
            raise ValueError(f"condition names must differ: {names}")
        if jacobian not in ("auto", "taylor", "jacrev", "jacfwd"):
            raise ValueError(f"jacobian = {jacobian!r}: expected 'auto', 'taylor', 'jacrev' or "
                             "'jacfwd'")
        for c in conditions:
            if not callable(getattr(c.points, "draw", None)) or \
                    not isinstance(getattr(c.points, "count", None), int):
                raise ValueError(f"condition {c.name!r}: points must be Uniform(count, …), "
                                 "Fixed(tensor) or a sampler with a count and draw()")
            if not (isinstance(c.weight, (int, float)) and math.isfinite(c.weight) and
                    c.weight > 0):
                raise ValueError(f"condition {c.name!r}: weight = {c.weight!r}, expected a "
                                 "positive number")
            if c.point_weights is not None and not all(
                    callable(getattr(c.point_weights, m, None)) for m in ("factors", "update")):
                raise ValueError(f"condition {c.name!r}: point_weights must be CausalWeights, "
                                 "ResidualBasedAttention or an object with factors(points, "
                                 "coordinates) and update(points, squared, coordinates), not "
                                 f"{type(c.point_weights).__name__}")
        self.conditions = list(conditions)
        self.symbols = [_Symbols(c, self.coordinates, self.outputs) for c in conditions]
        self.seed, self.dtype, self.jacobian = int(seed), dtype, jacobian
        self._chunk_default = _chunk_bytes(chunk_bytes, self.device)
        self._chunk_given = chunk_bytes is not None
        self._planned_bytes: int | None = None  # use_memory_plan's, while chunk_bytes is None
        self._set_counts([c.points.count for c in conditions])
        self.growth: dict[int, tuple[int, int, int]] = {}  # grow(): (start, most, every)
        self.held = False  # hold(): resample keeps the points
        self.rows_per_point: list[int] | None = None  # k of each condition, known once evaluated
        self.jacobian_choice: dict[str, Any] = {}
        self._at_step(0)
        self.points = self.sample(0)
        self.step_drawn = 0
        self.drawn_counts = list(self.counts)  # the layout of `points` (set_count: the next's)

    # ---- points -----------------------------------------------------------------------------
    def sample(self, step: int, stream: int = 0, model: Any = None) -> torch.Tensor:
        """The collocation points of `step` (stream 0) or held-out points (stream 1), all
        conditions' points stacked in order; does not change ``points``.  ``ResidualAdaptive``
        conditions choose among their candidates by the residual of `model` on stream 0, and
        draw their base's points without a model (the held-out points, the first draw)."""
        parts = []
        for index, condition in enumerate(self.conditions):
            sampler, seed = condition.points, _seed(self.seed, stream, step, index)
            if stream != 0 and isinstance(sampler, Fixed):
                if sampler.heldout_sampler is None:
                    parts.append(sampler.points.to(self.dtype).cpu())
                    continue
                sampler = sampler.heldout_sampler
            if stream == 0 and model is not None and isinstance(sampler, ResidualAdaptive):
                parts.append(self._adaptive_draw(index, sampler, model, seed, step))
                continue
            parts.append(sampler.draw(self.coordinates, seed, self.dtype,
                                      self.counts[index]).cpu())
        return torch.cat(parts).to(self.device)

    def _adaptive_draw(self, index: int, sampler: ResidualAdaptive, model: Any, seed: int,
                       step: int) -> torch.Tensor:
        """Condition `index`'s points of `step` chosen by `model`'s residual among the
        sampler's candidates."""
        count = self.counts[index]
        pool = sampler.candidates(self.coordinates, seed, self.dtype, count).cpu()
        if sampler.pool == 1:  # nothing to choose among: no residual needed
            return pool
        squared = []
        # As few evaluations as chunk_bytes allows (at least `count` points each, the memory of
        # one evaluation at the points): on a GPU an evaluation's cost is the operators issued,
        # not the points.  Candidates are seen once, so the Taylor route keeps nothing of them.
        chunk = max(count, self._evaluation_chunk(index, model))
        with torch.no_grad(), uncached():
            for start in range(0, pool.shape[0], chunk):
                points = pool[start:start + chunk].to(self.device)
                rows = self._rows(index, model, points, point_weights=False)
                squared.append(self._squared(index, rows, points.shape[0]))
        try:
            chosen = sampler.choose(torch.cat(squared).cpu(), count,
                                    _seed(self.seed, 2, step, index))
        except ValueError as error:
            raise ValueError(f"condition {self.conditions[index].name!r} at step {step}: "
                             f"{error}") from None
        return pool[chosen]

    def _evaluation_chunk(self, index: int, model: Any) -> int:
        """Points per evaluation of condition `index`'s residual without J within chunk_bytes:
        by the Taylor route, its C = 1 + |first| + |second| + |third| + |fourth| components of every
        layer's output and input, twice (the values and one layer's temporaries); by vmap,
        whose memory per point is unknown here, 0 (the caller's minimum)."""
        taylor = self._taylor(index, model)
        if taylor is None:
            return 0
        components = (1 + len(taylor.first) + len(taylor.second) + len(taylor.third) +
                      len(taylor.fourth))
        widths = sum(layer.in_features + layer.out_features for _, layer in taylor.layers
                     if isinstance(layer, torch.nn.Linear))
        itemsize = torch.finfo(self.dtype).bits // 8
        return self.chunk_bytes // (2 * itemsize * components * widths)

    def resample(self, step: int, model: Any = None) -> torch.Tensor:
        """Draws the collocation points of `step` into ``points`` (and returns them).  Call it
        between steps; see the module's doc.  `model`: the network, which ``ResidualAdaptive``
        conditions need (their points follow its residual)."""
        self._check_model(model, "resample(step, model)")
        if self.held:
            return self.points
        self._set_counts(self._counts_at(int(step)))
        return self._draw(int(step), model)

    def hold(self, step: int, model: Any = None, factor: int = 4,
             adaptive: bool = False) -> torch.Tensor:
        """One last draw, of `factor` times each drawn condition's count at `step` (its
        ``grow`` schedule's), kept from then on: ``resample`` returns these points unchanged.
        LM then converges on one objective instead of fitting a fresh draw every step, whose
        sampling noise sets a resampled run's error near its end (Burgers: docs/pinn.md, "A
        last phase on held points"; the examples' recipe key ``polish``).  Between steps, as
        ``resample``; ``Fixed`` conditions keep their points.  `adaptive`: ``ResidualAdaptive``
        conditions choose by `model`'s residual, as ``resample`` does; by default they draw
        their base's points (uniform: the mean of F² over the domain, which the L2 error
        follows — Burgers ended lower so, and the draw costs no evaluation).  Returns the
        points."""
        if isinstance(factor, bool) or not isinstance(factor, int) or factor < 1:
            raise ValueError(f"hold(factor={factor!r}): expected a positive integer (the held "
                             "draw's count over the schedule's)")
        if self.held:
            raise ValueError("the problem holds its points already (hold() draws once)")
        if adaptive:
            self._check_model(model, "hold(step, model, adaptive=True)")
        counts = self._counts_at(int(step))
        for index, condition in enumerate(self.conditions):
            if not isinstance(condition.points, Fixed):
                counts[index] *= factor
        self._set_counts(counts)
        points = self._draw(int(step), model if adaptive else None)
        self.held = True
        return points

    def _check_model(self, model: Any, call: str) -> None:
        adaptive = [c.name for c in self.conditions if isinstance(c.points, ResidualAdaptive)]
        if adaptive and model is None:
            raise ValueError(f"the conditions {adaptive} draw their points by the residual "
                             f"(ResidualAdaptive): pass the model, problem.{call}")

    def _counts_at(self, step: int) -> list[int]:
        """The counts the next draw takes: ``grow``'s schedules at `step`, the others' own."""
        counts = list(self.counts)
        for index, (start, most, every) in self.growth.items():
            counts[index] = min(most, start * 2 ** (step // every))
        return counts

    def _draw(self, step: int, model: Any) -> torch.Tensor:
        self._at_step(step)
        self.points = self.sample(step, model=model)
        self.step_drawn = step
        self.drawn_counts = list(self.counts)
        return self.points

    def _at_step(self, step: int) -> None:
        """Tells the samplers that depend on the step (``Marching``) which one is drawn."""
        for condition in self.conditions:
            if callable(getattr(condition.points, "at_step", None)):
                condition.points.at_step(step)

    def set_count(self, name: str, count: int) -> None:
        """Draws `count` points for condition `name` from the next ``resample`` on (more points
        per parameter as the fit gets finer: a draw's sampling error must stay below it).
        Between steps only, followed by ``resample`` (``points`` keeps the old layout until
        then); not for ``Fixed`` points.  A condition that ``grow``s takes its schedule's count
        at every resample instead."""
        index = self._drawn_condition(name)
        if not isinstance(count, int) or count < 1:
            raise ValueError(f"count = {count!r}: expected a positive integer")
        if self.held:
            raise ValueError(f"set_count({name!r}, …): the problem holds its points (hold()); "
                             "their count is theirs")
        counts = list(self.counts)
        counts[index] = count
        self._set_counts(counts)

    def grow(self, name: str, most: int, every: int, start: int | None = None) -> None:
        """Doubles condition `name`'s count every `every` steps, from `start` (its count now by
        default) up to `most`: ``resample(step)`` draws min(most, start·2^(step // every))
        points (the recipe's
        "more points as the fit gets finer"; docs/pinn.md).  The count follows from the step, so
        a resumed run draws what the uninterrupted one would; the schedule is part of the
        problem's state (``load_state_dict`` refuses another)."""
        index = self._drawn_condition(name)
        start = self.counts[index] if start is None else start
        if not isinstance(start, int) or start < 1:
            raise ValueError(f"grow({name!r}, start={start!r}): expected a positive integer")
        if not isinstance(most, int) or most < start:
            raise ValueError(f"grow({name!r}, most={most!r}): expected an integer of at least "
                             f"the start, {start}")
        if not isinstance(every, int) or every < 1:
            raise ValueError(f"grow({name!r}, every={every!r}): expected a positive integer "
                             "(steps between doublings)")
        self.growth[index] = (start, most, every)

    @property
    def chunk_bytes(self) -> int:
        """The bytes of one chunk of points (the constructor's ``chunk_bytes``): the one given;
        else, once an optimizer has planned a step on this problem, the bytes its memory plan
        gives one slice, on the CPU at most 256 MiB; else the device's default."""
        if not self._chunk_given and self._planned_bytes is not None:
            if self.device.type == "cuda":
                return self._planned_bytes
            return min(self._planned_bytes, _CPU_CHUNK)
        return self._chunk_default

    @chunk_bytes.setter
    def chunk_bytes(self, value: int | None) -> None:
        self._chunk_default = _chunk_bytes(value, self.device)
        self._chunk_given = value is not None

    def use_memory_plan(self, slice_bytes: int) -> None:
        """lmtrain.torch's protocol for a residual_fn that sizes its own work: the library calls
        it whenever its memory plan sizes the step's slices, with the bytes the plan gives one
        slice of J (its rows and what computing them takes, as measured).  Unless
        ``chunk_bytes`` was given, J is then computed a whole slice per pass and a draw's
        candidates are evaluated in chunks of that many bytes."""
        self._planned_bytes = max(1, int(slice_bytes))

    def _drawn_condition(self, name: str) -> int:
        """The index of condition `name`, whose points are drawn (not Fixed)."""
        names = [c.name for c in self.conditions]
        if name not in names:
            raise ValueError(f"no condition {name!r}; the conditions are {names}")
        index = names.index(name)
        if isinstance(self.conditions[index].points, Fixed):
            raise ValueError(f"condition {name!r} has Fixed points; their count is theirs")
        return index

    def _set_counts(self, counts: list[int]) -> None:
        self.counts = counts
        self.point_offsets = [0]
        for c in counts:
            self.point_offsets.append(self.point_offsets[-1] + c)

    def draws(self, model: Any, every: int = 1,
              hold: tuple[int, int] | None = None) -> "Draws":
        """The problem's points as ``LevenbergMarquardt.fit``'s data, a fresh draw every
        `every` epochs: ``opt.fit(problem.draws(model), epochs=…, max_time_seconds=…)`` trains
        with the library's fit run (its time budget, history, Summary and report) and takes the
        steps of the loop ``resample(step, model)`` (when step % every == 0, step > 0),
        ``update_weights(model)``, ``step(problem.points)``, to the bit (tested).  `hold` =
        (epoch, factor): from that epoch on, ``hold(epoch, model, factor)``'s points instead
        (a resumed run past it draws the same: the held draw is uniform)."""
        return Draws(self, model, every, hold)

    def heldout(self, seed: int = 0) -> torch.Tensor:
        """Fresh points in the training layout, never drawn for training (their own stream);
        a Fixed condition without a heldout sampler repeats its points."""
        return self.sample(int(seed), stream=1)

    # ---- state (a resumed run) ----------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """What a resumed run needs to go on as the uninterrupted one would: the points of the
        step drawn last (a ``ResidualAdaptive`` draw depends on the model of that step), the
        counts, whether it holds them (``hold``), the Jacobian route chosen
        (``jacobian="auto"`` times the routes once; a resumed run keeps the first run's choice) and each condition's point weights' state (their
        ``state_dict()``, where they have one).  Plain Python values and CPU tensors, for
        ``torch.save``; the optimizer and the model have their own state_dicts."""
        weights = {c.name: c.point_weights.state_dict() for c in self.conditions
                   if callable(getattr(c.point_weights, "state_dict", None))}
        return {"coordinates": self.coordinates, "conditions": [c.name for c in self.conditions],
                "seed": self.seed, "counts": list(self.counts),
                "drawn_counts": list(self.drawn_counts),
                "growth": {self.conditions[i].name: list(g) for i, g in self.growth.items()},
                "points": self.points.detach().cpu().clone(), "step_drawn": self.step_drawn,
                "held": self.held,
                "jacobian_choice": dict(self.jacobian_choice),
                "rows_per_point": None if self.rows_per_point is None else
                list(self.rows_per_point), "point_weights": weights}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restores ``state_dict()``'s state into a problem built the same way (the same
        coordinates, conditions and seed, points matching the counts: a clear ValueError
        otherwise, before anything changes; a condition's point weights check their own state
        as they load it)."""
        names = [c.name for c in self.conditions]
        self._check_built_the_same_way(state, names)
        counts = [int(c) for c in state["counts"]]
        drawn = [int(c) for c in state.get("drawn_counts", counts)]  # points' layout
        points = torch.as_tensor(state["points"])
        if len(counts) != len(names) or len(drawn) != len(names) or min(counts + drawn) < 1 \
                or points.shape != (sum(drawn), len(self.coordinates)):
            raise ValueError(f"Problem state: points of shape {tuple(points.shape)} and counts "
                             f"{drawn}; expected one count per condition ({len(names)}) and "
                             f"(sum of counts, {len(self.coordinates)}) points")
        unknown = set(state.get("point_weights") or {}) - set(names)
        if unknown:
            raise ValueError(f"Problem state: point weights of unknown conditions "
                             f"{sorted(unknown)}; the conditions are {names}")
        for name, weights_state in (state.get("point_weights") or {}).items():
            weights = self.conditions[names.index(name)].point_weights
            if not callable(getattr(weights, "load_state_dict", None)):
                raise ValueError(f"Problem state: condition {name!r} has point weights' state "
                                 "but its point_weights cannot load it")
            weights.load_state_dict(weights_state)
        self._set_counts(counts)
        self.points = points.to(dtype=self.dtype, device=self.device)
        self.drawn_counts = drawn
        self.step_drawn = int(state["step_drawn"])
        self.held = bool(state.get("held", False))
        self._at_step(self.step_drawn)  # a Marching sampler's interval of that step
        self.jacobian_choice = dict(state.get("jacobian_choice") or {})
        rows = state.get("rows_per_point")
        self.rows_per_point = None if rows is None else [int(k) for k in rows]

    def _check_built_the_same_way(self, state: Mapping[str, Any], names: list[str]) -> None:
        """A state of this problem's coordinates, conditions, seed and growth schedules."""
        missing = {"coordinates", "conditions", "seed", "counts", "points", "step_drawn"} - \
            set(state)
        if missing:
            raise ValueError(f"Problem state misses {sorted(missing)}")
        for field, ours in (("coordinates", self.coordinates), ("conditions", names),
                            ("seed", self.seed)):
            if state[field] != ours:
                raise ValueError(f"Problem state: {field} {state[field]!r}, this problem's are "
                                 f"{ours!r}; load it into a problem built the same way")
        growth = {self.conditions[i].name: list(g) for i, g in self.growth.items()}
        if "growth" in state and {k: [int(v) for v in g] for k, g in state["growth"].items()} \
                != growth:
            raise ValueError(f"Problem state: grows {state['growth']!r}, this problem "
                             f"{growth!r} (grow(name, most, every)); load it into a problem "
                             "built the same way")

    # ---- residuals --------------------------------------------------------------------------
    def _point_residual(self, index: int, u: Callable[[torch.Tensor], torch.Tensor],
                        point: torch.Tensor) -> torch.Tensor:
        """Condition `index`'s k residual values at one point, weighted (w/√N)."""
        condition = self.conditions[index]
        basis = torch.eye(len(self.coordinates), dtype=point.dtype, device=point.device)
        values = self.symbols[index].values(u, point, basis)
        f = torch.as_tensor(condition.residual(**values))
        scale = condition.weight / math.sqrt(self.counts[index])
        return (scale * f).reshape(-1)

    @staticmethod
    def _of_module(model: Any) -> Callable[[torch.Tensor], torch.Tensor]:
        return lambda q: model(q.unsqueeze(0)).reshape(-1)

    def _split(self, x: Any) -> list[torch.Tensor]:
        if not isinstance(x, torch.Tensor) or x.dim() != 2:
            raise ValueError(f"x must be the problem's points, a (points × {len(self.coordinates)}"
                             f") tensor (problem.points), not {type(x).__name__}"
                             f"{tuple(x.shape) if isinstance(x, torch.Tensor) else ''}")
        if x.shape[0] != self.point_offsets[-1] or x.shape[1] != len(self.coordinates):
            layout = ", ".join(f"{c.name} {n}" for c, n in zip(self.conditions, self.counts))
            if self.drawn_counts != self.counts and x.shape[0] == sum(self.drawn_counts):
                changed = ", ".join(f"{c.name} {a} → {b}" for c, a, b in zip(
                    self.conditions, self.drawn_counts, self.counts) if a != b)
                raise ValueError(f"x has {x.shape[0]} points, the layout of the last draw; "
                                 f"set_count has changed it since ({changed}): call "
                                 "problem.resample(step) after set_count, before the step")
            raise ValueError(f"x has shape {tuple(x.shape)}; the problem's points are "
                             f"{self.point_offsets[-1]} × {len(self.coordinates)} ({layout}): "
                             "pass problem.points, problem.sample(step) or problem.heldout()")
        return [x[a:b] for a, b in zip(self.point_offsets[:-1], self.point_offsets[1:])]

    def _taylor(self, index: int, model: Any) -> TaylorMLP | None:
        """The Taylor route's propagation for condition `index`, or None where it does not
        apply (a model it does not know, a derivative above the fourth, jacobian= another)."""
        return self._taylor_of(self.symbols[index].derivatives, model)

    def _taylor_of(self, derivatives: set, model: Any) -> TaylorMLP | None:
        """The Taylor route's propagation of `derivatives`, or None where it does not apply."""
        if self.jacobian not in ("auto", "taylor") or not TaylorMLP.supports(model):
            return None
        if any(len(d) > 4 for d in derivatives):
            return None
        return TaylorMLP(model, len(self.coordinates), [d[0] for d in derivatives if len(d) == 1],
                         [d for d in derivatives if len(d) == 2],
                         [d for d in derivatives if len(d) == 3],
                         [d for d in derivatives if len(d) == 4])

    def _one_pass(self, model: Any) -> TaylorMLP | None:
        """One Taylor propagation for every condition's points (the union of their derivatives),
        where the Taylor route takes every condition: the residual then costs one forward pass,
        not one per condition — on a GPU a pass costs the operators it issues, not its points;
        on the CPU the conditions with fewer derivatives cost a little more."""
        if len(self.conditions) < 2 or any(self._taylor(i, model) is None
                                           for i in range(len(self.conditions))):
            return None
        return self._taylor_of(set().union(*(s.derivatives for s in self.symbols)), model)

    def _residual_values(self, index: int, arguments: list[torch.Tensor]) -> torch.Tensor:
        """F at every point (P × k) from the residual's batched arguments."""
        residual = self.conditions[index].residual
        names = [name for name, _, _ in self.symbols[index].arguments]

        def positional(*values: torch.Tensor) -> torch.Tensor:
            return torch.as_tensor(residual(**dict(zip(names, values)))).reshape(-1)

        if not arguments:
            raise ValueError(f"condition {self.conditions[index].name!r}: the residual takes "
                             "no symbols")
        return vmap(positional)(*arguments)

    def _point_factors(self, index: int, points: torch.Tensor) -> torch.Tensor | None:
        """Condition `index`'s factor per point (its point_weights'), or None without."""
        weights = self.conditions[index].point_weights
        if weights is None:
            return None
        factors = torch.as_tensor(weights.factors(points, self.coordinates))
        if factors.shape != (points.shape[0],):
            raise ValueError(f"condition {self.conditions[index].name!r}: point_weights."
                             f"factors gave shape {tuple(factors.shape)} for "
                             f"{points.shape[0]} points; expected ({points.shape[0]},)")
        return factors.to(dtype=points.dtype, device=points.device)

    def update_weights(self, model: Any) -> None:
        """Updates every condition's ``point_weights`` from the residuals at ``problem.points``
        (without the point weights, without a graph).  Call it between steps, after
        ``resample``; it costs one evaluation of the residuals."""
        indices = [i for i, c in enumerate(self.conditions) if c.point_weights is not None]
        if not indices:
            return
        with torch.no_grad():
            parts = self.condition_residuals(model, self.points.detach(), point_weights=False)
        for index, points in zip(range(len(parts)), self._split(self.points)):
            if index not in indices:
                continue
            self.conditions[index].point_weights.update(
                points, self._squared(index, parts[index], points.shape[0]), self.coordinates)

    def _squared(self, index: int, rows: torch.Tensor, points: int) -> torch.Tensor:
        """Each point's Σ|F|² (float64) from condition `index`'s weighted rows (w/√N·F) at
        `points` points: the weight and the count divided out."""
        scale = self.conditions[index].weight / math.sqrt(self.counts[index])
        f = (rows.double() / scale).reshape(points, -1)
        return (f * f).sum(dim=1)

    def condition_residuals(self, model: Any, x: torch.Tensor,
                            point_weights: bool = True) -> list[torch.Tensor]:
        """Each condition's weighted residual rows at its points of x, with autograd through
        the model's parameters: the Taylor route's batched forward pass where it applies,
        otherwise vmap over the points of the one-point residual (nested jvp).
        ``point_weights=False`` leaves the conditions' point weights out."""
        parameter = next(model.parameters(), None) if isinstance(model, torch.nn.Module) else None
        if parameter is not None and parameter.dtype != x.dtype:
            raise ValueError(f"the points are {x.dtype} but the model is {parameter.dtype}: "
                             f"make the Problem with dtype={parameter.dtype}")
        split = self._split(x)
        union = self._one_pass(model)
        if union is None:
            parts = [self._rows(index, model, points, point_weights)
                     for index, points in enumerate(split)]
        else:
            everything = union.forward(x)[:5]
            parts = [self._weighted(index, points, self._taylor_residual(
                index, union, points, *(c[a:b] for c in everything)), point_weights)
                for index, (points, a, b) in enumerate(zip(split, self.point_offsets[:-1],
                                                             self.point_offsets[1:]))]
        k = [part.numel() // n for part, n in zip(parts, self.counts)]
        if self.rows_per_point is None:
            self.rows_per_point = k
        return parts

    def _rows(self, index: int, model: Any, points: torch.Tensor,
              point_weights: bool = True) -> torch.Tensor:
        """Condition `index`'s weighted residual rows (w/√N·F) at `points`, any number of
        them: the Taylor route's batched forward pass where it applies, else vmap of the
        one-point residual."""
        taylor = self._taylor(index, model)
        if taylor is not None:
            r = self._taylor_residual(index, taylor, points, *taylor.forward(points)[:5])
        else:
            u = self._of_module(model)
            r = vmap(lambda p: self._point_residual(index, u, p))(points)
        return self._weighted(index, points, r, point_weights)

    def _taylor_residual(self, index: int, taylor: TaylorMLP, points: torch.Tensor,
                         *components: torch.Tensor) -> torch.Tensor:
        """Condition `index`'s rows w/√N·F at `points` from a Taylor forward pass's u, uᵃ,
        uᵃᵇ, uᵃᵃᵃ there (P × k)."""
        arguments = self.symbols[index].taylor_arguments(points, taylor, *components)
        scale = self.conditions[index].weight / math.sqrt(self.counts[index])
        return scale * self._residual_values(index, arguments)

    def _weighted(self, index: int, points: torch.Tensor, r: torch.Tensor,
                  point_weights: bool) -> torch.Tensor:
        """Condition `index`'s rows r (one set per point) with its point weights, flat."""
        factors = self._point_factors(index, points) if point_weights else None
        if factors is not None:
            r = r.reshape(points.shape[0], -1) * factors[:, None]
        return r.reshape(-1)

    def __call__(self, model: Any, x: torch.Tensor, y: Any = None) -> torch.Tensor:
        """The residual vector r of all conditions at the points x (lmtrain.torch's
        ``residual_fn(model, x, y)``; y is not used)."""
        return torch.cat(self.condition_residuals(model, x))

    @property
    def blocks(self) -> list[tuple[str, slice]]:
        """(condition name, slice of its residual rows in r)."""
        if self.rows_per_point is None:
            raise RuntimeError("the residual rows per point are known after the first "
                               "evaluation: call the problem (or a step) first")
        out, start = [], 0
        for condition, n, k in zip(self.conditions, self.counts, self.rows_per_point):
            out.append((condition.name, slice(start, start + n * k)))
            start += n * k
        return out

    def residual_blocks(self) -> list[tuple[str, int, int, float]]:
        """The blocks for lmtrain's step report: (condition name, first row, rows, 1/w²), so that
        the library's block loss 1/w²·Σ r² is the condition's mean |F|² (``block_losses``'
        figure).  lmtrain.torch asks for them at every linearization."""
        return [(name, rows.start, rows.stop - rows.start, 1.0 / condition.weight ** 2)
                for (name, rows), condition in zip(self.blocks, self.conditions)]

    def block_losses(self, r: torch.Tensor) -> dict[str, float]:
        """Each condition's mean squared residual, mean over its points of |F|² (its weight and
        point count divided out), from a residual vector r of this problem."""
        r = r.detach().double()
        return {name: float((r[rows] ** 2).sum()) / condition.weight ** 2
                for (name, rows), condition in zip(self.blocks, self.conditions)}

    def mean_squared(self, model: Any, x: torch.Tensor) -> dict[str, float]:
        """block_losses of the residuals at the points x (without a graph and without the
        conditions' point weights: each condition's plain mean |F|²)."""
        with torch.no_grad():
            return self.block_losses(torch.cat(self.condition_residuals(
                model, x.detach(), point_weights=False)))

    def interpolation_ratios(self, model: Any, training: torch.Tensor,
                             heldout: torch.Tensor) -> dict[str, float]:
        """Per condition, RMS residual on held-out points / RMS residual on the training
        points: about 1 when the network solves the PDE, ≫ 1 when it interpolates."""
        a, b = self.mean_squared(model, training), self.mean_squared(model, heldout)
        return {name: math.sqrt(b[name] / a[name]) if a[name] > 0 else math.inf for name in a}

    def warn_if_interpolating(self, model: Any, training: torch.Tensor,
                              heldout: torch.Tensor, threshold: float = 10.0) -> dict[str, float]:
        """interpolation_ratios, with an InterpolationWarning naming each condition whose ratio
        exceeds `threshold`."""
        ratios = self.interpolation_ratios(model, training, heldout)
        high = {name: ratio for name, ratio in ratios.items() if ratio > threshold}
        if high:
            detail = ", ".join(f"{name}: {ratio:.3g}×" for name, ratio in high.items())
            warnings.warn(f"the held-out residual is far above the training residual ({detail}): "
                          "the network fits the collocation points, not the PDE.  Use more "
                          "points per parameter, resample them (problem.resample) or a smaller "
                          "network", InterpolationWarning, stacklevel=2)
        return ratios

    # ---- the Jacobian -----------------------------------------------------------------------
    def _engine(self, index: int, model: torch.nn.Module, names: Sequence[str], n: int,
                mode: str) -> PointwiseJacobian:
        def point_residual(params: dict[str, torch.Tensor], point: torch.Tensor) -> torch.Tensor:
            # The whole residual under the differentiated parameters, not only the model's
            # call: a residual that reads a parameter of the model (an inverse problem's unknown
            # coefficient, `model.k`) then has its column of J too.
            with _reparametrize_module(model, params):
                return self._point_residual(index, self._of_module(model), point)

        k = self.rows_per_point[index] if self.rows_per_point else 1
        return PointwiseJacobian(names, point_residual, mode, self._jacobian_chunk(k, n))

    def _jacobian_chunk(self, k: int, n: int) -> int:
        """Points per chunk of J's rows: where the library's memory plan sizes the slices
        (use_memory_plan, chunk_bytes not given), on a GPU every point of the slice asked for —
        the plan measured what computing a slice in one pass takes, and a pass costs the
        operators it issues —, on the CPU chunks of 256 MiB within it (a whole 16 400-point
        slice of Burgers' recipe: 3 % slower, 0.4 GB more memory); otherwise within chunk_bytes.
        A chunk's bytes: k rows of n per point, and the intermediates about three times that."""
        per_point = 4 * k * n * (torch.finfo(self.dtype).bits // 8)
        if not self._chunk_given and self._planned_bytes is not None:
            return sys.maxsize if self.device.type == "cuda" else max(1, _CPU_CHUNK // per_point)
        return max(1, self.chunk_bytes // per_point)

    def _taylor_pass(self, taylor: TaylorMLP, params: dict[str, torch.Tensor],
                     points: torch.Tensor, segments: Sequence[tuple[int, int, int]],
                     out: torch.Tensor) -> torch.Tensor:
        """J's rows at `points` by the Taylor route into `out` (P·k × n, contiguous, k rows per
        point): one forward pass, ∂F/∂(u, uᵃ, uᵃᵇ, uᵃᵃᵃ) per point (vmap of jacrev of each
        residual, a handful of scalars) and one reverse sweep per row of a point.  `segments`:
        (condition, first, stop) — which condition's residual the points first:stop take.  A
        WithCoefficients model's coefficients: their columns ∂F/∂coefficient per point, from
        the same vmap of jacrev."""
        k = out.shape[0] // points.shape[0]
        *components, tape = taylor.forward(points, params, keep=True)
        seeds = [[torch.zeros_like(c) for c in components] for _ in range(k)]
        columns = [{name: out.new_zeros(points.shape[0], params[name].numel())
                    for name in taylor.coefficients} for _ in range(k)]
        for index, lo, hi in segments:
            part = slice(lo, hi)
            self._add_seeds(index, taylor, points[part], [c[part] for c in components],
                            [[t[part] for t in seed] for seed in seeds],
                            params, [{n: c[part] for n, c in row.items()} for row in columns])
        per_row, names = out.view(points.shape[0], k, -1), list(params)
        for j in range(k):
            taylor.jacobian(tape, *seeds[j], names, out=per_row[:, j], coefficients=columns[j])
        return out

    def _add_seeds(self, index: int, taylor: TaylorMLP, points: torch.Tensor,
                   components: Sequence[torch.Tensor], seeds: list[list[torch.Tensor]],
                   params: Mapping[str, torch.Tensor],
                   columns: list[dict[str, torch.Tensor]]) -> None:
        """Adds ∂(w/√N·F_j)/∂(u, uᵃ, uᵃᵇ, uᵃᵇᶜ, uᵃᵇᶜᵈ) of condition `index` at `points` to
        seeds[j] (five tensors shaped like taylor's forward components there), for each of its
        k rows per point: vmap of jacrev of the residual over the points.  And ∂(w/√N·F_j)/∂c of
        each coefficient c of a WithCoefficients model to columns[j][c] (points × size): the
        residual reads ``model.c``, which is substituted by params[c] while it runs, so that
        jacrev differentiates it (the jacrev route's substitution, _engine)."""
        symbols = self.symbols[index]
        arguments = symbols.taylor_arguments(points, taylor, *components)
        residual = self.conditions[index].residual
        arg_names = [name for name, _, _ in symbols.arguments]
        names, count = taylor.coefficients, len(arguments)

        def positional(*values: torch.Tensor) -> torch.Tensor:
            if not names:
                return torch.as_tensor(residual(**dict(zip(arg_names, values)))).reshape(-1)
            with _reparametrize_module(taylor.wrapper, dict(zip(names, values[count:]))):
                return torch.as_tensor(
                    residual(**dict(zip(arg_names, values[:count])))).reshape(-1)

        coefficients = [params[name] for name in names]
        every = vmap(jacrev(positional, argnums=tuple(range(count + len(names)))),
                     in_dims=(0,) * count + (None,) * len(names))(*arguments, *coefficients)
        partials, by_coefficient = every[:count], every[count:]
        scale = self.conditions[index].weight / math.sqrt(self.counts[index])
        for j, row in enumerate(columns):
            for name, partial in zip(names, by_coefficient):
                row[name].add_(scale * partial[:, j].reshape(points.shape[0], -1))
        for j, (seed, seed_d, seed_dd, seed_ddd, seed_dddd) in enumerate(seeds):
            for (_, kind, where), partial in zip(symbols.arguments, partials):
                if kind == "coordinate":
                    continue
                o, derivative = where
                g = scale * partial[:, j]
                if not derivative:
                    seed[:, o].add_(g)
                elif len(derivative) == 1:
                    seed_d[:, taylor.first.index(derivative[0]), o].add_(g)
                elif len(derivative) == 2:
                    seed_dd[:, taylor.second.index(derivative), o].add_(g)
                elif len(derivative) == 3:
                    seed_ddd[:, taylor.third.index(derivative), o].add_(g)
                else:
                    seed_dddd[:, taylor.fourth.index(derivative), o].add_(g)

    def _one_pass_rows(self, union: TaylorMLP, params: dict[str, torch.Tensor],
                       x: torch.Tensor, first: int, last: int, out: torch.Tensor) -> None:
        """The rows of J of the points first:last of x, every condition's, into `out`
        ((last − first)·k × n; every condition has k rows per point), by one Taylor pass per
        chunk of points for all the conditions in it, each seeding its own points (on a GPU a
        pass costs the operators it issues, not its points)."""
        k = self.rows_per_point[0]
        chunk = self._jacobian_chunk(k, out.shape[1])
        offsets = list(zip(self.point_offsets[:-1], self.point_offsets[1:]))
        for s in range(first, last, chunk):
            e = min(s + chunk, last)
            segments = [(index, max(a, s) - s, min(b, e) - s) for index, (a, b) in
                        enumerate(offsets) if max(a, s) < min(b, e)]
            self._taylor_pass(union, params, x[s:e], segments,
                              out[(s - first) * k:(e - first) * k])

    def _condition_rows(self, route: str, index: int, model: torch.nn.Module,
                        params: dict[str, torch.Tensor], points: torch.Tensor,
                        out: torch.Tensor | None = None) -> torch.Tensor:
        """Condition `index`'s rows of J at `points` (k·P × n), by `route`, in chunks of
        points of chunk_bytes; into `out` (contiguous, k·P × n) when given."""
        names = list(params)
        n = sum(p.numel() for p in params.values())
        k = self.rows_per_point[index] if self.rows_per_point else 1
        if route != "taylor":
            j = self._engine(index, model, names, n, route).rows(params, points)
            return j if out is None else out.copy_(j)
        taylor = self._taylor(index, model)
        if out is None:
            out = torch.empty(points.shape[0] * k, n, dtype=next(iter(params.values())).dtype,
                              device=points.device)
        chunk = self._jacobian_chunk(k, n)
        for s in range(0, points.shape[0], chunk):  # each chunk's rows where they belong
            e = min(s + chunk, points.shape[0])
            self._taylor_pass(taylor, params, points[s:e], [(index, 0, e - s)],
                              out[s * k:e * k])
        return out

    def _route(self, model: torch.nn.Module, params: dict[str, torch.Tensor],
               x: torch.Tensor) -> str:
        """The Jacobian's route, chosen once: "taylor" (TaylorMLP), "jacrev" or "jacfwd"
        (PointwiseJacobian).  jacrev against jacfwd by shape when the rows per point k and the
        parameters n differ tenfold (reverse mode costs a pass per row, forward mode one per
        parameter), otherwise by timing; where the Taylor route applies to every condition it
        is timed against the transform on up to 256 points of the largest condition (second
        calls timed, the first includes torch.func's start-up).  ``jacobian_choice`` says which
        and why."""
        if self.jacobian == "taylor" and not all(
                self._taylor(i, model) is not None for i in range(len(self.conditions))):
            raise ValueError("jacobian = 'taylor' needs an nn.Sequential of Linear layers and "
                             "Tanh/Sigmoid/SiLU/Softplus/GELU/Identity/pinn.Sin (after an optional "
                             "parameter-free input map), alone or in pinn.HardConstrained or "
                             "pinn.WithCoefficients (an "
                             "inverse problem's coefficients beside it), and derivatives of "
                             "order ≤ 4; use 'auto' or 'jacrev'")
        if self.jacobian != "auto":
            return self.jacobian
        if self.jacobian_choice:
            return self.jacobian_choice["mode"]
        n = sum(p.numel() for p in params.values())
        k = max(self.rows_per_point or [1])
        parts = self._split(x)
        index = max(range(len(parts)), key=lambda i: parts[i].shape[0])
        points = parts[index][:256]
        candidates = []
        if 10 * k <= n or 10 * n <= k:
            candidates.append("jacrev" if k <= n else "jacfwd")
        else:
            candidates += ["jacrev", "jacfwd"]
        if all(self._taylor(i, model) is not None for i in range(len(parts))):
            candidates.append("taylor")
        if len(candidates) == 1:
            self.jacobian_choice = {"mode": candidates[0], "by": "shape"}
            return candidates[0]
        seconds = {}
        for route in candidates:
            self._condition_rows(route, index, model, params, points)
            t = time.perf_counter()
            self._condition_rows(route, index, model, params, points)
            seconds[route] = time.perf_counter() - t
        mode = min(seconds, key=seconds.get)
        self.jacobian_choice = {"mode": mode, "by": "measurement", "seconds": seconds}
        return mode

    @property
    def jacobian_path(self) -> str:
        mode = self.jacobian_choice.get("mode", self.jacobian)
        if mode == "auto":  # before the first step, which measures the routes
            return "pinn (its route chosen at the first step)"
        return "pinn taylor" if mode == "taylor" else f"pinn pointwise {mode}"

    def jacobian_slice(self, model: torch.nn.Module, params: Mapping[str, torch.Tensor],
                       x: torch.Tensor, y: Any, start: int, stop: int) -> torch.Tensor:
        """Rows start:stop of J = ∂r/∂θ at the points x, (stop − start) × n, columns in the
        flat order of ``params`` (``model.named_parameters()``): lmtrain.torch's protocol for a
        residual_fn with its own Jacobian."""
        params = dict(params)
        parts_x = self._split(x)
        if self.rows_per_point is None:
            with torch.no_grad():
                self(model, x)
        route = self._route(model, params, x)
        n = sum(p.numel() for p in params.values())
        total = sum(points.shape[0] * k for points, k in zip(parts_x, self.rows_per_point))
        if not 0 <= start <= stop <= total:
            raise ValueError(f"jacobian_slice rows {start}:{stop}: the residual has {total} "
                             "rows at these points")
        # One J for the slice, each condition's rows computed into their place (the slice is
        # the step's largest tensor: joining the parts cost as much as computing them).
        out = torch.empty(stop - start, n, dtype=next(iter(params.values())).dtype,
                          device=x.device)
        union = self._one_pass(model) if route == "taylor" else None
        if union is not None and len(set(self.rows_per_point)) == 1:
            return self._one_pass_slice(union, params, x, parts_x, start, stop, out)
        offset = 0
        for index, (points, k) in enumerate(zip(parts_x, self.rows_per_point)):
            a, b = offset, offset + points.shape[0] * k  # this condition's rows
            offset = b
            lo, hi = max(a, start), min(b, stop)
            if lo >= hi:
                continue
            first, last = (lo - a) // k, -(-(hi - a) // k)  # the points holding those rows
            target = out[lo - start:hi - start]
            whole = (lo - a) % k == 0 and (hi - a) % k == 0  # whole points: straight into J
            j = self._condition_rows(route, index, model, params, points[first:last],
                                     target if whole else None)
            factors = self._point_factors(index, points)
            if factors is not None:
                j.view(last - first, k, -1).mul_(factors[first:last, None, None])
            if not whole:
                target.copy_(j[lo - a - first * k:hi - a - first * k])
        return out

    def _one_pass_slice(self, union: TaylorMLP, params: dict[str, torch.Tensor],
                        x: torch.Tensor, parts_x: list[torch.Tensor], start: int, stop: int,
                        out: torch.Tensor) -> torch.Tensor:
        """jacobian_slice's rows start:stop into `out` by _one_pass_rows (every condition on the
        Taylor route, k rows per point each), with each condition's point weights."""
        k = self.rows_per_point[0]
        first, last = start // k, -(-stop // k)  # the points holding those rows
        whole = start % k == 0 and stop % k == 0
        rows = out if whole else out.new_empty((last - first) * k, out.shape[1])
        self._one_pass_rows(union, params, x, first, last, rows)
        per_point = rows.view(last - first, k, -1)
        for index, (points, a) in enumerate(zip(parts_x, self.point_offsets)):
            lo, hi = max(a, first), min(a + points.shape[0], last)
            factors = self._point_factors(index, points) if lo < hi else None
            if factors is not None:
                per_point[lo - first:hi - first].mul_(factors[lo - a:hi - a, None, None])
        if not whole:
            out.copy_(rows[start - first * k:stop - first * k])
        return out


# ---- a whole-batch residual_fn whose rows are pointwise -----------------------------------------
class Draws:
    """``Problem.draws(model, every)``: one batch per epoch, the problem's current points;
    ``epoch_end(epoch)`` (which ``LevenbergMarquardt.fit`` calls after each epoch) draws the
    next epoch's points and updates the point weights, as the examples' loop does between
    steps."""

    def __init__(self, problem: Problem, model: Any, every: int = 1,
                 hold: tuple[int, int] | None = None) -> None:
        if not isinstance(every, int) or every < 0:
            raise ValueError(f"draws(every={every!r}): expected a non-negative integer (0: the "
                             "points of now, never redrawn)")
        if hold is not None and not (len(hold) == 2 and all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in hold)):
            raise ValueError(f"draws(hold={hold!r}): expected (epoch, factor), positive integers")
        self.problem, self.model, self.every, self.hold = problem, model, every, hold
        problem.update_weights(model)

    def __len__(self) -> int:
        return 1

    def __iter__(self) -> Iterator[tuple[torch.Tensor, None]]:
        yield self.problem.points, None

    def state_dict(self) -> dict[str, Any]:
        """The problem's state (``Problem.state_dict``): ``fit(checkpoint=FILE)`` keeps it
        beside the checkpoint (FILE.data), so a resumed run has the point weights' memory."""
        return {"problem": self.problem.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if not isinstance(state, Mapping) or "problem" not in state:
            raise ValueError("Draws state: expected {'problem': Problem.state_dict()}")
        self.problem.load_state_dict(state["problem"])

    def epoch_end(self, epoch: int) -> None:
        if self.hold is not None and epoch >= self.hold[0] and not self.problem.held:
            # At the hold's epoch, or on a resume past it: the same uniform draw either way.
            self.problem.hold(self.hold[0], self.model, self.hold[1])
        elif self.every and epoch % self.every == 0:
            self.problem.resample(epoch, self.model)
        self.problem.update_weights(self.model)


class Pointwise:
    """A whole-batch ``residual_fn(model, x, y)`` whose rows are pointwise in the rows of x:
    row block i (``rows_per_point`` rows) depends on x[i] (and y[i]) only, so
    ``residual_fn(model, x[a:b], y[a:b])`` is rows a·k:b·k of ``residual_fn(model, x, y)``.
    Declaring it lets lmtrain build J from slices of the points instead of one graph of the
    whole batch (O(m²·n)).  lmtrain.torch finds rows of one point by itself (per-point copies
    of θ, ``_per_point.py``, issue 39), so the declaration's use is its ``"vmap"`` route, about
    as fast for a torch.func residual_fn.  Two routes, the faster chosen by timing both on the
    first slice (``jacobian_choice`` says which):

    * ``"vmap"``: vmap over the points of jacrev in θ of the residual_fn on one point —
      O(m·n), for a residual_fn that torch.func can transform (input derivatives by
      ``torch.func`` rather than ``torch.autograd.grad``);
    * ``"sliced"``: the residual_fn on ``slice_points`` points at a time, its rows by batched
      reverse mode through that small graph — O(m·s·n), for any residual_fn (autograd input
      derivatives included).

    Boundary terms that do not belong to a point (poisson.py's two boundary values built inside
    the residual_fn) break the declaration: give them points of their own, or use ``Problem``.
    """

    def __init__(self, residual_fn: Callable[..., torch.Tensor], rows_per_point: int = 1, *,
                 slice_points: int = 32, route: str = "auto") -> None:
        if not callable(residual_fn):
            raise TypeError(f"Pointwise() needs a residual_fn, not {type(residual_fn).__name__}")
        if not isinstance(rows_per_point, int) or rows_per_point < 1:
            raise ValueError(f"rows_per_point = {rows_per_point!r}: expected a positive integer")
        if route not in ("auto", "vmap", "sliced"):
            raise ValueError(f"route = {route!r}: expected 'auto', 'vmap' or 'sliced'")
        self.residual_fn, self.rows_per_point = residual_fn, rows_per_point
        self.slice_points, self.route = max(1, int(slice_points)), route
        self.jacobian_choice: dict[str, Any] = {}

    def __call__(self, model: Any, x: torch.Tensor, y: Any = None) -> torch.Tensor:
        r = self.residual_fn(model, x, y)
        if isinstance(r, torch.Tensor) and r.numel() != x.shape[0] * self.rows_per_point:
            raise ValueError(f"the Pointwise residual_fn returned {r.numel()} residuals for "
                             f"{x.shape[0]} points; rows_per_point = {self.rows_per_point} "
                             f"makes {x.shape[0] * self.rows_per_point}")
        return r

    @property
    def jacobian_path(self) -> str:
        return f"pinn pointwise residual_fn {self.jacobian_choice.get('mode', self.route)}"

    def _vmap_rows(self, model: torch.nn.Module, params: dict[str, torch.Tensor],
                   x: torch.Tensor, y: Any) -> torch.Tensor:
        names = list(params)

        def one(theta: dict[str, torch.Tensor], xi: torch.Tensor,
                yi: torch.Tensor | None) -> torch.Tensor:
            with _reparametrize_module(model, theta):
                return self.residual_fn(model, xi.unsqueeze(0),
                                        None if yi is None else yi.unsqueeze(0)).reshape(-1)

        blocks = vmap(jacrev(one), in_dims=(None, 0, None if y is None else 0))(params, x, y)
        return torch.cat([blocks[k].reshape(blocks[k].shape[0] * blocks[k].shape[1], -1)
                          for k in names], dim=1)

    def _sliced_rows(self, model: torch.nn.Module, params: dict[str, torch.Tensor],
                     x: torch.Tensor, y: Any) -> torch.Tensor:
        leaves = {k: v.detach().requires_grad_(True) for k, v in params.items()}
        parts = []
        for s in range(0, x.shape[0], self.slice_points):
            xs = x[s:s + self.slice_points]
            ys = None if y is None else y[s:s + self.slice_points]
            with torch.enable_grad(), _reparametrize_module(model, leaves):
                r = self.residual_fn(model, xs, ys).reshape(-1)
            parts.append(BatchedReverseJacobian(r, list(leaves.values()))._slice(0, r.numel()))
        return torch.cat(parts)

    def _choose(self, model: torch.nn.Module, params: dict[str, torch.Tensor], x: torch.Tensor,
                y: Any) -> str:
        if self.route != "auto":
            return self.route
        if self.jacobian_choice:
            return self.jacobian_choice["mode"]
        xs = x[:64]
        ys = None if y is None else y[:64]
        seconds: dict[str, float] = {}
        reason = ""
        for route, rows in (("vmap", self._vmap_rows), ("sliced", self._sliced_rows)):
            try:
                rows(model, params, xs, ys)
            except Exception as error:  # noqa: BLE001 - a residual_fn torch.func cannot transform
                reason = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
                continue
            t = time.perf_counter()
            rows(model, params, xs, ys)
            seconds[route] = time.perf_counter() - t
        mode = min(seconds, key=seconds.get)
        self.jacobian_choice = {"mode": mode, "by": "measurement", "seconds": seconds}
        if "vmap" not in seconds:
            self.jacobian_choice["vmap_failed"] = reason
        return mode

    def jacobian_slice(self, model: torch.nn.Module, params: Mapping[str, torch.Tensor],
                       x: torch.Tensor, y: Any, start: int, stop: int) -> torch.Tensor:
        """Rows start:stop of J (lmtrain.torch's protocol), from the points that hold them."""
        params = dict(params)
        k = self.rows_per_point
        route = self._choose(model, params, x, y)
        first, last = start // k, -(-stop // k)
        xs = x[first:last]
        ys = None if y is None else y[first:last]
        rows = (self._vmap_rows if route == "vmap" else self._sliced_rows)(model, params, xs, ys)
        return rows[start - first * k:stop - first * k]
