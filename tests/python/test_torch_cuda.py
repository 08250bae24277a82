"""lmtrain.torch on CUDA tensors (issue 27): a model on cuda:0 trains on cuda:0, on torch's
current stream.  Every test is marked ``cuda`` and skips, saying why, where no CUDA device is
visible or this lmtrain was built without its CUDA backend — that is every CI machine; run them
where a GPU is lent (``pytest -m cuda tests/python/test_torch_cuda.py``).  References: the same
computation on the CPU in float64, and torch.autograd.functional.jacobian."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from torch_support import (flat_parameters, load_distributed_worker, lt, reference_jacobian,
                           run_distributed_worker, torch)

from lmtrain import _core
from lmtrain.torch._jacobian import PerSampleJacobian
from lmtrain.torch._losses import Loss

NEEDS_CUDA = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device visible to torch"),
    pytest.mark.skipif(not _core.cuda_backend_built(),
                       reason="this lmtrain was built without its CUDA backend"),
]
pytestmark = [pytest.mark.cuda]
# A test that runs on the CPU too, so that CI keeps it in step with the code it calls (the
# slices' test called PerSampleJacobian.slice without its argument `u` for a whole issue, unseen
# because no machine of CI has a GPU).


def needs_cuda(test):
    for mark in NEEDS_CUDA:
        test = mark(test)
    return test


ON_EACH_DEVICE = pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=NEEDS_CUDA)])


def _problem(device: str, dtype: torch.dtype = torch.float64, samples: int = 300):
    g = torch.Generator().manual_seed(11)
    x = torch.rand(samples, 2, generator=g, dtype=torch.float64) * 2 - 1
    y = torch.sin(3 * x[:, :1]) * x[:, 1:2]
    torch.manual_seed(11)
    model = torch.nn.Sequential(torch.nn.Linear(2, 12), torch.nn.Tanh(), torch.nn.Linear(12, 1))
    return model.to(device=device, dtype=dtype), x.to(device, dtype), y.to(device, dtype)


@ON_EACH_DEVICE
def test_slices_equal_autograd(device: str) -> None:
    model, x, y = _problem(device)
    loss = Loss("mse")
    reference = reference_jacobian(model, lambda f: loss.residuals(f(x), y).reshape(-1))
    engine = PerSampleJacobian(model, [n for n, _ in model.named_parameters()], loss, "jacrev")
    params = {n: p.detach() for n, p in model.named_parameters()}
    u = torch.zeros(50, dtype=torch.float64, device=device)  # mse draws nothing
    j = engine.slice(params, x[40:90], y[40:90], u)
    assert j.device.type == device
    torch.testing.assert_close(j, reference[40:90], rtol=1e-12, atol=1e-12)


@needs_cuda
def test_a_step_on_cuda_equals_the_cpu_step() -> None:
    # float64: the step on cuda:0 (A, the factorization, δ on the device; parameters updated in
    # place) against the same step on the CPU, to cuBLAS/OpenBLAS rounding amplified by one solve.
    reports, params = [], []
    for device in ("cpu", "cuda"):
        model, x, y = _problem(device)
        opt = lt.LevenbergMarquardt(model, fast_path=False)
        reports.append(opt.step(x, y))
        params.append(flat_parameters(model).cpu())
        assert next(model.parameters()).device.type == device
    assert reports[1].loss == pytest.approx(reports[0].loss, rel=1e-12)
    assert reports[1].loss_after == pytest.approx(reports[0].loss_after, rel=1e-9)
    torch.testing.assert_close(params[1], params[0], rtol=1e-9, atol=1e-12)


@needs_cuda
@pytest.mark.parametrize("fast_path", [False, True])
def test_w1_on_cuda_reaches_the_cpu_loss(fast_path: bool) -> None:
    # W1's network (1-20-1 tanh) on sinc data in float32, 20 epochs of batches of 1 000, by the
    # torch path and by the fast path's fit (the library's trainer on the CUDA backend, host data
    # sets copied batch by batch): the loss on cuda:0 within 3× the CPU's (float32 rounding makes
    # the trajectories part; a wrong kernel ends orders of magnitude away).
    losses = []
    for device in ("cpu", "cuda"):
        torch.manual_seed(0)
        x = torch.linspace(-10, 10, 20000).reshape(-1, 1)
        y = torch.special.sinc(x / torch.pi)
        model = torch.nn.Sequential(torch.nn.Linear(1, 20), torch.nn.Tanh(),
                                    torch.nn.Linear(20, 1)).to(device)
        opt = lt.LevenbergMarquardt(model, fast_path=fast_path)
        assert (opt.path == "native") == fast_path
        history = opt.fit((x.to(device), y.to(device)), epochs=20, batch_size=1000)
        assert opt.summary.rank_devices[0].startswith("cuda") == (device == "cuda")
        losses.append(history[-1]["loss"])
    assert losses[0] < 1e-4
    assert losses[1] <= 3 * losses[0]


@needs_cuda
def test_fast_path_steps_on_cuda_equal_the_cpus() -> None:
    # The native engine on cuda:0 (NativeStep on the CUDA backend, torch's stream, the flat
    # parameters, x and y as device tensors) against the same fast path on the CPU, float64,
    # 5 steps from the same start: losses to 1e-9, parameters to cuBLAS/OpenBLAS rounding.
    runs = []
    for device in ("cpu", "cuda"):
        model, x, y = _problem(device)
        opt = lt.LevenbergMarquardt(model)
        assert opt.path == "native"
        losses = [opt.step(x, y).loss_after for _ in range(5)]
        assert next(model.parameters()).device.type == device
        runs.append((losses, flat_parameters(model).cpu()))
    assert runs[1][0] == pytest.approx(runs[0][0], rel=1e-9)
    torch.testing.assert_close(runs[1][1], runs[0][1], rtol=1e-8, atol=1e-11)


@needs_cuda
@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch without distributed")
def test_two_ranks_on_cuda_equal_one_process(tmp_path: Path) -> None:
    # torchrun --nproc_per_node 2 with the model on CUDA: NCCL when there are two devices (A and g
    # summed on device buffers), else gloo on CUDA tensors sharing cuda:0 — against one process
    # on cuda:0, float64 (torch_distributed_worker.py with LMTRAIN_TEST_DEVICE=cuda).
    run_distributed_worker(tmp_path, 1, "train", device="cuda")
    run_distributed_worker(tmp_path, 2, "train", device="cuda")
    one, one_reports = load_distributed_worker(tmp_path, 1, 0)
    rank0, _ = load_distributed_worker(tmp_path, 2, 0)
    rank1, _ = load_distributed_worker(tmp_path, 2, 1)
    torch.testing.assert_close(rank0, rank1, rtol=0, atol=0)  # every rank the same parameters
    torch.testing.assert_close(rank0, one, rtol=0, atol=1e-10)
    assert one_reports["reports"][-1][1] < one_reports["reports"][0][0]


@needs_cuda
def test_the_budget_is_a_share_of_the_devices_free_memory() -> None:
    # The H200 run got "does not fit the memory budget of 0 B" for every CUDA step of this file
    # (its cause not found without a device): the plan says what the budget came from, and a
    # float64 step on CUDA plans with a budget of memory_fraction of what the device has free.
    model, x, y = _problem("cuda")
    opt = lt.LevenbergMarquardt(model, fast_path=False)
    opt.step(x, y)
    free, _ = torch.cuda.mem_get_info()
    plan = opt.plan
    assert "memory_fraction 0.5 of the" in plan["memory_plan"], plan["memory_plan"]
    assert 0.2 * free <= plan["budget_bytes"] <= 0.5 * free + (1 << 30), plan["memory_plan"]


@needs_cuda
def test_cupylma_on_cuda_equals_the_cpu_and_two_streams_equal_one() -> None:
    # LMA in cuPyLMA's call shape, float64, 4 steps: on cuda:0 against the CPU (cuBLAS/OpenBLAS
    # rounding through 4 solves), and devices=[cuda:0, cuda:0] (two streams of one GPU, the
    # library's threads summing the host copies of A and g) against cuda:0 alone.
    import lmtrain.torch as cuPyLMA

    x = torch.linspace(-1, 1, 3000, dtype=torch.float64).unsqueeze(1)
    y = torch.sinc(10 * x)
    results = []
    for devices in (["cpu"], ["cuda:0"], ["cuda:0", "cuda:0"]):
        torch.manual_seed(6)
        model = torch.nn.Sequential(torch.nn.Linear(1, 16), torch.nn.Tanh(),
                                    torch.nn.Linear(16, 1)).double().to(devices[0])
        lma = cuPyLMA.LMA(model, devices, torch.nn.MSELoss(), lambda a, b: torch.flatten(a - b),
                          dtype=torch.float64)
        losses = [lma.step(x, y, 1000)[0] for _ in range(4)]
        results.append((flat_parameters(model).cpu(), losses))
    (cpu, cpu_losses), (gpu, gpu_losses), (two, two_losses) = results
    torch.testing.assert_close(gpu, cpu, rtol=0, atol=1e-9)
    assert gpu_losses == pytest.approx(cpu_losses, rel=1e-9)
    torch.testing.assert_close(two, gpu, rtol=0, atol=1e-10)
    assert two_losses == pytest.approx(gpu_losses, rel=1e-10)


@needs_cuda
@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch without distributed")
def test_the_torch_job_on_cuda_trains_as_on_the_cpu(tmp_path: Path) -> None:
    # deploy/torch/train_sinc.py (the PyTorchJob's script) under torchrun, two ranks, with
    # --device cuda (NCCL with two GPUs, gloo on one shared GPU) against --device cpu, W1 in
    # float32 for 5 epochs of 20 steps.  The bounds come from 1-ulp perturbations of the start on
    # the CPU (3 draws, 2026-11-28): the first epoch's mse moved by at most 0.17%, the fifth's by
    # up to 2.4× (float32 LM steps on batches amplify rounding), all five runs ended below 0.06 ×
    # the first epoch's.  So: epoch 1 within 1%, epoch 5 below 0.2 × epoch 1 on both devices.
    root = Path(__file__).resolve().parents[2]
    data = tmp_path / "sinc.csv"
    subprocess.run([sys.executable, str(root / "examples" / "sinc" / "make_data.py"), str(data)],
                   check=True)
    losses = {}
    for device in ("cpu", "cuda"):
        run_dir = tmp_path / device
        result = subprocess.run(
            [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
             "2", str(root / "deploy" / "torch" / "train_sinc.py"), f"--data={data}",
             f"--run-dir={run_dir}", "--epochs=5", f"--device={device}"],
            env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True,
            timeout=300)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        losses[device] = json.loads((run_dir / "result.json").read_text())["losses"]
    print(f"train_sinc.py, two ranks: mse per epoch on the CPU {losses['cpu']}, "
          f"on CUDA {losses['cuda']}")
    assert losses["cuda"][0] == pytest.approx(losses["cpu"][0], rel=1e-2)
    for device in ("cpu", "cuda"):
        assert losses[device][-1] < 0.2 * losses[device][0], (device, losses[device])


def test_torchs_default_stream_is_handed_over_as_the_legacy_stream() -> None:
    # torch reads its default stream's handle as 0, which the library took for "a stream of its
    # own": a non-blocking stream, unordered with torch's kernels.  0 goes over as
    # cudaStreamLegacy (1); any other stream as it is.  Runs without a device.
    from types import SimpleNamespace

    from lmtrain.torch._native import cuda_stream_handle

    assert cuda_stream_handle(SimpleNamespace(cuda_stream=0)) == 1
    assert cuda_stream_handle(SimpleNamespace(cuda_stream=0x5A5A00)) == 0x5A5A00
