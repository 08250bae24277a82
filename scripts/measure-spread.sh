#!/usr/bin/env bash
# Measures how far the runs that the tests compare part under rounding (issue 35), on every
# kernel path this CPU can run, and prints each comparison's margin: its bound over the largest
# gap measured.  The tests that compare two trajectories (two paths, lmtrain.fit and
# lmtrain.torch, several ranks and one) assert within(check, actual, expected, bound)
# (tests/python/spread.py, tests/support/spread.h) with a bound ≥ 1000 × that gap, the margin
# scripts/gpu-run.sh's header takes; this script is how the gap is measured and re-measured.
#
# Each kernel configuration runs the tests twice: as they are, and with the data of one side of
# every comparison moved by one ulp (LMTRAIN_SPREAD_ULP=1: v·(1 + 2⁻⁵²)), the perturbation by
# which scripts/gpu-run.sh's header sizes its own bound.  The configurations set
#   OPENBLAS_CORETYPE    OpenBLAS's kernels (SYRK, POTRF, GEMM): both paths.  Debian's
#                        OpenBLAS 0.3.21 takes the Haswell kernels on AMD Zen 4/5 and SkylakeX
#                        (or Cooperlake) on Intel CPUs with AVX-512;
#   LMTRAIN_SIMD         lmtrain's activation loops (baseline, avx2, avx512): the native path;
#   ATEN_CPU_CAPABILITY  ATen's vectorized kernels (tanh, sigmoid, …): the torch path;
#   the MKL in torch     (torch's GEMMs): on a CPU that is not Intel's, MKL takes a generic code
#                        path and ignores MKL_ENABLE_INSTRUCTIONS and MKL_CBWR (but
#                        MKL_CBWR=COMPATIBLE); an Intel CPU gets MKL's AVX2 or AVX-512 kernels.
#                        The "intel" MKL settings preload build/spread/libmkl-intel-cpu.so,
#                        which answers MKL's vendor tests (mkl_serv_intel_cpu, mkl_serv_intel_cpu_true) with yes, so
#                        that MKL runs the kernels it runs on an Intel CPU, capped by
#                        MKL_ENABLE_INSTRUCTIONS.  The MKL_VERBOSE banner of each is printed.
# A configuration whose instructions the CPU lacks is skipped, with the reason.
#
# usage: scripts/measure-spread.sh [--grid] [--suites torch,python,cpp,mpi] [--configs a,b]
#                                  [-k PYTEST_EXPRESSION] [--gtest-filter FILTER]
#   --grid     every OPENBLAS_CORETYPE × LMTRAIN_SIMD × ATEN_CPU_CAPABILITY × MKL setting
#              (108 configurations; use with -k and --suites torch), instead of the named ones
#   --suites   torch: tests/python/test_torch_*.py (build/venv-torch, scripts/test-torch.sh);
#              python: the other tests/python (build/py-venv, scripts/test-python.sh);
#              cpp: the C++ comparisons of the release build; mpi: those under mpirun, on
#              LMTRAIN_SPREAD_RANKS ranks (default 2; the W2-sized distributed test needs 4)
#   --out      where the figures go (default build/spread): <suite>.jsonl, the logs, report.txt
# Exits 1 when a gap exceeds its bound, 0 otherwise (a margin under 1000 is flagged, not failed).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=$root/build/spread
suites=torch,python,cpp
configs=""
grid=0
pytest_k=()
gtest_filter=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --grid) grid=1; shift ;;
    --suites) suites=${2:?}; shift 2 ;;
    --configs) configs=${2:?}; shift 2 ;;
    -k) pytest_k=(-k "${2:?}"); shift 2 ;;
    --gtest-filter) gtest_filter=${2:?}; shift 2 ;;
    --out) out=$(realpath -m "${2:?}"); shift 2 ;;
    *) echo "measure-spread: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
wants() { [[ ",$suites," == *",$1,"* ]]; }
mkdir -p "$out" "$root/build/spread"

# The shim that makes MKL take an Intel CPU's code paths (see the header).
shim=$root/build/spread/libmkl-intel-cpu.so
if [[ ! -f $shim ]]; then
  printf 'int %s(void) { return 1; }\n' mkl_serv_intel_cpu mkl_serv_intel_cpu_true \
    > "$root/build/spread/mkl-intel-cpu.c"
  cc -shared -fPIC -O2 -o "$shim" "$root/build/spread/mkl-intel-cpu.c"
fi

has() { for f in "$@"; do grep -qw "$f" /proc/cpuinfo || return 1; done; }
# Can this CPU run the settings of a configuration?  Prints the reason when not.
runnable() {  # "VAR=value VAR=value …"
  local setting
  for setting in $1; do
    case $setting in
      OPENBLAS_CORETYPE=SkylakeX | OPENBLAS_CORETYPE=Cooperlake | LMTRAIN_SIMD=avx512 | \
        ATEN_CPU_CAPABILITY=avx512 | MKL=intel-avx512)
        has avx512f avx512dq avx512vl avx512bw || { echo "no AVX-512 for $setting"; return 1; } ;;
      OPENBLAS_CORETYPE=Haswell | OPENBLAS_CORETYPE=Zen | LMTRAIN_SIMD=avx2 | \
        ATEN_CPU_CAPABILITY=avx2 | MKL=intel-avx2)
        has avx2 fma || { echo "no AVX2/FMA for $setting"; return 1; } ;;
    esac
  done
}
# The environment of a configuration: MKL=generic|compatible|intel-avx2|intel-avx512 expanded.
environment() {
  local setting
  for setting in $1; do
    case $setting in
      MKL=generic) ;;
      MKL=compatible) echo MKL_CBWR=COMPATIBLE ;;
      MKL=intel-avx2) printf '%s\n' "LD_PRELOAD=$shim" MKL_ENABLE_INSTRUCTIONS=AVX2 ;;
      MKL=intel-avx512) printf '%s\n' "LD_PRELOAD=$shim" MKL_ENABLE_INSTRUCTIONS=AVX512 ;;
      *) echo "$setting" ;;
    esac
  done
}

# Named configurations: this CPU as it is, the CPUs the tests meet (an Intel CPU with AVX-512, one
# with AVX2 only, an AMD Zen 2/3), the oldest kernels, and mixtures no CPU picks but which move
# each path's rounding on its own.
declare -A named=(
  [here]=""
  [intel-avx512]="OPENBLAS_CORETYPE=SkylakeX LMTRAIN_SIMD=avx512 ATEN_CPU_CAPABILITY=avx512 MKL=intel-avx512"
  [intel-avx2]="OPENBLAS_CORETYPE=Haswell LMTRAIN_SIMD=avx2 ATEN_CPU_CAPABILITY=avx2 MKL=intel-avx2"
  [zen-avx2]="OPENBLAS_CORETYPE=Zen LMTRAIN_SIMD=avx2 ATEN_CPU_CAPABILITY=avx2 MKL=generic"
  [sse]="OPENBLAS_CORETYPE=Prescott LMTRAIN_SIMD=baseline ATEN_CPU_CAPABILITY=default MKL=compatible"
  [mix-1]="OPENBLAS_CORETYPE=SkylakeX LMTRAIN_SIMD=baseline ATEN_CPU_CAPABILITY=avx2 MKL=generic"
  [mix-2]="OPENBLAS_CORETYPE=Sandybridge LMTRAIN_SIMD=avx512 ATEN_CPU_CAPABILITY=default MKL=intel-avx512"
  [mix-3]="OPENBLAS_CORETYPE=Haswell LMTRAIN_SIMD=baseline ATEN_CPU_CAPABILITY=avx512 MKL=intel-avx2"
)
order=(here intel-avx512 intel-avx2 zen-avx2 sse mix-1 mix-2 mix-3)
list=()
if ((grid)); then
  for blas in Haswell SkylakeX Sandybridge Prescott; do
    for simd in baseline avx2 avx512; do
      for aten in default avx2 avx512; do
        for mkl in generic intel-avx2 intel-avx512; do
          name="$blas/$simd/$aten/$mkl"
          named[$name]="OPENBLAS_CORETYPE=$blas LMTRAIN_SIMD=$simd ATEN_CPU_CAPABILITY=$aten MKL=$mkl"
          list+=("$name")
        done
      done
    done
  done
elif [[ -n $configs ]]; then
  IFS=, read -r -a list <<< "$configs"
else
  list=("${order[@]}")
fi

torch_python=$root/build/venv-torch/bin/python
py_python=$root/build/py-venv/bin/python
if wants torch && [[ ! -x $torch_python ]]; then
  echo "measure-spread: $torch_python is missing; run scripts/test-torch.sh first" >&2; exit 2
fi
if wants python && [[ ! -x $py_python ]]; then
  echo "measure-spread: $py_python is missing; run scripts/test-python.sh first" >&2; exit 2
fi
if { wants cpp || wants mpi; } && [[ ! -x build/release/tests/lmtrain_tests ]]; then
  echo "measure-spread: build the release preset first" >&2; exit 2
fi

# The tests that compare trajectories: those that call within() / expect_within().
mapfile -t torch_tests < <(cd tests/python && grep -l 'within(' test_torch_*.py |
                             grep -v -e test_torch_cuda -e test_torch_cupylma)
mapfile -t py_tests < <(cd tests/python && grep -l 'within(' test_*.py | grep -v '^test_torch_')
# The C++ comparisons: the tests that call expect_within, by binary.
cpp_filter=${gtest_filter:-"W1Sinc.EigenSolverTakesCholeskysSteps:MemoryPlan.AllocationFailure*:*ForeignSource*:*WeightedFit*"}
cpp_binaries=(build/release/tests/lmtrain_tests build/release/tests/lmtrain_convergence_tests)
mpi_filter=${gtest_filter:-"Ranks.*:ConjugateGradients.ReachesTheCholeskyStep:DistributedCholesky.*:MeasuredBalance.*"}
mpi_binaries=(build/release/tests/dist/lmtrain_mpi_tests build/release/tests/dist/lmtrain_distributed_tests)

rm -f "$out"/*.jsonl "$out"/*.log
for name in "${list[@]}"; do
  settings=${named[$name]-}
  [[ -v named[$name] ]] || { echo "measure-spread: no configuration $name" >&2; exit 2; }
  if ! why=$(runnable "$settings"); then
    echo "== $name: skipped ($why)"
    continue
  fi
  mapfile -t env_of < <(environment "$settings")
  if wants torch; then
    banner=$(env "${env_of[@]}" MKL_VERBOSE=1 "$torch_python" -c \
      'import torch; torch.ones(2, 2, dtype=torch.float64) @ torch.ones(2, 2, dtype=torch.float64)' |
      sed -n 's/.*Product build [0-9]* for \(.*\), Lnx.*/\1/p' | head -n 1)
    echo "== $name: ${settings:-(nothing set)}; MKL: ${banner:-?}"
  else
    echo "== $name: ${settings:-(nothing set)}"
  fi
  for ulp in 0 1; do
    run_env=(env "${env_of[@]}" LMTRAIN_SPREAD_ULP=$ulp OMP_NUM_THREADS=1)
    tag() { sed "s|}\$|, \"config\": \"$name\", \"ulp\": $ulp}|" "$1" >> "$2"; rm -f "$1"; }
    if wants torch && ((${#torch_tests[@]})); then
      (cd tests/python && "${run_env[@]}" LMTRAIN_SPREAD_LOG=$out/raw.jsonl LMTRAIN_REQUIRE_TORCH=1 \
        "$torch_python" -m pytest -q -p no:cacheprovider "${torch_tests[@]}" "${pytest_k[@]}" \
        >> "$out/pytest.log" 2>&1) || echo "   (pytest exit $?; see $out/pytest.log)"
      [[ -f $out/raw.jsonl ]] && tag "$out/raw.jsonl" "$out/torch.jsonl"
    fi
    if wants python && ((${#py_tests[@]})); then
      (cd tests/python && "${run_env[@]}" LMTRAIN_SPREAD_LOG=$out/raw.jsonl \
        LMTRAIN_CLI=$root/build/release/bin/lmtrain \
        "$py_python" -m pytest -q -p no:cacheprovider "${py_tests[@]}" "${pytest_k[@]}" \
        >> "$out/pytest.log" 2>&1) || echo "   (pytest exit $?; see $out/pytest.log)"
      [[ -f $out/raw.jsonl ]] && tag "$out/raw.jsonl" "$out/python.jsonl"
    fi
    if wants cpp; then
      for binary in "${cpp_binaries[@]}"; do
        "${run_env[@]}" LMTRAIN_SPREAD_LOG=$out/raw.jsonl OMP_NUM_THREADS=2 "$binary" \
          --gtest_filter="$cpp_filter" >> "$out/ctest.log" 2>&1 || echo "   ($binary exit $?)"
      done
      [[ -f $out/raw.jsonl ]] && tag "$out/raw.jsonl" "$out/cpp.jsonl"
    fi
    if wants mpi; then
      for binary in "${mpi_binaries[@]}"; do
        [[ -x $binary ]] || continue
        "${run_env[@]}" LMTRAIN_SPREAD_LOG=$out/raw.jsonl mpirun -np "${LMTRAIN_SPREAD_RANKS:-2}" \
          --oversubscribe --allow-run-as-root "$binary" --expected-ranks="${LMTRAIN_SPREAD_RANKS:-2}" \
          --gtest_filter="$mpi_filter" >> "$out/mpi.log" 2>&1 || echo "   (mpirun $binary exit $?)"
      done
      [[ -f $out/raw.jsonl ]] && tag "$out/raw.jsonl" "$out/mpi.jsonl"
    fi
  done
done
python3 scripts/spread-report.py "$out"/*.jsonl | tee "$out/report.txt"
