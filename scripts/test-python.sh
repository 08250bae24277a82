#!/usr/bin/env bash
# The Python package (issue 14), as a user installs it, in a virtual environment of its own:
#   1. build/py-venv: Debian's python3 -m venv, with the pinned packages of
#      tests/python/requirements.txt from PyPI (build tools, numpy, scikit-learn, pandas, tqdm,
#      pytest);
#   2. `pip install .` without build isolation (the venv's pinned scikit-build-core and nanobind):
#      CMake in build/python builds only lmtrain._core and the two static libraries it links,
#      with the release build's compile commands, so the library's objects come from ccache
#      (a stage of a few minutes, not a second C++ build); the type stubs are generated there;
#   3. pytest on tests/python with the release build's lmtrain command (LMTRAIN_CLI), so the
#      tests that compare with the command-line tool run instead of skipping.
# Exits non-zero when any step or any test fails.  Run by scripts/test.sh after the release
# build; runs on its own as well (it builds nothing but the extension).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=build/py-venv
started=$SECONDS

if [[ ! -x $venv/bin/python ]]; then
  /usr/bin/python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r tests/python/requirements.txt
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-build-isolation \
  --no-deps --force-reinstall .
echo "test-python: lmtrain installed in $venv ($((SECONDS - started)) s)"

cli=build/release/bin/lmtrain
if [[ ! -x $cli ]]; then
  echo "test-python: $cli is missing; build the release preset first" >&2
  exit 1
fi
# `import lmtrain` is the installed package (the sources are under python/, not on sys.path).
LMTRAIN_CLI=$PWD/$cli "$venv/bin/python" -m pytest -p no:cacheprovider -q tests/python
echo "test-python: passed in $((SECONDS - started)) s"
