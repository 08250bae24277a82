#!/usr/bin/env bash
# The standing rule's GPU check in one device call (a session's device time is short: one start,
# one call): scripts/gpu-run.sh's stage groups side by side, then the timing stages with the GPU
# to themselves.  Each group writes its own logs; they come back packed, one file per group, so
# that $OUT stays within the device tool's 8 files.
#
#   phase 0  --stages ext: lmtrain._core for the machine's Python, once, into build/gpu-pkg (kept
#            on a warm machine between calls; gpu-run.sh's LMTRAIN_GPU_PKG), reused by every group
#   phase 1  the --together groups side by side, each under the deadline --together-seconds;
#            their GPU work shares the device, so read their timings as loaded, not as speeds
#   phase 2  the --alone groups one after another, the GPU to themselves, each until the call's
#            deadline --total-seconds (counted from this script's start)
#
# usage: bash scripts/gpu-session.sh [--together "A=env,tests,fits,ranks B=torch,sanitizers
#            C=pinn D=bench"] [--alone "E=peers,profile F=peers5"] [--together-seconds 200] [--total-seconds 570]
#   (with the device tool: run(command="bash scripts/gpu-session.sh", carry=[".gpu"], timeout_s=600)
#    after scripts/gpu-bundle.sh here).  The defaults take about 9 minutes on an H200 (2026-11-27:
#    phase 1 about 100 s; peers about 120 s, peers5 about 180 s; profile, new on 2026-11-30, not
#    yet run: its three ncu runs are limited to 120 s each).  The PINN recipes on the GPU
#    (issue 39) want a call of their own:  --together "" --alone "G=pinnbench"  (about 9 minutes
#    at gpu-run.sh's default LMTRAIN_GPU_PINN_SCALE).  Issue 39's 30 minutes of Burgers on a GPU, in
#    parts over several calls (gpu-run.sh's pinnbench header): each call
#      LMTRAIN_GPU_PINN_PDES=burgers LMTRAIN_GPU_PINN_SCALE=2 LMTRAIN_GPU_PINN_PAUSE=480
#      LMTRAIN_GPU_PINN_CHECKPOINTS=.gpu/pinn-checkpoints bash scripts/gpu-session.sh --together ""
#      --alone "G=pinnbench"
#    and between calls, here: tar -xzf G.tar.gz G/pinn-checkpoints.tar.gz (the call's files)
#    and unpack that into .gpu/pinn-checkpoints, which the next call's carry brings along.
#    A change to lmtrain.torch's Python against an earlier commit's, in one call (timings of two
#    calls do not compare): mkdir -p .gpu/baseline && git archive REV python/lmtrain |
#      tar -x --strip-components=1 -C .gpu/baseline, then
#      LMTRAIN_GPU_PINN_BASELINE=.gpu/baseline bash scripts/gpu-session.sh --together "" --alone "P=pinn"
#    (gpu-run.sh's pinn stage runs the recipe and the profile with the baseline's Python first).
# Writes $OUT/summary.txt (every group's summary, in order, with its stages and wall time) and
# $OUT/<group>.tar.gz (that group's logs: see gpu-run.sh's header).  Exit status: gpu-run.sh's
# worst (1 a check failed, 77 no device, 2 usage or no bundle), 0 when every group passed.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/gpu-out}
together="A=env,tests,fits,ranks B=torch,sanitizers C=pinn D=bench"
alone="E=peers,profile F=peers5"
together_s=200
total_s=570
while [[ $# -gt 0 ]]; do
  case $1 in
    --together) together=$2; shift 2 ;;
    --alone) alone=$2; shift 2 ;;
    --together-seconds) together_s=$2; shift 2 ;;
    --total-seconds) total_s=$2; shift 2 ;;
    *) echo "gpu-session: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
for group in $together $alone; do
  [[ $group =~ ^[A-Za-z0-9_-]+=[a-z0-9,]+$ ]] ||
    { echo "gpu-session: '$group' is not NAME=stage,stage…" >&2; exit 2; }
done
mkdir -p "$out"
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
export LMTRAIN_GPU_PKG=$root/build/gpu-pkg
worst=0
# Runs one group under a deadline; its summary goes to $logs/<name>.summary, its logs to a tarball.
group() {  # name stages deadline_s
  local name=$1 stages=$2 limit=$3 started=$SECONDS rc
  mkdir -p "$logs/$name"
  OUT=$logs/$name LMTRAIN_GPU_RUN_SECONDS=$limit bash "$root/scripts/gpu-run.sh" --stages "$stages" \
    > "$logs/$name.stdout" 2>&1
  rc=$?
  { echo "### group $name: --stages $stages (deadline ${limit} s, ran $((SECONDS - started)) s, exit $rc)"
    cat "$logs/$name/summary.txt" 2>/dev/null || tail -n 20 "$logs/$name.stdout"
  } > "$logs/$name.summary"
  cp "$logs/$name.stdout" "$logs/$name/stdout.txt"
  tar -czf "$out/$name.tar.gz" -C "$logs" "$name"
  return $rc
}
note() { # rc of a group → the worst so far (1 beats 77 beats 0; 2 is kept)
  if (($1 == 1 || $1 == 2)) || ((worst == 0)); then worst=$1; fi
}

started=$SECONDS
if [[ -n $together || -n $alone ]]; then
  group ext ext 200
  note $?
  # No shared extension: each group builds its own (gpu-run.sh's default), none racing another.
  compgen -G "$LMTRAIN_GPU_PKG/lmtrain/_core*.so" > /dev/null || unset LMTRAIN_GPU_PKG
fi
names=()
for g in $together; do
  name=${g%%=*}
  names+=("$name")
  group "$name" "${g#*=}" "$together_s" &
done
for job in $(jobs -p); do wait "$job"; note $?; done
for g in $alone; do
  name=${g%%=*}
  names+=("$name")
  left=$((total_s - (SECONDS - started)))
  if ((left < 30)); then
    echo "### group $name: --stages ${g#*=} not started (${left} s left of ${total_s} s)" \
      > "$logs/$name.summary"
    continue
  fi
  group "$name" "${g#*=}" "$left"
  note $?
done
for name in ext "${names[@]}"; do
  cat "$logs/$name.summary" 2>/dev/null
done | tee "$out/summary.txt"
echo "== gpu-session: $((SECONDS - started)) s, exit $worst" | tee -a "$out/summary.txt"
exit "$worst"
