"""The fast path: an nn.Sequential of layers lmtrain implements, trained by the library's own step.

The module becomes the model file's architecture (``{"input_shape": [n], "layers": [...]}``) and
its parameters the library's flat vector, which is the concatenation of
``model.named_parameters()`` in order (a Linear's weight, (out, in) row-major, then its bias).
Each step runs entirely in C++ (``_core.NativeStep``: structural Jacobians, SYRK, damping loop)
on that vector, and the result is written back into the module's parameters.  On a CUDA device
the vector, x and y are device tensors handed over by DLPack, and the step runs on the library's
CUDA backend queued on torch's current stream; ``fit`` hands the data over as host arrays, which
the library's trainer copies to the device batch by batch.
"""

from __future__ import annotations

import json
from typing import Any

import torch

from .. import _core

# torch activation modules lmtrain implements, with the library's name.  GELU only in its exact
# (erf) form, ELU only with α = 1, Softplus only with β = 1 (include/lmtrain/core/activation.h).
_ACTIVATIONS: dict[type, str] = {
    torch.nn.Identity: "identity",
    torch.nn.Tanh: "tanh",
    torch.nn.Sigmoid: "sigmoid",
    torch.nn.ReLU: "relu",
    torch.nn.ELU: "elu",
    torch.nn.GELU: "gelu",
    torch.nn.Softplus: "softplus",
}


def _activation(module: torch.nn.Module) -> str | None:
    name = _ACTIVATIONS.get(type(module))
    if name == "elu" and module.alpha != 1.0:
        return None
    if name == "gelu" and module.approximate != "none":
        return None
    if name == "softplus" and module.beta != 1.0:
        return None
    return name


def _pair(value: Any) -> list[int] | None:
    if isinstance(value, int):
        return [value, value]
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(
            isinstance(v, int) for v in value):
        return [int(v) for v in value]
    return None  # "same", "valid" and other forms lmtrain's windows do not take


def _window(kernel: Any, stride: Any, padding: Any) -> dict[str, Any] | None:
    window = {"kernel": _pair(kernel), "stride": _pair(stride if stride is not None else kernel),
              "padding": _pair(padding)}
    return window if all(v is not None for v in window.values()) else None


def _layer(module: torch.nn.Module) -> dict[str, Any] | None:
    """The model file's entry for one module, or None when lmtrain has no such layer."""
    kind = type(module)
    if kind is torch.nn.Linear:
        return {"type": "dense", "units": module.out_features} if module.bias is not None \
            else None
    if kind is torch.nn.Conv2d:
        if module.groups != 1 or _pair(module.dilation) != [1, 1] or \
                module.padding_mode != "zeros":
            return None
        window = _window(module.kernel_size, module.stride, module.padding)
        return None if window is None else {"type": "conv2d", "out_channels": module.out_channels,
                                             "bias": module.bias is not None, **window}
    if kind is torch.nn.MaxPool2d:
        if module.ceil_mode or module.return_indices or _pair(module.dilation) != [1, 1]:
            return None
        window = _window(module.kernel_size, module.stride, module.padding)
        return None if window is None else {"type": "max_pool2d", **window}
    if kind is torch.nn.AvgPool2d:
        if module.ceil_mode or not module.count_include_pad or \
                module.divisor_override is not None:
            return None
        window = _window(module.kernel_size, module.stride, module.padding)
        return None if window is None else {"type": "avg_pool2d", **window}
    if kind is torch.nn.Flatten:
        return {"type": "flatten"} if (module.start_dim, module.end_dim) == (1, -1) else None
    name = _activation(module)
    return None if name is None else {"type": "activation", "activation": name}


def native_architecture(model: torch.nn.Module) -> dict[str, Any] | None:
    """The library's architecture of ``model`` — ``input_shape`` is ``[in_features]`` for a
    model that starts with a Linear, None for one that starts with a Conv2d (it comes from the
    first batch: channels × height × width) — or None when ``model`` is not an nn.Sequential of
    layers lmtrain implements: Linear (with bias), Conv2d (zero padding, no groups or dilation),
    MaxPool2d, AvgPool2d (count_include_pad), Flatten and the activations."""
    if type(model) is not torch.nn.Sequential or len(model) == 0:
        return None
    layers = [_layer(module) for module in model]
    if any(layer is None for layer in layers):
        return None
    first = next((m for m in model if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d))), None)
    if first is None or not any(isinstance(m, torch.nn.Linear) for m in model):
        return None
    shape = [first.in_features] if isinstance(first, torch.nn.Linear) else None
    return {"input_shape": shape, "layers": layers}



def cuda_stream_handle(stream: Any) -> int:
    """The handle the library's CUDA backend queues on for a torch stream: its cudaStream_t, or
    cudaStreamLegacy (1) for torch's default stream, whose ``cuda_stream`` reads 0.  (0 would make
    the library create a non-blocking stream of its own, unordered with torch's kernels.)"""
    return int(stream.cuda_stream) or 1

class NativePath:
    """Steps of the library's engine on a torch Sequential's parameters."""

    def __init__(self, model: torch.nn.Module, architecture: dict[str, Any], loss: str,
                 options: Any) -> None:
        self.model = model
        self.params = list(model.parameters())
        self.dtype = self.params[0].dtype
        self.device = self.params[0].device
        self.architecture = architecture
        self._input_shape: list[int] | None = None
        self.loss_options = _core.LossOptions()
        self.loss_options.loss = loss
        self.options = options
        self.outputs = [m for m in model if isinstance(m, torch.nn.Linear)][-1].out_features
        self._step: Any = None
        self._state: Any = None  # a _core.StepperState to hand the next step
        self._draw_key = 0  # cross_entropy_sampled's draws, carried across rebuilt steps
        from ._losses import Loss

        self._loss = Loss(loss)
        # step()'s flat vector, kept: gathered with one torch.cat and scattered back through
        # views made once — W1's step is ~0.2 ms, and rebuilding these each time cost a fifth.
        self._buffer = torch.empty(sum(p.numel() for p in self.params), dtype=self.dtype,
                                   device=self.device)
        offsets = [0]
        for p in self.params:
            offsets.append(offsets[-1] + p.numel())
        self._buffer_views = [self._buffer[a:b].view_as(p)
                              for a, b, p in zip(offsets, offsets[1:], self.params)]

    def _engine(self, batch: int, input_shape: list[int]) -> Any:
        """The library's step, made at the first batch (a larger batch is planned for again by
        the library itself, PlannedStep) and again for images of another shape."""
        if self._step is None or input_shape != self._input_shape:
            if self._step is not None:
                self._state = self._step.state()
                self._draw_key = self._step.draw_key
            cls = _core.NativeStep64 if self.dtype == torch.float64 else _core.NativeStep32
            architecture = dict(self.architecture, input_shape=input_shape)
            self._step = cls(json.dumps(architecture), self.loss_options, self.options, batch,
                             *self._device_and_stream())
            self._input_shape = input_shape
            if self._state is not None:
                self._step.set_state(self._state)
            self._step.draw_key = self._draw_key
        return self._step

    @property
    def draw_key(self) -> int:
        """cross_entropy_sampled: the key of the last linearization's draws."""
        return self._step.draw_key if self._step is not None else self._draw_key

    @draw_key.setter
    def draw_key(self, key: int) -> None:
        if key < 0:
            raise ValueError(f"optimizer state draw_key = {key}: expected an integer ≥ 0")
        self._draw_key = key
        if self._step is not None:
            self._step.draw_key = key

    def state(self) -> Any:
        """The step's schedule (``_core.StepperState``): the library's start before a step."""
        if self._step is not None:
            return self._step.state()
        if self._state is not None:
            return self._state
        return _core.StepperState.initial(self.options)

    def set_state(self, state: Any) -> None:
        """Takes a ``_core.StepperState``, checked by the library (ValueError naming the
        field)."""
        state.validate()
        self._state = state
        if self._step is not None:
            self._step.set_state(state)

    def _device_and_stream(self) -> tuple[str, int]:
        """The library's device string and, on CUDA, torch's current stream to queue on (after
        the kernels that wrote the inputs, before those that read the parameters)."""
        if self.device.type != "cuda":
            return "cpu", 0
        return (f"cuda:{self.device.index or 0}",
                cuda_stream_handle(torch.cuda.current_stream(self.device)))

    def fit(self, x: Any, y: Any, x_validation: Any, y_validation: Any, request: Any,
            on_epoch: Any) -> Any:
        """The library's Trainer on the module's parameters (trained in place) over (x, y);
        returns the Summary.  The data sets are host arrays (the trainer validates them and
        copies each batch to the device); the parameters come back to the module's device at
        the end."""
        cpu = torch.device("cpu")
        xs, ys, input_shape = self._arrays(x, y, cpu)
        xv = yv = None
        if x_validation is not None:
            xv, yv, _ = self._arrays(x_validation, y_validation, cpu)
        architecture = dict(self.architecture, input_shape=input_shape)
        flat = self._gather().cpu()  # the buffer itself on the CPU, a copy on CUDA
        fit = _core.native_fit64 if self.dtype == torch.float64 else _core.native_fit32
        summary = fit(json.dumps(architecture), self.loss_options, self.options,
                      request, xs, ys, xv, yv, flat, on_epoch,
                      *self._device_and_stream())
        self._buffer.copy_(flat)
        self._scatter()
        return summary

    def _arrays(self, x: Any, y: Any,
                device: torch.device) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
        """x flattened per sample and the loss's targets, contiguous, in the model's dtype on
        `device`.  Their values are the library's to check (NativeStep, the trainer's data
        sets): a NaN or inf is refused there with the parameters unchanged."""
        images = self.architecture["input_shape"] is None
        if not isinstance(x, torch.Tensor) or x.dim() != (4 if images else 2):
            raise ValueError("the fast path takes x as one batch × channels × height × width "
                             "tensor" if images else "the fast path takes x as one batch × "
                             "inputs tensor")
        input_shape = list(x.shape[1:]) if images else self.architecture["input_shape"]
        targets = self._loss.targets(y, self.outputs, self.dtype)
        if targets.shape != (x.shape[0], self.outputs):
            raise ValueError(f"y has shape {tuple(y.shape)}; expected ({x.shape[0]}, "
                             f"{self.outputs})")
        xs = x.detach().to(device, self.dtype).reshape(x.shape[0], -1).contiguous()
        ys = targets.detach().to(device).contiguous()
        return xs, ys, input_shape

    def _gather(self) -> torch.Tensor:
        """The parameters in the library's flat order, in the kept buffer (one torch.cat)."""
        with torch.no_grad():
            return torch.cat([p.detach().reshape(-1) for p in self.params], out=self._buffer)

    def _scatter(self) -> None:
        """The buffer back into the parameters, through the views made once."""
        with torch.no_grad():
            for p, v in zip(self.params, self._buffer_views):
                p.copy_(v)

    def step(self, x: Any, y: Any) -> Any:
        xs, ys, input_shape = self._arrays(x, y, self.device)
        report = self._engine(x.shape[0], input_shape).step(self._gather(), xs, ys)
        self._scatter()
        return report
