#!/usr/bin/python3
"""model.safetensors read from Python, with no lmtrain code.

usage: test_model_file.py WRITER WORKDIR

Runs WRITER (tests/python/write_test_model.cpp) to produce models, inputs and lmtrain's outputs
in WORKDIR, then for each model: reads the file with the `safetensors` package when it is
installed and with the standard-library reader below in any case (the two must agree), checks
the container the way the reference implementation does, rebuilds the network in numpy from the
"lmtrain.architecture" metadata and the PyTorch-named tensors, and asserts that its outputs
equal lmtrain's to 1e-12 relative.  Exit 77 (CTest's skip) when numpy is missing.
"""
import json
import math
import os
import struct
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("numpy is not installed: skipped")
    sys.exit(77)

try:
    import safetensors.numpy
    from safetensors import safe_open
except ImportError:
    safetensors = None

DTYPES = {"F32": "<f4", "F64": "<f8"}
RTOL = 1e-12


def read_safetensors(path):
    """The format, read with the standard library: 8-byte LE length, JSON header, raw data."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    body = data[8 + n:]
    assert (8 + n) % 8 == 0, "header not padded to a multiple of 8"
    metadata = header.pop("__metadata__", {})
    assert all(isinstance(v, str) for v in metadata.values()), "metadata must be strings"
    end = 0
    tensors = {}
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"]):
        begin, stop = info["data_offsets"]
        assert begin == end, f"{name}: gap or overlap at {begin} (expected {end})"
        dtype = np.dtype(DTYPES[info["dtype"]])
        assert begin % dtype.itemsize == 0, f"{name}: misaligned"
        count = math.prod(info["shape"])
        assert stop - begin == count * dtype.itemsize, f"{name}: byte count"
        tensors[name] = np.frombuffer(body[begin:stop], dtype=dtype).reshape(info["shape"])
        end = stop
    assert end == len(body), "bytes after the last tensor"
    return tensors, metadata


def load(path):
    tensors, metadata = read_safetensors(path)
    if safetensors is not None:
        reference = safetensors.numpy.load_file(path)
        with safe_open(path, framework="np") as f:
            assert f.metadata() == metadata, "metadata differs from safetensors'"
        assert reference.keys() == tensors.keys()
        for name, value in reference.items():
            assert value.dtype == tensors[name].dtype and np.array_equal(value, tensors[name]), name
        print(f"  {os.path.basename(path)}: safetensors {safetensors.__version__} agrees")
    return tensors, metadata


def activation(name, z):
    with np.errstate(over="ignore"):
        if name == "identity":
            return z
        if name == "tanh":
            return np.tanh(z)
        if name == "sigmoid":
            e = np.exp(-np.abs(z))
            return np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
        if name == "relu":
            return np.maximum(z, 0.0)
        if name == "elu":
            return np.where(z > 0, z, np.expm1(np.minimum(z, 0.0)))
        if name == "gelu":
            erf = np.vectorize(math.erf)
            return 0.5 * z * (1.0 + erf(z / math.sqrt(2.0)))
        if name == "softplus":
            return np.logaddexp(0.0, z)
        if name == "sin":
            return np.sin(z)
    raise AssertionError(f"unknown activation {name}")


def windows(a, kernel, stride, padding, fill):
    """Yields (i, j, patch): patch[n, c, y, x] = padded input at (y·sh + i, x·sw + j)."""
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    n, c, h, w = a.shape
    padded = np.full((n, c, h + 2 * ph, w + 2 * pw), fill)
    padded[:, :, ph:ph + h, pw:pw + w] = a
    ho = (h + 2 * ph - kh) // sh + 1
    wo = (w + 2 * pw - kw) // sw + 1
    for i in range(kh):
        for j in range(kw):
            yield i, j, padded[:, :, i:i + sh * (ho - 1) + 1:sh, j:j + sw * (wo - 1) + 1:sw]


def forward(architecture, tensors, x):
    """The network of `architecture` on x (rows × features, NCHW order), torch semantics."""
    a = x.reshape([x.shape[0]] + architecture["input_shape"])
    expected_names = set()
    for i, layer in enumerate(architecture["layers"]):
        kind = layer["type"]
        if kind == "dense":
            w, b = tensors[f"{i}.weight"], tensors[f"{i}.bias"]
            expected_names |= {f"{i}.weight", f"{i}.bias"}
            flat = a.reshape(a.shape[0], -1)
            assert w.shape == (layer["units"], flat.shape[1]), f"{i}.weight shape {w.shape}"
            a = (flat @ w.astype(np.float64).T + b.astype(np.float64))[:, :, None, None]
        elif kind == "activation":
            a = activation(layer["activation"], a)
        elif kind == "conv2d":
            w = tensors[f"{i}.weight"].astype(np.float64)
            expected_names.add(f"{i}.weight")
            assert w.shape == (layer["out_channels"], a.shape[1], *layer["kernel"]), w.shape
            out = 0.0
            for ki, kj, patch in windows(a, layer["kernel"], layer["stride"], layer["padding"], 0.0):
                out = out + np.einsum("oc,nchw->nohw", w[:, :, ki, kj], patch)
            if layer["bias"]:
                out = out + tensors[f"{i}.bias"].astype(np.float64)[None, :, None, None]
                expected_names.add(f"{i}.bias")
            a = out
        elif kind == "max_pool2d":
            a = np.max([p for _, _, p in windows(a, layer["kernel"], layer["stride"],
                                                  layer["padding"], -np.inf)], axis=0)
        elif kind == "avg_pool2d":  # zero padding counted, divisor kh·kw (count_include_pad)
            kh, kw = layer["kernel"]
            a = sum(p for _, _, p in windows(a, layer["kernel"], layer["stride"],
                                             layer["padding"], 0.0)) / (kh * kw)
        elif kind == "flatten":
            a = a.reshape(a.shape[0], -1, 1, 1)
        else:
            raise AssertionError(f"unknown layer type {kind}")
    return a.reshape(a.shape[0], -1), expected_names


def check(workdir, name, parameter_dtype):
    tensors, metadata = load(os.path.join(workdir, f"{name}.safetensors"))
    assert metadata["format"] == "pt"
    assert metadata["lmtrain.format_version"] == "1"
    assert metadata["lmtrain.task"] == "regression" and metadata["lmtrain.loss"] == "mse"
    provenance = json.loads(metadata["lmtrain.provenance"])
    assert provenance["lmtrain_version"] and provenance["date"].endswith("Z"), provenance
    architecture = json.loads(metadata["lmtrain.architecture"])

    x = np.load(os.path.join(workdir, f"{name}_inputs.npy"))
    expected = np.load(os.path.join(workdir, f"{name}_outputs.npy"))
    xn = (x - tensors["normalization.input_mean"]) / tensors["normalization.input_std"]
    yn, parameter_names = forward(architecture, tensors, xn)
    y = yn * tensors["normalization.target_std"] + tensors["normalization.target_mean"]

    normalization = {f"normalization.{s}_{k}" for s in ("input", "target") for k in ("mean", "std")}
    assert set(tensors) == parameter_names | normalization, sorted(tensors)
    for p in parameter_names:
        assert tensors[p].dtype == np.dtype(DTYPES[parameter_dtype]), (p, tensors[p].dtype)
    for n in normalization:
        assert tensors[n].dtype == np.float64

    assert y.shape == expected.shape, (y.shape, expected.shape)
    # Relative error, with a floor of 1e-3 of the largest output so that an output near zero is
    # not judged by its own tiny magnitude.
    scale = np.maximum(np.abs(expected), 1e-3 * np.max(np.abs(expected)))
    worst = float(np.max(np.abs(y - expected) / scale))
    print(f"  {name}: {len(tensors)} tensors, {y.shape[0]}×{y.shape[1]} outputs, "
          f"worst relative difference {worst:.2e}")
    assert worst <= RTOL, f"{name}: numpy and lmtrain differ by {worst:.3e} > {RTOL}"
    # The outputs are not trivially constant (the check would be vacuous).
    assert np.std(expected) > 1e-3


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    writer, workdir = sys.argv[1], sys.argv[2]
    os.makedirs(workdir, exist_ok=True)
    subprocess.run([writer, workdir], check=True)
    print("safetensors package:", "installed" if safetensors else "not installed (stdlib reader)")
    check(workdir, "mlp", "F64")
    check(workdir, "conv", "F32")
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
