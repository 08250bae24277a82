"""The host memory a CPU step plans with, inside a Python process that holds PyTorch and a CUDA
context, for scripts/gpu-run.sh (stage torch).  On the H200 of 2026-11-26 and again on
2026-11-27 every CPU step of test_torch_cuda.py and of pinn_cuda.py was refused with "the memory
budget of 0 B (memory_fraction 0.5 of the 0 B cpu … has available)" while `lmtrain fit` on the
same machine planned with 123 GiB available.

Prints /proc/meminfo's MemTotal, MemFree and MemAvailable as this process reads them after each
stage of loading (start, torch imported, CUDA initialized, lmtrain imported), the libstdc++ the
process mapped, and each path's plan of one float64 CPU step (the torch path and the native fast
path); checks that both step, and that the torch path's plan ("… of the X cpu … has available")
is within 10% (or 256 MiB) of the MemAvailable read here at the same moment.  Exits 1 when a step
fails or the figures disagree.

usage: PYTHONPATH=<lmtrain package> python scripts/gpu-python/host_memory.py
"""

from __future__ import annotations

import re
import sys


def meminfo() -> dict[str, int]:
    values = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("MemTotal", "MemFree", "MemAvailable"):
                values[key] = int(rest.split()[0]) * 1024
    return values


def show(stage: str) -> dict[str, int]:
    m = meminfo()
    print(f"host memory {stage}: " + ", ".join(f"{k} {v / 2**30:.2f} GiB" for k, v in m.items()),
          flush=True)
    return m


def parse_bytes(text: str) -> float:
    number, unit = text.split()
    return float(number) * {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[unit]


def main() -> int:
    show("at start")
    import torch

    show("after import torch")
    if torch.cuda.is_available():
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
        show("after CUDA initialized")
    import lmtrain.torch as lt

    show("after import lmtrain.torch")
    with open("/proc/self/maps") as f:
        libs = sorted({line.split()[-1] for line in f if "libstdc++" in line})
    print(f"host memory: libstdc++ mapped: {', '.join(libs) or 'none'}", flush=True)
    ok = True
    x = torch.linspace(-1, 1, 300, dtype=torch.float64).unsqueeze(1)
    y = torch.sin(3 * x)
    for fast_path in (False, True):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(1, 8), torch.nn.Tanh(),
                                    torch.nn.Linear(8, 1)).double()
        name = "native fast path" if fast_path else "torch path"
        stepped = False
        try:
            opt = lt.LevenbergMarquardt(model, fast_path=fast_path)
            opt.step(x, y)
            stepped = True
            # The native fast path exposes no plan: that it stepped is its check.
            plan = opt.plan.get("memory_plan", "(the fast path stepped; it exposes no plan)")
        except MemoryError as e:
            plan = str(e)
        here = show(f"when the {name} planned")["MemAvailable"]
        found = re.search(r"of the ([0-9.]+ (?:B|KiB|MiB|GiB)) cpu", plan)
        seen = parse_bytes(found.group(1)) if found else None
        good = stepped and (seen is None and fast_path or
                            seen is not None and abs(seen - here) <= max(0.1 * here, 256 * 2**20))
        ok = ok and good
        print(f"host memory: {'PASS' if good else 'FAIL'} {name}: the plan read "
              f"{found.group(1) if found else '(no figure)'} available, this process "
              f"{here / 2**30:.2f} GiB; plan: {plan[:200]}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
