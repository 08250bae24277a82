#!/usr/bin/env python3
"""Classification: Fashion-MNIST with LMClassifier (the CLI's examples/fashion-mlp, in Python).

The images (Debian package dataset-fashion-mnist) are read from their IDX files with numpy and
averaged over 4×4 pixels to 7×7, which keeps LM's normal equations small: a 49-16-10 tanh
network has 970 parameters (JᵀJ's cost grows with their square).  LMClassifier trains it on the exact Gauss–Newton matrix of the
cross-entropy in mini-batches, holding out 10 % of the training images for early stopping, and
is scored on the official 10 000 test images.

usage: classification_fashion.py [--train N] [--epochs E] [--data DIR]
"""

from __future__ import annotations

import argparse
import gzip
import time
from pathlib import Path

import numpy as np
from sklearn.metrics import accuracy_score, confusion_matrix

from lmtrain import LMClassifier

CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker",
           "Bag", "Ankle boot"]


def read_idx(path: Path) -> np.ndarray:
    """An IDX file (gzipped): a big-endian header of dimensions, then unsigned bytes."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = np.frombuffer(data, dtype=">u4", count=dims, offset=4)
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def images(path: Path) -> np.ndarray:
    """(n, 49) float32: each 28×28 image averaged over 4×4 blocks, scaled to [0, 1]."""
    pixels = read_idx(path).astype(np.float32) / 255
    return pixels.reshape(-1, 7, 4, 7, 4).mean(axis=(2, 4)).reshape(-1, 49)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=20000, help="training images used")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--data", type=Path, default=Path("/usr/share/datasets/fashion-mnist"))
    args = parser.parse_args()

    X_train = images(args.data / "train-images-idx3-ubyte.gz")[:args.train]
    y_train = read_idx(args.data / "train-labels-idx1-ubyte.gz")[:args.train]
    X_test = images(args.data / "t10k-images-idx3-ubyte.gz")
    y_test = read_idx(args.data / "t10k-labels-idx1-ubyte.gz")

    started = time.perf_counter()
    net = LMClassifier(hidden_layer_sizes=(16,), batch_size=1000, max_epochs=args.epochs,
                       early_stopping=True, validation_fraction=0.1, n_iter_no_change=3,
                       precision="float32", random_state=0).fit(X_train, y_train)
    seconds = time.perf_counter() - started

    predicted = net.predict(X_test)
    print(f"{len(X_train)} training images, {net.n_iter_} epochs in {seconds:.1f} s")
    print(f"validation loss per epoch: {' '.join(f'{v:.4f}' for v in net.validation_scores_)}")
    print(f"test accuracy {accuracy_score(y_test, predicted):.4f}")
    print("confusion matrix (rows: true class, columns: predicted):")
    for name, row in zip(CLASSES, confusion_matrix(y_test, predicted)):
        print(f"  {name:<12}" + "".join(f"{n:6d}" for n in row))


if __name__ == "__main__":
    main()
