#!/usr/bin/env bash
# Installs dependencies, builds lmtrain and runs every test:
#   0. the style checks (scripts/check-style.sh: clang-format, function size with lizard);
#   1. the optimized build: every test (unit, W1 convergence, the lmtrain binary end to end),
#      then the convergence runs again on each other SIMD path of the activation loops this CPU
#      can run (LMTRAIN_SIMD=baseline, avx2, avx512), so that a CPU without AVX-512 is covered;
#      then the installed CMake package in a consumer project (scripts/test-consumer.sh);
#      then the Python package: pip install . in a venv and pytest (scripts/test-python.sh);
#      then its PyTorch front end with torch from bench/peers/install.sh (scripts/test-torch.sh);
#      then the deployment templates of deploy/ (scripts/test-deploy.sh) and the container image
#      (scripts/container-test.sh, skipped with its reason unless LMTRAIN_CONTAINER_TEST=1);
#   2. the AddressSanitizer + UndefinedBehaviorSanitizer build: every test except the W1
#      convergence runs, which take minutes under the sanitizers, and the mpirun tests (OpenMPI's
#      own allocations trip LeakSanitizer);
#   3. the libFuzzer targets of the file readers (clang), each for a fixed short time.
# Exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
fuzz_seconds=${LMTRAIN_FUZZ_SECONDS:-20}

# Each stage's wall time, printed at the end: CI has 90 minutes on 2 cores and should stay
# under 45, so where they go is part of every run's output.
timings=() stage_name="installing the dependencies" stage_started=$SECONDS
stage() {  # title: ends the stage before it and starts this one
  timings+=("$(printf '%6d s  %s' $((SECONDS - stage_started)) "$stage_name")")
  stage_name=$1 stage_started=$SECONDS
  echo "== $1"
}
scripts/install-deps.sh

stage "style (clang-format, lizard)"
scripts/check-style.sh

stage "release build"
cmake --preset release
cmake --build --preset release -j "$jobs"
stage "release tests"
ctest --preset release -j "$jobs"
widest=$(build/release/bin/lmtrain info --devices | sed -n 's/.* \([a-z0-9]*\) loops.*/\1/p' | head -n 1)
for path in baseline avx2 avx512; do
  [[ $path == "$widest" ]] && continue
  case $path in
    avx2) grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo || continue ;;
    avx512) for f in avx512f avx512dq avx512vl avx512bw; do grep -qw $f /proc/cpuinfo || continue 2; done ;;
  esac
  stage "convergence tests on the $path activation loops (LMTRAIN_SIMD=$path)"
  LMTRAIN_SIMD=$path ctest --preset release -L convergence
done

stage "the installed package in another project (find_package(lmtrain), the README's example)"
scripts/test-consumer.sh

stage "the Python package (pip install . in build/py-venv, pytest tests/python)"
scripts/test-python.sh

stage "the PyTorch front end (torch as bench/peers/install.sh installs it; tests/python/test_torch_*)"
scripts/test-torch.sh

stage "deployment templates (deploy/: manifests validated offline, sbatch under a stub srun, faults)"
scripts/test-deploy.sh
stage "the container image (scripts/container-test.sh: only with LMTRAIN_CONTAINER_TEST=1)"
LMTRAIN_CONTAINER_TEST=${LMTRAIN_CONTAINER_TEST:-0} scripts/container-test.sh

stage "sanitizer build (ASan + UBSan)"
cmake --preset asan
cmake --build --preset asan -j "$jobs"
stage "sanitizer tests"
ctest --preset asan -j "$jobs" -LE "convergence|mpi"

stage "fuzzing the file readers (${fuzz_seconds} s each)"
fuzzers=(csv npy idx fann safetensors run_config)
cmake --preset fuzz
cmake --build --preset fuzz -j "$jobs" --target "${fuzzers[@]/#/lmtrain_fuzz_}"
for name in "${fuzzers[@]}"; do
  target=build/fuzz/fuzz/lmtrain_fuzz_$name
  corpus=$(mktemp -d)
  "$target" -max_total_time="$fuzz_seconds" -print_final_stats=0 "$corpus" 2>&1 | tail -n 2
  rm -rf "$corpus"
  echo "fuzz: $(basename "$target") ran ${fuzz_seconds} s with no crash"
done
stage "done"
printf '%s\n' "${timings[@]}"
echo "test.sh: every stage passed in $SECONDS s"
