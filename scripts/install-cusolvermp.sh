#!/usr/bin/env bash
# Unpacks NVIDIA's cuSOLVERMp and cuBLASMp (PyPI wheels nvidia-cusolvermp-cu13 and
# nvidia-cublasmp-cu13: headers and libraries) into LMTRAIN_CUSOLVERMP_ROOT (default
# /opt/lmtrain/nvidia-mp, or ${XDG_DATA_HOME:-~/.local/share}/lmtrain/nvidia-mp for a user who
# cannot write /opt), where CMake looks for them to build the cuSOLVERMp module of
# distributed_cholesky on GPU ranks (src/dist/cusolvermp/).  Only where the CUDA toolkit's nvcc
# is (the wheels are for CUDA 13, the toolkit of /usr/local/cuda); idempotent.  Cost: two
# downloads of 12.3 and 13.7 MB, 57 MB unpacked.  Nothing else of the wheels' dependencies is
# installed: the module links the toolkit's cuBLAS, cuSOLVER and runtime, and loads NCCL at run
# time (≥ 2.29 needed there: the nvidia-nccl-cu13 wheel).
set -euo pipefail
system_root=/opt/lmtrain/nvidia-mp
user_root=${XDG_DATA_HOME:-$HOME/.local/share}/lmtrain/nvidia-mp
present() { [[ -f $1/nvidia/cu13/include/cusolverMp.h && -f $1/nvidia/cublasmp/cu13/include/cublasmp.h ]]; }
if [[ -n ${LMTRAIN_CUSOLVERMP_ROOT:-} ]]; then
  root=$LMTRAIN_CUSOLVERMP_ROOT
elif present "$system_root" || { mkdir -p "$system_root" 2>/dev/null && [[ -w $system_root ]]; }; then
  root=$system_root
else
  # Not root and no sudo: the user's data directory, which CMake searches too
  # (src/dist/cusolvermp/CMakeLists.txt).
  root=$user_root
fi
cusolvermp=nvidia-cusolvermp-cu13==0.9.1.9318.post1
cublasmp=nvidia-cublasmp-cu13==0.10.0.3695

nvcc=$(command -v nvcc || true)
[[ -z $nvcc && -x /usr/local/cuda/bin/nvcc ]] && nvcc=/usr/local/cuda/bin/nvcc
if [[ -z $nvcc ]]; then
  echo "install-cusolvermp: no nvcc, so no CUDA build to use cuSOLVERMp: skipped"
  exit 0
fi
if present "$root"; then
  echo "install-cusolvermp: present in $root"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# pip from a throw-away venv (Debian's python3 has no pip of its own; python3-venv does).
python3 -m venv "$work/venv"
"$work/venv/bin/pip" download --quiet --no-deps --only-binary=:all: --dest "$work/wheels" \
  "$cusolvermp" "$cublasmp"
mkdir -p "$root"
for wheel in "$work"/wheels/*.whl; do
  python3 -m zipfile -e "$wheel" "$root"
done
rm -rf "$root"/*.dist-info
echo "install-cusolvermp: $cusolvermp and $cublasmp unpacked in $root"
