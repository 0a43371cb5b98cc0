#!/usr/bin/env bash
# Runs the whole test suite: the README's second command, and what .ci/run calls.
# Installs system packages first (scripts/setup.sh), runs each step below with its output
# collected, and ends with cargo test's summary lines (every test binary of every step) and the
# totals. Further steps go before the "summary" block, through `step`.
set -uo pipefail
usage() { sed -n '2,/^set -/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
case ${1:-} in
  -h|--help) usage; exit 0 ;;
  '') ;;
  *) echo "test.sh: unknown argument $1 (it takes none; --help)" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."

scripts/setup.sh || exit $?

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
# step NAME CMD...: runs CMD, its output shown and kept for the summary; a failure is remembered
# (the remaining steps still run, so one red step does not hide the others).
step() {
  local name=$1
  shift
  echo "== test.sh: $name"
  "$@" 2>&1 | tee -a "$log"
  local rc=${PIPESTATUS[0]}
  if [ "$rc" -ne 0 ]; then
    echo "test.sh: step '$name' failed (exit $rc)" | tee -a "$log"
    status=$rc
  fi
}

# Unit, property and integration tests (the tshark/scapy checks need ../shared beside the repo;
# the netns tests need root and skip with a printed reason without it).
step "cargo test --workspace" cargo test --workspace

# --- DPDK ports (issue 7) -----------------------------------------------------------------------
# Optional: the default build needs no DPDK. When libdpdk-dev is installed or installable
# (scripts/setup-dpdk.sh), build the `dpdk` feature and run its own test binary (rte_eal_init runs
# once per process, so those tests live in engine/quench/tests/dpdk.rs); otherwise say why it is skipped.
if scripts/setup-dpdk.sh; then
  step "clippy --features dpdk" cargo clippy -p quench -p quench-runtime --features dpdk --all-targets -- -D warnings
  step "cargo test --features dpdk --test dpdk" cargo test -p quench --features dpdk --test dpdk
else
  echo "SKIP DPDK tests: libdpdk-dev is not installable here (see scripts/setup-dpdk.sh)" | tee -a "$log"
fi
# --- end DPDK ports ----------------------------------------------------------------------------

# --- fuzzing (issue 18) ------------------------------------------------------------------------
# Every cargo-fuzz target for a short bounded run (20,000 executions each); scripts/fuzz.sh
# installs cargo-fuzz when missing and runs on the stable toolchain. The long runs (10M each)
# are `scripts/fuzz.sh` by hand.
step "fuzz (20,000 executions per target)" scripts/fuzz.sh 20000
# --- end fuzzing -------------------------------------------------------------------------------

# --- Python package (issue 34) ------------------------------------------------------------------
# python/ built with maturin into a fresh venv: quench.sim against the CLI's FCTs, a sweep on a Dask
# scheduler and two worker processes over TCP against the CLI sweep, the CLI's errors as ValueError.
# scripts/test-python.sh prints "SKIP python: ..." only when python3 has no venv or pip.
step "python package" scripts/test-python.sh
# --- end Python package ------------------------------------------------------------------------

# --- summary (keep last) -----------------------------------------------------------------------
echo "== cargo test summary =="
grep -E '^test result:|^SKIP|^test\.sh: step' "$log" || true
passed=$(grep -E '^test result:' "$log" | grep -oE '[0-9]+ passed' | awk '{s+=$1} END {print s+0}')
failed=$(grep -E '^test result:' "$log" | grep -oE '[0-9]+ failed' | awk '{s+=$1} END {print s+0}')
echo "cargo test: ${passed} passed, ${failed} failed"
exit "$status"
