"""lmtrain.torch.LevenbergMarquardt: LM steps on any torch.nn.Module with lmtrain's engine.

Every step is the library's own (``LevenbergMarquardtStep``, planned by its ``StepPlanner``):

* an ``nn.Sequential`` made only of layers lmtrain implements takes the fast path — the
  library's structural Jacobians on the module's weights (``_native.py``);
* any other module takes the torch path — ``lmtrain._core.ForeignStep`` calls back into
  ``TorchLinearization`` (``_linearization.py``) for residuals and torch.func Jacobian slices,
  reads them in place through DLPack, and does everything else in C++: A = JᵀJ by SYRK, the
  damping, the ratio test, the linear solver (cholesky, eigen, dual, cg), mixed precision, the
  penalties (l2, bayesian, ard), geodesic acceleration, the memory plan and the stop criteria,
  with the names and messages of ``lmtrain fit``.

This module translates: it checks the model and the batch, shards the batch over torchrun's
ranks, keeps the parameters in one flat buffer the C++ step updates in place, and measures the
Jacobian's memory footprint for the plan.  It decides nothing of the step.
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
import time
import warnings
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import torch

from .. import _core
from ._jacobian import _rows, batch_size, resolve_mode
from ._linearization import TorchLinearization
from ._losses import Loss
from ._native import NativePath, cuda_stream_handle, native_architecture

batch_size_of = batch_size  # fit() has an argument of that name

StepReport = _core.StepReport
TerminationReason = _core.TerminationReason


def _trainable_parameters(
        model: torch.nn.Module) -> tuple[list[str], list[torch.Tensor], torch.dtype, torch.device]:
    """Names and tensors of the parameters, with their one dtype and device; every one must
    require grad (a clear error otherwise)."""
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
    if device.type not in ("cpu", "cuda"):
        raise NotImplementedError(f"the model is on {device}; lmtrain.torch trains models on the "
                                  "CPU and on CUDA devices (move it with .cpu() or .cuda())")
    if device.type == "cuda" and not _core.cuda_backend_built():
        raise NotImplementedError(f"the model is on {device}, but this lmtrain was built without "
                                  "its CUDA backend; rebuild it where nvcc is found, or move the "
                                  "model with .cpu()")
    return names, params, dtype, device


def _device_list(devices: Sequence[Any] | None, model_device: torch.device) -> list[torch.device]:
    """devices=[…] as torch devices, the model's first ([model_device] when None)."""
    if devices is None:
        return [model_device]
    listed = [torch.device(d) for d in devices]
    if not listed:
        raise ValueError("devices=[] names no device; give at least the model's")
    first = listed[0]
    if first.type == "cuda" and first.index is None:
        first = torch.device("cuda", torch.cuda.current_device())
    if first != model_device and not (first.type == model_device.type == "cpu"):
        raise ValueError(f"the model is on {model_device} but devices[0] is {listed[0]}; move "
                         f"it with model.to({str(listed[0])!r})")
    for d in listed:
        if d.type not in ("cpu", "cuda"):
            raise NotImplementedError(f"devices: {d} is neither a CPU nor a CUDA device")
        if d.type == "cuda" and not _core.cuda_backend_built():
            raise NotImplementedError(f"devices: {d}, but this lmtrain was built without its "
                                      "CUDA backend")
    return [model_device, *listed[1:]]


class _OnStream:
    """A device's linearization whose calls run on that device and its stream: the library
    calls it from the device's own thread, where torch starts on the default stream of the
    current device."""

    def __init__(self, lin: TorchLinearization, stream: Any) -> None:
        self._lin, self._stream = lin, stream

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._lin, name)
        if not callable(value):
            return value
        stream = self._stream

        def on_stream(*args: Any, **kwargs: Any) -> Any:
            with torch.cuda.device(stream.device), torch.cuda.stream(stream):
                return value(*args, **kwargs)

        return on_stream


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


def _process_group(distributed: bool | str, fast_path: bool | str) -> Any:
    """The ranks the step sums A and g over, else None: the ranks of an MPI launch (mpirun,
    srun: lmtrain's own MPI communicator, which distributed_cholesky needs), else torch.distributed
    initialized with several ranks (torchrun)."""
    if not distributed:
        return None
    if _core.launched_with_several_ranks() and _core.mpi_built():
        if fast_path is True:
            raise ValueError("fast_path=True runs one process; with several ranks the torch path "
                             "sums A and g over them (fast_path='auto' chooses it)")
        return _MpiGroup.of_this_launch()
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
        if distributed is True:
            raise ValueError("distributed=True needs torch.distributed initialized (torchrun) "
                             "with more than one rank")
        return None
    if fast_path is True:
        raise ValueError("fast_path=True runs one process; with several ranks the torch path "
                         "sums A and g over them (fast_path='auto' chooses it)")
    return dist


def relevance_groups(model: torch.nn.Module) -> tuple[list[int], list[str], list[int], int]:
    """ard's groups of the flat parameters (``lmtrain::ParameterGroups``): one per input of the
    first Linear or Conv2d (column i of its weight: the weights leaving input i), then one per
    other parameter tensor (each later weight, every bias).  Returns (group of each parameter,
    names, sizes, input groups)."""
    group_of: list[int] = []
    names: list[str] = []
    sizes: list[int] = []
    first = next((m for m in model.modules()
                  if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d)) and m.weight.requires_grad),
                 None)
    inputs = 0
    for name, p in model.named_parameters():
        if first is not None and p is first.weight and not names:
            inputs = p.shape[1]
            columns = torch.arange(inputs).reshape(1, inputs, *([1] * (p.dim() - 2)))
            index = columns.expand_as(p).reshape(-1)
            group_of += index.tolist()
            names += [f"input {i}" for i in range(inputs)]
            sizes += torch.bincount(index, minlength=inputs).tolist()
            continue
        group_of += [len(names)] * p.numel()
        names.append(name)
        sizes.append(p.numel())
    return group_of, names, sizes, inputs


def _measure_peak(device: torch.device, probe: Callable[[], Any]) -> tuple[int | None, str]:
    """Bytes `probe` needs beyond what is allocated now: on CUDA, torch's peak allocation; on
    the CPU, the growth of the process's peak resident memory (VmHWM, reset through
    /proc/self/clear_refs).  None when it cannot be measured here."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        probe()
        torch.cuda.synchronize(device)
        return max(0, torch.cuda.max_memory_allocated(device) - base), \
            "torch.cuda.max_memory_allocated over a probe slice"

    def status(field: str) -> int:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
        raise OSError(field)

    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        before = status("VmRSS")
        probe()
        return max(0, status("VmHWM") - before), \
            "peak resident memory (VmHWM) over a probe slice"
    except OSError:
        return None, ""


class _MpiGroup:
    """The ranks of an MPI launch (``mpirun -np R python train.py``) in the few calls of
    torch.distributed this module makes itself (rank, size, the sum of a CPU float64 tensor),
    and, as the library's communicator, lmtrain's own MPI communicator: one per process, made on
    first use and finalized at exit.  torch.distributed may be initialized beside it (gloo or
    MPI); its ranks must then be MPI's."""

    _this_launch: _MpiGroup | None = None

    def __init__(self) -> None:
        self.ranks = _core.MpiRanks()
        try:
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized() and (
                    dist.get_rank(), dist.get_world_size()) != (self.ranks.rank, self.ranks.size):
                raise ValueError(
                    f"torch.distributed is rank {dist.get_rank()} of {dist.get_world_size()}, but "
                    f"this MPI launch makes it rank {self.ranks.rank} of {self.ranks.size}; "
                    "initialize torch.distributed with MPI's rank and size (OMPI_COMM_WORLD_RANK, "
                    "OMPI_COMM_WORLD_SIZE), or pass distributed=False")
        except ImportError:  # torch without distributed: MPI alone
            pass

    @classmethod
    def of_this_launch(cls) -> _MpiGroup:
        if cls._this_launch is None:
            import atexit

            cls._this_launch = cls()
            atexit.register(_core.finalize_mpi)  # mpirun reports ranks that leave without it
        return cls._this_launch

    def get_rank(self) -> int:
        return int(self.ranks.rank)

    def get_world_size(self) -> int:
        return int(self.ranks.size)

    def all_reduce(self, tensor: torch.Tensor) -> None:
        values = tensor.detach().to("cpu", torch.float64).contiguous()
        self.ranks.all_reduce(values.numpy())
        tensor.copy_(values)


def _communicator(group: Any, device: torch.device) -> Any:
    """What the library's step takes as its ranks' communicator for `group` (None: one rank)."""
    if group is None:
        return None
    if isinstance(group, _MpiGroup):
        return group.ranks
    return _TorchDistributed(group, device)


class _TorchDistributed:
    """torch.distributed as the library's communicator (src/python/python_communicator.h)."""

    def __init__(self, dist: Any, device: torch.device) -> None:
        self._dist = dist
        self.rank, self.size = dist.get_rank(), dist.get_world_size()
        backend = str(dist.get_backend())
        self.device_buffers = backend == "nccl" and device.type == "cuda"
        self.name = f"torch.distributed {backend} ({self.size} ranks)"

    def all_reduce(self, tensor: torch.Tensor) -> None:
        self._dist.all_reduce(tensor)

    def broadcast(self, tensor: torch.Tensor, root: int) -> None:
        self._dist.broadcast(tensor, src=root)

    def all_gather(self, mine: torch.Tensor, everything: torch.Tensor) -> None:
        self._dist.all_gather(list(everything.chunk(self.size)), mine)


def _first_batch_rows(data: Any) -> int:
    size = getattr(data, "batch_size", None)
    if isinstance(size, int) and size > 0:
        return size
    return batch_size(next(iter(data))[0])


class _TorchTrainingSet:
    """A fit run's training set of torch tensors (the protocol of src/python/foreign_fit.cpp):
    rows are samples of (x, y), gathered on the model's device; or, for an iterable of batches
    (a DataLoader), rows are its batches, taken in its own order."""

    def __init__(self, lin: TorchLinearization, data: Any, validation: Any,
                 device: torch.device) -> None:
        self._lin, self._device = lin, device
        self.batches_are_rows = not LevenbergMarquardt._is_pair(data)
        self._data = data
        self.samples = len(data) if self.batches_are_rows else batch_size(data[0])
        self._validation = validation
        if validation is None:
            self.validation_samples = 0
        elif LevenbergMarquardt._is_pair(validation):
            self.validation_samples = batch_size(validation[0])
        else:
            self.validation_samples = len(validation)
        self._iterator: Any = None
        self._next = 0
        self._units_per_sample = 1.0
        # rows → samples where rows are a loader's batches: of the last load and evaluation
        self._loaded = self._evaluated = (0, 0)
        self._batch_samples: dict[int, int] = {}  # a loader's batch → its samples, last seen

    def max_units(self, samples: int) -> int:
        """The units of the first `samples` rows (made the linearization's batch)."""
        return self.load(list(range(samples)), probe=True)

    def load(self, rows: Any, probe: bool = False) -> int:
        if self.batches_are_rows:
            xs, ys, count = [], [], 0
            for k in (int(r) for r in rows):
                xb, yb = self._batch(k, probe)
                xs.append(xb)
                ys.append(yb)
                count += batch_size(xb)
                self._batch_samples[k] = batch_size(xb)
            x = xs[0] if len(xs) == 1 else torch.cat(xs)
            y = ys[0] if len(ys) == 1 or ys[0] is None else torch.cat(ys)
        else:
            index = torch.as_tensor(rows, dtype=torch.int64, device=self._device)
            x, y = self._data
            x = type(x)(v[index] for v in x) if isinstance(x, (tuple, list)) else x[index]
            y = None if y is None else y[index]
            count = batch_size(x)
        units = self._lin.set_batch(x, y)
        self._units_per_sample = units / count
        self._loaded = (len(rows), count)
        return units

    def _batch(self, k: int, probe: bool) -> tuple[Any, Any]:
        if probe or k == 0 or self._iterator is None or k != self._next:
            self._iterator = iter(self._data)
            for _ in range(k):
                next(self._iterator)
        xb, yb = next(self._iterator)
        self._next = k + 1
        if probe:
            self._iterator = None
        return _to(xb, self._device), _to(yb, self._device)

    def objective(self, theta: torch.Tensor, validation: bool, first: int, count: int) -> float:
        """F of rows [first, first + count) at the model's parameters (θ is their buffer)."""
        data = self._validation if validation else self._data
        total, units = 0.0, 0
        if LevenbergMarquardt._is_pair(data):
            x, y = data
            x, y = _rows(x, first, first + count), None if y is None else y[first:first + count]
            parts: Iterable[tuple[Any, Any]] = [(x, y)]
        else:
            parts = (batch for k, batch in enumerate(data) if first <= k < first + count)
        samples = 0
        for xb, yb in parts:
            f, u, _ = self._lin.evaluate(_to(xb, self._device), _to(yb, self._device))
            total, units, samples = total + f, units + u, samples + batch_size(xb)
        self._lin.reset_step()
        self._evaluated = (count, samples)
        return total

    def described(self) -> tuple[int, int] | None:
        """(training samples, samples per batch) for the Summary where the library's rows are a
        loader's batches (None otherwise): the samples of the batches seen, the first batch's
        (the last draw's where the points change between epochs, pinn.Problem.draws)."""
        if not self.batches_are_rows or not self._batch_samples:
            return None
        return sum(self._batch_samples.values()), self._batch_samples.get(
            0, next(iter(self._batch_samples.values())))

    def reported(self, objective: float, samples: int) -> float:
        if self.batches_are_rows:  # `samples` counts batches: the samples they held
            samples = next((n for rows, n in (self._evaluated, self._loaded) if rows == samples),
                           samples)
        if self._lin.loss is None:  # the mean of r² over the residual rows
            return 2.0 * objective / max(1.0, samples * self._units_per_sample)
        return _core.reported_loss(self._lin.loss.kind, objective, samples, self._lin.outputs)


def _data_state_path(checkpoint: str) -> str:
    """Where fit(checkpoint=FILE) keeps the state of data that changes between epochs."""
    return f"{checkpoint}.data"


def _write_data_state(checkpoint: str, epoch: int, data: Any) -> None:
    """The data's ``state_dict()`` after `epoch`'s ``epoch_end`` (pinn's ``Problem.draws``: the
    points and the point weights' state, residual-based attention's multipliers), tagged with
    that epoch, beside the checkpoint the library has just written (its hook on_checkpoint:
    every ``checkpoint_every`` epochs and on an interruption).  The tag is the checkpoint's
    epoch, or the one before it where the run stopped on an exception before the last
    epoch's ``epoch_end`` (a resume then calls it).  Atomic: a temporary file, then a
    rename."""
    path = _data_state_path(checkpoint)
    temporary = f"{path}.tmp"
    torch.save({"epoch": int(epoch), "state": data.state_dict()}, temporary)
    os.replace(temporary, path)


def _read_data_state(checkpoint: str, done: int) -> tuple[int, Any] | None:
    """(epoch, state): the data's state saved with the checkpoint of epoch `done`, after the
    ``epoch_end`` of `done` or of `done` − 1 (an interrupted run's last epoch ended without
    it); or None: no file (a run without changing data's state, an older checkpoint) or
    another epoch's (the run stopped between the two files) — then the resume draws the data
    of after `done` anew, and point weights with a memory (residual-based attention on held
    points) start over, which a warning says."""
    path = _data_state_path(checkpoint)
    if not os.path.exists(path):
        return None
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
        epoch, state = int(saved["epoch"]), saved["state"]
    except Exception as error:  # noqa: BLE001 - any unreadable file: say which and go on
        warnings.warn(f"resume: {path} is not readable ({type(error).__name__}: {error}); the "
                      "data after the checkpoint's epoch is drawn anew and point weights "
                      "start over", RuntimeWarning, stacklevel=4)
        return None
    if epoch not in (done, done - 1):
        warnings.warn(f"resume: {path} holds the data's state of epoch {epoch}, the checkpoint "
                      f"epoch {done}; the data after epoch {done} is drawn anew and point "
                      "weights start over", RuntimeWarning, stacklevel=4)
        return None
    return epoch, state


def _follow_changing_data(data: Any, checkpoint: str | None, request: Any,
                          callbacks: list[Callable[..., Any]]) -> list[int] | None:
    """For data that changes between epochs (a method ``epoch_end``: pinn's ``Problem.draws``):
    its ``epoch_end(epoch)`` first among fit's epoch callbacks, and with a checkpoint and a
    ``state_dict()``, the library's checkpoint hook keeps the data's state beside each
    checkpoint it writes (FILE.data; the hook runs on the rank that writes).  Returns the
    epoch of the data's last ``epoch_end`` (a one-element list the resume sets), or None for
    data that does not change."""
    epoch_end = getattr(data, "epoch_end", None)
    if not callable(epoch_end):
        return None
    data_epoch = [0]

    def end_of_epoch(epoch: int, *_: Any) -> None:
        epoch_end(epoch)
        data_epoch[0] = epoch

    callbacks.insert(0, end_of_epoch)
    if checkpoint is not None and callable(getattr(data, "state_dict", None)):
        request.on_checkpoint = lambda _: _write_data_state(str(checkpoint), data_epoch[0], data)
    return data_epoch


def _checkpoint_position(path: str, dtype: torch.dtype) -> tuple[int, torch.Tensor]:
    """(epochs done, parameters) of a fit checkpoint, read before the library resumes from it
    (records/checkpoint.h's read_checkpoint_position; the library checks the file itself as it
    resumes)."""
    try:
        done, params = _core.checkpoint_position(str(path))
    except (ValueError, RuntimeError) as error:
        raise ValueError(f"resume={path!r}: not a checkpoint of fit() ({error}); give a file "
                         "written by fit(checkpoint=…)") from None
    return int(done), torch.from_numpy(params).to(dtype)


def _check_tensor_pairs(**pairs: Any) -> None:
    """fit's (x, y) pairs hold torch tensors: a pair of arrays would otherwise be taken for an
    iterable of two batches."""
    for name, pair in pairs.items():
        if isinstance(pair, (tuple, list)) and len(pair) == 2 and any(
                hasattr(v, "__array__") and not isinstance(v, torch.Tensor) for v in pair):
            kinds = "/".join(type(v).__name__ for v in pair)
            raise TypeError(f"fit({name}=(x, y)) takes torch tensors, not {kinds}; convert with "
                            "torch.from_numpy(...) or torch.as_tensor(...)")


def _to(t: Any, device: torch.device) -> Any:
    if t is None:
        return None
    if isinstance(t, (tuple, list)):
        return type(t)(_to(v, device) for v in t)
    return t.to(device)


class LevenbergMarquardt:
    """Levenberg–Marquardt training of a torch model with lmtrain's engine.

    Parameters
    ----------
    model : torch.nn.Module
        Trained in place, on the CPU or a CUDA device.  Every parameter must require grad;
        buffers must not change in forward.  On the torch path the parameters are moved into one
        flat buffer (each ``p.data`` becomes a view of it), which the library updates in place.
    loss : str
        ``"mse"``, ``"cross_entropy"`` (exact Gauss–Newton), ``"cross_entropy_sqrt"``,
        ``"cross_entropy_sampled"`` (the Gauss–Newton sampled with one row per sample; both paths
        draw the same rows), ``"bce"``, ``"huber"`` or ``"l1"``:
        the library's losses (include/lmtrain/core/loss_kind.h).
    residual_fn : callable, optional
        ``residual_fn(model, x, y) -> r``, a vector of residuals; the objective is F = ½‖r‖².
        It may differentiate the model with respect to x (PINNs).  Replaces ``loss``.  An object
        with a method ``jacobian_slice(model, params, x, y, start, stop)`` gives its own rows of J.
    damping : str
        ``"nielsen"`` (default) or ``"multiplicative"``.
    precision : str, optional
        Precision of A, g and the solve: ``"float64"`` (for a float32 model: mixed precision,
        also called ``"mixed"``), ``"float32"`` (exactly, for a float32 model) or ``"auto"``.
        The default is ``"auto"``, as ``lmtrain fit``'s: for a float32 model the library chooses
        float64 under ``bayesian`` and ``ard``, and for batches of at least 16 384 residual rows
        on a CPU or a data-centre GPU, float32 otherwise (the Summary's ``precision_reason``
        says why); a float64 model solves in float64.
    memory_budget : int, optional
        Bytes the step may use; default ``memory_fraction`` of the device's available memory.
    slice_size : int, optional
        Caps the units (samples, or residual rows for a residual_fn) per Jacobian slice.
    jacobian : str
        ``"auto"``, ``"jacrev"``, ``"jacfwd"`` or ``"autograd"`` (see ``_jacobian.py``).
    fast_path : bool or "auto"
        "auto": an nn.Sequential of lmtrain's layers runs on the library's own engine.
    distributed : bool or "auto"
        "auto": with torch.distributed initialized (torchrun) and several ranks, data-parallel
        steps: each rank builds A and g of its shard of the batch, the library sums them with one
        all-reduce per step through torch.distributed (on device buffers with NCCL), rank 0
        solves and broadcasts δ, so all ranks keep the same parameters.  A rank that fails in a
        step makes every rank raise.
    shard : bool
        With several ranks: each rank takes its contiguous share of the batch it is given (all
        ranks given the same batch, as fit() does with tensors).  False: each rank's batch is
        already its shard (a DataLoader with a DistributedSampler).
    devices : list of torch.device, optional
        Several devices driven by this process (cuPyLMA's device list): ``devices[0]`` is the
        model's; each other device gets a replica of it.  ``step`` splits the batch into one
        contiguous shard per device, computes each shard's Jacobian slices where the shard lives
        and sums the devices' A and g in the library (NCCL on distinct GPUs, a sum of host
        buffers otherwise), which solves once and updates every replica alike.  A device may
        appear twice (two CPU workers, or two streams of one GPU).  The torch path only, and
        ``step`` only (``fit`` runs on one device, or on ranks under torchrun).
    **options
        Any other field of ``lmtrain._core.SolverOptions`` (``lambda_initial``, ``max_attempts``,
        ``learning_rate``, ``damping_matrix``, ``linear_solver``, ``regularization``,
        ``weight_decay``, the tolerances, …).
    """

    def __init__(self, model: torch.nn.Module, loss: str = "mse",
                 residual_fn: Callable[..., torch.Tensor] | None = None, *,
                 damping: str = "nielsen", precision: str | None = None,
                 memory_budget: int | None = None, slice_size: int | None = None,
                 jacobian: str = "auto", fast_path: bool | str = "auto",
                 distributed: bool | str = "auto", shard: bool = True,
                 devices: Sequence[Any] | None = None, **options: Any) -> None:
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, not {type(model).__name__}")
        # What a replica on another device is made with (devices=[…]).
        self._replica_arguments = dict(loss=loss, residual_fn=residual_fn, damping=damping,
                                       precision=precision, memory_budget=memory_budget,
                                       slice_size=slice_size, jacobian=jacobian, **options)
        self.model = model
        self.residual_fn = residual_fn
        # A loss name, or a loss object of the torch path (lmtrain.torch.LMA's RowResiduals).
        self.loss = None if residual_fn is not None else Loss(loss) if isinstance(loss, str) \
            else loss
        self._names, self._params, self.dtype, self.device = _trainable_parameters(model)
        self.n = sum(p.numel() for p in self._params)
        self.options = _solver_options(damping, memory_budget, slice_size, options)
        self.slice_size = slice_size
        # The user's name for it; the library decides what it means for this model's dtype.
        self.precision = precision or "auto"
        self.options.apply_precision(self.precision, self.dtype == torch.float64)

        self.devices = _device_list(devices, self.device)
        if len(self.devices) > 1:
            if fast_path is True:
                raise ValueError("fast_path=True runs one device; with devices=[…] the torch path "
                                 "takes each device's shard (fast_path='auto' or False)")
            if distributed is True or _process_group(distributed, "auto") is not None:
                raise ValueError("devices=[…] drives several devices from one process; under "
                                 "torchrun give each rank one device and let the ranks sum A "
                                 "and g (distributed=False to train each rank on its own)")
            fast_path, distributed = False, False
        self._dist: Any = _process_group(distributed, fast_path)
        self._shard = bool(shard)
        # devices=[…]: the replicas on devices[1:], each device's torch stream, and the
        # library's step over them (a DeviceGroupStep, in self._step).
        self._replicas: list[LevenbergMarquardt] = []
        self._streams: list[Any] = []
        self._step: Any = None
        self._pending_state: Any = None  # a _core.StepperState for the first step
        self._native: NativePath | None = None
        architecture = self._fast_path_architecture(fast_path, loss, residual_fn)
        if architecture is not None:
            self._native = NativePath(model, architecture, loss, self.options)
            self.path = "native"
        else:
            mode = resolve_mode(jacobian, residual_fn, 1, self.n)  # a bad mode fails here
            self._theta = self._flat_buffer()
            self._lin = TorchLinearization(model, self._names, self._params, self.loss,
                                           residual_fn, jacobian)
            self.path = self._lin.path = "autograd" if mode == "autograd" else f"torch.func {mode}"
            if hasattr(residual_fn, "jacobian_slice"):  # its own rows (a pinn.Problem)
                self.path = self._lin.path = getattr(residual_fn, "jacobian_path",
                                                     "residual_fn.jacobian_slice")
        self.last_report: Any = None
        if len(self.devices) > 1:
            self._replicas = [self._replica(d) for d in self.devices[1:]]
            # A stream per device (two on a GPU listed twice); the library's backend on each
            # queues on it, and each device's callbacks run on it (_OnStream).
            self._streams = [torch.cuda.Stream(d) if d.type == "cuda" else None
                             for d in self.devices]

    def _replica(self, device: torch.device) -> LevenbergMarquardt:
        """The optimizer of the model's replica on `device` (devices=[…])."""
        replica = copy.deepcopy(self.model).to(device)
        return LevenbergMarquardt(replica, fast_path=False, distributed=False,
                                  **self._replica_arguments)

    def _fast_path_architecture(self, fast_path: bool | str, loss: Any,
                                residual_fn: Any) -> dict[str, Any] | None:
        """The native engine's architecture of the model when the fast path applies, else None
        (fast_path=True where it cannot apply is an error)."""
        use_native = (self._dist is None and residual_fn is None and isinstance(loss, str)
                      and fast_path in (True, "auto"))
        architecture = native_architecture(self.model) if use_native else None
        if fast_path is True and architecture is None:
            raise ValueError("fast_path=True needs an nn.Sequential of layers lmtrain implements "
                             "(Linear, Conv2d, MaxPool2d, AvgPool2d, Flatten, activations) and a "
                             "built-in loss, on one process (under torch.distributed the "
                             "torch path runs: fast_path='auto' or False)")
        return architecture

    # ---- the flat parameter buffer --------------------------------------------------------------
    def _flat_buffer(self) -> torch.Tensor:
        """One buffer holding every parameter, each p.data a view of it: the library's step
        updates the model in place."""
        with torch.no_grad():
            flat = torch.cat([p.detach().reshape(-1) for p in self._params])
            offset = 0
            for p in self._params:
                k = p.numel()
                p.data = flat[offset:offset + k].view_as(p)
                offset += k
        self._views = [p.data_ptr() for p in self._params]
        return flat

    def _theta_now(self) -> torch.Tensor:
        """The flat buffer, gathered again when something replaced a parameter's storage
        (``model.to``, an assignment to ``p.data``)."""
        if [p.data_ptr() for p in self._params] != self._views:
            self._theta = self._flat_buffer()
        return self._theta

    # ---- state --------------------------------------------------------------------------------
    def _schedule(self) -> Any:
        """The step's schedule now (``_core.StepperState``): the library's start before the
        first step, or what load_state_dict gave."""
        if self._native is not None:
            return self._native.state()
        if self._step is not None:
            return self._step.state()
        return self._pending_state or _core.StepperState.initial(self.options)

    def state_dict(self) -> dict[str, Any]:
        """λ's schedule (λ, ν and the damping's learned floor, where the geodesic backoff
        stands), the penalties' weight decays and cross_entropy_sampled's draw key: what a
        resumed run needs."""
        s = self._schedule()
        state = {"lambda": s.lambda_, "nu": s.nu, "floor": s.floor,
                 "geodesic_skip": s.geodesic_skip, "geodesic_backoff": s.geodesic_backoff}
        if s.weight_decays:
            state["weight_decays"] = list(s.weight_decays)
        state["draw_key"] = self._native.draw_key if self._native is not None else \
            self._lin.draw_key
        state["path"] = self.path
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        missing = {"lambda", "nu", "floor"} - set(state)
        if missing:
            raise ValueError(f"state_dict misses {sorted(missing)}")
        key = int(state.get("draw_key", 0))
        if key < 0:
            raise ValueError(f"optimizer state draw_key = {key}: expected an integer ≥ 0")
        schedule = _core.StepperState()
        schedule.lambda_, schedule.nu = float(state["lambda"]), float(state["nu"])
        schedule.floor = float(state["floor"])
        # A state_dict from before the geodesic backoff computes the next correction.
        schedule.geodesic_skip = int(state.get("geodesic_skip", 0))
        schedule.geodesic_backoff = int(state.get("geodesic_backoff", 0))
        schedule.weight_decays = [float(v) for v in state.get("weight_decays") or []]
        schedule.validate()  # ValueError naming the field, before anything changes
        if self._native is not None:
            self._native.set_state(schedule)
            if "draw_key" in state:
                self._native.draw_key = key
            return
        if "draw_key" in state:
            self._lin.draw_key = key
        if self._step is None:
            self._pending_state = schedule
        else:
            self._step.set_state(schedule)

    @property
    def lambda_(self) -> float:
        return self.state_dict()["lambda"]

    @property
    def jacobian_choice(self) -> dict[str, Any]:
        return self._lin.jacobian_choice if self._native is None else {}

    @property
    def effective_parameters(self) -> list[float]:
        """γ per relevance group from the last evidence update (bayesian, ard)."""
        return list(self._step.effective_parameters) if self._step is not None else []

    @property
    def plan(self) -> dict[str, Any]:
        """The library's plan of the torch path's step: the linear solver and why, the memory
        plan, the slice and the device (empty before the first step)."""
        if self._step is None:
            return {}
        s = self._step
        return {"linear_solver": s.linear_solver, "reason": s.linear_solver_reason,
                "geodesic_acceleration": s.geodesic_acceleration, "memory_plan": s.memory_plan,
                "planned_peak_bytes": s.planned_peak_bytes, "budget_bytes": s.budget_bytes,
                "fixed_bytes": s.fixed_bytes, "bytes_per_unit": s.bytes_per_unit,
                "slice_units": s.slice_units,
                "device": s.device, "communicator": s.communicator,
                "footprint": self._footprint_how}

    # ---- the step -----------------------------------------------------------------------------
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

    def step(self, x: Any, y: Any = None) -> Any:
        """One LM step on the batch (x, y); the model's parameters are updated in place.

        Returns the library's StepReport.  Raises ValueError (parameters unchanged) for inputs on
        another device, a residual_fn whose residuals have the wrong shape or are not finite, or
        buffers changed by forward.  With several ranks, a rank that fails makes every rank
        raise (the failed one its own error), with the parameters unchanged everywhere.
        """
        if self._replicas:
            report = self._group_step(x, y)
            self.last_report = report
            return report
        failure: BaseException | None = None
        try:
            b = self._check_inputs(x, y)
            if self._dist is not None and self._shard:
                ranks, rank = self._dist.get_world_size(), self._dist.get_rank()
                if b < ranks:
                    raise ValueError(f"a batch of {b} rows cannot be shared by {ranks} ranks")
                start, stop = rank * b // ranks, (rank + 1) * b // ranks
                x = _rows(x, start, stop)
                y = None if y is None else y[start:stop]
                self._lin.draw_first = start
            if self._native is None:
                units = self._lin.set_batch(x, y)
                step = self._planned_step(units)
        except Exception as error:  # noqa: BLE001 - raised below, on every rank
            failure = error
        if self._dist is not None:  # one scalar all-reduce: every rank starts the step, or none
            self._agree_on_failure(failure)
        if failure is not None:
            raise failure
        if self._native is not None:
            report = self._native.step(x, y)
        else:
            report = self._torch_step(step, units, b)
        self.last_report = report
        return report

    def _torch_step(self, step: Any, units: int, b: int) -> Any:
        reported = b if self.residual_fn is None else self._total_units(units)
        failure: BaseException | None = None
        try:
            report = step.step(self._theta_now(), units, reported)
        except BaseException as error:  # raised below, after the ranks agree
            failure = error
        finally:
            self._lin.reset_step()
        try:
            if self._dist is not None and (failure is not None or not report.accepted):
                # A step no rank accepted may be one another rank failed in (its NaNs end the
                # step everywhere): every rank asks, and all raise together.
                self._agree_on_failure(failure)
            if failure is not None:
                raise failure
        except BaseException:
            step.undo_last_step()  # λ's schedule as before the step, on every rank
            raise
        self.path = self._lin.path
        return report

    # ---- several devices of this process (devices=[…]) ----------------------------------------
    def _members(self) -> list[LevenbergMarquardt]:
        return [self, *self._replicas]

    @contextlib.contextmanager
    def _on_own_stream(self, rank: int) -> Iterator[None]:
        """Work of device `rank` on its stream (a no-op on a CPU)."""
        stream = self._streams[rank]
        if stream is None:
            yield
            return
        with torch.cuda.device(stream.device), torch.cuda.stream(stream):
            yield

    def _group_step(self, x: Any, y: Any) -> Any:
        """One step over the devices: device r takes rows [r·b/R, (r+1)·b/R) of the batch (x
        and y may be anywhere: each shard is moved to its device), and the library's
        DeviceGroupStep sums the devices' A and g and updates every replica alike."""
        members, ranks = self._members(), len(self.devices)
        b = batch_size(x)
        if b < ranks:
            raise ValueError(f"a batch of {b} rows cannot be shared by {ranks} devices")
        if self.residual_fn is None and (y is None or batch_size(y) != b):
            raise ValueError(f"x has {b} rows but y has {0 if y is None else batch_size(y)}; "
                             "give one target row per sample")
        units = []
        try:
            for r, member in enumerate(members):
                lo, hi = r * b // ranks, (r + 1) * b // ranks
                xr = _to(_rows(x, lo, hi), member.device)
                yr = None if y is None else _to(y[lo:hi], member.device)
                with self._on_own_stream(r):
                    units.append(member._lin.set_batch(xr, yr))
                member._lin.draw_first = lo
            group = self._planned_group(max(units))
            for r, member in enumerate(members):  # the shards were written on torch's stream
                if self._streams[r] is not None:
                    self._streams[r].wait_stream(torch.cuda.current_stream(member.device))
            reported = b if self.residual_fn is None else sum(units)
            try:
                return group.step([m._theta_now() for m in members], units, reported)
            except BaseException:
                if group.stopped:  # a failed device broke it: the next step plans anew
                    group.undo_last_step()
                    self._pending_state = group.state()
                    self._step = None
                raise
        finally:
            for r, member in enumerate(members):
                member._lin.reset_step()
                if self._streams[r] is not None:
                    torch.cuda.current_stream(member.device).wait_stream(self._streams[r])

    def _planned_group(self, units: int) -> Any:
        """The library's step over the devices for shards of up to `units` units, planned at the
        first step (each device's footprint measured on its shard) or after a failure broke the
        group, keeping the schedule.  Larger shards are planned for again by the library."""
        if self._step is not None:
            return self._step
        state = self._pending_state
        specs, callbacks = [], []
        for r, member in enumerate(self._members()):
            with self._on_own_stream(r):
                spec = member._spec(units)
            if self._streams[r] is not None:
                spec.stream = cuda_stream_handle(self._streams[r])
            spec.total_units = units * len(self.devices)
            specs.append(spec)
            callbacks.append(member._lin if self._streams[r] is None else
                             _OnStream(member._lin, self._streams[r]))
        self._footprint_how = self._members()[0]._footprint_how
        cls = _core.DeviceGroupStep64 if self.dtype == torch.float64 else _core.DeviceGroupStep32
        self._step = cls(specs, callbacks)
        if state is not None:
            self._step.set_state(state)
        return self._step

    def _total_units(self, units: int) -> int:
        if self._dist is None:
            return units
        total = torch.tensor([float(units)], dtype=torch.float64)
        self._dist.all_reduce(total)
        return int(total.item())

    def _agree_on_failure(self, error: BaseException | None) -> None:
        """One all-reduce of a failure flag after a step that may have failed somewhere: every
        rank raises when any rank failed (the failed one its own error)."""
        flag = torch.tensor([0.0 if error is None else 1.0], dtype=torch.float64)
        self._dist.all_reduce(flag)
        failed = int(flag.item())
        if error is None and failed:
            raise RuntimeError(f"{failed} other rank(s) failed in this LM step (their output has "
                               "the error); parameters are unchanged")

    def _planned_step(self, units: int) -> Any:
        """The library's step, planned at the first step with the Jacobian's footprint measured
        on a probe slice of the batch the linearization holds (`units` units).  A later batch
        with more units is planned for again by the library itself (PlannedStep)."""
        if self._step is not None:
            return self._step
        spec = self._spec(units)
        communicator = _communicator(self._dist, self.device)
        cls = _core.ForeignStep64 if self.dtype == torch.float64 else _core.ForeignStep32
        self._step = cls(spec, self._lin, communicator)
        if self._pending_state is not None:
            self._step.set_state(self._pending_state)
        return self._step

    def _spec(self, units: int) -> Any:
        """The library's description of a torch-path problem whose batches have up to `units`
        units (the linearization holds such a batch: the footprint is measured on it)."""
        spec = _core.ForeignStepSpec()
        spec.parameters = self.n
        spec.residuals_per_unit = self._lin.residuals_per_unit()
        spec.max_units = units
        spec.total_units = (units * self._dist.get_world_size() if self._dist is not None
                            else units)
        spec.options = self.options
        spec.loss = "mse" if self.loss is None else self.loss.kind
        spec.outputs = self._lin.outputs
        spec.device = "cpu" if self.device.type == "cpu" else f"cuda:{self.device.index or 0}"
        if self.device.type == "cuda":
            # The library's backend queues on torch's current stream (when the step is built):
            # after the kernels of the slices, before those that read the parameters.
            spec.stream = cuda_stream_handle(torch.cuda.current_stream(self.device))
        spec.bytes_per_unit, spec.footprint_measured = self._footprint(units)
        self._footprint_how = spec.footprint_measured
        group_of, names, sizes, inputs = relevance_groups(self.model)
        spec.group_of, spec.group_names, spec.group_sizes = group_of, names, sizes
        spec.input_groups = inputs
        return spec

    def _footprint(self, units: int) -> tuple[int, str]:
        """(bytes per unit of a slice, how it was measured): what computing a probe slice of J
        took at its peak, per unit, or 0 and why it was not measured.  The library counts the
        rest (ForeignSource::footprint: the residuals, the rows of J at least)."""
        if self.slice_size is not None:
            return 0, "the rows of J (slice_size given)"
        count = min(units, 8)
        lin = self._lin
        key = lin.draw_key
        pending = lin._pending
        theta = self._theta_now()
        f, r = lin.linearize(theta)[:2]

        def probe() -> None:
            lin.jacobian(theta, 0, count)

        probe()  # torch.func's first call includes its start-up
        measured, how = _measure_peak(self.device, probe)
        lin.draw_key = key
        lin._pending = pending if pending is not None else None
        if self.residual_fn is not None:
            lin._pending = (f, r)
        lin._jacobian = None
        if measured is None:
            return 0, "3 × the rows of J (no way to measure here)"
        return max(1, -(-measured // count)), how

    def normal_equations(self, x: Any, y: Any = None) -> tuple[float, torch.Tensor, torch.Tensor]:
        """F, A = JᵀJ and g = Jᵀr at the current parameters, built by the library from the same
        slices the step folds in: for inspection and tests.  Not on the fast path."""
        if self._native is not None:
            raise RuntimeError("normal_equations() is not available on the fast path; construct "
                               "the optimizer with fast_path=False")
        if self._replicas:
            raise NotImplementedError("normal_equations() runs on one device; construct the "
                                      "optimizer without devices=[…]")
        self._check_inputs(x, y)
        units = self._lin.set_batch(x, y)
        step = self._planned_step(units)
        try:
            f, a, g = step.normal_equations(self._theta_now(), units)
        finally:
            self._lin.reset_step()
        # The Jacobian's mode may have been chosen just now (by measurement): say which, as
        # step() does — the constructor's path is only the guess by shape.
        self.path = self._lin.path
        return f, torch.from_numpy(a), torch.from_numpy(g)

    # ---- training -----------------------------------------------------------------------------
    def fit(self, data: Any, epochs: int = 100, validation: Any = None,
            callbacks: Iterable[Callable[[int, float, float], Any]] = (), *,
            batch_size: int | None = None, loss_goal: float = 0.0,
            max_time_seconds: float = 0.0, max_validation_failures: int = 6,
            restore_best: bool = True, shuffle: bool = True, seed: int = 0,
            verbose: bool = False, checkpoint: str | None = None, checkpoint_every: int = 1,
            resume: str | None = None) -> list[dict[str, Any]]:
        """Trains for up to ``epochs`` passes over ``data`` with the library's fit run (the one
        ``lmtrain fit`` runs) and returns one record per epoch (with ``block_losses`` when the
        residual_fn declares residual blocks); ``self.summary`` is the library's Summary
        (``summary.full_report()`` is lmtrain fit's report).

        ``data`` is a tuple (x, y) of tensors — split into ``batch_size`` batches (full batch by
        default), the rows reshuffled every epoch when ``shuffle`` with the library's RNG seeded
        by ``seed``, as ``lmtrain fit`` shuffles — or any sized iterable of (x, y) batches, such
        as a DataLoader, whose batches are the steps in its own order (the fast path takes its
        batches once, in that order); an iterable with a method ``epoch_end(epoch)`` has it
        called after each epoch, before the callbacks (``pinn.Problem.draws``: fresh
        collocation points for the next epoch).  It stops at the first of: ``epochs``; the
        training loss ≤ ``loss_goal``; ``max_time_seconds``; ``max_validation_failures`` epochs
        without a better validation loss (then the best validation model is restored when
        ``restore_best``); a step's own stop (λ above lambda_max, the gradient, function or
        parameter tolerance); or a callback ``cb(epoch, training_loss, validation_loss)``
        returning True.  The record of the last epoch names the reason (the library's
        TerminationReason).  ``checkpoint``: a file written every ``checkpoint_every`` epochs
        and on Ctrl-C (the library's checkpoint format; data with ``epoch_end`` and
        ``state_dict()``, pinn's ``Problem.draws``, keeps its state of that epoch beside it in
        FILE.data); ``resume``: such a file to continue from, bit for bit as an uninterrupted
        run.
        """
        from .._progress import EpochProgress

        trainer = _core.TrainerOptions()
        trainer.max_epochs = int(epochs)
        trainer.batch_size = int(batch_size or 0)
        trainer.shuffle = bool(shuffle)
        trainer.seed = int(seed)
        trainer.loss_goal = float(loss_goal)
        trainer.max_time_seconds = float(max_time_seconds) if max_time_seconds > 0 else math.inf
        trainer.max_validation_failures = int(max_validation_failures)
        trainer.restore_best = bool(restore_best)
        trainer.validate()
        _check_tensor_pairs(data=data, validation=validation)
        request = _core.ForeignFitRequest()
        request.model = self._describe_model()
        request.precision = self.precision
        if checkpoint is not None:
            request.checkpoint = str(checkpoint)
            request.checkpoint_every = int(checkpoint_every)
        if resume is not None:
            request.resume = str(resume)
        progress = EpochProgress(epochs) if verbose else None
        callbacks = list(callbacks)
        restore: Callable[[], None] | None = None
        data_epoch = _follow_changing_data(data, checkpoint, request, callbacks)

        def on_epoch(record: Any) -> bool:
            if progress is not None:
                progress(record.epoch, record.training_loss, record.validation_loss,
                         record.seconds)
            return any(bool(cb(record.epoch, record.training_loss, record.validation_loss))
                       for cb in callbacks)

        if self._replicas:
            raise NotImplementedError("fit() runs on one device (or on ranks under torchrun); "
                                      "with devices=[…] call step() on each batch")
        try:
            if data_epoch is not None and resume is not None:
                restore, data_epoch[0] = self._resume_changing_data(str(resume), data)
            if self._native is not None:
                summary = self._native_fit(data, validation, trainer, request, on_epoch)
            else:
                summary = self._torch_fit(data, validation, trainer, request, on_epoch)
        except BaseException:
            if restore is not None:  # the parameters (and the data) as they were
                restore()
            raise
        finally:
            if progress is not None:
                progress.close()
        self.summary = summary
        for line in summary.options_ignored:  # the engine's judgment: an option that did nothing
            warnings.warn(line, UserWarning, stacklevel=2)
        history: list[dict[str, Any]] = [
            {"epoch": e.epoch, "loss": e.training_loss, "validation_loss": e.validation_loss,
             "lambda": e.lambda_, "seconds": e.seconds,
             # a residual_fn with residual_blocks(): the epoch's last step's, before its update
             **({"block_losses": e.block_losses} if e.block_losses else {})}
            for e in summary.history]
        if history:
            history[-1]["termination"] = str(summary.termination)
        return history

    summary: Any = None

    def _resume_changing_data(self, resume: str, data: Any) -> tuple[Callable[[], None], int]:
        """Before the library resumes from `resume`: the resumed run's first epoch needs the
        data of after the checkpoint's last epoch, so the checkpoint's parameters go into the
        model and the data takes its state saved with that epoch (``fit(checkpoint=…)``'s
        FILE.data), or with the epoch before, then ``epoch_end(epochs done)`` with the model of
        then (a residual-adaptive draw), as the uninterrupted run did; without one, that
        ``epoch_end`` alone draws it.  Returns what puts the parameters and the data's state
        back as they were, if the library then refuses the file, and the epochs done."""
        done, params = _checkpoint_position(resume, self.dtype)
        if params.numel() != self.n:
            raise ValueError(f"resume={resume!r}: the checkpoint holds {params.numel()} "
                             f"parameters, this model {self.n}")
        load = getattr(data, "load_state_dict", None)
        saved = _read_data_state(resume, done) if callable(load) else None
        theta = self._theta_now().detach().clone()
        save = getattr(data, "state_dict", None)
        data_before = copy.deepcopy(save()) if callable(save) and callable(load) else None

        def restore() -> None:
            with torch.no_grad():
                self._theta_now().copy_(theta)
            if data_before is not None:
                load(data_before)

        try:
            with torch.no_grad():
                self._theta_now().copy_(params.to(self.device))
            if saved is not None:
                load(saved[1])  # the data as the uninterrupted run had it after epoch saved[0]
            if saved is None or saved[0] != done:
                data.epoch_end(done)
        except BaseException:  # another problem's state, say: nothing changed
            restore()
            raise
        return restore, done

    def _describe_model(self) -> str:
        shapes = ", ".join(f"{name} {tuple(p.shape)}" for name, p in zip(self._names,
                                                                         self._params))
        return f"{type(self.model).__name__} ({shapes}), {self.n} parameters"

    def _native_fit(self, data: Any, validation: Any, trainer: Any, request: Any,
                    on_epoch: Callable[[Any], bool]) -> Any:
        x, y = self._materialized(data)
        if not self._is_pair(data):
            trainer.batch_size, trainer.shuffle = _first_batch_rows(data), False
        request.trainer = trainer
        xv = yv = None
        if validation is not None:
            xv, yv = self._materialized(validation)
        return self._native.fit(x, y, xv, yv, request, on_epoch)

    def _torch_fit(self, data: Any, validation: Any, trainer: Any, request: Any,
                   on_epoch: Callable[[Any], bool]) -> Any:
        if self._dist is not None and not self._is_pair(data):
            raise NotImplementedError("fit() on several ranks takes (x, y) tensors, which the "
                                      "library shards; for a DataLoader with a "
                                      "DistributedSampler call step() on its batches with "
                                      "shard=False")
        if self.residual_fn is None:  # NaN anywhere: refused before the first step
            for what, pair in (("", data), ("validation ", validation)):
                if pair is not None and self._is_pair(pair):
                    self._lin.model_data(*pair, what=what)
        dataset = _TorchTrainingSet(self._lin, data, validation, self.device)
        if dataset.batches_are_rows:
            trainer.batch_size, trainer.shuffle = 1, False
        request.trainer = trainer
        batch = trainer.batch_size or dataset.samples
        first = min(batch, dataset.samples) if not dataset.batches_are_rows else 1
        units = dataset.max_units(first)  # and the batch the footprint is measured on
        spec = self._spec(units)
        communicator = _communicator(self._dist, self.device)
        fit = _core.foreign_fit64 if self.dtype == torch.float64 else _core.foreign_fit32
        try:
            return fit(spec, request, self._lin, dataset, communicator, self._theta_now(),
                       on_epoch)
        finally:
            self._lin.reset_step()
            # The Jacobian's route is chosen at the first step (by measurement where "auto"):
            # say which, as step() does.
            self.path = self._lin.path

    def _materialized(self, data: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if self._is_pair(data):
            return data
        xs, ys = zip(*data)
        return torch.cat(xs), torch.cat(ys)

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
        total_f, total_units, outputs = 0.0, 0, 1
        lin = self._lin if self._native is None else TorchLinearization(
            self.model, self._names, self._params, self.loss, self.residual_fn, "auto")
        for xb, yb in self._batches(data, None):
            f, units, outputs = lin.evaluate(xb, yb)
            total_f, total_units = total_f + f, total_units + units
        lin.reset_step()
        kind = "mse" if self.loss is None else self.loss.kind
        return _core.reported_loss(kind, total_f, total_units, outputs)
