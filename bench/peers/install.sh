#!/usr/bin/env bash
# Installs the peers of bench/run.sh (issue 7).  Nothing here is needed to build or test lmtrain.
#
#   bench/peers/.venv   Python virtual environment with torch (CPU use) and
#                       torch-levenberg-marquardt, from PyPI only
#   Debian packages     libfann-dev (RPROP/quickprop peer), libfann-doc (the W6 data sets),
#                       libbenchmark-dev (the top-level CMakeLists adds bench/ only with it), bc,
#                       gnuplot-nox (charts), python3-venv when `python3 -m venv` is missing
#
# PyPI's torch wheel for Linux x86_64 is the CUDA build: `pip install torch` pulls about 3.0 GB of
# wheels (torch 539 MB, cuDNN 519 MB, cuBLAS 405 MB, triton 286 MB, cuSOLVER, cuFFT, NCCL, …).
# Only PyPI is reachable here, so the CPU-only wheel index is not an option.  The smallest
# PyPI-hosted install that imports and runs on the CPU is torch without its dependencies plus its
# pure-Python requirements (~560 MB), and then only those CUDA runtime libraries that the loader
# cannot find on the machine: on a machine with the CUDA 13 toolkit in the loader path, cuFile,
# cuSPARSELt, NVSHMEM and NCCL (~520 MB more).  Where even that does not import, the script falls
# back to the full `pip install torch`.  Everything is pinned so the numbers can be reproduced.
#
# usage: bench/peers/install.sh            (idempotent; re-running only checks)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv"

TORCH_VERSION=2.15.0
TLM_VERSION=1.2.3
# torch's pure-Python requirements and torch-levenberg-marquardt's (pytorch-lightning, torchmetrics,
# tqdm, numpy).  Installed with --no-deps: otherwise pip's resolver re-reads torch's metadata and
# downloads the 3 GB of CUDA wheels this script avoids.
PY_DEPS=(filelock==4.2.11 typing-extensions==4.16.0 sympy==1.14.0 mpmath==1.3.0 networkx==3.6.1
         jinja2==3.1.6 markupsafe==3.0.4 fsspec==2026.9.0 numpy==2.4.6
         pytorch-lightning==2.6.6 torchmetrics==1.9.0 lightning-utilities==0.15.3 tqdm==4.70.1
         pyyaml==6.0.3 packaging==26.3)
# CUDA runtime libraries libtorch links against that a CUDA 13.0 toolkit does not provide.
CUDA_EXTRAS=(nvidia-cufile==1.17.1.22 nvidia-cusparselt-cu13==0.8.1 nvidia-nvshmem-cu13==3.7.2
             nvidia-nccl-cu13==2.30.7)

apt_updated=0
apt_install() {
  if [ "$apt_updated" = 0 ]; then apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

missing=()
for pkg in libfann-dev libfann-doc gnuplot-nox libbenchmark-dev bc; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
# Debian's python3 (the one python3-venv belongs to) when there is one.
python=/usr/bin/python3
[ -x "$python" ] || python="$(command -v python3)"
"$python" -m venv --help >/dev/null 2>&1 && "$python" -c 'import ensurepip' 2>/dev/null ||
  missing+=(python3-venv)
if [ "${#missing[@]}" -gt 0 ]; then
  echo "install.sh: apt-get install ${missing[*]}"
  apt_install "${missing[@]}"
fi

[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)

imports() { "$venv/bin/python" -c 'import torch, torch_levenberg_marquardt; torch.ones(2) @ torch.ones(2)' 2>/dev/null; }

if ! imports; then
  echo "install.sh: torch $TORCH_VERSION (no dependencies) and torch-levenberg-marquardt $TLM_VERSION"
  "${pip[@]}" --no-deps "torch==$TORCH_VERSION" "torch-levenberg-marquardt==$TLM_VERSION" "${PY_DEPS[@]}"
  if ! imports; then
    echo "install.sh: adding the CUDA runtime libraries the loader cannot find: ${CUDA_EXTRAS[*]}"
    "${pip[@]}" --no-deps "${CUDA_EXTRAS[@]}"
  fi
  if ! imports; then
    echo "install.sh: still not importable; installing torch with all its dependencies (~3 GB)"
    "${pip[@]}" "torch==$TORCH_VERSION"
  fi
fi
if ! imports; then
  "$venv/bin/python" -c 'import torch, torch_levenberg_marquardt' || true
  echo "install.sh: torch does not import in $venv" >&2
  exit 1
fi
"$venv/bin/python" - <<'PY'
import torch, torch_levenberg_marquardt as tlm
print(f"install.sh: torch {torch.__version__} ({torch.get_num_threads()} threads), "
      f"torch-levenberg-marquardt {tlm.__version__}")
PY
echo "install.sh: FANN $(dpkg-query -W -f='${Version}' libfann-dev), gnuplot $(dpkg-query -W -f='${Version}' gnuplot-nox)"
du -sh "$venv" | awk '{print "install.sh: venv size " $1}'
