"""The PyTorch peers of the standard workloads (shared/WORKLOADS.md), printing JSON lines in the
schema of bench/lmtrain_workloads.cpp.

  W1, W2, W7  torch-levenberg-marquardt's LevenbergMarquardtModule on the same data, network, batch
          and epochs as lmtrain, with its README configuration (MSELoss, learning_rate 1,
          attempts_per_step 10, solve_method 'qr' unless --solve says otherwise) and its
          StandardDampingStrategy with lmtrain's λ₀ = 1e-3, ×10 up, ×0.1 down, [1e-10, 1e10]
          (which are also its defaults).  With --optimizer adam|lbfgs, the first-order peers on
          the same network and data: torch.optim.Adam on the same mini-batches, or
          torch.optim.LBFGS (full batch, strong-Wolfe line search), for --budget seconds of wall
          clock (bench/run.sh passes the time lmtrain's run took).
  W3      the Jacobian of the residuals with torch.func.jacrev (vmapped per sample, as
          torch-levenberg-marquardt builds it) or jacfwd, then JᵀJ, timed separately: `J.T @ J`,
          a full GEMM (what torch-levenberg-marquardt does), or with --jtj syrk numpy's
          `Jn.T @ Jn` on the same buffer, which numpy hands to BLAS ?syrk (one triangle, then
          mirrored): the product lmtrain computes.  torch itself has no SYRK.
  W6      a FANN set (bench/run.sh's W6) with --optimizer adam|lbfgs, full batch, 1 hidden tanh
          layer, linear outputs, for --budget seconds; inputs standardized with the training
          file's statistics with --standardize-inputs (as lmtrain's and FANN's W6 rows).
  W4      cuPyLMA's SimpleCNN on the first --train-rows / --test-rows images of Fashion-MNIST
          (gzip IDX from Debian's dataset-fashion-mnist), pixels standardized per pixel with the
          training subset's mean and population standard deviation (lmtrain's
          normalize_inputs = "standardize"), torch-levenberg-marquardt's CrossEntropyLoss (one
          residual √CE per image, lmtrain's cross_entropy_sqrt), the same LM settings as W1/W2;
          or, with --optimizer adam, torch.optim.Adam on nn.CrossEntropyLoss (the first-order
          baseline of WORKLOADS.md, PyTorch's default lr 1e-3), same batches and epochs.

usage: python torch_lm.py W1|W2|W7 [--epochs N] [--seed S] [--solve qr|cholesky|solve] [--device cpu|cuda]
       python torch_lm.py W5 [--width 100] [--rows 100000] [--epochs 4] [--solve cholesky] [--device D]
                                 [--optimizer lm|adam|lbfgs] [--lr LR] [--budget S]
       python torch_lm.py W3 --width W --depth D --samples S [--method jacrev|jacfwd]
                             [--jtj gemm|syrk] [--repeats R]
       python torch_lm.py W6 --set NAME [--datasets DIR] [--hidden 16] --optimizer adam|lbfgs
                             [--lr LR] [--budget 5] [--seed S] [--standardize-inputs]
       python torch_lm.py W4 [--epochs 5] [--train-rows 6000] [--test-rows 2000] [--data DIR]
                             [--seed S] [--solve qr|cholesky|solve] [--optimizer lm|adam] [--lr 1e-3]

Run it with the virtual environment of bench/peers/install.sh.
"""
import argparse
import json
import math
import resource
import statistics
import sys
import time

import torch


def emit(obj):
    def clean(v):
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        return v
    print(json.dumps(clean(obj)), flush=True)


def peak_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def sinc10(x):
    return torch.sinc(10.0 * x)  # torch.sinc(t) = sin(πt)/(πt), as in WORKLOADS.md


def sinc_data(n, dtype):
    # Computed in float64 and rounded once, as lmtrain_workloads.cpp does.
    h = 2.0 / (n - 1)
    x = -1.0 + h * torch.arange(n, dtype=torch.float64)
    xt = -1.0 + h * (torch.arange(0, n - 1, 4, dtype=torch.float64) + 0.5)
    return (x[:, None].to(dtype), sinc10(x)[:, None].to(dtype),
            xt[:, None].to(dtype), sinc10(xt)[:, None].to(dtype))


def dense_data(rows, seed, dtype):
    """W5's data as bench/lmtrain_workloads.cpp makes it (dense_data): x standard normal by
    Box-Muller from SplitMix64 (seed 5 for training, 6 for the test rows), y = sin x0 +
    cos x1 x2 + 0.1 x3^2 + tanh(x4 - x5) + 0.3 x6 x7 in float64, both rounded to dtype once."""
    import numpy as np
    with np.errstate(over='ignore'):
        state = np.uint64(seed) + np.arange(1, 8 * rows + 1, dtype=np.uint64) * \
            np.uint64(0x9E3779B97F4A7C15)
        z = (state ^ (state >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
    u1, u2 = u[0::2], u[1::2]
    radius = np.sqrt(-2.0 * np.log1p(-u1))
    normals = np.empty(8 * rows)
    normals[0::2] = radius * np.cos(2.0 * np.pi * u2)
    normals[1::2] = radius * np.sin(2.0 * np.pi * u2)
    x = normals.reshape(rows, 8)
    y = (np.sin(x[:, 0]) + np.cos(x[:, 1]) * x[:, 2] + 0.1 * x[:, 3] ** 2
         + np.tanh(x[:, 4] - x[:, 5]) + 0.3 * x[:, 6] * x[:, 7])
    return torch.from_numpy(x).to(dtype), torch.from_numpy(y[:, None]).to(dtype)


def run_dense(args):
    """W5 (dense-large): 8-W-W-1 tanh on args.rows samples, full batch, as lmtrain_workloads W5."""
    import torch_levenberg_marquardt as tlm

    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    width = args.width if args.width != 64 else 100  # 64: the W3 default, not given
    x, y = (t.to(device) for t in dense_data(args.rows, 5, torch.float32))
    xt, yt = (t.to(device) for t in dense_data(max(args.rows // 10, 1), 6, torch.float32))
    model = mlp([8, width, width, 1]).to(device)
    step_fn = lm_stepper(lm_module(model, tlm.loss.MSELoss(), args.solve))
    tool = 'torch-lm' if args.solve == 'qr' else f'torch-lm-{args.solve}'
    n = sum(p.numel() for p in model.parameters())

    def mse(xs, ys):
        with torch.no_grad():
            return float(torch.mean((model(xs) - ys) ** 2))

    train_epochs(args, tool, f'dense-{n}', model, step_fn, mse, x, y, xt, yt, args.rows,
                 args.epochs if args.epochs > 0 else 4, f'8-{width}-{width}-1 tanh',
                 extra={'solver': args.solve, 'torch_lm_version': tlm.__version__})


def mlp(widths):
    layers = []
    for i in range(len(widths) - 1):
        layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
        if i + 1 < len(widths) - 1:
            layers.append(torch.nn.Tanh())
    return torch.nn.Sequential(*layers)


def sync(device):
    if device.type == 'cuda':
        torch.cuda.synchronize()


def lm_module(model, loss_fn, solve):
    """torch-levenberg-marquardt with lmtrain's damping: λ₀ = 1e-3, ×10 up, ×0.1 down,
    λ ∈ [1e-10, 1e10], 10 attempts per step, learning rate 1 (also the library's defaults)."""
    import torch_levenberg_marquardt as tlm
    damping = tlm.damping.StandardDampingStrategy(
        starting_value=1e-3, dec_factor=0.1, inc_factor=10.0, min_value=1e-10, max_value=1e10)
    return tlm.training.LevenbergMarquardtModule(
        model=model, loss_fn=loss_fn, damping_strategy=damping, learning_rate=1.0,
        attempts_per_step=10, solve_method=solve)


def lm_stepper(module):
    """One torch-levenberg-marquardt training_step: (batch loss, stop, λ after, attempts)."""
    def step(xb, yb):
        _, batch_loss, stop, logs = module.training_step(xb, yb)
        return float(batch_loss), bool(stop), float(logs['damping']), int(logs['attempts'])
    step.damping = lambda: float(module.damping_strategy.get_current_damping())
    return step


def adam_stepper(model, loss_fn, lr):
    """One torch.optim.Adam step on the batch's mean loss (the loss before the update)."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)

    def step(xb, yb):
        opt.zero_grad(set_to_none=True)
        batch_loss = loss_fn(model(xb), yb)
        batch_loss.backward()
        opt.step()
        return float(batch_loss.detach()), False, None, 1
    step.damping = lambda: None
    return step


def lbfgs_stepper(model, loss_fn, lr):
    """One torch.optim.LBFGS step (up to max_iter = 20 iterations with a strong-Wolfe line search,
    history 100) on the batch's mean loss; the loss before the step and the closure evaluations
    it took (its "attempts")."""
    opt = torch.optim.LBFGS(model.parameters(), lr=lr, max_iter=20, history_size=100,
                            line_search_fn='strong_wolfe')

    def step(xb, yb):
        calls = []

        def closure():
            opt.zero_grad(set_to_none=True)
            batch_loss = loss_fn(model(xb), yb)
            batch_loss.backward()
            calls.append(float(batch_loss.detach()))
            return batch_loss
        opt.step(closure)
        return calls[0], False, None, len(calls)
    step.damping = lambda: None
    return step


def first_order_stepper(args, model, loss_fn):
    """(tool, step function, result fields) of --optimizer adam|lbfgs."""
    if args.optimizer == 'adam':
        lr = args.lr if args.lr > 0 else 1e-3
        tool = 'torch-adam' if lr == 1e-3 else f'torch-adam-lr{lr:g}'
        return tool, adam_stepper(model, loss_fn, lr), {'optimizer': f'Adam (lr {lr:g})'}
    lr = args.lr if args.lr > 0 else 1.0
    tool = 'torch-lbfgs' if lr == 1.0 else f'torch-lbfgs-lr{lr:g}'
    return tool, lbfgs_stepper(model, loss_fn, lr), {
        'optimizer': f'L-BFGS (lr {lr:g}, max_iter 20, history 100, strong Wolfe), full batch'}


def train_epochs(args, tool, variant, model, step_fn, loss, x, y, xt, yt, batch, epochs, describe,
             accuracy=None, extra=None):
    """Epochs of optimizer steps (`step_fn`, see lm_stepper) over shuffled mini-batches; prints
    the step, epoch and result lines.  `loss(xs, ys)` is the reported loss (PyTorch's mean
    reduction) on a whole set; `accuracy`, when given, the fraction of argmax hits.  With
    args.budget > 0 the run also stops at the first step that ends past that many seconds of
    wall clock (checked after every step, as lmtrain's max_time_seconds), epochs then being only
    a cap."""
    device = torch.device(args.device)
    n = x.shape[0]
    params = sum(p.numel() for p in model.parameters())
    initial = loss(x, y)
    step_seconds, epoch_seconds = [], []
    step = 0
    start = time.perf_counter()
    stopped = over_budget = False
    budget = getattr(args, 'budget', 0) or 0
    epoch = 0
    for epoch in range(1, epochs + 1):
        t_epoch = time.perf_counter()
        perm = torch.randperm(n, device=device)
        for b, first in enumerate(range(0, n, batch)):
            idx = perm[first:first + batch]
            xb, yb = x[idx], y[idx]
            sync(device)
            t0 = time.perf_counter()
            batch_loss, stop, damping, attempts = step_fn(xb, yb)
            sync(device)
            dt = time.perf_counter() - t0
            step += 1
            step_seconds.append(dt)
            over_budget = budget > 0 and time.perf_counter() - start >= budget
            emit({'type': 'step', 'tool': tool, 'workload': args.workload, 'variant': variant,
                  'step': step, 'epoch': epoch, 'batch': b, 'seconds': dt,
                  'elapsed': time.perf_counter() - start, 'batch_loss': batch_loss,
                  'lambda': damping, 'attempts': attempts})
            if stop:
                stopped = True
                break
            if over_budget:
                break
        # The epoch's training loss over all samples, inside the epoch's time as in lmtrain.
        train_loss = loss(x, y)
        now = time.perf_counter()
        epoch_seconds.append(now - t_epoch)
        emit({'type': 'epoch', 'tool': tool, 'workload': args.workload, 'variant': variant,
              'epoch': epoch, 'train_loss': train_loss, 'elapsed': now - start,
              'lambda': step_fn.damping()})
        if stopped or over_budget:
            break
    total = time.perf_counter() - start
    result = {
        'type': 'result', 'tool': tool, 'workload': args.workload, 'variant': variant,
        'device': f'{device.type} (torch {torch.__version__}, {torch.get_num_threads()} threads)',
        'precision': 'float32', 'model': f'{describe} ({params} parameters)',
        'params': params, 'batch': batch, 'epochs': epoch, 'steps': step,
        'median_step_s': statistics.median(step_seconds),
        'step_basis': 'median of optimizer steps (training_step calls for torch-lm)',
        'median_epoch_s': statistics.median(epoch_seconds), 'total_s': total,
        'initial_train_loss': initial, 'final_train_loss': loss(x, y), 'test_loss': loss(xt, yt),
        'peak_rss_bytes': peak_rss_bytes(),
        'termination': ('lambda_above_max' if stopped else 'time_budget' if over_budget
                        else 'max_epochs')}
    if budget > 0:
        result['budget_s'] = budget
    result.update(extra or {})
    if accuracy is not None:
        result['test_accuracy'] = accuracy(xt, yt)
        result['train_accuracy'] = accuracy(x, y)
    emit(result)


def run_sinc(args):
    import torch_levenberg_marquardt as tlm

    w1, w7 = args.workload == 'W1', args.workload == 'W7'
    n, hidden, batch = (20000, 20, 1000) if w1 else (100000, 256, 100000 if w7 else 10000)
    epochs = args.epochs if args.epochs > 0 else (50 if w1 else 200 if w7 else 10)
    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    x, y, xt, yt = (t.to(device) for t in sinc_data(n, torch.float32))
    model = mlp([1, hidden, 1]).to(device)
    if args.optimizer == 'lm':
        step_fn = lm_stepper(lm_module(model, tlm.loss.MSELoss(), args.solve))
        tool = 'torch-lm' if args.solve == 'qr' else f'torch-lm-{args.solve}'
        extra = {'solver': args.solve, 'torch_lm_version': tlm.__version__}
    else:
        # L-BFGS is a full-batch method; Adam takes the LM runs' mini-batches.
        if args.optimizer == 'lbfgs':
            batch = n
        if args.budget > 0 and args.epochs <= 0:
            epochs = 10**9  # the budget ends the run
        tool, step_fn, extra = first_order_stepper(args, model, torch.nn.functional.mse_loss)

    def mse(xs, ys):
        with torch.no_grad():
            return float(torch.mean((model(xs) - ys) ** 2))

    variant = 'sinc-61' if w1 else 'sinc-769-full' if w7 else 'sinc-769'
    train_epochs(args, tool, variant, model, step_fn, mse, x, y,
             xt, yt, batch, epochs, f'1-{hidden}-1 tanh', extra=extra)


def read_fann(path):
    """A FANN data file (first line: samples inputs outputs; then alternating input and output
    lines, whitespace-separated) as float64 tensors (samples × inputs, samples × outputs)."""
    with open(path) as f:
        values = f.read().split()
    samples, inputs, outputs = (int(v) for v in values[:3])
    data = torch.tensor([float(v) for v in values[3:3 + samples * (inputs + outputs)]],
                        dtype=torch.float64).view(samples, inputs + outputs)
    return data[:, :inputs].contiguous(), data[:, inputs:].contiguous()


def run_fann(args):
    """W6 with a first-order optimizer: the network of lmtrain's and FANN's rows (inputs-16-outputs,
    tanh hidden, linear outputs), full batch, for --budget seconds of wall clock."""
    import os
    if not args.set:
        raise ValueError('W6 needs --set NAME')
    if args.optimizer == 'lm':
        raise ValueError('W6: --optimizer adam or lbfgs (the LM rows are lmtrain and FANN)')
    device = torch.device(args.device)
    torch.manual_seed(args.seed)

    def find(part):
        for p in (os.path.join(args.datasets, f'{args.set}.{part}'),):
            if os.path.exists(p):
                return p
        raise FileNotFoundError(f'{args.datasets}/{args.set}.{part} not found')
    x, y = read_fann(find('train'))
    xt, yt = read_fann(find('test'))
    if args.standardize_inputs:
        # io::Standardization: training rows' mean and population standard deviation, a constant
        # column only centred, in float64, rounded once.
        mean = x.mean(dim=0)
        scale = ((x - mean) ** 2).mean(dim=0).sqrt()
        scale[~(scale > 1e-12)] = 1.0
        x, xt = (x - mean) / scale, (xt - mean) / scale
    x, y, xt, yt = (t.float().to(device) for t in (x, y, xt, yt))
    model = mlp([x.shape[1], args.hidden, y.shape[1]]).to(device)
    tool, step_fn, extra = first_order_stepper(args, model, torch.nn.functional.mse_loss)
    one_hot = y.shape[1] > 1 and bool(((y == 0) | (y == 1)).all()) and bool((y.sum(1) == 1).all())
    extra.update(inputs='standardized' if args.standardize_inputs else 'raw')

    def mse(xs, ys):
        with torch.no_grad():
            return float(torch.mean((model(xs) - ys) ** 2))

    def accuracy(xs, ys):
        with torch.no_grad():
            return float((model(xs).argmax(1) == ys.argmax(1)).float().mean())

    if args.budget <= 0:
        args.budget = 5.0
    epochs = args.epochs if args.epochs > 0 else 10**9
    train_epochs(args, tool, args.set, model, step_fn, mse, x, y, xt, yt, x.shape[0], epochs,
                 f'{x.shape[1]}-{args.hidden}-{y.shape[1]} tanh/linear',
                 accuracy if one_hot else None, extra)


def read_idx(path, rows):
    """The first `rows` records of an IDX file (http://yann.lecun.com/exdb/mnist/), plain or gzip,
    as a numpy array; only those are decompressed (as lmtrain_workloads does)."""
    import gzip
    import numpy as np

    opener = gzip.open if path.endswith('.gz') else open
    with opener(path, 'rb') as f:
        head = f.read(4)
        if len(head) < 4 or head[0] != 0 or head[1] != 0:
            raise ValueError(f'{path}: not an IDX file')
        dtypes = {0x08: '>u1', 0x09: '>i1', 0x0B: '>i2', 0x0C: '>i4', 0x0D: '>f4', 0x0E: '>f8'}
        if head[2] not in dtypes:
            raise ValueError(f'{path}: unknown IDX type code {head[2]:#x}')
        dtype = np.dtype(dtypes[head[2]])
        raw_dims = f.read(4 * head[3])
        dims = [int.from_bytes(raw_dims[4 * i:4 * i + 4], 'big') for i in range(head[3])]
        dims[0] = min(rows, dims[0]) if rows > 0 else dims[0]
        count = int(np.prod(dims))
        data = f.read(count * dtype.itemsize)
    if len(data) != count * dtype.itemsize:
        raise ValueError(f'{path}: shorter than its IDX header says')
    return np.frombuffer(data, dtype=dtype).reshape(dims)


def fashion_data(args):
    """The first train_rows / test_rows images and labels, standardized per pixel with the
    training subset's mean and population standard deviation (a constant pixel is only centred),
    computed in float64 and rounded once to float32: lmtrain's Standardization::fit."""
    import os
    import numpy as np

    def load(images, labels, rows):
        x = read_idx(os.path.join(args.data, images), rows).reshape(-1, 28 * 28)
        y = read_idx(os.path.join(args.data, labels), rows)
        return x.astype(np.float64), y.astype(np.int64)

    x, y = load('train-images-idx3-ubyte.gz', 'train-labels-idx1-ubyte.gz', args.train_rows)
    xt, yt = load('t10k-images-idx3-ubyte.gz', 't10k-labels-idx1-ubyte.gz', args.test_rows)
    mean = x.mean(axis=0)
    scale = np.sqrt(((x - mean) ** 2).mean(axis=0))
    scale[~(scale > 1e-12)] = 1.0
    to_t = lambda a: torch.from_numpy(((a - mean) / scale).astype(np.float32)).view(-1, 1, 28, 28)
    return to_t(x), torch.from_numpy(y), to_t(xt), torch.from_numpy(yt)


def simple_cnn():
    """cuPyLMA's SimpleCNN as in examples/fashion-cnn/run.toml (1 026 parameters)."""
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(1, 8, 4, stride=2), nn.ELU(),
        nn.Conv2d(8, 4, 4, stride=2), nn.ELU(),
        nn.Conv2d(4, 4, 2), nn.ELU(),
        nn.Conv2d(4, 4, 2), nn.ELU(),
        nn.Conv2d(4, 4, 2), nn.ELU(),
        nn.Flatten(), nn.Linear(16, 10))


def run_fashion(args):
    import torch_levenberg_marquardt as tlm

    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    x, y, xt, yt = (t.to(device) for t in fashion_data(args))
    model = simple_cnn().to(device)
    if args.optimizer == 'adam':
        lr = args.lr if args.lr > 0 else 1e-3
        tool = 'torch-adam'
        step_fn = adam_stepper(model, torch.nn.functional.cross_entropy, lr)
        extra = {'optimizer': f'Adam (lr {lr:g})'}
    else:
        tool = 'torch-lm' if args.solve == 'qr' else f'torch-lm-{args.solve}'
        step_fn = lm_stepper(lm_module(model, tlm.loss.CrossEntropyLoss(), args.solve))
        extra = {'solver': args.solve, 'torch_lm_version': tlm.__version__,
                 'loss': 'CrossEntropyLoss (residual √CE per image)'}
    epochs = args.epochs if args.epochs > 0 else 5

    def batches(xs):
        return (xs[i:i + 2000] for i in range(0, xs.shape[0], 2000))

    def cross_entropy(xs, ys):
        with torch.no_grad():
            total = sum(float(torch.nn.functional.cross_entropy(model(xb), yb, reduction='sum'))
                        for xb, yb in zip(batches(xs), batches(ys)))
            return total / xs.shape[0]

    def accuracy(xs, ys):
        with torch.no_grad():
            hits = sum(int((model(xb).argmax(dim=1) == yb).sum())
                       for xb, yb in zip(batches(xs), batches(ys)))
            return hits / xs.shape[0]

    extra.update(train_samples=x.shape[0], test_samples=xt.shape[0])
    train_epochs(args, tool, f'fashion-{x.shape[0]}', model, step_fn, cross_entropy, x, y, xt, yt,
             2000, epochs, 'SimpleCNN: conv 8 k4 s2, conv 4 k4 s2, 3 × conv 4 k2, ELU, dense 10',
             accuracy, extra)


def run_jacobian(args):
    from torch.func import functional_call, jacfwd, jacrev, vmap

    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    s = args.samples
    x = torch.linspace(-1, 1, s, dtype=torch.float64)
    y = sinc10(x)
    x, y = x[:, None].float().to(device), y[:, None].float().to(device)
    model = mlp([1] + [args.width] * args.depth + [1]).to(device)
    names = [k for k, _ in model.named_parameters()]
    shapes = [p.shape for p in model.parameters()]
    sizes = [p.numel() for p in model.parameters()]
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    n = flat.numel()

    def residuals(theta, xs, ys):
        parts = torch.split(theta, sizes)
        params = {k: t.view(sh) for k, t, sh in zip(names, parts, shapes)}
        return (functional_call(model, params, (xs,)) - ys).flatten()

    if args.jtj == 'syrk' and device.type != 'cpu':
        raise ValueError('--jtj syrk goes through numpy: CPU only')
    if args.method == 'jacrev':
        # torch-levenberg-marquardt's construction: per-sample jacrev under vmap.
        jac = vmap(jacrev(residuals), in_dims=(None, 0, 0))
        jacobian = lambda: jac(flat, x[:, None], y[:, None]).reshape(s, n)
    else:
        jac = vmap(jacfwd(residuals), in_dims=(None, 0, 0))
        jacobian = lambda: jac(flat, x[:, None], y[:, None]).reshape(s, n)

    times, jac_times, jtj_times = [], [], []
    with torch.no_grad():
        for r in range(args.repeats + 1):  # r = 0 is the warm-up
            sync(device)
            t0 = time.perf_counter()
            J = jacobian()
            sync(device)
            t1 = time.perf_counter()
            if args.jtj == 'syrk':
                Jn = J.numpy()  # no copy: the same buffer
                A = Jn.T @ Jn   # numpy sees one operand transposed: BLAS ?syrk, then mirrors
            else:
                A = J.T @ J     # a full GEMM, as torch-levenberg-marquardt computes it
            sync(device)
            t2 = time.perf_counter()
            del J, A
            if r == 0:
                continue
            jac_times.append(t1 - t0)
            jtj_times.append(t2 - t1)
            times.append(t2 - t0)
    emit({'type': 'result', 'tool': f'torch-{args.method}' + ('-syrk' if args.jtj == 'syrk' else ''),
          'workload': 'W3', 'jtj': 'numpy J.T @ J (BLAS syrk)' if args.jtj == 'syrk' else 'torch J.T @ J (GEMM)',
          'variant': f'w{args.width}-d{args.depth}-s{s}',
          'device': f'{device.type} (torch {torch.__version__}, {torch.get_num_threads()} threads)',
          'width': args.width, 'depth': args.depth, 'samples': s, 'params': n,
          'median_s': statistics.median(times), 'median_jacobian_s': statistics.median(jac_times),
          'median_jtj_s': statistics.median(jtj_times), 'peak_rss_bytes': peak_rss_bytes(),
          'repeats': args.repeats})


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('workload', choices=['W1', 'W2', 'W3', 'W4', 'W5', 'W6', 'W7'])
    p.add_argument('--epochs', type=int, default=-1)
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--solve', default='qr', choices=['qr', 'cholesky', 'solve'])
    p.add_argument('--device', default='cpu', choices=['cpu', 'cuda'])
    p.add_argument('--width', type=int, default=64)
    p.add_argument('--depth', type=int, default=1)
    p.add_argument('--samples', type=int, default=5000)
    p.add_argument('--rows', type=int, default=100000, help='W5: training samples')
    p.add_argument('--method', default='jacrev', choices=['jacrev', 'jacfwd'])
    p.add_argument('--repeats', type=int, default=5)
    p.add_argument('--train-rows', type=int, default=6000)
    p.add_argument('--test-rows', type=int, default=2000)
    p.add_argument('--data', default='/usr/share/datasets/fashion-mnist')
    p.add_argument('--optimizer', default='lm', choices=['lm', 'adam', 'lbfgs'],
                   help='torch-levenberg-marquardt (default), torch.optim.Adam or torch.optim.LBFGS '
                        '(lbfgs: W1, W2, W7, W6)')
    p.add_argument('--lr', type=float, default=0,
                   help='Adam / L-BFGS learning rate (default: PyTorch\'s, 1e-3 and 1)')
    p.add_argument('--budget', type=float, default=0,
                   help='seconds of wall clock, checked after every step (W1/W2/W7 first-order '
                        'runs and W6; W6 default 5)')
    p.add_argument('--jtj', default='gemm', choices=['gemm', 'syrk'],
                   help='W3: torch J.T @ J (GEMM) or numpy\'s J.T @ J on one buffer (BLAS syrk)')
    p.add_argument('--set', default='', help='W6: the FANN set (kin32fm, …)')
    p.add_argument('--datasets', default='/usr/share/doc/libfann-dev/examples/datasets')
    p.add_argument('--hidden', type=int, default=16)
    p.add_argument('--standardize-inputs', action='store_true')
    args = p.parse_args()
    tool = ('torch-' + args.method + ('-syrk' if args.jtj == 'syrk' else '')
            if args.workload == 'W3' else 'torch-' + args.optimizer if args.optimizer != 'lm'
            else 'torch-lm' if args.solve == 'qr' else f'torch-lm-{args.solve}')
    try:
        if args.workload == 'W3':
            run_jacobian(args)
        elif args.workload == 'W4':
            run_fashion(args)
        elif args.workload == 'W6':
            run_fann(args)
        elif args.workload == 'W5':
            run_dense(args)
        else:
            run_sinc(args)
    except Exception as e:  # reported as a failed peer, with its error
        emit({'type': 'error', 'tool': tool, 'workload': args.workload,
              'error': f'{type(e).__name__}: {e}'})
        print(f'torch_lm.py: {type(e).__name__}: {e}', file=sys.stderr)
        sys.exit(2)


if __name__ == '__main__':
    main()
