#!/usr/bin/env bash
# Reproduces the figures that README.md and examples/*/README.md quote (issue 18 §3), each from
# the command the README names, and writes one Markdown result file per section with the
# command, the machine, the commit, the thread count and the load average at its start and end.
#
# usage: bench/figures.sh SECTION… [--build-dir DIR]
#   sinc          examples/sinc through `lmtrain fit`: float32 50 epochs (seeds 0–19), mixed
#                 50 epochs (seeds 0–9), float64 100 epochs (seeds 0–4)   → examples/sinc/results/seeds.md
#   sinc-numpy    the independent numpy implementation of the peers' algorithm
#                 (shared/reference/lm_sinc_numpy.py, multiplicative damping) on W1, float32, seeds 0–4,
#                 with bench/peers/.venv's Python                           → examples/sinc/results/numpy-reference.md
#   fann-kin32fm  examples/fann-kin32fm: the run.toml (early stopping) and with ard for 60, 100 and
#                 200 epochs, each evaluated on kin32fm.test by `lmtrain eval`
#                                                                           → examples/fann-kin32fm/results/figures.md
#   fashion-cnn   examples/fashion-cnn on the CI test's subset (first 6 000 training and 2 000 test
#                 images, 5 epochs), three losses                         → examples/fashion-cnn/results/subset.md
#   fashion-mlp   examples/fashion-mlp as it is (6 epochs on all 60 000 images; ~4–8 min on 2 cores),
#                 and one 40 s run of each loss (the README's "same 40 s budget")
#                                                                           → examples/fashion-mlp/results/figures.md
#   w7-multiplicative  W7 (examples/sinc-full-batch's problem, mixed precision, 200 epochs) with the
#                 peers' damping instead of lmtrain's default (~5–10 min)   → examples/sinc-full-batch/results/multiplicative.md
#   ranks         W1 (examples/sinc) on 1, 2 and 3 MPI ranks, float32 and mixed: final MSE and the
#                 largest relative parameter difference from one rank   → bench/results/figures/ranks.md
#   all           every section above
#
# The binaries come from DIR (default build/release, the README's build): DIR/bin/lmtrain.
# Timings on a shared machine vary several-fold; the losses are what the sections are for.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build/release"
sections=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build="$(cd "$2" && pwd)"; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    all) sections+=(sinc sinc-numpy fann-kin32fm fashion-cnn fashion-mlp w7-multiplicative ranks) ;;
    sinc|sinc-numpy|fann-kin32fm|fashion-cnn|fashion-mlp|w7-multiplicative|ranks) sections+=("$1") ;;
    *) echo "figures.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ ${#sections[@]} -gt 0 ] || { echo "figures.sh: name a section (see --help)" >&2; exit 2; }
lmtrain="$build/bin/lmtrain"
[ -x "$lmtrain" ] || { echo "figures.sh: $lmtrain not found: build it (cmake --build $build --target lmtrain_cli)" >&2; exit 1; }
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
fann_dir=/usr/share/doc/libfann-dev/examples/datasets
fashion_dir=/usr/share/datasets/fashion-mnist

# The header of every result file: what ran, where, under which load.
header() {  # TITLE COMMAND LOAD_AT_START
  echo "# $1"
  echo
  echo "Produced by \`$2\` on $(date -u '+%Y-%m-%d %H:%M UTC') at commit $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- src include 2>/dev/null || echo ' (library sources modified)')."
  echo
  echo "* Machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; threads: ${OMP_NUM_THREADS:-all cores (OMP_NUM_THREADS unset)}."
  echo "* Binary: \`${lmtrain#"$root/"}\` (built $(date -u -r "$lmtrain" '+%Y-%m-%d %H:%M UTC'))."
  echo "* Load average (1, 5, 15 min) at the start: $3 (the machine may be shared: times are indicative, losses are not affected; the load at the end is the last line)."
  echo
}
# Appends the load average at the end and moves OUT.tmp to OUT.
finish() {
  printf '\nLoad average (1, 5, 15 min) at the end: %s.\n' "$(load)" >> "$1.tmp"
  mv "$1.tmp" "$1"
  echo "figures.sh: wrote $1"
}
load() { cut -d' ' -f1-3 /proc/loadavg; }
# A field of summary.txt ("Final training loss   1.2e-07" → 1.2e-07).
summary_field() { grep -m1 "^$2" "$1/summary.txt" | sed -E "s/^$2 +//"; }
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
fit() {  # OUT_DIR CONFIG [--set …]: lmtrain fit, quietly, into OUT_DIR; prints wall seconds
  local out="$1" config="$2"; shift 2
  local t0; t0=$(date +%s.%N)
  "$lmtrain" fit "$config" --quiet --set "output_dir=\"$out\"" "$@" > "$out.log" 2>&1 ||
    { echo "figures.sh: lmtrain fit $config $* failed:" >&2; tail -5 "$out.log" >&2; exit 1; }
  echo "$(date +%s.%N) - $t0" | bc
}

section_sinc() {
  local dir="$root/examples/sinc" out="$root/examples/sinc/results/seeds.md" start; start=$(load)
  [ -f "$dir/sinc.csv" ] || python3 "$dir/make_data.py" "$dir/sinc.csv"
  mkdir -p "$(dirname "$out")"
  {
    header "W1 (examples/sinc) over seeds" "bench/figures.sh sinc" "$start"
    echo "Each row: \`lmtrain fit examples/sinc/run.toml --set seed=K --set precision='\"P\"' --set trainer.max_epochs=E\` (lmtrain's default solver: Nielsen damping with geodesic acceleration); the final MSE on all 20 000 points from \`summary.txt\` (\"Final training loss\"), and the training time it reports (\"total\": fit alone, without reading the CSV or drawing the plots)."
    echo
    echo "| precision | epochs | seeds | median final MSE | worst | best | median training time | per seed (MSE) |"
    echo "|---|---|---|---|---|---|---|---|"
  } > "$out.tmp"
  local spec
  for spec in "float32 50 19" "mixed 50 9" "float64 100 4"; do
    local precision epochs last losses=() times=()
    read -r precision epochs last <<< "$spec"
    for seed in $(seq 0 "$last"); do
      local run="$scratch/sinc-$precision-$seed"
      fit "$run" "$dir/run.toml" --set "seed=$seed" --set "precision=\"$precision\"" --set "trainer.max_epochs=$epochs" --set trainer.checkpoint_every=0 > /dev/null
      times+=("$(summary_field "$run" '  total' | awk '{print $1}')")
      losses+=("$(summary_field "$run" 'Final training loss')")
    done
    local sorted; sorted=$(printf '%s\n' "${losses[@]}" | sort -g)
    printf '| %s | %s | 0–%s | %.2e | %.2e | %.2e | %.2f s | %s |\n' "$precision" "$epochs" "$last" \
      "$(echo "$sorted" | median)" "$(echo "$sorted" | tail -1)" "$(echo "$sorted" | head -1)" \
      "$(printf '%s\n' "${times[@]}" | median)" "$(printf '%.2e, ' "${losses[@]}" | sed 's/, $//')" >> "$out.tmp"
  done
  finish "$out"
}

section_sinc_numpy() {
  local out="$root/examples/sinc/results/numpy-reference.md" start; start=$(load)
  local ref="$root/../shared/reference/lm_sinc_numpy.py" py="$root/bench/peers/.venv/bin/python"
  [ -f "$ref" ] || { echo "figures.sh: $ref not found (shared/ beside the repository)" >&2; exit 1; }
  [ -x "$py" ] || py=python3
  mkdir -p "$(dirname "$out")"
  {
    header "W1 with the independent numpy reference" "bench/figures.sh sinc-numpy" "$start"
    echo "\`python shared/reference/lm_sinc_numpy.py 20 50 1000 f32 K\` for K = 0…4: the peers' algorithm (λ₀ = 1e-3, ×10 / ×0.1) with an analytic Jacobian and numpy's solve, float32, its own initialization and shuffling."
    echo
    echo '```'
    for seed in 0 1 2 3 4; do "$py" "$ref" 20 50 1000 f32 "$seed"; done
    echo '```'
  } > "$out.tmp"
  finish "$out"
}

section_fann_kin32fm() {
  local dir="$root/examples/fann-kin32fm" out="$root/examples/fann-kin32fm/results/figures.md" start; start=$(load)
  mkdir -p "$(dirname "$out")"
  {
    header "examples/fann-kin32fm" "bench/figures.sh fann-kin32fm" "$start"
    echo "Each row: \`lmtrain fit examples/fann-kin32fm/run.toml\` with the overrides shown, then \`lmtrain eval RUN/model.safetensors --data $fann_dir/kin32fm.test\` (2 048 rows; MSE in the target's units)."
    echo
    echo "| overrides | epochs run | stop | test MSE | R² | wall time |"
    echo "|---|---|---|---|---|---|"
  } > "$out.tmp"
  local i=0 overrides
  for overrides in "" "solver.regularization=\"ard\" data.validation_fraction=0 trainer.max_epochs=60" \
                   "solver.regularization=\"ard\" data.validation_fraction=0 trainer.max_epochs=100" \
                   "solver.regularization=\"ard\" data.validation_fraction=0 trainer.max_epochs=200"; do
    i=$((i + 1))
    local run="$scratch/kin-$i" sets=() o
    for o in $overrides; do sets+=(--set "$o"); done
    local t; t=$(fit "$run" "$dir/run.toml" "${sets[@]}")
    local ev; ev=$("$lmtrain" eval "$run/model.safetensors" --data "$fann_dir/kin32fm.test" 2>&1)
    local mse r2
    mse=$(echo "$ev" | sed -nE 's/^MSE ([-0-9.e+]+),.*/\1/p' | head -1)
    r2=$(echo "$ev" | sed -nE 's/.*R² ([-0-9.]+).*/\1/p' | head -1)
    printf '| %s | %s | %s | %s | %s | %.1f s |\n' "${overrides:-(none: the example as it is)}" \
      "$(summary_field "$run" 'Epochs')" "$(summary_field "$run" 'Termination' | cut -c1-40)" "$mse" "$r2" "$t" >> "$out.tmp"
    echo "$ev" > "$scratch/kin-$i.eval"
  done
  { echo; echo "\`lmtrain eval\` output of the last row:"; echo; echo '```'; cat "$scratch/kin-$i.eval"; echo '```'; } >> "$out.tmp"
  finish "$out"
}

# Accuracy and loss on the test images of a classification run.
eval_fashion() {  # RUN TEST_ROWS → "accuracy loss"
  local ev; ev=$("$lmtrain" eval "$1/model.safetensors" --data "$fashion_dir/t10k-images-idx3-ubyte.gz" \
      --targets "$fashion_dir/t10k-labels-idx1-ubyte.gz" 2>&1)
  echo "$ev" > "$1.eval"
  local acc loss
  acc=$(echo "$ev" | sed -nE 's/^accuracy ([0-9.]+).*/\1/p' | head -1)
  loss=$(echo "$ev" | sed -nE 's/^loss \(([a-z_]+)\) ([-0-9.e+]+).*/\2 (\1)/p' | head -1)
  echo "$(awk -v a="$acc" 'BEGIN {printf "%.2f %%", 100 * a}') | $loss"
}

section_fashion_cnn() {
  local dir="$root/examples/fashion-cnn" out="$root/examples/fashion-cnn/results/subset.md" start; start=$(load)
  mkdir -p "$(dirname "$out")"
  {
    header "examples/fashion-cnn on the CI test's subset" "bench/figures.sh fashion-cnn" "$start"
    echo "\`lmtrain fit examples/fashion-cnn/run.toml --set data.train.rows=6000 --set trainer.max_epochs=5\` (first 6 000 training images, 3 batches of 2 000 per epoch, seed 0), with \`loss.type\` as shown; then \`lmtrain eval\` on the 10 000 test images (accuracy, mean cross-entropy). Training loss from \`summary.txt\`."
    echo
    echo "| loss type | epochs | final training loss | test accuracy | test loss | wall time | per LM step |"
    echo "|---|---|---|---|---|---|---|"
  } > "$out.tmp"
  local loss
  for loss in cross_entropy cross_entropy_sqrt cross_entropy_sampled; do
    local run="$scratch/cnn-$loss"
    local t; t=$(fit "$run" "$dir/run.toml" --set data.train.rows=6000 --set trainer.max_epochs=5 --set "loss.type=\"$loss\"" --set trainer.checkpoint_every=0)
    printf '| `%s` | %s | %s | %s | %.0f s | %s |\n' "$loss" "$(summary_field "$run" 'Epochs')" \
      "$(summary_field "$run" 'Final training loss')" "$(eval_fashion "$run")" "$t" \
      "$(summary_field "$run" '  per LM step')" >> "$out.tmp"
  done
  finish "$out"
}

section_fashion_mlp() {
  local dir="$root/examples/fashion-mlp" out="$root/examples/fashion-mlp/results/figures.md" start; start=$(load)
  mkdir -p "$(dirname "$out")"
  local run="$scratch/mlp" t
  t=$(fit "$run" "$dir/run.toml")
  # The README's "same 40 s budget" comparison: one 40 s run of each loss, no early stopping.
  local sq="$scratch/mlp-sqrt40" ce="$scratch/mlp-ce40" sa="$scratch/mlp-sampled40" budget=(--set trainer.max_time_seconds=40 --set trainer.max_epochs=1 --set data.validation_fraction=0 --set trainer.checkpoint_every=0)
  fit "$sq" "$dir/run.toml" "${budget[@]}" > /dev/null
  fit "$ce" "$dir/run.toml" "${budget[@]}" --set 'loss.type="cross_entropy"' --set trainer.batch_size=200 > /dev/null
  fit "$sa" "$dir/run.toml" "${budget[@]}" --set 'loss.type="cross_entropy_sampled"' > /dev/null
  {
    header "examples/fashion-mlp" "bench/figures.sh fashion-mlp" "$start"
    echo "\`lmtrain fit examples/fashion-mlp/run.toml\` as it is (wall time $(printf '%.0f' "$t") s), then \`lmtrain eval\` on the 10 000 test images: accuracy and loss $(eval_fashion "$run")."
    echo
    echo "Same 40 s budget (\`--set trainer.max_time_seconds=40 --set trainer.max_epochs=1 --set data.validation_fraction=0\`), test accuracy and loss:"
    echo
    echo "| loss, batch | LM steps | test accuracy | test loss |"
    echo "|---|---|---|---|"
    echo "| \`cross_entropy_sqrt\`, 2 000 (run.toml) | $(summary_field "$sq" 'LM steps' | cut -d' ' -f1) | $(eval_fashion "$sq") |"
    echo "| \`cross_entropy\`, 200 (\`--set loss.type='\"cross_entropy\"' --set trainer.batch_size=200\`) | $(summary_field "$ce" 'LM steps' | cut -d' ' -f1) | $(eval_fashion "$ce") |"
    echo "| \`cross_entropy_sampled\`, 2 000 (\`--set loss.type='\"cross_entropy_sampled\"'\`) | $(summary_field "$sa" 'LM steps' | cut -d' ' -f1) | $(eval_fashion "$sa") |"
    echo
    echo "\`epochs.csv\` of the full run:"
    echo
    echo '```'
    cat "$run/epochs.csv"
    echo '```'
    echo
    echo "\`summary.txt\`:"
    echo
    echo '```'
    cat "$run/summary.txt"
    echo '```'
  } > "$out.tmp"
  finish "$out"
}

section_w7_multiplicative() {
  local dir="$root/examples/sinc-full-batch" out="$root/examples/sinc-full-batch/results/multiplicative.md" start; start=$(load)
  [ -f "$dir/sinc100k.csv" ] || python3 "$root/examples/sinc/make_data.py" "$dir/sinc100k.csv" 100000
  local run="$scratch/w7" t
  t=$(fit "$run" "$dir/run.toml" --set 'solver.damping="multiplicative"' --set solver.geodesic_acceleration=false --set trainer.checkpoint_every=0)
  {
    header "W7 with the peers' damping" "bench/figures.sh w7-multiplicative" "$start"
    echo "\`lmtrain fit examples/sinc-full-batch/run.toml --set solver.damping='\"multiplicative\"' --set solver.geodesic_acceleration=false\`: the peers' λ₀ = 1e-3, ×10 / ×0.1 schedule on W7 (mixed precision, 200 full-batch epochs), wall time $(printf '%.0f' "$t") s. lmtrain's default on the same problem: \`results/summary-seed0.txt\`."
    echo
    echo "Training loss every 20 epochs (\`epochs.csv\`):"
    echo
    echo '```'
    awk -F, 'NR == 1 || (NR - 1) % 20 == 0' "$run/epochs.csv"
    echo '```'
    echo
    echo '```'
    cat "$run/summary.txt"
    echo '```'
  } > "$out.tmp"
  finish "$out"
}

section_ranks() {
  local dir="$root/examples/sinc" out="$root/bench/results/figures/ranks.md" start; start=$(load)
  [ -f "$dir/sinc.csv" ] || python3 "$dir/make_data.py" "$dir/sinc.csv"
  mkdir -p "$(dirname "$out")"
  local mpi=(mpirun --oversubscribe); [ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
  local OMP_NUM_THREADS=1; export OMP_NUM_THREADS  # one thread per rank
  {
    header "W1 on 1, 2 and 3 MPI ranks" "bench/figures.sh ranks" "$start"
    echo "\`OMP_NUM_THREADS=1 mpirun -np R lmtrain fit examples/sinc/run.toml --set precision=…\` (50 epochs, seed 0). \"Parameters\": the largest |θ_R − θ_1| / max|θ_1| over the model's parameters, against the one-rank run of the same precision."
    echo
    echo "| precision | ranks | final MSE | parameters vs 1 rank |"
    echo "|---|---|---|---|"
  } > "$out.tmp"
  local precision r
  for precision in mixed float32; do
    for r in 1 2 3; do
      local run="$scratch/ranks-$precision-$r"
      "${mpi[@]}" -np "$r" "$lmtrain" fit "$dir/run.toml" --quiet --set "output_dir=\"$run\"" \
        --set "precision=\"$precision\"" --set trainer.checkpoint_every=0 > "$run.log" 2>&1 ||
        { echo "figures.sh: mpirun -np $r failed:" >&2; tail -5 "$run.log" >&2; exit 1; }
      local diff="–"
      [ "$r" = 1 ] || diff=$(python3 "$root/bench/safetensors_diff.py" "$scratch/ranks-$precision-1/model.safetensors" "$run/model.safetensors")
      echo "| $precision | $r | $(summary_field "$run" 'Final training loss') | $diff |" >> "$out.tmp"
    done
  done
  finish "$out"
}

for s in "${sections[@]}"; do
  echo "figures.sh: $s"
  "section_${s//-/_}"
done
