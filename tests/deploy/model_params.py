#!/usr/bin/env python3
"""Compares the parameters of lmtrain model files (model.safetensors) or checkpoints.

    model_params.py A.safetensors B.safetensors     → prints the largest difference; exit 0 when
                                                      every tensor is bitwise equal, 1 otherwise

Reads the safetensors layout itself (an 8-byte little-endian header length, a JSON header of
name → dtype, shape and byte offsets, then the raw data), so it needs numpy alone.  The metadata
(provenance: times, host names) is not compared: two runs of the same training differ there.
"""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import numpy as np

DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32, "U8": np.uint8}


def tensors(path: Path) -> dict[str, np.ndarray]:
    raw = path.read_bytes()
    if len(raw) < 8:
        raise SystemExit(f"model_params.py: {path} is not a safetensors file (too short)")
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + length])
    body = raw[8 + length:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        out[name] = np.frombuffer(body[begin:end], dtype=DTYPES[info["dtype"]]).reshape(
            info["shape"])
    return out


def compare(a: Path, b: Path) -> tuple[bool, float, int]:
    """(bitwise equal, largest absolute difference, number of values)."""
    ta, tb = tensors(a), tensors(b)
    if ta.keys() != tb.keys():
        raise SystemExit(f"model_params.py: {a} and {b} hold different tensors: "
                         f"{sorted(ta)} vs {sorted(tb)}")
    equal, largest, count = True, 0.0, 0
    for name in ta:
        x, y = ta[name], tb[name]
        if x.shape != y.shape:
            raise SystemExit(f"model_params.py: tensor {name}: shape {x.shape} vs {y.shape}")
        equal &= x.tobytes() == y.tobytes()
        if x.size:
            largest = max(largest, float(np.max(np.abs(x.astype(np.float64) - y))))
        count += x.size
    return equal, largest, count


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    equal, largest, count = compare(Path(argv[0]), Path(argv[1]))
    print(f"{count} values, largest difference {largest:.3e}, "
          f"{'bitwise equal' if equal else 'NOT bitwise equal'}")
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
