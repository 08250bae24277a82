#!/usr/bin/env bash
# Makes W1's data (if missing) and trains it with the lmtrain command; outputs go to runs/sinc/.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
[[ -f "$here/sinc.csv" ]] || python3 "$here/make_data.py" "$here/sinc.csv"
exec "$root/build/release/bin/lmtrain" fit "$here/run.toml" "$@"
