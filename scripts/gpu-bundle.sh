#!/usr/bin/env bash
# Packs what scripts/gpu-run.sh needs on a GPU machine that has the CUDA toolkit and driver and
# nothing else of lmtrain's (the `device` machines of this workplace: no package registry, an
# Ubuntu image whose glibc is newer than Debian 12's, so Debian-built binaries run there) into
# .gpu/bundle.tar.xz:
#
#   bin/      lmtrain and the GPU test and benchmark binaries, stripped
#   lib/      every shared library they load except CUDA's (cudart, cuBLAS(Lt), cuSOLVER and
#             their own dependencies come from the machine's toolkit) and the C/C++ runtime (the
#             machine's newer one serves Debian-built binaries)
#   openmpi/  OpenMPI's mpirun with the plugins, PMIx components and help files it loads, laid
#             out as Debian installs them under a prefix that OPAL_PREFIX relocates (gpu-run.sh
#             sets it): the GPU machine has no MPI, and the multi-rank checks need a launcher
#   data/     the first 1 200 training images and labels of Fashion-MNIST (Debian's
#             dataset-fashion-mnist, absent there), for the conv-net check
#   python/   lmtrain's static libraries (archives/) and the third-party headers the Python
#             extension's sources include (include/: fmt, nlohmann), from which gpu-run.sh's torch
#             stage builds lmtrain._core for the machine's own Python and PyTorch
#             (scripts/gpu-python/CMakeLists.txt says why it is built there); wheels/ holds
#             torch-levenberg-marquardt (pure Python, the version bench/peers/install.sh pins),
#             the peer that gpu-run.sh's peers stage runs beside lmtrain on the same GPU
#
# Not NCCL: libnccl.so.2 is 218 MB of already-compressed GPU code (xz gains 3%), more than the
# device tool carries (64 MiB).  lmtrain loads it only when a rank uses NCCL
# (src/dist/nccl_library.h), so nothing here needs it at load time; gpu-run.sh points lmtrain at
# the machine's own copy (PyTorch's nvidia-nccl wheel) and records which one it used.
#
# usage: scripts/gpu-bundle.sh [BUILD_DIR]      (default build/release, configured with CUDA on)
#
# Then, with the device tool:  run(command="bash scripts/gpu-run.sh", carry=[".gpu"])
# .gpu/ is in .gitignore, so it travels only when carried and is never committed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build/release}
out=$root/.gpu

if ! grep -q 'LMTRAIN_HAVE_CUDA_BUILT:INTERNAL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "gpu-bundle: $build is not a CUDA build (configure it with: cmake --preset release)" >&2
  exit 2
fi
targets=(lmtrain_cli lmtrain_tests lmtrain_cuda_tests lmtrain_nccl_tests lmtrain_workloads)
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
mkdir -p "$stage/bin" "$stage/lib" "$stage/data" "$stage/python/archives" "$stage/python/include"
for b in "${binaries[@]}"; do
  [[ -x $b ]] || { echo "gpu-bundle: $b was not built" >&2; exit 2; }
  cp "$b" "$stage/bin/"
  strip --strip-unneeded "$stage/bin/$(basename "$b")"
done

# ---- OpenMPI (Debian's 4.1, with PMIx) -------------------------------------------------------
# Its configure-time layout under OPAL_PREFIX: pkglibdir (the MCA plugins) is
# $prefix/lib/x86_64-linux-gnu/openmpi/lib/openmpi3, pkgdatadir (help texts) $prefix/share/openmpi.
# Plugins for interconnects the GPU machine lacks (UCX, libfabric, PSM, verbs) are left out:
# their libraries are not there either, and a single node needs only shared memory (vader).
mpirun=$(readlink -f "$(command -v mpirun || true)")
ompi_libdir=/usr/lib/x86_64-linux-gnu/openmpi/lib
pmix_dir=/usr/lib/x86_64-linux-gnu/pmix2
extra_elves=()
if [[ -x $mpirun && -d $ompi_libdir/openmpi3 ]]; then
  ompi=$stage/openmpi
  mkdir -p "$ompi/bin" "$ompi/lib/x86_64-linux-gnu/openmpi/lib/openmpi3" "$ompi/share/openmpi" \
           "$ompi/pmix/lib/pmix" "$ompi/pmix/share/pmix" "$ompi/etc"
  cp "$mpirun" "$ompi/bin/mpirun"
  extra_elves+=("$ompi/bin/mpirun")
  unwanted='libuc[mpst]|libpsm|libinfinipath|libfabric|libefa|libibverbs|librdmacm|libnl-'
  for plugin in "$ompi_libdir"/openmpi3/*.so; do
    ldd "$plugin" | grep -Eq "$unwanted" && continue
    cp "$plugin" "$ompi/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/"
    extra_elves+=("$ompi/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/$(basename "$plugin")")
  done
  cp /usr/share/openmpi/help-*.txt "$ompi/share/openmpi/"
  cp /etc/openmpi/openmpi-mca-params.conf /etc/openmpi/openmpi-default-hostfile "$ompi/etc/"
  if [[ -d $pmix_dir/lib/pmix ]]; then
    cp "$pmix_dir"/lib/pmix/*.so "$ompi/pmix/lib/pmix/"
    extra_elves+=("$ompi"/pmix/lib/pmix/*.so)
    cp "$pmix_dir"/share/pmix/*.txt "$ompi/pmix/share/pmix/" 2>/dev/null || true
  fi
else
  echo "gpu-bundle: warning: no OpenMPI (mpirun, $ompi_libdir/openmpi3) here; the bundle cannot" \
       "run several ranks" >&2
fi

# Every shared library the binaries and mpirun's plugins load, except CUDA's own and the C/C++
# runtime (see above).
ldd "${binaries[@]}" "${extra_elves[@]}" | awk '/=> \//{print $3}' | sort -u |
  grep -Ev '^/usr/local/cuda|/(libc|libm|libdl|libpthread|librt|ld-linux-x86-64|libstdc\+\+|libgcc_s)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done

# ---- the Python extension's kit (gpu-run.sh's torch stage) -----------------------------------
# The archives the command-line tool links (compiled with -fPIC), the headers of fmt and
# nlohmann-json, and the shared libraries the archives need beyond the binaries' (those copied
# above usually cover them; the loop adds any that are missing).
for a in src/liblmtrain.a src/io/liblmtrain_io.a src/backend/cuda/liblmtrain_cuda.a; do
  [[ -f $build/$a ]] || { echo "gpu-bundle: $build/$a was not built" >&2; exit 2; }
  cp "$build/$a" "$stage/python/archives/"
done
cp -r /usr/include/fmt /usr/include/nlohmann "$stage/python/include/"
for name in fmt lapacke openblas gomp mpi_cxx mpi scalapack-openmpi z; do
  compgen -G "$stage/lib/lib$name.so*" > /dev/null && continue
  lib=$(ldconfig -p | awk -v n="lib$name.so." 'index($1, n) == 1 {print $NF; exit}')
  [[ -n $lib ]] && cp -L "$lib" "$stage/lib/"
done

# torch-levenberg-marquardt's wheel for the peers stage (its dependencies — torch, lightning,
# torchmetrics — are on the device machines already).
tlm=$(awk -F= '/^TLM_VERSION=/ {print $2}' "$root/bench/peers/install.sh")
mkdir -p "$stage/python/wheels"
pip_python=$root/bench/peers/.venv/bin/python
[[ -x $pip_python ]] || { python3 -m venv "$stage/pipvenv" && pip_python=$stage/pipvenv/bin/python; }
if ! "$pip_python" -m pip download --quiet --no-deps --only-binary=:all: \
     --dest "$stage/python/wheels" "torch-levenberg-marquardt==$tlm"; then
  echo "gpu-bundle: warning: could not download torch-levenberg-marquardt $tlm; the peers stage" \
       "will be skipped" >&2
fi
rm -rf "$stage/pipvenv"

# ---- Fashion-MNIST subset for the conv-net check (W4) -----------------------------------------
fashion=/usr/share/datasets/fashion-mnist
if [[ -f $fashion/train-images-idx3-ubyte.gz ]]; then
  python3 - "$fashion" "$stage/data" 1200 <<'EOF'
"""The first N images and labels of Fashion-MNIST's training set, as IDX files (gzip)."""
import gzip, struct, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
with gzip.open(f"{src}/train-images-idx3-ubyte.gz") as f:
    magic, count, rows, cols = struct.unpack(">IIII", f.read(16))
    assert magic == 0x803 and count >= n
    pixels = f.read(n * rows * cols)
with gzip.open(f"{src}/train-labels-idx1-ubyte.gz") as f:
    magic, count = struct.unpack(">II", f.read(8))
    assert magic == 0x801 and count >= n
    labels = f.read(n)
with gzip.GzipFile(f"{dst}/fashion-train-images-idx3-ubyte.gz", "wb", mtime=0) as f:
    f.write(struct.pack(">IIII", 0x803, n, rows, cols) + pixels)
with gzip.GzipFile(f"{dst}/fashion-train-labels-idx1-ubyte.gz", "wb", mtime=0) as f:
    f.write(struct.pack(">II", 0x801, n) + labels)
EOF
else
  echo "gpu-bundle: warning: $fashion is missing (Debian's dataset-fashion-mnist); the conv-net" \
       "check will be skipped" >&2
fi

mkdir -p "$out"
rm -f "$out/bundle.tar.xz"
tar -cJf "$out/bundle.tar.xz.tmp" -C "$stage" .
mv "$out/bundle.tar.xz.tmp" "$out/bundle.tar.xz"
echo "gpu-bundle: $out/bundle.tar.xz ($(du -h "$out/bundle.tar.xz" | cut -f1); $(ls "$stage/lib" | wc -l)" \
     "libraries, $(find "$stage/openmpi" -name '*.so' 2>/dev/null | wc -l) OpenMPI/PMIx plugins," \
     "$(ls "$stage/data" | wc -l) data files, the Python extension's kit)"
