#!/usr/bin/env bash
# Makes W7's data (if missing) and trains it with the lmtrain command; outputs go to
# runs/sinc-full-batch/.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
[[ -f "$here/sinc100k.csv" ]] || python3 "$root/examples/sinc/make_data.py" "$here/sinc100k.csv" 100000
exec "$root/build/release/bin/lmtrain" fit "$here/run.toml" "$@"
