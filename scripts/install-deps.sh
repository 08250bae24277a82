#!/usr/bin/env bash
# Installs the Debian 12 packages lmtrain needs to build, test and run its examples.
# Idempotent: packages already present are skipped, and apt-get runs only when something is
# missing.  Run as root (or with sudo available).
set -euo pipefail

packages=(
  build-essential cmake ccache pkg-config
  libopenblas-openmp-dev liblapacke-dev   # BLAS (OpenMP build) and LAPACKE
  libfmt-dev nlohmann-json3-dev libtomlplusplus-dev libcli11-dev zlib1g-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenmpi-dev openmpi-bin              # data-parallel ranks (mpirun)
  libscalapack-openmpi-dev                # A sharded over CPU ranks (distributed_cholesky)
  gnuplot-nox                             # PNG plots of training runs
  clang libclang-rt-14-dev libomp-dev     # libFuzzer targets of the file readers
  python3 python3-numpy python3-venv      # reference implementation, Python-side checks, venvs
  python3-dev                             # Python.h for the extension (pip install ., issue 14)
  clang-format                            # the style check of scripts/test.sh
  libfann-doc dataset-fashion-mnist       # real data sets of the examples and tests
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# cuSOLVERMp and cuBLASMp (PyPI wheels) for distributed_cholesky on GPU ranks, where nvcc is.
"$(dirname "$0")/install-cusolvermp.sh"
