#!/usr/bin/env python3
"""Loading a model the `lmtrain` command trained, and using it from Python.

`examples/sinc/run.sh` trains W1 (sinc(10x), a 1-20-1 tanh network) with `lmtrain fit` and
writes runs/sinc/model.safetensors.  lmtrain.load reads that file — architecture,
normalization and provenance included — and predicts as `lmtrain predict` does; the model
pickles, and Model.save writes a file the command reads back.

usage: load_cli_model.py [MODEL]   (default: runs/sinc/model.safetensors)
"""

from __future__ import annotations

import argparse
import pickle
from pathlib import Path

import numpy as np

import lmtrain

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", type=Path,
                        default=ROOT / "runs/sinc/model.safetensors")
    args = parser.parse_args()

    model = lmtrain.load(args.model)
    run = model.provenance
    print(f"{model!r}: {model.parameters.size} parameters, {run['epochs']} epochs, "
          f"final training loss {run['final_loss']:.3e}")

    x = np.linspace(-1, 1, 1001)
    predicted = model.predict(x[:, None])
    print(f"MSE against sinc(10x) on {x.size} points: "
          f"{np.mean((predicted - np.sinc(10 * x)) ** 2):.6e}")

    # A model pickles as its file's bytes (for joblib, multiprocessing, ...).
    copy = pickle.loads(pickle.dumps(model))
    assert np.array_equal(copy.predict(x[:, None]), predicted)


if __name__ == "__main__":
    main()
