#!/usr/bin/env bash
# Side-by-side benchmarks of lmtrain against its peers on the standard workloads
# (shared/WORKLOADS.md, issue 7).  Builds what is needed, installs the peers
# (bench/peers/install.sh), runs lmtrain and every applicable peer on the same data, network,
# batch and epochs — a warm-up of each first, then the repetitions interleaved A B A B — and
# writes bench/results/<date>-<machine>.md with medians, ratios and one loss-vs-wall-time chart
# per workload.  A peer that fails appears in the table as failed, with its error.
#
# usage: bench/run.sh [W1 W2 W3 W4 W6 …] [--device cpu|cuda] [--repeats R] [--threads N]
#                     [--budget SECONDS] [--quick] [--no-install] [--tag NAME]
#                     [--build-dir DIR] [--no-build]
#   (no workload: W1 W2 W6)
#   PINN        W8 (issue 29): bench/pinn.py — each PDE of examples/pinn/ (KdV included, issue
#               39) with lmtrain.torch's LM and Adam → L-BFGS, same network, points and budget,
#               seeds interleaved (--repeats R: seeds 0..R-1, default 3; --quick: one seed, 2% of
#               the budgets; --threads N, default 1), judged against issue 39's targets.
#               LMTRAIN_PINN_PDES (environment, space-separated) picks the PDEs and the recipe
#               variants (bench/pinn.py --help: poisson2d-rba, allen_cahn-causal, …).  Needs
#               lmtrain.torch in build/venv-torch (scripts/test-torch.sh) and no C++ build;
#               writes bench/results/<date>-<machine>-PINN.md and .json. Long: about 5.5 hours
#               for the five PDEs and 3 seeds.
#   --device    cpu (default) or cuda: the device of lmtrain and of the PyTorch peers; with cuda
#               the report judges issue 4's roofline targets (W1 W2 W3: Jacobian assembly against
#               the measured copy bandwidth, SYRK against the measured GEMM rate)
#   --repeats   measured repetitions per tool after the warm-up (default 5; each repetition runs
#               every tool once, so they interleave A B C A B C …); the report gives the median
#               and the min–max spread, and the load average before each repetition
#   --threads   OMP_NUM_THREADS / OPENBLAS_NUM_THREADS for every tool (default: unset, each
#               tool's own default — all cores).  W6 ignores it: every W6 run is one thread
#               (FANN has no other), so the wall-clock budget is the same CPU time for all
#   --budget    W6 wall-clock budget per training run in seconds (default 5)
#   --w6-rows   all (default) or headline: W6 runs only the headline rows (lmtrain-ard, fann-rprop,
#               fann-quickprop), a third of the time
#   --quick     a smoke test: few epochs, one repetition (unless --repeats is given), a small
#               W3 grid, 1 s W6 budget
#   --no-install  do not run bench/peers/install.sh (a missing peer is then reported as failed)
#   --tag       appended to the results file name: <date>-<machine>-<tag>.md (a variant run, e.g.
#               with OMP_WAIT_POLICY=passive, beside the default one).  Default: none for the
#               issue-7 set W1 W2 W6, otherwise the workloads (and "quick"), e.g. -W4 or
#               -W1-W2-W3-W4-W6-quick, so a partial or smoke run never overwrites the day's main file
#   --build-dir where lmtrain_workloads and fann_train are configured and built (default
#               build/bench-<device>)
#   --no-build  use the binaries already in the build directory as they are
#   --rows "TOOL …"  run only these rows (the tool names of the report's tables: lmtrain,
#               lmtrain-peerdamp, torch-lm-cholesky, …), warm-ups included; every other row is
#               left out of the run and the report.  Where a GPU's time is short, e.g. scripts/
#               gpu-run.sh's peers stage: --rows "lmtrain lmtrain-peerdamp torch-lm-cholesky"
#   LMTRAIN_PEERS_PYTHON (environment): the Python of the PyTorch peers and of lmtrain.torch's rows
#               instead of bench/peers/.venv's (a machine's own Python with torch, as
#               scripts/gpu-run.sh's peers stage passes with --no-install)
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bench="$root/bench"
workloads=()
pinn=0
device=cpu
repeats=5
repeats_given=0
threads=""
budget=5
w6_rows=all
quick=0
install=1
tag=""
tag_given=0
build=""
do_build=1
rows_only=""
while [ $# -gt 0 ]; do
  case "$1" in
    W1|W2|W3|W4|W5|W6|W7) workloads+=("$1") ;;
    PINN) pinn=1 ;;
    --device) device="$2"; shift ;;
    --repeats) repeats="$2"; repeats_given=1; shift ;;
    --threads) threads="$2"; shift ;;
    --budget) budget="$2"; shift ;;
    --w6-rows) w6_rows="$2"; shift ;;
    --quick) quick=1 ;;
    --no-install) install=0 ;;
    --tag) tag="-$2"; tag_given=1; shift ;;
    --build-dir) build="$2"; shift ;;
    --no-build) do_build=0 ;;
    --rows) rows_only=" $2 "; shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ "$pinn" = 1 ]; then
  pinn_only=$([ ${#workloads[@]} -eq 0 ] && echo 1 || echo 0)
else
  pinn_only=0
fi
[ ${#workloads[@]} -gt 0 ] || workloads=(W1 W2 W6)
if [ "$tag_given" = 0 ] && { [ "${workloads[*]}" != "W1 W2 W6" ] || [ "$quick" = 1 ]; }; then
  tag="-$(IFS=-; echo "${workloads[*]}")$([ "$quick" = 1 ] && echo -quick)"
fi
case "$device" in cpu|cuda) ;; *) echo "run.sh: --device must be cpu or cuda" >&2; exit 2 ;; esac
case "$w6_rows" in all|headline) ;; *) echo "run.sh: --w6-rows must be all or headline" >&2; exit 2 ;; esac

w1_epochs=50; w2_epochs=10; w7_epochs=200
# W5 (dense-large): "WIDTH:ROWS" per size — n = 11 101 on 100 000 rows and n = 30 771 on 50 000,
# the sizes of the H200 run (a GPU's workload: on 2 CPU cores one step of the first takes minutes).
w5_sizes="100:100000 170:50000"; w5_epochs=4
# W4: the CI test's Fashion-MNIST subset (tests/cli/fashion_cnn_test.cpp): the first 6 000
# training and 2 000 test images, 5 epochs of 3 batches of 2 000.  The full 60 000 images take
# 7–14 minutes per lmtrain run on 2 cores (examples/fashion-cnn/README.md), too long to repeat.
w4_train_rows=6000; w4_test_rows=2000; w4_epochs=5
w3_grid=("64 1 500" "64 1 5000" "64 1 50000" "256 1 500" "256 1 5000" "256 1 50000"
         "1024 1 500" "1024 1 5000" "1024 1 50000" "64 2 500" "64 2 5000" "64 2 50000")
w3_repeats=3
w6_sets=(kin32fm pumadyn-32fm bank32nh building census-house thyroid)
if [ "$quick" = 1 ]; then
  w1_epochs=5; w2_epochs=2; w7_epochs=5; [ "$repeats_given" = 1 ] || repeats=1; budget=1; w3_repeats=2
  w5_sizes="30:20000"; w5_epochs=2
  w4_train_rows=4000; w4_test_rows=1000; w4_epochs=1
  w3_grid=("64 1 500" "256 1 5000"); w6_sets=(kin32fm thyroid)
fi
if [ -n "$threads" ]; then
  export OMP_NUM_THREADS="$threads" OPENBLAS_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads"
fi

started=$(date +%s)
load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$device" = cuda ] && command -v nvidia-smi >/dev/null; then
  machine_desc="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
else
  machine_desc="$(nproc)core $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
fi
machine="$(echo "$machine_desc" | tr 'A-Z' 'a-z' | sed -E 's/\((r|tm)\)//g; s/(cpu|processor|@.*)//g; s/[^a-z0-9]+/-/g; s/^-+|-+$//g')"
stamp="$(date +%Y-%m-%d)"
if [ "$pinn" = 1 ]; then
  venv="${LMTRAIN_TORCH_VENV:-$root/build/venv-torch}"
  if ! "$venv/bin/python" -c 'import lmtrain.torch' 2>/dev/null; then
    echo "run.sh: PINN needs lmtrain.torch with torch in $venv: run scripts/test-torch.sh first" \
      "(it builds that environment), or set LMTRAIN_TORCH_VENV" >&2
    exit 2
  fi
  pinn_args=(--machine "$machine" --threads "${threads:-1}")
  [ -n "${LMTRAIN_PINN_PDES:-}" ] && pinn_args+=(--pde $LMTRAIN_PINN_PDES)
  [ "$repeats_given" = 1 ] && pinn_args+=(--seeds $(seq 0 $((repeats - 1))))
  [ "$quick" = 1 ] && pinn_args+=(--quick)
  "$venv/bin/python" "$bench/pinn.py" "${pinn_args[@]}" || exit $?
  [ "$pinn_only" = 1 ] && exit 0
fi
results="$bench/results"
raw="$results/raw/$stamp-$machine$tag-$(date +%H%M%S)"
mkdir -p "$raw"
out_md="$results/$stamp-$machine$tag.md"
# A second run on the same day with the same workloads keeps the first's report: the new one gets
# the time of day in its name (a same-named re-run once overwrote a report that had not been
# committed yet).
[ -e "$out_md" ] && out_md="$results/$stamp-$machine$tag-$(date +%H%M).md"
log() { echo "[run.sh $(date +%H:%M:%S)] $*"; }
# The load average before each repetition, for the report (the machine may be shared).
mark_load() { echo "$1 $2 $(cut -d' ' -f1-3 /proc/loadavg)" >> "$raw/loadavg.txt"; }
# total_s of a finished run (the wall time the first-order peers get); 1 s when it has none.
run_seconds() {
  python3 -c 'import json, sys
t = [json.loads(l).get("total_s") for l in open(sys.argv[1]) if l.startswith("{\"type\":\"result")]
print(t[0] if t and t[0] else 1.0)' "$1" 2>/dev/null || echo 1.0
}

# ---- peers and build ---------------------------------------------------------------------------
if [ "$install" = 1 ]; then
  log "installing the peers (bench/peers/install.sh)"
  "$bench/peers/install.sh" > "$raw/install.log" 2>&1 || log "install.sh failed (see $raw/install.log); the peers it could not install are reported as failed"
fi
# The Python of the PyTorch peers and of lmtrain.torch's rows: the peers' venv, or one given (a
# lent GPU machine's own Python with torch: scripts/gpu-run.sh's peers stage).
python_peer="${LMTRAIN_PEERS_PYTHON:-$bench/peers/.venv/bin/python}"

[ -n "$build" ] || build="$root/build/bench-$device"
build="$(mkdir -p "$build" && cd "$build" && pwd)"
cuda_flag=OFF; [ "$device" = cuda ] && cuda_flag=ON
if [ "$do_build" = 0 ]; then
  log "using the binaries in $build as they are (--no-build)"
elif log "building lmtrain_workloads and fann_train in $build" && ! { cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DLMTRAIN_BUILD_TESTS=OFF \
         -DLMTRAIN_BUILD_EXAMPLES=OFF -DLMTRAIN_BUILD_BENCH=ON -DLMTRAIN_WERROR=OFF \
         -DLMTRAIN_CUDA="$cuda_flag" > "$raw/build.log" 2>&1 &&
       cmake --build "$build" --target lmtrain_workloads -j"$(nproc)" >> "$raw/build.log" 2>&1; }; then
  tail -20 "$raw/build.log"
  echo "run.sh: building lmtrain_workloads failed (full log: $raw/build.log). bench/ is built only" \
       "when Google Benchmark is found: Debian libbenchmark-dev (bench/peers/install.sh installs it)." >&2
  exit 1
fi
lmtrain_bin="$build/bench/lmtrain_workloads"
fann_bin="$build/bench/fann_train"
if [ "$do_build" = 1 ] && grep -q '^FANN_LIBRARY:FILEPATH=/' "$build/CMakeCache.txt" 2>/dev/null; then
  cmake --build "$build" --target fann_train -j"$(nproc)" >> "$raw/build.log" 2>&1 || true
fi

# run WORKLOAD VARIANT TOOL REP COMMAND…: stdout (JSON lines) and stderr into $raw; a run longer
# than $run_timeout seconds is stopped and reported as failed.
run_timeout=1200
run() {
  local w="$1" v="$2" tool="$3" rep="$4"; shift 4
  [ -n "$rows_only" ] && [[ "$rows_only" != *" $tool "* ]] && return
  local base="$raw/${w}__${v}__${tool}__${rep}" exe="$1" a
  if [ "$exe" = env ]; then  # env VAR=value … PROGRAM: check PROGRAM
    for a in "${@:2}"; do case "$a" in *=*) ;; *) exe="$a"; break ;; esac; done
  fi
  if [ ! -x "$exe" ]; then
    echo "{\"type\":\"error\",\"tool\":\"$tool\",\"error\":\"$exe not found (not installed or not built)\"}" > "$base.jsonl"
    : > "$base.log"
    log "$w $v $tool rep $rep: FAILED ($exe not found)"
    return
  fi
  local t0=$(date +%s.%N)
  timeout "$run_timeout" "$@" > "$base.jsonl" 2> "$base.log"
  local rc=$?
  local dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.3f", b - a}')
  if [ $rc -eq 124 ]; then
    echo "{\"type\":\"error\",\"tool\":\"$tool\",\"error\":\"timed out after $run_timeout s\"}" >> "$base.jsonl"
  fi
  if [ $rc -ne 0 ]; then log "$w $v $tool rep $rep: FAILED (exit $rc, ${dt}s; see $base.log)"
  else log "$w $v $tool rep $rep: ${dt}s"; fi
}

# ---- workloads ---------------------------------------------------------------------------------
# W5: one full-batch step per epoch of 8-W-W-1 tanh, lmtrain beside torch-levenberg-marquardt's
# cholesky (its fastest here) with the same precision on both sides (float32), and lmtrain's
# default (precision auto: a float64 system from 16 384 rows) for reference.
dense_workload() {
  local size width rows variant
  for size in $w5_sizes; do
    width=${size%%:*} rows=${size##*:}
    local lm=("$lmtrain_bin" W5 --width "$width" --rows "$rows" --device "$device")
    local torch=("$python_peer" "$bench/peers/torch_lm.py" W5 --width "$width" --rows "$rows"
                 --device "$device" --solve cholesky)
    variant="dense-$(( 8 * width + width + width * width + width + width + 1 ))"
    run W5 "$variant" lmtrain-float32 0 "${lm[@]}" --epochs 1 --float32
    run W5 "$variant" torch-lm-cholesky 0 "${torch[@]}" --epochs 1
    for rep in $(seq 1 "$repeats"); do
      mark_load W5 "$rep"
      local a=(--epochs "$w5_epochs" --seed "$rep")
      run W5 "$variant" lmtrain-float32 "$rep" "${lm[@]}" "${a[@]}" --float32
      run W5 "$variant" lmtrain-peerdamp "$rep" "${lm[@]}" "${a[@]}" --float32 \
        --damping multiplicative --no-geodesic --per-sample-damping
      run W5 "$variant" lmtrain "$rep" "${lm[@]}" "${a[@]}"
      run W5 "$variant" torch-lm-cholesky "$rep" "${torch[@]}" "${a[@]}"
    done
  done
  echo "lmtrain-float32" > "$raw/W5.pair"
  cat > "$raw/W5.note" <<NOTE
Rows (x ∈ R⁸ standard normal and y = sin x₀ + cos x₁·x₂ + 0.1·x₃² + tanh(x₄ − x₅) + 0.3·x₆x₇, the same data in both tools; 8-W-W-1 tanh, full batch, $w5_epochs steps; seeds 1…$repeats):

* **lmtrain-float32**: lmtrain's defaults in float32 throughout, the precision of the peer: **the speed-up is judged on it**.
* **lmtrain-peerdamp**: the same in the peer's algorithm (multiplicative, λ per sample, no geodesic acceleration).
* **lmtrain**: precision auto (a float64 system for these row counts).
* **torch-lm-cholesky**: torch-levenberg-marquardt with \`solve_method\` cholesky, its default damping.
NOTE
}

sinc_workload() {
  local w="$1" epochs="$2" variant
  variant=$(case "$w" in W1) echo sinc-61 ;; W2) echo sinc-769 ;; W7) echo sinc-769-full ;; esac)
  local lm=("$lmtrain_bin" "$w" --device "$device")
  local torch=("$python_peer" "$bench/peers/torch_lm.py" "$w" --device "$device")
  # The peers' algorithm (λ₀ = 1e-3, ×10 / ×0.1, no geodesic acceleration), on lmtrain's λ scale
  # and on the peer's: torch-levenberg-marquardt adds λI to JᵀJ/B, so --per-sample-damping
  # multiplies λ₀, λ_min and λ_max by the batch size B and both tools damp alike (issue 18 §2).
  local peer_alg=(--damping multiplicative --no-geodesic)
  # Warm-up (rep 0, not reported): one epoch of each tool.
  run "$w" "$variant" lmtrain 0 "${lm[@]}" --epochs 1
  run "$w" "$variant" torch-lm 0 "${torch[@]}" --epochs 1
  for rep in $(seq 1 "$repeats"); do
    mark_load "$w" "$rep"
    local a=(--epochs "$epochs" --seed "$rep") budget_s
    run "$w" "$variant" lmtrain "$rep" "${lm[@]}" "${a[@]}"
    # SolverOptions::cuda_graphs (issue 36): the attempt's factorization, trial and correction
    # replayed from recordings; on the CPU it is ignored, so only a GPU run has this row.
    [ "$device" = cuda ] && run "$w" "$variant" lmtrain-graphs "$rep" "${lm[@]}" "${a[@]}" --cuda-graphs
    if [ "$w" = W7 ]; then
      run "$w" "$variant" torch-lm "$rep" "${torch[@]}" "${a[@]}"
      # Its fastest solver (issue 36 judges W7 against it; 8.9 ms per step against qr's 14.3 ms
      # on the H200 of 2026-11-26).
      run "$w" "$variant" torch-lm-cholesky "$rep" "${torch[@]}" "${a[@]}" --solve cholesky
      # The default (precision auto) solves W7 in float64 (mixed: 100 000 rows per A); this row
      # is float32 throughout, what the default was before issue 28.
      run "$w" "$variant" lmtrain-float32 "$rep" "${lm[@]}" "${a[@]}" --float32
      continue
    fi
    budget_s=$(run_seconds "$raw/${w}__${variant}__lmtrain__${rep}.jsonl")
    run "$w" "$variant" lmtrain-peerdamp "$rep" "${lm[@]}" "${a[@]}" "${peer_alg[@]}" --per-sample-damping
    run "$w" "$variant" lmtrain-mult "$rep" "${lm[@]}" "${a[@]}" "${peer_alg[@]}"
    # torch-levenberg-marquardt with each of its solvers: qr (its default), cholesky, solve.
    run "$w" "$variant" torch-lm "$rep" "${torch[@]}" "${a[@]}"
    run "$w" "$variant" torch-lm-cholesky "$rep" "${torch[@]}" "${a[@]}" --solve cholesky
    run "$w" "$variant" torch-lm-solve "$rep" "${torch[@]}" "${a[@]}" --solve solve
    # lmtrain.torch (issue 27), the peers' damping: its fast path (the native engine on the
    # nn.Sequential) and its torch path (torch.func slices, the library's step).  Needs lmtrain's
    # Python package importable by the peers' Python (pip install . there, or PYTHONPATH);
    # otherwise these rows fail with the import error.
    local front=("$python_peer" "$bench/torch/front_end.py" "$w" --damping same --device "$device")
    run "$w" "$variant" lmtrain.torch-native "$rep" "${front[@]}" "${a[@]}" --variant native
    run "$w" "$variant" lmtrain.torch-torch "$rep" "${front[@]}" "${a[@]}" --variant torch
    # First-order peers, same network and data, for the wall time lmtrain's default run took.
    local fo=("${torch[@]}" --seed "$rep" --budget "$budget_s")
    run "$w" "$variant" torch-adam "$rep" "${fo[@]}" --optimizer adam
    run "$w" "$variant" torch-adam-lr0.01 "$rep" "${fo[@]}" --optimizer adam --lr 0.01
    run "$w" "$variant" torch-lbfgs "$rep" "${fo[@]}" --optimizer lbfgs
  done
  [ "$w" = W7 ] && return
  # report.py judges the issue-7 target on this lmtrain row (same damping as the peer).
  echo "lmtrain-peerdamp" > "$raw/$w.pair"
  cat > "$raw/$w.note" <<EOF
Rows (same data, network, batches and epochs; every tool at its default thread count; seeds 1…$repeats, one per repetition, the repetitions interleaved):

* **lmtrain**: lmtrain's defaults (Nielsen damping with geodesic acceleration).
* **lmtrain-graphs** (a GPU only): the same with \`--cuda-graphs\` (SolverOptions::cuda_graphs): the same steps, bit for bit, launched from recorded CUDA graphs.
* **lmtrain-peerdamp**: the peers' algorithm (λ₀ = 1e-3, ×10 on rejection, ×0.1 on acceptance, no geodesic acceleration) with λ₀, λ_min and λ_max × B (\`--damping multiplicative --no-geodesic --per-sample-damping\`). torch-levenberg-marquardt adds λI to JᵀJ/B, so this row damps exactly as much as the peer: **the issue-7 target is judged on it**, against the fastest torch-levenberg-marquardt solver.
* **lmtrain-mult**: the same algorithm on lmtrain's own λ scale (λI added to JᵀJ, i.e. 1/B of the peer's damping).
* **torch-lm**, **torch-lm-cholesky**, **torch-lm-solve**: torch-levenberg-marquardt with \`solve_method\` qr (its default), cholesky and solve.
* **lmtrain.torch-native**, **lmtrain.torch-torch**: lmtrain's PyTorch front end with the peers' damping (multiplicative, λ₀ = 1e-3, no geodesic acceleration): the fast path (the native engine on the nn.Sequential) and the torch path (torch.func Jacobian slices, the library's step); bench/torch/front_end.py, whose result lines carry the step's phases.
* **torch-adam** (lr 1e-3, PyTorch's default) and **torch-adam-lr0.01** on the LM runs' mini-batches, and **torch-lbfgs** (\`torch.optim.LBFGS\`, lr 1, up to 20 iterations per step, history 100, strong-Wolfe line search, full batch): each given the wall time lmtrain's default run took in the same repetition, checked after every step. Their "epochs" are passes over the data (L-BFGS: optimizer steps) and their time/step is an optimizer step, so their step ratios compare unlike units.
EOF
}

jacobian_workload() {
  local run_timeout=300  # jacfwd on the large configurations takes far longer: reported as failed
  for cfg in "${w3_grid[@]}"; do
    read -r width depth samples <<< "$cfg"
    local v="w$width-d$depth-s$samples"
    # Each process warms up once and then times w3_repeats builds.
    run W3 "$v" lmtrain 1 "$lmtrain_bin" W3 --width "$width" --depth "$depth" --samples "$samples" --repeats "$w3_repeats" --device "$device"
    local n=$(( 2 * width + (depth - 1) * (width * width + width) + width + 1 ))
    for method in jacrev jacfwd; do
      # Forward mode pushes n tangents through every sample: s·n = 3.8e6 (w256, s5000) already
      # takes ~20 s per build on 2 cores, so larger configurations are not started on the CPU.
      if [ "$method" = jacfwd ] && [ "$device" = cpu ] && [ $(( samples * n )) -gt 4000000 ]; then
        echo "{\"type\":\"error\",\"tool\":\"torch-jacfwd\",\"error\":\"not run: s·n = $(( samples * n )) > 4e6 forward tangents (minutes per build on this CPU)\"}" > "$raw/W3__${v}__torch-jacfwd__1.jsonl"
        continue
      fi
      run W3 "$v" "torch-$method" 1 "$python_peer" "$bench/peers/torch_lm.py" W3 --method "$method" --width "$width" --depth "$depth" --samples "$samples" --repeats "$w3_repeats" --device "$device"
    done
    # lmtrain folds J into one triangle of A (SYRK, n(n+1)·s flops); J.T @ J above is torch's full
    # GEMM (2n²·s).  torch has no SYRK; numpy's J.T @ J on one buffer calls BLAS ?syrk (CPU only).
    if [ "$device" = cpu ]; then
      run W3 "$v" torch-jacrev-syrk 1 "$python_peer" "$bench/peers/torch_lm.py" W3 --method jacrev --jtj syrk --width "$width" --depth "$depth" --samples "$samples" --repeats "$w3_repeats"
    fi
  done
  cat > "$raw/W3.note" <<EOF
The JᵀJ column is not the same product in every row: **lmtrain** computes one triangle of A = JᵀJ with SYRK (n(n+1)·s flops, slice by slice); **torch-jacrev** and **torch-jacfwd** the full \`J.T @ J\`, a GEMM of twice the flops, as torch-levenberg-marquardt does; **torch-jacrev-syrk** (CPU only) the same jacrev J, then numpy's \`J.T @ J\` on the one buffer, which numpy hands to BLAS ?syrk (one triangle, then mirrored): the SYRK-equivalent product, which torch itself does not offer.
EOF
}

fann_workload() {
  local src=/usr/share/doc/libfann-dev/examples/datasets data="$raw/datasets"
  mkdir -p "$data"
  for s in "${w6_sets[@]}"; do
    for part in train test; do
      if [ -f "$src/$s.$part" ]; then ln -sf "$src/$s.$part" "$data/$s.$part"
      elif [ -f "$src/$s.$part.gz" ]; then gzip -dc "$src/$s.$part.gz" > "$data/$s.$part"
      fi
    done
  done
  local first="${w6_sets[0]}"
  # Every W6 run is single-threaded: FANN has one thread, and a wall-clock budget is only the same
  # CPU time for every tool when each has one core (issue 18 §2).
  local one=(env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1)
  w6_tools() {  # set rep budget
    local s="$1" rep="$2" b="$3"
    local lm=("${one[@]}" "$lmtrain_bin" W6 --set "$s" --datasets "$data" --budget "$b" --seed "$rep" --device "$device")
    local fann=("$fann_bin" --train "$data/$s.train" --test "$data/$s.test" --set "$s" --budget "$b" --seed "$rep")
    local torch=("${one[@]}" "$python_peer" "$bench/peers/torch_lm.py" W6 --set "$s" --datasets "$data" --budget "$b" --seed "$rep" --device "$device")
    # The headline, chosen before the run: lmtrain-ard (README, "Regularization": ard for small
    # data sets) against FANN RPROP and quickprop on the same standardized split.
    run W6 "$s" lmtrain-ard "$rep" "${lm[@]}" --standardize-inputs --regularization ard
    run W6 "$s" fann-rprop "$rep" "${fann[@]}" --standardize-inputs --algorithm rprop
    run W6 "$s" fann-quickprop "$rep" "${fann[@]}" --standardize-inputs --algorithm quickprop
    [ "$w6_rows" = headline ] && return
    # Extra rows, not counted in the headline.
    run W6 "$s" lmtrain "$rep" "${lm[@]}" --standardize-inputs
    run W6 "$s" lmtrain-raw "$rep" "${lm[@]}"
    run W6 "$s" fann-rprop-raw "$rep" "${fann[@]}" --algorithm rprop
    run W6 "$s" lmtrain-valstop "$rep" "${lm[@]}" --standardize-inputs --validation-fraction 0.2
    run W6 "$s" lmtrain-bayes "$rep" "${lm[@]}" --standardize-inputs --regularization bayesian
    run W6 "$s" torch-adam "$rep" "${torch[@]}" --standardize-inputs --optimizer adam
    run W6 "$s" torch-lbfgs "$rep" "${torch[@]}" --standardize-inputs --optimizer lbfgs
  }
  w6_tools "$first" 0 0.5  # warm-up
  for rep in $(seq 1 "$repeats"); do
    mark_load W6 "$rep"
    for s in "${w6_sets[@]}"; do w6_tools "$s" "$rep" "$budget"; done
  done
  echo "lmtrain-ard" > "$raw/W6.headline"
  cat > "$raw/W6.note" <<EOF
Every run has **one thread** (\`OMP_NUM_THREADS=1\`; FANN is single-threaded) and the same **wall-clock budget** of $budget s per set, checked after every step or epoch, so each tool gets the same CPU time. Seeds 1…$repeats, one per repetition (FANN draws its initial weights after \`srand(seed)\`), the repetitions interleaved. Targets stay in the files' units for every tool.

* **Headline, chosen before the run: lmtrain-ard** (\`--standardize-inputs --regularization ard\`, the setting README "Regularization" recommends for small data sets), against **fann-rprop** and **fann-quickprop**, all three on the same standardized split (every input column standardized with the training file's mean and population standard deviation by \`io::Standardization\`, applied to the test file too).
* Extra rows, not counted in the headline: **lmtrain** (no regularization, standardized), **lmtrain-raw** and **fann-rprop-raw** (both on the raw files), **lmtrain-valstop** (last 20 % of the training file held out, stop after 6 epochs without a better validation loss, best parameters restored), **lmtrain-bayes** (single-ρ Bayesian regularization), **torch-adam** (lr 1e-3) and **torch-lbfgs** (lr 1, strong Wolfe, history 100), both full batch on the standardized split.
* "test MSE / fann-rprop" is the ratio of the medians over the repetitions; "wins" counts the (set, seed) pairs where the row's test MSE is below fann-rprop's with the same seed.
EOF
}

fashion_workload() {
  local data=/usr/share/datasets/fashion-mnist variant="fashion-$w4_train_rows"
  local batches=$(( (w4_train_rows + 1999) / 2000 ))
  w4_tools() {  # REP EPOCHS TRAIN_ROWS TEST_ROWS
    local rep="$1" e=(--epochs "$2" --train-rows "$3" --test-rows "$4" --data "$data" --seed "$1" --device "$device")
    run W4 "$variant" lmtrain "$rep" "$lmtrain_bin" W4 "${e[@]}" --loss cross_entropy_sqrt
    run W4 "$variant" torch-lm "$rep" "$python_peer" "$bench/peers/torch_lm.py" W4 "${e[@]}"
    run W4 "$variant" lmtrain-ce "$rep" "$lmtrain_bin" W4 "${e[@]}" --loss cross_entropy
    run W4 "$variant" lmtrain-sampled "$rep" "$lmtrain_bin" W4 "${e[@]}" --loss cross_entropy_sampled
    run W4 "$variant" lmtrain-peerdamp "$rep" "$lmtrain_bin" W4 "${e[@]}" --loss cross_entropy_sqrt --damping multiplicative --no-geodesic --per-sample-damping
    run W4 "$variant" torch-adam "$rep" "$python_peer" "$bench/peers/torch_lm.py" W4 "${e[@]}" --optimizer adam
  }
  # Warm-up (rep 0, not reported): one epoch of one batch of each tool.
  w4_tools 0 1 2000 500
  for rep in $(seq 1 "$repeats"); do
    mark_load W4 "$rep"
    w4_tools "$rep" "$w4_epochs" "$w4_train_rows" "$w4_test_rows"
  done
  # Shown above the table by report.py.
  cat > "$raw/W4.note" <<EOF
The first $w4_train_rows training and $w4_test_rows test images of Fashion-MNIST (Debian \`dataset-fashion-mnist\`, gzip IDX; the subset of the CI test \`tests/cli/fashion_cnn_test.cpp\`), standardized per pixel with the training subset's mean and standard deviation (run.toml's \`normalize_inputs = "standardize"\`); $w4_epochs epochs of $batches shuffled batches of 2 000 (= $(( w4_epochs * batches )) steps), float32; the network of \`examples/fashion-cnn/run.toml\` (1 026 parameters), PyTorch's default initialization.

* **Loss.** run.toml's \`cross_entropy\` (exact generalized Gauss–Newton, 10 residual rows per image) has no torch-levenberg-marquardt equivalent. The closest it offers, \`CrossEntropyLoss\`, squares one residual √CE per image — lmtrain's \`cross_entropy_sqrt\`. The **lmtrain** row uses that, so the lmtrain/torch-lm ratios compare the same least-squares problem (2 000 residual rows per step); **lmtrain-ce** is run.toml's exact-GGN loss (20 000 rows per step), for reference; **lmtrain-sampled** is \`cross_entropy_sampled\`, the same GGN sampled with one row per image (2 000 rows per step, like √CE; include/lmtrain/core/loss_kind.h). Train and test loss are the mean cross-entropy (\`nn.CrossEntropyLoss\`) for every tool; accuracy is argmax on the $w4_test_rows test images.
* **Damping.** **lmtrain**, **lmtrain-ce** and **lmtrain-sampled** use lmtrain's defaults (Nielsen damping; geodesic acceleration is off by default for the softmax losses). torch-levenberg-marquardt uses its own: λ₀ = 1e-3, ×10 on rejection, ×0.1 on acceptance, λ ∈ [1e-10, 1e10], 10 attempts per step, learning rate 1, its QR solve, and JᵀJ and Jᵀr divided by the batch size (so the same λ damps it 2 000 times more). **lmtrain-peerdamp** runs that algorithm (\`--damping multiplicative --no-geodesic --per-sample-damping\`: λ₀, λ_min and λ_max × 2 000): the peer's damping in effect, step for step.
* **torch-adam.** \`torch.optim.Adam\` at PyTorch's defaults (lr 1e-3) on \`nn.CrossEntropyLoss\`, same batches and epochs: the first-order peer of WORKLOADS.md. $(( w4_epochs * batches )) steps are far too few for it; the row shows what an LM step buys per epoch, not what Adam reaches with many more, much cheaper steps. Its ratios compare an LM step with an Adam step.
EOF
}

for w in "${workloads[@]}"; do
  log "workload $w"
  case "$w" in
    W1) sinc_workload W1 "$w1_epochs" ;;
    W2) sinc_workload W2 "$w2_epochs" ;;
    W7) sinc_workload W7 "$w7_epochs" ;;
    W3) jacobian_workload ;;
    W4) fashion_workload ;;
    W5) dense_workload ;;
    W6) fann_workload ;;
  esac
done

# ---- report ------------------------------------------------------------------------------------
elapsed=$(( $(date +%s) - started ))
torch_v="$("$python_peer" -c 'import torch, torch_levenberg_marquardt as t; print(f"torch {torch.__version__} ({torch.get_num_threads()} threads), torch-levenberg-marquardt {t.__version__}")' 2>/dev/null || echo 'torch: not installed')"
fann_v="$(dpkg-query -W -f='FANN ${Version}' libfann-dev 2>/dev/null || echo 'FANN: not installed')"
{
  echo "Measured by \`bench/run.sh ${workloads[*]} --device $device --repeats $repeats${threads:+ --threads $threads} --budget $budget$([ "$w6_rows" = headline ] && echo ' --w6-rows headline')$([ $quick = 1 ] && echo ' --quick')\` on $(date -u '+%Y-%m-%d %H:%M UTC'), in ${elapsed} s."
  echo
  echo "* Machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); load average $load_start at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end (the machine is shared: a load above the core count slows multi-threaded runs)."
  default_threads="each tool's default (all cores)"
  [[ " ${workloads[*]} " == *" W6 "* ]] && default_threads+="; W6: one thread for every tool (OMP_NUM_THREADS=1)"
  omp_env="$(env | grep -E '^(OMP|GOMP|OPENBLAS|MKL)_' | sort | tr '\n' ' ' | sed 's/ $//')"
  echo "* Threads: ${threads:-$default_threads}. OpenMP/BLAS environment: ${omp_env:-none set}."
  echo "* lmtrain: $(grep -m1 -o '"device":"[^"]*"' "$raw"/*__lmtrain__1.jsonl 2>/dev/null | head -1 | cut -d'"' -f4); built Release in ${build#"$root"/} ($(basename "$lmtrain_bin") modified $(date -u -r "$lmtrain_bin" '+%Y-%m-%d %H:%M UTC' 2>/dev/null || echo '?'))."
  echo "* Repository at commit $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- src include bench 2>/dev/null || echo ' with uncommitted changes in src/, include/ or bench/')$([ "$do_build" = 1 ] || echo '; --no-build: the binaries may predate it')."
  echo "* Peers: $torch_v; $fann_v (float, 1 thread)."
  echo "* Times are medians over $repeats repetitions (after a warm-up run of every tool; each repetition runs every tool once, so the tools interleave) of each run's median step / epoch time, with the min–max over the repetitions in brackets; the load average before each repetition is under each workload. Losses are PyTorch's MSELoss (mean over samples × outputs; W4: CrossEntropyLoss) on all training samples after the last epoch, and on the test set. \"lmtrain/peer\" < 1 means lmtrain is faster. Peak RSS is getrusage's ru_maxrss of the whole process (a Python process with torch imported starts near 0.5 GiB)."
} > "$raw/preamble.md"
python3 "$bench/report.py" "$raw" "$out_md" --title "lmtrain vs peers — $stamp, $machine_desc" \
  --workloads "${workloads[*]}" --preamble "$raw/preamble.md" --device "$device"
log "done in ${elapsed} s: $out_md (raw output in $raw)"
