"""bench/kernel_times.py (scripts/gpu-run.sh's profile stage) on a CSV written the way Nsight
Compute writes one: its ==PROF== lines and the program's output before the header, values with
thousands separators, times in several units, rows of other metrics.  The per-step figures
against sums made here by hand."""

from __future__ import annotations

import importlib.util

import pytest

from conftest import ROOT

spec = importlib.util.spec_from_file_location("kernel_times", ROOT / "bench/kernel_times.py")
kernel_times = importlib.util.module_from_spec(spec)
spec.loader.exec_module(kernel_times)

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
          '"Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",'
          '"Metric Value"')


def row(i: int, kernel: str, unit: str, value: str, metric: str = "gpu__time_duration.sum") -> str:
    return (f'"{i}","4242","lmtrain_workloads","127.0.0.1","{kernel}","1","13","(256, 1, 1)",'
            f'"(40, 1, 1)","0","9.0","Command line profiler metrics","{metric}","{unit}","{value}"')


POTRF = "void potrf_kernel<float, 32>(int, float *, int, int *)"
OWN = ("void lmtrain::cuda::(anonymous namespace)::add_scaled_kernel<float>(unsigned long, "
       "const float *, float, const float *, float *)")
CSV = "\n".join([
    '{"type":"step","tool":"lmtrain"}',
    "==PROF== Connected to process 4242 (lmtrain_workloads)",
    "==PROF== Profiling \"potrf_kernel\": 0%....50%....100% - 1 pass",
    HEADER,
    row(0, POTRF, "nsecond", "1,200,000"),          # 1 200 µs
    row(1, OWN, "usecond", "3.5"),
    row(2, POTRF, "msecond", "0.8"),                # 800 µs
    '{"type":"step","tool":"lmtrain","step":4}',   # the program's output among the rows
    row(3, OWN, "nsecond", "4,500"),                # 4.5 µs
    row(4, OWN, "byte", "1,024", metric="dram__bytes.sum"),
    "==PROF== Disconnected from process 4242",
])


def test_short_names_drop_parameters_namespaces_and_void():
    assert kernel_times.short_name(POTRF) == "potrf_kernel<float, 32>"
    assert kernel_times.short_name(OWN) == "add_scaled_kernel<float>"
    assert len(kernel_times.short_name("k" * 200)) == 90


def test_per_kernel_times_and_the_per_step_table():
    times = kernel_times.kernel_times(CSV)
    assert times == {"potrf_kernel<float, 32>": [1200.0, 800.0],
                     "add_scaled_kernel<float>": [3.5, 4.5]}
    text = kernel_times.report("W2", times, steps=2, top=25)
    assert "**1004.0 µs of kernels per step**, 2.0 launches per step (2 kernels)" in text
    lines = [line for line in text.splitlines() if line.startswith("| `")]
    assert lines[0] == "| `potrf_kernel<float, 32>` | 1.0 | 1000.0 | 1000.0 | 99.6% |"
    assert lines[1] == "| `add_scaled_kernel<float>` | 1.0 | 4.0 | 4.0 | 0.4% |"
    assert "(1 others)" in kernel_times.report("W2", times, steps=2, top=1)


def test_a_file_without_rows_and_an_unknown_unit_are_reported():
    assert "no kernel rows" in kernel_times.report("W2", kernel_times.kernel_times("==PROF== x"),
                                                   steps=1, top=5)
    with pytest.raises(ValueError, match="unexpected time"):
        kernel_times.kernel_times("\n".join([HEADER, row(0, POTRF, "cycle", "12")]))
