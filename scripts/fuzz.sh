#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ for RUNS executions (default 10,000,000), or for SECS
# seconds each when the budget is written `SECSs` (e.g. 60s), two targets at a time (the machine
# has 2 cores), and prints each target's execution count, time and corpus.
# cargo-fuzz comes from crates.io (installed here when missing). It passes libFuzzer's
# unstable compiler flags, which the stable toolchain takes under RUSTC_BOOTSTRAP=1: a machine
# with only the stable toolchain runs every target.
#
#   scripts/fuzz.sh [RUNS | SECSs] [TARGET...]     (default 10000000, every target)
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
case ${1:-} in
  -h|--help) usage; exit 0 ;;
  -*) echo "fuzz.sh: unknown flag $1 (--help)" >&2; exit 2 ;;
esac
budget=${1:-10000000}
shift || true
case $budget in
  *s) limit=(-max_total_time="${budget%s}") ;;
  *) limit=(-runs="$budget") ;;
esac
fuzz() { RUSTC_BOOTSTRAP=1 cargo fuzz "$@"; }
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz.sh: installing cargo-fuzz from crates.io"
  cargo install --locked cargo-fuzz >/dev/null 2>&1 || cargo install --locked cargo-fuzz
fi
if [ "$#" -gt 0 ]; then targets=("$@"); else mapfile -t targets < <(fuzz list); fi

# Pure safe Rust: no sanitizer needed to catch panics; debug assertions stay on (overflow checks).
fuzz build -s none
logdir=$(mktemp -d)
run_one() {
  local t=$1
  mkdir -p "fuzz/corpus/$t"
  if fuzz run -s none "$t" "fuzz/corpus/$t" -- "${limit[@]}" -max_len=512 \
      >"$logdir/$t.log" 2>&1; then
    local n secs
    n=$(grep -oE 'Done [0-9]+ runs' "$logdir/$t.log" | grep -oE '[0-9]+' | tail -1)
    secs=$(grep -oE 'Done [0-9]+ runs in [0-9]+ second' "$logdir/$t.log" | grep -oE '[0-9]+ second' \
      | grep -oE '[0-9]+' | tail -1)
    echo "$t: ${n:-?} executions in ${secs:-?} s, corpus $(ls "fuzz/corpus/$t" | wc -l) inputs, no crash"
  else
    echo "$t: FAILED (see below)"
    tail -30 "$logdir/$t.log"
    return 1
  fi
}

status=0
for ((i = 0; i < ${#targets[@]}; i += 2)); do
  pids=()
  for t in "${targets[@]:i:2}"; do
    run_one "$t" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || status=1; done
done
rm -rf "$logdir"
exit "$status"
