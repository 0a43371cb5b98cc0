#!/usr/bin/env bash
# The Python package (python/): builds its wheel with maturin in a fresh venv (pandas, dask,
# distributed and matplotlib from PyPI), installs it, and runs python/tests/test_quench.py against
# the `quench` binary. Prints "SKIP python: ..." and succeeds only when python3 has no venv or pip.
#
#   scripts/test-python.sh
#   PYTHON=PATH   (environment) the interpreter that makes the venv (default python3)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
usage() { sed -n '2,/^set -/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
case ${1:-} in
  -h|--help) usage; exit 0 ;;
  '') ;;
  *) echo "test-python.sh: unknown argument $1 (it takes none; --help)" >&2; exit 2 ;;
esac

py=${PYTHON:-python3}
if ! command -v "$py" >/dev/null; then
  echo "SKIP python: no python3 on PATH"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! "$py" -m venv "$tmp/venv" >/dev/null 2>&1 || [ ! -x "$tmp/venv/bin/pip" ]; then
  echo "SKIP python: $py cannot make a venv with pip (Debian: apt-get install python3-venv)"
  exit 0
fi
"$tmp/venv/bin/pip" install -q maturin pandas dask distributed matplotlib
cargo build -q -p quench --bin quench
# A dev build with the simulator optimised (python/Cargo.toml's profile): the release build's
# link-time optimisation would cost minutes here.
(cd python && CARGO_TARGET_DIR="$repo/target/python" "$tmp/venv/bin/maturin" build -q \
  --profile dev -o "$tmp/wheels")
"$tmp/venv/bin/pip" install -q "$tmp"/wheels/*.whl
# From the temporary directory: `import quench` must find the installed package, not python/.
cd "$tmp"
"$tmp/venv/bin/python" "$repo/python/tests/test_quench.py" "$repo/target/debug/quench"
