#!/usr/bin/python3
"""`lmtrain predict` reproduced in numpy from model.safetensors alone.

usage: test_predict_cli.py LMTRAIN WORKDIR

Writes a random regression CSV (3 inputs, 2 targets), a classification CSV (2 inputs,
3 classes) and a bce CSV (3 inputs; a 0/1 and a probability target) into WORKDIR, trains small MLPs on them with `lmtrain fit` (a few epochs; tanh,
sigmoid, gelu, softplus and elu; float32 and float64; standardized and raw inputs), runs
`lmtrain predict --out pred.npy` on the training data, then reads each model.safetensors with
the standard-library reader of test_model_file.py, rebuilds the network in numpy from the
"lmtrain.architecture" metadata and the PyTorch-named tensors, applies the stored
normalization, and asserts that numpy's outputs equal predict's: the de-normalized outputs for
regression, the sigmoid of the outputs for bce (its targets never standardized), the "class"
column and the softmax probabilities for classification; to 1e-5
relative for float32 models and 1e-12 for float64 ones.  Every model has a square hidden
weight (8×8), so a transposed weight is caught by the values, not only by a shape check.

Exit 0 on success, 1 with a message on a mismatch, 0 with "skipped: numpy missing" when numpy
is not installed.
"""
import json
import os
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("skipped: numpy missing")
    sys.exit(0)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_model_file import activation, read_safetensors  # noqa: E402  (stdlib reader)

RTOL = {"F32": 1e-5, "F64": 1e-12}
DTYPES = {"F32": np.float32, "F64": np.float64}


class Mismatch(Exception):
    pass


def write_data(workdir):
    rng = np.random.default_rng(20261121)
    n = 400
    # Regression: inputs far from zero mean / unit scale so that the normalization matters.
    x1 = rng.uniform(2.0, 6.0, n)
    x2 = rng.normal(-3.0, 0.5, n)
    x3 = rng.uniform(-100.0, 100.0, n)
    y1 = 50.0 + 10.0 * np.sin(x1) + x2 * x3 / 20.0
    y2 = np.exp(-0.5 * (x2 + 3.0) ** 2) + 0.01 * x3
    table = np.column_stack([x1, x2, x3, y1, y2])
    np.savetxt(os.path.join(workdir, "regression.csv"), table, delimiter=",",
               header="x1,x2,x3,y1,y2", comments="", fmt="%.17g")
    # Classification: three Gaussian blobs.
    labels = rng.integers(0, 3, n)
    centers = np.array([[0.0, 0.0], [2.0, 1.0], [-1.0, 2.5]])
    points = centers[labels] + rng.normal(0.0, 0.8, (n, 2)) + np.array([10.0, -4.0])
    with open(os.path.join(workdir, "classification.csv"), "w") as f:
        f.write("a,b,label\n")
        for (a, b), label in zip(points, labels):
            f.write(f"{a!r},{b!r},{label}\n")
    # bce: the regression data's inputs with a 0/1 target and a probability target.
    p = 1.0 / (1.0 + np.exp(-(x1 - 4.0) * 2.0))
    table = np.column_stack([x1, x2, x3, (rng.uniform(size=n) < p).astype(float), p])
    np.savetxt(os.path.join(workdir, "binary.csv"), table, delimiter=",",
               header="x1,x2,x3,y1,y2", comments="", fmt="%.17g")


def layers_toml(layers):
    items = []
    for layer in layers:
        items.append(f'{{ type = "dense", units = {layer} }}' if isinstance(layer, int)
                     else f'{{ type = "{layer}" }}')
    return "[" + ", ".join(items) + "]"


# name, data file, task, precision, loss, layers, normalize_inputs
MODELS = [
    ("reg64", "regression.csv", "regression", "float64", "mse",
     [8, "tanh", 8, "sigmoid", 8, "gelu", 2], "standardize"),
    ("reg32", "regression.csv", "regression", "float32", "mse",
     [8, "softplus", 8, "elu", 2], "standardize"),
    ("cls32", "classification.csv", "classification", "float32", "cross_entropy",
     [8, "gelu", 8, "tanh", 3], "standardize"),
    ("cls64", "classification.csv", "classification", "float64", "cross_entropy_sqrt",
     [8, "sigmoid", 8, "softplus", 3], "none"),
    # normalize_targets = "standardize" is asked for and does not apply: bce's targets are
    # probabilities, and predict writes probabilities.
    ("bce64", "binary.csv", "regression", "float64", "bce", [8, "tanh", 8, "elu", 2],
     "standardize"),
]


def write_config(workdir, name, data, task, precision, loss, layers, normalize_inputs):
    if task == "regression":
        data_keys = 'normalize_targets = "standardize"\n'
        train_keys = 'inputs = ["x1", "x2", "x3"]\ntargets = ["y1", "y2"]\n'
    else:
        data_keys = "classes = 3\n"
        train_keys = 'targets = ["label"]\n'
    text = (f'seed = 1\nprecision = "{precision}"\noutput_dir = "{name}"\n'
            f'[model]\nlayers = {layers_toml(layers)}\n'
            f'[data]\ntask = "{task}"\nnormalize_inputs = "{normalize_inputs}"\n{data_keys}'
            f'[data.train]\npath = "{data}"\n{train_keys}'
            f'[loss]\ntype = "{loss}"\n'
            f'[trainer]\nmax_epochs = 4\nbatch_size = 100\n')
    path = os.path.join(workdir, f"{name}.toml")
    with open(path, "w") as f:
        f.write(text)
    return path


def run(command):
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        raise Mismatch(f"{' '.join(command)} exited with {result.returncode}:\n{result.stdout}")


def forward(architecture, tensors, x):
    """The dense/activation network of `architecture` on x (rows × features), in float64."""
    a = x
    names = set()
    for i, layer in enumerate(architecture["layers"]):
        if layer["type"] == "dense":
            w = tensors[f"{i}.weight"].astype(np.float64)
            b = tensors[f"{i}.bias"].astype(np.float64)
            names |= {f"{i}.weight", f"{i}.bias"}
            if w.shape != (layer["units"], a.shape[1]) or b.shape != (layer["units"],):
                raise Mismatch(f"{i}.weight {w.shape} / {i}.bias {b.shape} do not fit "
                               f"{a.shape[1]} → {layer['units']}")
            a = a @ w.T + b  # torch's nn.Linear: y = x·Wᵀ + b, W is out × in
        elif layer["type"] == "activation":
            a = activation(layer["activation"], a)
        else:
            raise Mismatch(f"layer {i}: unexpected type {layer['type']}")
    return a, names


def compare(what, got, expected, rtol):
    if got.shape != expected.shape:
        raise Mismatch(f"{what}: numpy's shape {got.shape} != predict's {expected.shape}")
    # Relative error, with a floor of 1e-3 of the largest value so that a value near zero is
    # not judged by its own tiny magnitude.
    scale = np.maximum(np.abs(expected), 1e-3 * np.max(np.abs(expected)))
    worst = float(np.max(np.abs(got - expected) / scale))
    if not worst <= rtol:
        row = int(np.argmax(np.max(np.abs(got - expected) / scale, axis=1)))
        raise Mismatch(f"{what}: numpy and predict differ by {worst:.3e} relative (> {rtol:g}); "
                       f"row {row}: numpy {got[row]}, predict {expected[row]}")
    return worst


def softmax(z):
    e = np.exp(z - np.max(z, axis=1, keepdims=True))
    return e / np.sum(e, axis=1, keepdims=True)


def check(lmtrain, workdir, name, data, task, layers, normalize_inputs):
    model = os.path.join(workdir, name, "model.safetensors")
    prediction = os.path.join(workdir, f"{name}_pred.npy")
    run([lmtrain, "predict", model, "--data", os.path.join(workdir, data), "--out", prediction])
    expected = np.load(prediction)

    tensors, metadata = read_safetensors(model)
    architecture = json.loads(metadata["lmtrain.architecture"])
    if metadata["lmtrain.task"] != task:
        raise Mismatch(f"{name}: task {metadata['lmtrain.task']}, expected {task}")
    inputs = int(np.prod(architecture["input_shape"]))
    x = np.loadtxt(os.path.join(workdir, data), delimiter=",", skiprows=1)[:, :inputs]

    normalization = {k for k in tensors if k.startswith("normalization.")}
    if normalize_inputs == "standardize":
        x = (x - tensors["normalization.input_mean"]) / tensors["normalization.input_std"]
    elif any(k.startswith("normalization.input") for k in normalization):
        raise Mismatch(f"{name}: input normalization stored although the run used none")
    z, parameter_names = forward(architecture, tensors, x)
    if set(tensors) != parameter_names | normalization:
        raise Mismatch(f"{name}: unexpected tensors {sorted(set(tensors) - parameter_names)}")
    dtypes = {tensors[p].dtype for p in parameter_names}
    if len(dtypes) != 1:
        raise Mismatch(f"{name}: mixed parameter dtypes {dtypes}")
    dtype = "F32" if dtypes == {np.dtype(np.float32)} else "F64"
    rtol = RTOL[dtype]

    if metadata["lmtrain.loss"] == "bce":
        if any(k.startswith("normalization.target") for k in normalization):
            raise Mismatch(f"{name}: bce's targets were standardized")
        worst = compare(f"{name} probabilities", 1.0 / (1.0 + np.exp(-z)), expected, rtol)
        if not (np.all((expected > 0) & (expected < 1)) and np.std(expected) > 1e-2):
            raise Mismatch(f"{name}: predict's bce outputs are not varied probabilities")
    elif task == "regression":
        y = z * tensors["normalization.target_std"] + tensors["normalization.target_mean"]
        worst = compare(f"{name} outputs", y, expected, rtol)
        if np.std(expected) < 1e-3:
            raise Mismatch(f"{name}: predict's outputs are constant; the check would be vacuous")
    else:
        probabilities = softmax(z)
        worst = compare(f"{name} probabilities", probabilities, expected[:, 1:], rtol)
        classes = expected[:, 0]
        if not np.array_equal(classes, np.argmax(expected[:, 1:], axis=1)):
            raise Mismatch(f"{name}: predict's class column is not the argmax of its probabilities")
        # numpy's argmax must agree wherever the top two probabilities are not within tolerance.
        top2 = np.sort(probabilities, axis=1)[:, -2:]
        clear = top2[:, 1] - top2[:, 0] > 10 * rtol
        disagree = np.flatnonzero(clear & (np.argmax(probabilities, axis=1) != classes))
        if disagree.size:
            raise Mismatch(f"{name}: numpy's class differs from predict's in rows {disagree[:10]}")
        if len(np.unique(classes)) < 2:
            raise Mismatch(f"{name}: predict gives one class for every row; the check would be vacuous")
    print(f"  {name} ({dtype}, {metadata['lmtrain.loss']}): {expected.shape[0]}×{expected.shape[1]} "
          f"predictions, worst relative difference {worst:.2e} (tolerance {rtol:g})")


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 1
    lmtrain, workdir = sys.argv[1], os.path.abspath(sys.argv[2])
    os.makedirs(workdir, exist_ok=True)
    try:
        write_data(workdir)
        for name, data, task, precision, loss, layers, normalize_inputs in MODELS:
            config = write_config(workdir, name, data, task, precision, loss, layers,
                                  normalize_inputs)
            run([lmtrain, "fit", config, "--quiet"])
            check(lmtrain, workdir, name, data, task, layers, normalize_inputs)
    except (Mismatch, KeyError, ValueError, OSError) as e:
        print(f"FAIL: {type(e).__name__ + ': ' if not isinstance(e, Mismatch) else ''}{e}")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
