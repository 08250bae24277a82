#!/usr/bin/env bash
# The deployment templates of deploy/ (issue 31), in a virtual environment of their own
# (build/deploy-venv, the pinned packages of deploy/requirements.txt from PyPI):
#   1. deploy/validate.py: every manifest of deploy/kubernetes against the Kubernetes API schema
#      (core kinds, kubernetes-validate) or the committed CRD schema (MPIJob, PyTorchJob);
#   2. pytest tests/deploy with the release build's lmtrain: deploy/slurm/lmtrain.sbatch under a
#      stub srun (rank/thread/device mapping, W1 equal to mpirun -np 2, a killed rank restarted
#      from its checkpoint), the validator's rejections, and the MPIJob launcher's command run with
#      mpirun here (W1, and a restart after a killed rank).
# The PyTorchJob's command runs in scripts/test-torch.sh (tests/python/test_torch_job.py), where
# torch is.  The image itself: scripts/container-test.sh.  Exits non-zero when anything fails.
#
# usage: scripts/test-deploy.sh [pytest arguments]
#   LMTRAIN_CLI   the lmtrain command to test (default build/release/bin/lmtrain)
set -euo pipefail
cd "$(dirname "$0")/.."
venv=build/deploy-venv
started=$SECONDS
[[ -x $venv/bin/python ]] || /usr/bin/python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r deploy/requirements.txt
cli=${LMTRAIN_CLI:-$PWD/build/release/bin/lmtrain}
if [[ ! -x $cli ]]; then
  echo "test-deploy: $cli is missing; build the release preset first" >&2
  exit 1
fi
"$venv/bin/python" deploy/validate.py
LMTRAIN_CLI=$cli "$venv/bin/python" -m pytest -p no:cacheprovider -q tests/deploy "$@"
echo "test-deploy: passed in $((SECONDS - started)) s"
