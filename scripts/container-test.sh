#!/usr/bin/env bash
# Builds the CPU image (deploy/container/Containerfile) and runs W1 in it, on one rank and with
# `mpirun -np 2` inside the container; each result must equal, bit for bit, the same run outside
# the container (the checkout's build).  Also checks what the image promises: `lmtrain --version`
# by default, a non-root user, no compiler or CMake in the runtime stage.  Prints the image size.
#
# No container registry is reachable here, so the base image is made locally: debootstrap (Debian
# 12 minbase, from Debian's package mirror) → `podman import` → localhost/lmtrain-base:bookworm,
# the same system as docker.io/library/debian:bookworm-slim.  The image is built with
# `buildah bud --isolation chroot` (no container runtime needed), with the host's ccache mounted
# so that objects the checkout's builds compiled are reused.  Containers run with `podman run`
# where this machine allows it; in this sandbox podman's runtime (crun) refuses two things, which
# the script works around and says so: setting RLIMIT_NOFILE and RLIMIT_NPROC to podman's defaults
# (→ --ulimit nofile at the current hard limit, nproc=4096), and cgroups in "hybrid" mode, i.e. a cgroup v2 hierarchy
# with controllers beside the v1 ones (→ podman runs in a private mount namespace of this script
# where /sys/fs/cgroup/unified is unmounted; nothing outside that namespace changes).  When even
# that fails, the checks run with `buildah run --isolation chroot` (no cgroups, no namespaces
# beyond chroot), as the image's user.
#
# scripts/test.sh (which sets LMTRAIN_CONTAINER_TEST=0 unless it is set) and CI (CI=true) skip the
# whole script, printing why, unless LMTRAIN_CONTAINER_TEST=1: the image's build stage repeats the
# C++ build from nothing (with an empty ccache about 15 minutes on 2 cores, plus a few minutes of
# package downloads and the base system), which CI's 45-minute budget for scripts/test.sh cannot
# hold.  Run by hand, it runs.  Any step the machine forbids (no root, no debootstrap or
# buildah to install, no chroot) ends the script with status 0 after a line "container-test:
# SKIPPED: <what was refused>"; a check that runs and fails ends it with status 1.
#
# usage: scripts/container-test.sh [BUILD_DIR]      (the host build to compare with; default
#                                                     build/release, built by scripts/test.sh)
#   LMTRAIN_CONTAINER_TEST     1: run under CI=true too; 0: skip (what scripts/test.sh sets)
#   LMTRAIN_IMAGE              the image's name (default localhost/lmtrain:cpu)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${1:-build/release}
image=${LMTRAIN_IMAGE:-localhost/lmtrain:cpu}
base=localhost/lmtrain-base:bookworm
work=$root/build/container
started=$SECONDS

skip() {
  echo "container-test: SKIPPED: $*"
  exit 0
}
say() { echo "container-test: $*"; }

if [[ ${LMTRAIN_CONTAINER_TEST:-} == 0 || (${CI:-} == true && ${LMTRAIN_CONTAINER_TEST:-} != 1) ]]; then
  skip "building the image repeats the whole C++ build inside it (about 15 min on 2 cores with" \
    "an empty ccache, plus package downloads and a base system), more than scripts/test.sh and" \
    "CI can spend on it; run scripts/container-test.sh by hand, or set LMTRAIN_CONTAINER_TEST=1"
fi
[[ -x $build/bin/lmtrain ]] || { echo "container-test: $build/bin/lmtrain is missing; build it first" >&2; exit 1; }
[[ $(id -u) == 0 ]] || skip "not root: debootstrap and buildah need root here (rootless podman" \
  "needs subordinate uid ranges this machine does not set up)"

missing=()
for tool in podman buildah debootstrap; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if ((${#missing[@]})); then
  say "installing ${missing[*]} (Debian packages)"
  if ! { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    podman buildah debootstrap >/dev/null 2>&1 ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends podman buildah debootstrap >/dev/null; }; }; then
    skip "apt-get could not install podman, buildah and debootstrap"
  fi
fi

# 1. The base image: Debian 12 minbase with the apt sources of debian:bookworm-slim.
mkdir -p "$work"
if ! podman image exists "$base"; then
  say "debootstrap --variant=minbase bookworm (the base image)"
  rm -rf "$work/rootfs"
  if ! debootstrap --variant=minbase bookworm "$work/rootfs" http://deb.debian.org/debian \
    >"$work/debootstrap.log" 2>&1; then
    tail -n 5 "$work/debootstrap.log"
    skip "debootstrap failed (log: $work/debootstrap.log)"
  fi
  rm -f "$work/rootfs/etc/apt/sources.list"
  cat >"$work/rootfs/etc/apt/sources.list.d/debian.sources" <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  rm -rf "$work/rootfs/var/cache/apt/archives/"*.deb "$work/rootfs/var/lib/apt/lists/"*
  tar -C "$work/rootfs" -c . | podman import - "$base" >/dev/null ||
    skip "podman import of the debootstrapped root file system failed"
  rm -rf "$work/rootfs"
fi

# 2. The image.
say "buildah bud --isolation chroot -f deploy/container/Containerfile -t $image"
ccache_dir=$(ccache -k cache_dir 2>/dev/null || echo "$HOME/.cache/ccache")
mkdir -p "$ccache_dir"
# The host's CA bundle for pip, when it trusts more than Debian's (a TLS-intercepting proxy).
ca=()
bundle=${PIP_CERT:-${SSL_CERT_FILE:-}}
if [[ -n $bundle && -f $bundle ]]; then
  ca=(-v "$bundle:/etc/ssl/host-ca.crt:ro" --build-arg PIP_CERT=/etc/ssl/host-ca.crt)
fi
build_started=$SECONDS
if ! buildah bud --isolation chroot --layers -f deploy/container/Containerfile \
  --build-arg BASE_IMAGE="$base" -v "$ccache_dir:/root/.cache/ccache" "${ca[@]}" -t "$image" . \
  >"$work/image.log" 2>&1; then
  tail -n 30 "$work/image.log"
  if grep -qiE 'operation not permitted|permission denied' "$work/image.log"; then
    skip "buildah was refused by the sandbox while building (log: $work/image.log)"
  fi
  echo "container-test: the image build failed (log: $work/image.log)" >&2
  exit 1
fi
size=$(podman image inspect --format '{{.Size}}' "$image")
say "image $image built in $((SECONDS - build_started)) s: $((size / 1000000)) MB" \
  "($(podman image inspect --format '{{.Size}}' "$base" | awk '{printf "%d", $1 / 1e6}') MB of it the base system)"

# 3. How containers run here.
# podman's default limits (nofile 1048576, nproc as the host's) are refused here; these are not.
ulimits=(--ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=4096:4096)
podman_run() {
  # A private mount namespace without the cgroup v2 hierarchy (see the header).
  unshare -m --propagation private sh -c \
    'if [ -n "$(cat /sys/fs/cgroup/unified/cgroup.controllers 2>/dev/null)" ]; then
       umount /sys/fs/cgroup/unified; fi; exec "$@"' sh \
    podman run --rm --network none "${ulimits[@]}" "$@"
}
runner=podman
if ! out=$(podman_run "$image" 2>&1); then
  say "podman run is refused here: $(echo "$out" | tail -n 1)"
  runner=buildah
fi
# run_in DIR COMMAND…: COMMAND in a container of the image, as its user, with DIR at /job.
run_in() {
  local dir=$1
  shift
  if [[ $runner == podman ]]; then
    podman_run -v "$dir:/job" -w /job -e OMP_NUM_THREADS=1 "$image" "$@"
  else
    local ctr
    ctr=$(buildah from "$image")
    buildah run --isolation chroot --user 1000:1000 -v "$dir:/job" --workingdir /job \
      --env OMP_NUM_THREADS=1 "$ctr" -- "$@"
    buildah rm "$ctr" >/dev/null
  fi
}
if [[ $runner == buildah ]]; then
  out=$(run_in "$work" lmtrain --version) || skip "buildah run --isolation chroot is refused too"
fi
say "containers run with: $runner run"

# 4. What the image promises.
version=$(echo "$out" | tail -n 1)
[[ $version == "$("$build/bin/lmtrain" --version)" ]] ||
  { echo "container-test: the image's default command printed '$version'" >&2; exit 1; }
say "default command: $version"
scratch=$(mktemp -d "$work/run-XXXXXX")
chown 1000:1000 "$scratch"
user=$(run_in "$scratch" id -u)
[[ $user != 0 ]] || { echo "container-test: the image runs as root" >&2; exit 1; }
toolchain=$(run_in "$scratch" sh -c 'for t in cc gcc g++ c++ cmake nvcc make; do command -v $t; done; true')
[[ -z $toolchain ]] || { echo "container-test: toolchain in the runtime image: $toolchain" >&2; exit 1; }
say "runs as uid $user; no compiler, make or CMake in the image"

# What an MPIJob Worker runs: sshd as the image's user with the image's sshd_config, reached by
# the image's ssh client (port 2222) with the job's key pair, which puts `lmtrain` on sshd's PATH.
ssh_check='mkdir -p ~/.ssh && ssh-keygen -q -t rsa -N "" -f ~/.ssh/id_rsa &&
  cp ~/.ssh/id_rsa.pub ~/.ssh/authorized_keys &&
  { /usr/sbin/sshd -De -f /opt/lmtrain/etc/sshd_config 2>/dev/null & } && sleep 1 &&
  ssh -o BatchMode=yes -o LogLevel=ERROR localhost "id -u; lmtrain --version"'
if [[ $runner == podman ]]; then
  over_ssh=$(run_in "$scratch" bash -c "$ssh_check" | tr '\n' ' ')
  [[ $over_ssh == "1000 $version " ]] ||
    { echo "container-test: lmtrain over the worker's sshd printed '$over_ssh'" >&2; exit 1; }
  say "MPIJob worker: sshd as uid 1000 on port 2222 runs lmtrain for the launcher's ssh"
else
  say "MPIJob worker's sshd: not checked (buildah run has no process of its own to serve it)"
fi

# 5. W1 inside and outside: one rank, then mpirun -np 2; one thread per rank.
/usr/bin/python3 examples/sinc/make_data.py "$scratch/sinc.csv"
cp examples/sinc/run.toml "$scratch/run.toml"
chown -R 1000:1000 "$scratch"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # the host runs, as root
compare() {  # NAME: the container's run against the host's
  local name=$1 verdict
  verdict=$(/usr/bin/python3 tests/deploy/model_params.py "$scratch/host-$name/model.safetensors" \
    "$scratch/ctr-$name/model.safetensors") || {
    echo "container-test: W1 $name: the container's parameters differ from the host's: $verdict" >&2
    exit 1
  }
  local host_loss ctr_loss
  host_loss=$(sed -n 's/^Final training loss *//p' "$scratch/host-$name/summary.txt")
  ctr_loss=$(sed -n 's/^Final training loss *//p' "$scratch/ctr-$name/summary.txt")
  say "W1 $name: final training loss $ctr_loss in the container, $host_loss on the host;" \
    "parameters: $verdict"
}
run_in "$scratch" lmtrain fit run.toml --set output_dir=/job/ctr-1rank --quiet
OMP_NUM_THREADS=1 "$build/bin/lmtrain" fit "$scratch/run.toml" \
  --set output_dir="$scratch/host-1rank" --quiet
compare 1rank
run_in "$scratch" mpirun -np 2 --bind-to none lmtrain fit run.toml \
  --set output_dir=/job/ctr-2ranks --quiet
OMP_NUM_THREADS=1 mpirun -np 2 --bind-to none "$build/bin/lmtrain" fit "$scratch/run.toml" \
  --set output_dir="$scratch/host-2ranks" --quiet
grep -q '^Ranks *2 ' "$scratch/ctr-2ranks/summary.txt" ||
  { echo "container-test: the container's mpirun run did not train on 2 ranks" >&2; exit 1; }
compare 2ranks
rm -rf "$scratch"
say "passed in $((SECONDS - started)) s"
