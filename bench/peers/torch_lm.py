"""The PyTorch peers of the standard workloads (shared/WORKLOADS.md), printing JSON lines in the
schema of bench/lmtrain_workloads.cpp.

  W1, W2  torch-levenberg-marquardt's LevenbergMarquardtModule on the same data, network, batch
          and epochs as lmtrain, with its README configuration (MSELoss, learning_rate 1,
          attempts_per_step 10, solve_method 'qr' unless --solve says otherwise) and its
          StandardDampingStrategy with lmtrain's λ₀ = 1e-3, ×10 up, ×0.1 down, [1e-10, 1e10]
          (which are also its defaults).
  W3      the Jacobian of the residuals with torch.func.jacrev (vmapped per sample, as
          torch-levenberg-marquardt builds it) or jacfwd, then JᵀJ, timed separately.

usage: python torch_lm.py W1|W2 [--epochs N] [--seed S] [--solve qr|cholesky|solve] [--device cpu|cuda]
       python torch_lm.py W3 --width W --depth D --samples S [--method jacrev|jacfwd] [--repeats R]

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


def run_sinc(args):
    import torch_levenberg_marquardt as tlm

    w1 = args.workload == 'W1'
    n, hidden, batch = (20000, 20, 1000) if w1 else (100000, 256, 10000)
    epochs = args.epochs if args.epochs > 0 else (50 if w1 else 10)
    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    x, y, xt, yt = (t.to(device) for t in sinc_data(n, torch.float32))
    model = mlp([1, hidden, 1]).to(device)
    params = sum(p.numel() for p in model.parameters())
    damping = tlm.damping.StandardDampingStrategy(
        starting_value=1e-3, dec_factor=0.1, inc_factor=10.0, min_value=1e-10, max_value=1e10)
    module = tlm.training.LevenbergMarquardtModule(
        model=model, loss_fn=tlm.loss.MSELoss(), damping_strategy=damping, learning_rate=1.0,
        attempts_per_step=10, solve_method=args.solve)
    tool = 'torch-lm' if args.solve == 'qr' else f'torch-lm-{args.solve}'
    variant = 'sinc-61' if w1 else 'sinc-769'

    def mse(xs, ys):
        with torch.no_grad():
            return float(torch.mean((model(xs) - ys) ** 2))

    initial = mse(x, y)
    step_seconds, epoch_seconds = [], []
    step = 0
    start = time.perf_counter()
    stopped = False
    epoch = 0
    for epoch in range(1, epochs + 1):
        t_epoch = time.perf_counter()
        perm = torch.randperm(n, device=device)
        for b, first in enumerate(range(0, n, batch)):
            idx = perm[first:first + batch]
            xb, yb = x[idx], y[idx]
            sync(device)
            t0 = time.perf_counter()
            _, loss, stop, logs = module.training_step(xb, yb)
            sync(device)
            dt = time.perf_counter() - t0
            step += 1
            step_seconds.append(dt)
            emit({'type': 'step', 'tool': tool, 'workload': args.workload, 'variant': variant,
                  'step': step, 'epoch': epoch, 'batch': b, 'seconds': dt,
                  'elapsed': time.perf_counter() - start, 'batch_loss': float(loss),
                  'lambda': float(logs['damping']), 'attempts': int(logs['attempts'])})
            if stop:
                stopped = True
                break
        # The epoch's training loss over all samples, inside the epoch's time as in lmtrain.
        train_loss = mse(x, y)
        now = time.perf_counter()
        epoch_seconds.append(now - t_epoch)
        emit({'type': 'epoch', 'tool': tool, 'workload': args.workload, 'variant': variant,
              'epoch': epoch, 'train_loss': train_loss, 'elapsed': now - start,
              'lambda': float(module.damping_strategy.get_current_damping())})
        if stopped:
            break
    total = time.perf_counter() - start
    emit({'type': 'result', 'tool': tool, 'workload': args.workload, 'variant': variant,
          'device': f'{device.type} (torch {torch.__version__}, {torch.get_num_threads()} threads)',
          'precision': 'float32', 'model': f'1-{hidden}-1 tanh ({params} parameters)',
          'params': params, 'batch': batch, 'epochs': epoch, 'steps': step,
          'median_step_s': statistics.median(step_seconds),
          'step_basis': 'median of training_step calls',
          'median_epoch_s': statistics.median(epoch_seconds), 'total_s': total,
          'initial_train_loss': initial, 'final_train_loss': mse(x, y), 'test_loss': mse(xt, yt),
          'peak_rss_bytes': peak_rss_bytes(),
          'termination': 'lambda_above_max' if stopped else 'max_epochs',
          'solver': args.solve, 'torch_lm_version': tlm.__version__})


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
            A = J.T @ J
            sync(device)
            t2 = time.perf_counter()
            del J, A
            if r == 0:
                continue
            jac_times.append(t1 - t0)
            jtj_times.append(t2 - t1)
            times.append(t2 - t0)
    emit({'type': 'result', 'tool': f'torch-{args.method}', 'workload': 'W3',
          'variant': f'w{args.width}-d{args.depth}-s{s}',
          'device': f'{device.type} (torch {torch.__version__}, {torch.get_num_threads()} threads)',
          'width': args.width, 'depth': args.depth, 'samples': s, 'params': n,
          'median_s': statistics.median(times), 'median_jacobian_s': statistics.median(jac_times),
          'median_jtj_s': statistics.median(jtj_times), 'peak_rss_bytes': peak_rss_bytes(),
          'repeats': args.repeats})


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('workload', choices=['W1', 'W2', 'W3'])
    p.add_argument('--epochs', type=int, default=-1)
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--solve', default='qr', choices=['qr', 'cholesky', 'solve'])
    p.add_argument('--device', default='cpu', choices=['cpu', 'cuda'])
    p.add_argument('--width', type=int, default=64)
    p.add_argument('--depth', type=int, default=1)
    p.add_argument('--samples', type=int, default=5000)
    p.add_argument('--method', default='jacrev', choices=['jacrev', 'jacfwd'])
    p.add_argument('--repeats', type=int, default=5)
    args = p.parse_args()
    tool = 'torch-' + args.method if args.workload == 'W3' else 'torch-lm'
    try:
        if args.workload == 'W3':
            run_jacobian(args)
        else:
            run_sinc(args)
    except Exception as e:  # reported as a failed peer, with its error
        emit({'type': 'error', 'tool': tool, 'workload': args.workload,
              'error': f'{type(e).__name__}: {e}'})
        print(f'torch_lm.py: {type(e).__name__}: {e}', file=sys.stderr)
        sys.exit(2)


if __name__ == '__main__':
    main()
