#!/usr/bin/env bash
# Wall time and FCTs of `quench sim` beside the HPCC ns-3 simulator on the same scenarios:
#   A: 2 x 20 MB 2:1 incast at 100 Gb/s;  B: 2 x 200 MB 2:1 incast at 100 Gb/s.
# DCQCN with the hpcc-ns3 preset, RED 400/1600 KB Pmax 0.2 (ns-3 config.txt at 100G), PFC on.
# ns-3 runs only when NS3_HPCC_DIR points at a checkout of alibaba-edu/High-Precision-Congestion-
# Control (its code is never part of this repository); the script builds it there on first use
# (Python 2.7 + waf, reference/dcqcn.md). Without it, only quench's figures are printed.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p engine --bin quench >/dev/null 2>&1 || cargo build --release -p engine --bin quench
Q=$PWD/target/release/quench
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
printf '4 1 3\n3\n0 3 100Gbps 0.001ms 0\n1 3 100Gbps 0.001ms 0\n2 3 100Gbps 0.001ms 0\n' > "$W/topo.txt"
cat > "$W/sim.toml" <<'T'
[host]
ack_every = 1
[red]
kmin_bytes = 400000
kmax_bytes = 1600000
pmax = 0.2
[pfc]
T
now() { date +%s.%N; }
# waf needs Python 2.7: on PATH, or a pyenv build (whose shim refuses without PYENV_VERSION).
py2() {
  local p
  for p in python2.7 "$HOME"/.pyenv/versions/2.7*/bin/python2.7 /usr/bin/python2.7; do
    if "$p" -c '' 2>/dev/null; then echo "$p"; return; fi
  done
  echo "bench-sim.sh: building ns-3 needs Python 2.7 (python2.7 not found)" >&2
  exit 1
}
ns3_build() {
  local d=$NS3_HPCC_DIR/simulation
  if [ ! -e "$d/build/scratch/third" ] && ! ls "$d"/build/scratch/third* >/dev/null 2>&1; then
    local py; py=$(py2)
    echo "bench-sim.sh: building ns-3 in $d (once; ~15 min on 2 cores)" >&2
    (cd "$d" && CC=gcc CXX=g++ "$py" ./waf configure --disable-python --disable-tests \
       --disable-examples --build-profile=optimized >/dev/null && "$py" ./waf build >/dev/null)
  fi
}
ns3_run() { # ns3_run FLOWS OUTDIR
  local d=$NS3_HPCC_DIR/simulation out=$2
  mkdir -p "$out"
  cat > "$out/config.txt" <<C
ENABLE_QCN 1
USE_DYNAMIC_PFC_THRESHOLD 1
PACKET_PAYLOAD_SIZE 1000
TOPOLOGY_FILE $W/topo.txt
FLOW_FILE $1
TRACE_FILE $out/trace.txt
TRACE_OUTPUT_FILE $out/mix.tr
FCT_OUTPUT_FILE $out/fct.txt
PFC_OUTPUT_FILE $out/pfc.txt
SIMULATOR_STOP_TIME 4.00
CC_MODE 1
ALPHA_RESUME_INTERVAL 1
RATE_DECREASE_INTERVAL 4
CLAMP_TARGET_RATE 0
RP_TIMER 300
EWMA_GAIN 0.00390625
FAST_RECOVERY_TIMES 1
RATE_AI 20Mb/s
RATE_HAI 200Mb/s
MIN_RATE 1000Mb/s
DCTCP_RATE_AI 1000Mb/s
ERROR_RATE_PER_LINK 0.0000
L2_CHUNK_SIZE 4000
L2_ACK_INTERVAL 1
L2_BACK_TO_ZERO 0
HAS_WIN 0
GLOBAL_T 1
VAR_WIN 0
FAST_REACT 0
U_TARGET 0.95
MI_THRESH 0
INT_MULTI 1
MULTI_RATE 0
SAMPLE_FEEDBACK 0
PINT_LOG_BASE 1.05
PINT_PROB 1.0
RATE_BOUND 1
ACK_HIGH_PRIO 1
LINK_DOWN 0 0 0
ENABLE_TRACE 0
KMAX_MAP 1 100000000000 1600
KMIN_MAP 1 100000000000 400
PMAX_MAP 1 100000000000 0.2
BUFFER_SIZE 32
QLEN_MON_FILE $out/qlen.txt
QLEN_MON_START 0
QLEN_MON_END 0
C
  echo 0 > "$out/trace.txt"
  # The simulator binary itself, not `waf --run` (which first re-checks the whole build): the
  # wall time is ns-3's simulation alone, as quench's is.
  (cd "$d" && LD_LIBRARY_PATH=$d/build ./build/scratch/third "$out/config.txt" >"$out/log.txt" 2>&1)
}
fcts() { awk '{print $7}' "$1" | sort -n | awk '{printf "%s%.1f", (NR>1?" ":""), $1/1000}'; }
# fct_diff QUENCH_FCT NS3_FCT: the FCTs of each file sorted, then (quench - ns-3) / ns-3 in
# percent, first to finish against first to finish. Why sorted and not by flow id: the flows of
# these incasts are alike in all but their addresses, so which one finishes first is decided by
# each simulator's own random marking, not by the flow; what must agree is the order statistics.
fct_diff() {
  paste -d' ' <(awk '{print $7}' "$1" | sort -n) <(awk '{print $7}' "$2" | sort -n) |
    awk '{printf "%s%+.1f%%", (NR > 1 ? " " : ""), 100 * ($1 - $2) / $2}'
}
printf '%-22s %12s %12s %8s   %s\n' scenario "quench s" "ns-3 s" speedup "FCT us (quench | ns-3 | quench vs ns-3)"
for sc in "A 20000000" "B 200000000"; do
  set -- $sc
  printf '2\n0 2 3 100 %s 2\n1 2 3 100 %s 2\n' "$2" "$2" > "$W/flows$1.txt"
  t0=$(now); $Q sim -q --topology "$W/topo.txt" --flows "$W/flows$1.txt" --cc dcqcn \
     --preset hpcc-ns3 --config "$W/sim.toml" --out "$W/q$1"; t1=$(now)
  qs=$(echo "$t1 - $t0" | bc -l)
  ns="-"; sp="-"; nf="-"; df="-"
  if [ -n "${NS3_HPCC_DIR:-}" ]; then
    t0=$(now); ns3_run "$W/flows$1.txt" "$W/n$1"; t1=$(now)
    ns=$(echo "$t1 - $t0" | bc -l); sp=$(echo "$ns / $qs" | bc -l); nf=$(fcts "$W/n$1/fct.txt")
    ns=$(printf '%.2f' "$ns"); sp=$(printf '%.1fx' "$sp"); df=$(fct_diff "$W/q$1/fct.txt" "$W/n$1/fct.txt")
  fi
  printf '%-22s %12.3f %12s %8s   %s | %s | %s\n' "$1: 2 x $(( $2 / 1000000 )) MB incast" "$qs" "$ns" "$sp" "$(fcts "$W/q$1/fct.txt")" "$nf" "$df"
done
