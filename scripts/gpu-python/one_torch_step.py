"""One lmtrain.torch step on cuda:0 by each path — the native fast path and the torch path — for
compute-sanitizer in scripts/gpu-run.sh (stage sanitizers): lmtrain's CUDA kernels, cuBLAS and
cuSOLVER calls of a step on torch's stream, with the parameters updated in place.  Prints the
losses; exits 1 if a step did not lower the loss."""

import sys

import torch

import lmtrain.torch as lt


def main() -> int:
    g = torch.Generator().manual_seed(3)
    x = (torch.rand(256, 2, generator=g, dtype=torch.float64) * 2 - 1).cuda()
    y = torch.sin(3 * x[:, :1]) * x[:, 1:2]
    ok = True
    for fast_path in (True, False):
        torch.manual_seed(3)
        model = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.Tanh(),
                                    torch.nn.Linear(16, 1)).double().cuda()
        opt = lt.LevenbergMarquardt(model, fast_path=fast_path)
        report = opt.step(x, y)
        torch.cuda.synchronize()
        print(f"{opt.path}: loss {report.loss:.6e} -> {report.loss_after:.6e}")
        ok = ok and report.accepted and report.loss_after < report.loss
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
