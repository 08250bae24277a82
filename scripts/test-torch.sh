#!/usr/bin/env bash
# Tests of lmtrain.torch (the PyTorch front end, issue 15): builds the Python package into a
# virtual environment that sees torch, and runs tests/python/test_torch_*.py with pytest, whose
# exit status is this script's.  CI runs it after the release stage (scripts/test.sh).
#
# torch is installed exactly as the benchmark peers install it — bench/peers/install.sh: PyPI's
# torch without its 3 GB of CUDA wheels, pinned — and this script's venv reads that venv's
# site-packages through a .pth file instead of downloading torch a second time.  Its own venv adds
# only the build requirements (scikit-build-core, nanobind) and pytest.
#
# usage: scripts/test-torch.sh [pytest arguments]        e.g. -k poisson
#   LMTRAIN_TORCH_VENV   the venv to use (default build/venv-torch)
#   LMTRAIN_PEERS_VENV   a venv made by bench/peers/install.sh elsewhere (e.g. another checkout's);
#                        then install.sh is not run
set -euo pipefail
cd "$(dirname "$0")/.."

peers=${LMTRAIN_PEERS_VENV:-bench/peers/.venv}
if [ -z "${LMTRAIN_PEERS_VENV:-}" ]; then
  bench/peers/install.sh
fi
"$peers/bin/python" -c 'import torch' ||
  { echo "test-torch.sh: torch does not import in $peers" >&2; exit 1; }
peers_site=$("$peers/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')

venv=${LMTRAIN_TORCH_VENV:-build/venv-torch}
python=/usr/bin/python3
[ -x "$python" ] || python="$(command -v python3)"
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
echo "$peers_site" >"$site/lmtrain-torch-peers.pth"
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
"${pip[@]}" scikit-build-core==1.1.2 nanobind==3.1.0 pytest==9.2.0

echo "== lmtrain.torch: pip install . (build/python)"
CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)} \
  "${pip[@]}" --no-build-isolation --no-deps .

echo "== lmtrain.torch: pytest tests/python/test_torch_*.py"
# torch may not be skipped here: a missing torch fails the stage.  One thread per process: the
# tests compare numbers, and small problems only lose time to thread start-up.
cd tests/python
LMTRAIN_REQUIRE_TORCH=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} \
  "../../$venv/bin/python" -m pytest -q -p no:cacheprovider test_torch_*.py "$@"
