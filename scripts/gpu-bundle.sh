#!/usr/bin/env bash
# Packs lmtrain's GPU test and benchmark binaries, with the shared libraries they need besides
# CUDA's and the C/C++ runtime, into .gpu/bundle.tar.xz — for a GPU machine that has the CUDA
# toolkit but none of lmtrain's other dependencies (the `device` machines of this workplace: no
# package registry, an Ubuntu image whose glibc is newer than Debian 12's, so Debian-built
# binaries run there).  scripts/gpu-run.sh unpacks and runs it there.
#
# usage: scripts/gpu-bundle.sh [BUILD_DIR]      (default build/release, configured with CUDA on)
#
# Then, with the device tool:  run(command="bash scripts/gpu-run.sh", carry=[".gpu"])
# .gpu/ is listed in .git/info/exclude so it travels only when carried and is never committed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build/release}
out=$root/.gpu

if ! grep -q 'LMTRAIN_HAVE_CUDA_BUILT:INTERNAL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "gpu-bundle: $build is not a CUDA build (configure it with: cmake --preset release)" >&2
  exit 2
fi
targets=(lmtrain lmtrain_tests lmtrain_cuda_tests lmtrain_nccl_tests lmtrain_workloads)
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"

binaries=(
  "$build/bin/lmtrain"
  "$build/tests/lmtrain_tests"
  "$build/tests/cuda/lmtrain_cuda_tests"
  "$build/tests/dist/lmtrain_nccl_tests"
  "$build/bench/lmtrain_workloads"
)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
for b in "${binaries[@]}"; do
  [[ -x $b ]] || { echo "gpu-bundle: $b was not built" >&2; exit 2; }
  cp "$b" "$stage/bin/"
  strip --strip-unneeded "$stage/bin/$(basename "$b")"
done
# Every shared library the binaries load, except CUDA's own (the GPU machine has its toolkit and
# driver) and the C/C++ runtime (the machine's newer one serves Debian-built binaries).
ldd "${binaries[@]}" | awk '/=> \//{print $3}' | sort -u |
  grep -Ev '^/usr/local/cuda|/(libc|libm|libdl|libpthread|librt|ld-linux-x86-64|libstdc\+\+|libgcc_s)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done

mkdir -p "$out"
rm -f "$out/bundle.tar.xz"
tar -cJf "$out/bundle.tar.xz.tmp" -C "$stage" bin lib
mv "$out/bundle.tar.xz.tmp" "$out/bundle.tar.xz"
exclude=$(git -C "$root" rev-parse --absolute-git-dir)/info/exclude
mkdir -p "$(dirname "$exclude")"
grep -qx '/.gpu/' "$exclude" 2>/dev/null || echo '/.gpu/' >> "$exclude"
echo "gpu-bundle: $out/bundle.tar.xz ($(du -h "$out/bundle.tar.xz" | cut -f1); $(ls "$stage/lib" | wc -l) libraries)"
