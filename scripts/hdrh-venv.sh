#!/usr/bin/env bash
#   scripts/hdrh-venv.sh DIR
#
# Creates (once) a Python virtual environment in DIR holding PyPI's `hdrhistogram` package, the
# HdrHistogram reader independent of quench that scripts/analysis/hlog-check.py uses, and prints the path
# of its python. Needs python3-venv and network access to PyPI the first time (scripts/setup.sh
# installs python3-venv on Debian).
set -euo pipefail
usage() { sed -n '2,/^set -/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
case ${1:-} in
  -h|--help) usage; exit 0 ;;
  '') echo "hdrh-venv.sh: DIR expected (--help)" >&2; exit 2 ;;
  -*) echo "hdrh-venv.sh: unknown flag $1 (--help)" >&2; exit 2 ;;
esac
dir=$1
# Debian's python, which python3-venv belongs to (a pyenv python3 may sit first on PATH).
py=/usr/bin/python3
[ -x "$py" ] || py=python3
if [ ! -x "$dir/bin/python" ]; then
  "$py" -m venv "$dir" >&2
fi
if ! "$dir/bin/python" -c 'import hdrh' 2>/dev/null; then
  "$dir/bin/python" -m pip install --quiet --disable-pip-version-check 'hdrhistogram>=0.10' >&2
fi
echo "$dir/bin/python"
