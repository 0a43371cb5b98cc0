#!/usr/bin/env bash
# Runs the benchmarks and writes docs/results.md from their machine-readable outputs: one table
# per measure, the machine and the date at its head, under each table the command that
# reproduces it and when it ran.
#
#   scripts/bench/bench-all.sh [--only PART[,PART...]] [--rounds R] [--shield] [--ns3-dir DIR]
#                              [--ns3-cache DIR] [--fat-seeds K] [--render] [--help]
#
# Parts, in this order (all by default):
#   forward       scripts/bench/bench-forward.sh: forwarding rate at 64 and 1500 B through every
#                 forwarder it knows, and egress shaping accuracy (root; ~4 min)
#   latency       scripts/bench/bench-forward.sh --latency-only --lat-rounds R: forwarding latency,
#                 medians over R rounds (root; ~7 min at the default R = 5)
#   passthrough   scripts/bench/bench-forward.sh --appliance: 64 B through the appliance against the
#                 switch (root; ~1 min)
#   dpdk          scripts/bench/bench-dpdk.sh: quench's DPDK path against a bare C loop (~2 min)
#   dpdk-workers  scripts/bench/bench-dpdk.sh --workers 2: the scaling table (~4 min)
#   sim           scripts/bench/bench-sim.sh: quench's simulator, and beside ns-3 (with the fat tree)
#                 when --ns3-dir names an HPCC checkout (~1 min alone; ~10 min with ns-3)
#   appliance     cargo bench -p quench-runtime --bench appliance: the appliance's cost per frame at
#                 1k, 100k and 1M flows (~4 min)
#
# --only L     run only the parts of the comma-separated list L
# --rounds R   the latency part's rounds (default 5)
# --shield     run the bench-forward parts with --shield (scripts/testbed/cpu-shield.sh: the
#              machine's other work kept off the forwarder's core while the latency part runs)
# --ns3-dir DIR, --ns3-cache DIR, --fat-seeds K
#              passed to bench-sim.sh (the sim part; default none, none, 1)
# --render     run nothing: write docs/results.md again from docs/results/*.json
#
# Each part's figures go to docs/results/PART.json (the command, the date, the machine, the
# benchmark's own JSON where it prints one, and the figures as the tables show them);
# docs/results.md is written from every docs/results/*.json, so a partial run rewrites its own
# tables and keeps the others. A part that cannot run here (not root, DPDK not installable, no
# ns-3 checkout for the ns-3 table) keeps its previous figures and says so on stderr.
# Environment passed through: QUENCH (another build's binary: bench-forward, bench-sim).
set -euo pipefail
cd "$(dirname "$0")/../.."

ALL="forward latency passthrough dpdk dpdk-workers sim appliance"
usage() { sed -n '2,/^set -/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
only=$ALL
rounds=5
shield=()
sim_args=()
render_only=0
while [ $# -gt 0 ]; do
  case $1 in
    --only|--rounds|--ns3-dir|--ns3-cache|--fat-seeds)
      [ $# -ge 2 ] || { echo "bench-all.sh: $1 needs a value" >&2; exit 2; } ;;&
    --only) only=$(echo "$2" | tr ',' ' '); shift ;;
    --rounds) rounds=$2; shift ;;
    --shield) shield=(--shield) ;;
    --ns3-dir|--ns3-cache|--fat-seeds) sim_args+=("$1" "$2"); shift ;;
    --render) render_only=1 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "bench-all.sh: unknown argument '$1' (--help lists them)" >&2; exit 2 ;;
  esac
  shift
done
for p in $only; do
  case " $ALL " in
    *" $p "*) ;;
    *) echo "bench-all.sh: unknown part '$p' (parts: $ALL)" >&2; exit 2 ;;
  esac
done
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "bench-all.sh: --rounds must be a positive integer, not '$rounds'" >&2; exit 2; }

RESULTS=docs/results
mkdir -p "$RESULTS"
py() { python3 scripts/bench/bench-results.py "$@"; }
if [ "$render_only" = 1 ]; then
  py render "$RESULTS" docs/results.md
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
LOCK=/tmp/quench-netns-tests.lock

# run PART CMD...: runs the benchmark, its stdout kept for the parser and both streams shown on
# stderr; on failure the part's previous figures stay (the parser is not called).
run() {
  local part=$1
  shift
  echo "== bench-all.sh: $part: $* ($(date -u +%T) UTC)" >&2
  local rc=0
  "$@" >"$work/$part.out" 2> >(tee "$work/$part.err" >&2) || rc=$?
  cat "$work/$part.out" >&2
  [ "$rc" = 0 ] && return 0
  echo "bench-all.sh: $part failed (exit $rc): its previous figures stay in docs/results.md" >&2
  return 1
}
# parse PART COMMAND: the part's output into docs/results/PART.json.
parse() {
  py parse "$1" "$work/$1.out" --stderr "$work/$1.err" --command "$2" --dir "$RESULTS"
}
needs_root() {
  [ "$(id -u)" -eq 0 ] && return 0
  echo "bench-all.sh: $1 needs root: skipped, its previous figures stay" >&2
  return 1
}

for part in $ALL; do
  case " $only " in *" $part "*) ;; *) continue ;; esac
  case $part in
    forward)
      needs_root $part || continue
      cmd="scripts/bench/bench-forward.sh${shield[*]:+ ${shield[*]}}"
      run $part flock "$LOCK" $cmd && parse $part "$cmd" || true ;;
    latency)
      needs_root $part || continue
      cmd="scripts/bench/bench-forward.sh${shield[*]:+ ${shield[*]}} --latency-only --lat-rounds $rounds"
      run $part flock "$LOCK" $cmd && parse $part "$cmd" || true ;;
    passthrough)
      needs_root $part || continue
      run $part flock "$LOCK" scripts/bench/bench-forward.sh --appliance \
        && parse $part "scripts/bench/bench-forward.sh --appliance" || true ;;
    dpdk)
      run $part scripts/bench/bench-dpdk.sh && parse $part "scripts/bench/bench-dpdk.sh" || true ;;
    dpdk-workers)
      run $part scripts/bench/bench-dpdk.sh --workers 2 \
        && parse $part "scripts/bench/bench-dpdk.sh --workers 2" || true ;;
    sim)
      # The command as the table shows it: the directories named DIR, not this machine's paths.
      cmd="scripts/bench/bench-sim.sh"
      for ((i = 0; i < ${#sim_args[@]}; i += 2)); do
        case ${sim_args[i]} in
          --fat-seeds) cmd+=" --fat-seeds ${sim_args[i + 1]}" ;;
          *) cmd+=" ${sim_args[i]} DIR" ;;
        esac
      done
      run $part scripts/bench/bench-sim.sh "${sim_args[@]}" && parse $part "$cmd" || true ;;
    appliance)
      # Criterion keeps its estimates under the target directory; the old ones go first, so
      # that the parser reads this run's.
      target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
      rm -rf "$target"/criterion/appliance*
      args=(--warm-up-time 1 --measurement-time 3 --sample-size 20)
      if run $part cargo bench -p quench-runtime --bench appliance -- "${args[@]}"; then
        py parse appliance "$work/$part.out" --stderr "$work/$part.err" --dir "$RESULTS" \
          --criterion "$target/criterion" \
          --command "cargo bench -p quench-runtime --bench appliance -- ${args[*]}" || true
      fi ;;
  esac
done
py render "$RESULTS" docs/results.md
echo "bench-all.sh: wrote docs/results.md" >&2
