#!/usr/bin/env bash
# The defaults a user gets, on a quiet machine and a shared one (issue 28): W2c — cuPyLMA's dev
# example, 1-256-1 tanh on W2's 100 000 sinc(10x) points, batches of 10 000, 2 epochs — run by
# `lmtrain fit` with no thread setting against the same run with OMP_NUM_THREADS=1, in pairs
# (default, one thread, default, one thread, …), in three conditions:
#   quiet    nothing else started by this script (the load average is reported: on a shared
#            machine "quiet" is only what the others leave);
#   busy     one co-tenant process keeps a core busy (a shell busy loop) during every run;
#   dynamic  OMP_DYNAMIC=true with the busy co-tenant: it hung forever inside OpenBLAS before
#            issue 28; every run has a time limit (--limit), and a run that reaches it is
#            reported as a hang.
# Writes bench/results/<date>-<machine>-defaults.md: per condition the median wall time (min–max)
# of each, the ratio of the medians and the median of the paired ratios, and the load average
# before every pair.  Targets: default ≤ 1.2 × one thread, quiet and busy; dynamic ≤ 2 ×.
#
# usage: bench/defaults.sh [--repeats R] [--lmtrain PATH] [--conditions "quiet busy dynamic"]
#                          [--limit SECONDS] [--tag NAME]
#   --repeats     pairs per condition after one unmeasured warm-up pair (default 5)
#   --lmtrain     the binary (default build/release/bin/lmtrain; build it first)
#   --limit       seconds before a run counts as hung and is killed (default 120)
#   --tag         appended to the results file's name
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
repeats=5
lmtrain="$root/build/release/bin/lmtrain"
conditions="quiet busy dynamic"
limit=120
tag=""
while [ $# -gt 0 ]; do
  case "$1" in
    --repeats) repeats="$2"; shift ;;
    --lmtrain) lmtrain="$2"; shift ;;
    --conditions) conditions="$2"; shift ;;
    --limit) limit="$2"; shift ;;
    --tag) tag="-$2"; shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "defaults.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ -x "$lmtrain" ] || { echo "defaults.sh: $lmtrain is not built (cmake --preset release && cmake --build --preset release)" >&2; exit 2; }
for v in OMP_NUM_THREADS OPENBLAS_NUM_THREADS GOTO_NUM_THREADS OMP_WAIT_POLICY GOMP_SPINCOUNT OMP_DYNAMIC; do
  [ -z "${!v+x}" ] || { echo "defaults.sh: $v is set in this shell; the defaults are measured with it unset" >&2; exit 2; }
done

machine_desc="$(nproc)core $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
machine="$(echo "$machine_desc" | tr 'A-Z' 'a-z' | sed -E 's/\((r|tm)\)//g; s/(cpu|processor|@.*)//g; s/[^a-z0-9]+/-/g; s/^-+|-+$//g')"
stamp="$(date +%Y-%m-%d)"
out_md="$root/bench/results/$stamp-$machine-defaults$tag.md"
[ -e "$out_md" ] && out_md="$root/bench/results/$stamp-$machine-defaults$tag-$(date +%H%M).md"
work="$(mktemp -d "${TMPDIR:-/tmp}/lmtrain-defaults-XXXXXX")"
cotenant=""
cleanup() { [ -n "$cotenant" ] && kill "$cotenant" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

python3 "$root/examples/sinc/make_data.py" "$work/sinc100k.csv" 100000
cat > "$work/w2c.toml" <<'EOF'
# W2c: cuPyLMA's dev example (1-256-1 tanh, batches of 10 000 of 100 000 sinc(10x) points)
seed = 0
output_dir = "out"
[model]
init = "torch"
layers = [{ type = "dense", units = 256 }, { type = "tanh" }, { type = "dense", units = 1 }]
[data]
task = "regression"
normalize_inputs = "none"
normalize_targets = "none"
[data.train]
path = "sinc100k.csv"
inputs = ["x"]
targets = ["y"]
[loss]
type = "mse"
[trainer]
max_epochs = 2
batch_size = 10000
EOF

# One timed run: prints its wall seconds, or "hang" past the limit, or "failed".
timed_run() {
  local label="$1"; shift
  local start end rc
  start=$(date +%s.%N)
  env "$@" timeout -s KILL "$limit" "$lmtrain" fit "$work/w2c.toml" --quiet \
    --set "output_dir=\"$work/run-$label\"" > "$work/$label.log" 2>&1
  rc=$?
  end=$(date +%s.%N)
  [ -f "$work/run-$label/summary.txt" ] && cp "$work/run-$label/summary.txt" "$work/$label.summary"
  rm -rf "$work/run-$label"
  if [ "$rc" = 137 ]; then echo hang
  elif [ "$rc" != 0 ]; then echo failed
  else python3 -c "print(f'{$end - $start:.3f}')"; fi
}

start_cotenant() { bash -c 'while :; do :; done' & cotenant=$!; }
stop_cotenant() { [ -n "$cotenant" ] && kill "$cotenant" 2>/dev/null; wait "$cotenant" 2>/dev/null; cotenant=""; }

rows="$work/rows.txt"
: > "$rows"
for condition in $conditions; do
  extra=()
  case "$condition" in
    quiet) ;;
    busy) start_cotenant ;;
    dynamic) start_cotenant; extra=(OMP_DYNAMIC=true) ;;
    *) echo "defaults.sh: unknown condition '$condition'" >&2; exit 2 ;;
  esac
  echo "[defaults.sh] $condition: warm-up pair, then $repeats pairs"
  timed_run warm "${extra[@]}" > /dev/null
  timed_run warm1 "${extra[@]}" OMP_NUM_THREADS=1 > /dev/null
  for ((i = 1; i <= repeats; ++i)); do
    load="$(cut -d' ' -f1 /proc/loadavg)"
    d=$(timed_run "default-$i" "${extra[@]}")
    o=$(timed_run "one-$i" "${extra[@]}" OMP_NUM_THREADS=1)
    echo "$condition $i $load $d $o" | tee -a "$rows"
  done
  [ "$condition" = quiet ] || stop_cotenant
  # The Summary's thread lines of the condition's last default run, for the report.
  sed -n '/^Threads/,/^$/p' "$work/default-$repeats.summary" > "$work/threads-$condition.txt" 2>/dev/null
done

python3 - "$rows" "$out_md" "$machine_desc" "$repeats" "$limit" "$work" "$root" "$lmtrain" <<'EOF'
import os, statistics, subprocess, sys
rows_path, out_md, machine, repeats, limit, work, root, lmtrain = sys.argv[1:9]
rows = [l.split() for l in open(rows_path) if l.strip()]
def num(x):
    return float(x) if x not in ("hang", "failed") else None
targets = {"quiet": 1.2, "busy": 1.2, "dynamic": 2.0}
described = {
    "quiet": "no co-tenant started by the script",
    "busy": "one busy-loop co-tenant",
    "dynamic": "OMP_DYNAMIC=true, one busy-loop co-tenant",
}
git = ["git", "-C", root]
commit = subprocess.run(git + ["rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
if subprocess.run(git + ["diff", "--quiet", "HEAD", "--", "src", "include", "CMakeLists.txt"]).returncode != 0:
    commit += " with uncommitted changes to src/ or include/"
extra_args = ""
if os.path.realpath(lmtrain) != os.path.realpath(os.path.join(root, "build/release/bin/lmtrain")):
    extra_args += f" --lmtrain {lmtrain}"
    commit = "(the binary given; the script's own checkout at " + commit + ")"
out = [f"# Default threads against one thread — W2c, {machine}", "",
       f"`bench/defaults.sh --repeats {repeats}{extra_args}` at commit {commit}: `lmtrain fit` on W2c (1-256-1 tanh, "
       "100 000 sinc(10x) points, batches of 10 000, 2 epochs), with no thread setting against "
       "`OMP_NUM_THREADS=1`, in pairs after one warm-up pair.  Wall time of the whole command "
       f"(start-up and data loading included); a run past {limit} s counts as a hang.", "",
       "| condition | default: median (min–max) s | one thread: median (min–max) s | ratio of medians | median paired ratio | target | load average before the pairs |",
       "|---|---|---|---|---|---|---|"]
for cond in dict.fromkeys(r[0] for r in rows):
    rs = [r for r in rows if r[0] == cond]
    d = [num(r[3]) for r in rs]
    o = [num(r[4]) for r in rs]
    hangs = sum(1 for r in rs if r[3] == "hang")
    fails = sum(1 for r in rs if r[3] == "failed")
    dv = [x for x in d if x is not None]
    ov = [x for x in o if x is not None]
    def cell(v):
        return f"{statistics.median(v):.2f} ({min(v):.2f}–{max(v):.2f})" if v else "–"
    ratio = statistics.median(dv) / statistics.median(ov) if dv and ov else float("nan")
    paired = [a / b for a, b in zip(d, o) if a is not None and b is not None]
    pr = statistics.median(paired) if paired else float("nan")
    note = ""
    if hangs: note += f", {hangs} hang(s)"
    if fails: note += f", {fails} failure(s)"
    loads = " ".join(r[2] for r in rs)
    out.append(f"| {cond} ({described.get(cond, cond)}) | {cell(dv)}{note} | {cell(ov)} | {ratio:.2f} | {pr:.2f} | ≤ {targets.get(cond, 0):.1f} | {loads} |")
out += ["", "Every pair (seconds):", "", "| condition | pair | load | default | one thread |", "|---|---|---|---|---|"]
out += [f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} |" for r in rows]
for cond in dict.fromkeys(r[0] for r in rows):
    path = os.path.join(work, f"threads-{cond}.txt")
    text = open(path).read().strip() if os.path.exists(path) else ""
    if text:
        out += ["", f"The Summary's thread lines of the last default run, {cond}:", "", "```", text, "```"]
open(out_md, "w").write("\n".join(out) + "\n")
print("\n".join(out))
print(f"\nwritten: {out_md}")
EOF
