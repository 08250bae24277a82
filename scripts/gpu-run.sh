#!/usr/bin/env bash
# Runs lmtrain's GPU checks from .gpu/bundle.tar.xz (scripts/gpu-bundle.sh) on a machine with a
# CUDA device, in one command, writing logs and results under $OUT (the device tool's output
# folder; ./gpu-out when unset).  Each stage runs even if an earlier one failed; the exit status
# is that of the first failure.
#
#   1. the devices lmtrain sees                               devices.txt
#   2. the CUDA backend test suite (CPU double as reference)  cuda-tests.{log,xml}
#   3. mixed precision on CUDA, and the NCCL communicator     mixed-nccl.log
#   4. W1 through the command on the GPU: float32, mixed and
#      NCCL with one rank (= the local communicator)          fit.log
#   5. the W1/W2/W3 benchmark drivers with the roofline       bench.jsonl, bench.log
#
# usage: bash scripts/gpu-run.sh [--skip-bench]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
skip_bench=0
[[ ${1:-} == --skip-bench ]] && skip_bench=1

bundle=$root/.gpu/bundle.tar.xz
[[ -f $bundle ]] || { echo "gpu-run: $bundle is missing; run scripts/gpu-bundle.sh first" >&2; exit 2; }
dir=$(mktemp -d)
tar -xJf "$bundle" -C "$dir"
# The toolkit's libraries (cuBLAS, cuSOLVER, NCCL), wherever this machine keeps them.
cuda_dirs=$(ls -d /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
                  /opt/torch/.venv/lib/python3*/site-packages/nvidia/*/lib 2>/dev/null | paste -sd: -)
export LD_LIBRARY_PATH="$dir/lib:$cuda_dirs:${LD_LIBRARY_PATH:-}"
bin=$dir/bin
status=0
stage() {  # name log command…
  local name=$1 log=$2
  shift 2
  echo "== $name" | tee -a "$out/$log"
  local started=$SECONDS
  "$@" >> "$out/$log" 2>&1
  local rc=$?
  echo "== $name: exit $rc in $((SECONDS - started)) s" | tee -a "$out/$log"
  [[ $rc -ne 0 && $status -eq 0 ]] && status=$rc
  return 0
}

stage "libraries not found (should list none)" devices.txt bash -c "! ldd \"$bin\"/* | grep 'not found'"
stage "nvidia-smi" devices.txt nvidia-smi
stage "lmtrain info --devices" devices.txt "$bin/lmtrain" info --devices
stage "CUDA backend tests" cuda-tests.log "$bin/lmtrain_cuda_tests" --gtest_output="xml:$out/cuda-tests.xml"
stage "mixed precision on CUDA" mixed-nccl.log "$bin/lmtrain_tests" --gtest_filter='*MixedPrecisionOn*'
stage "NCCL communicator" mixed-nccl.log "$bin/lmtrain_nccl_tests"

# W1 through the command: the data come from the example's generator (numpy is on the machine).
work=$(mktemp -d)
python3 "$root/examples/sinc/make_data.py" "$work/sinc.csv" > /dev/null
for variant in 'float32::' 'mixed::' 'float32:nccl:'; do
  IFS=: read -r precision comm _ <<< "$variant"
  sets=(--set "precision=\"$precision\"" --set 'device="cuda"' --set "output_dir=\"$work/run-$precision-${comm:-auto}\""
        --set "data.train.path=\"$work/sinc.csv\"")
  [[ -n $comm ]] && sets+=(--set "communicator=\"$comm\"")
  stage "W1 fit $precision ${comm:-auto}" fit.log "$bin/lmtrain" fit "$root/examples/sinc/run.toml" --quiet "${sets[@]}"
  cat "$work/run-$precision-${comm:-auto}/summary.txt" >> "$out/fit.log" 2>/dev/null
done

# NCCL with one rank takes part in every sum and broadcast of the step (identities), so its
# predictions must equal the local communicator's bit for bit.
for run in float32-auto float32-nccl; do
  "$bin/lmtrain" predict "$work/run-$run/model.safetensors" --data "$work/sinc.csv" --out "$work/$run.csv" \
    >> "$out/fit.log" 2>&1
done
stage "NCCL (1 rank) predictions equal the local communicator's" fit.log cmp "$work/float32-auto.csv" "$work/float32-nccl.csv"

if [[ $skip_bench -eq 0 ]]; then
  for args in "W1 --epochs 50" "W1 --epochs 50 --mixed" "W2 --epochs 10" "W2 --epochs 10 --mixed" \
              "W3 --width 64 --depth 2 --samples 50000 --repeats 5" \
              "W3 --width 256 --depth 1 --samples 100000 --repeats 5" \
              "W3 --width 1024 --depth 1 --samples 20000 --repeats 5"; do
    # shellcheck disable=SC2086  # the arguments are words on purpose
    stage "lmtrain_workloads $args" bench.log bash -c "\"$bin/lmtrain_workloads\" $args --device cuda >> \"$out/bench.jsonl\""
  done
fi
rm -rf "$dir" "$work"
echo "gpu-run: exit $status; logs in $out"
exit "$status"
