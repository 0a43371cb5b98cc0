#!/usr/bin/env bash
# Wall time, peak memory and FCTs of `quench sim` beside the HPCC ns-3 simulator on the same files:
#   A: 2 x 20 MB 2:1 incast at 100 Gb/s;  B: 2 x 200 MB 2:1 incast at 100 Gb/s;
#   C: HPCC's fat tree (mix/fat.txt: 320 hosts, 56 switches, 100G and 400G links) with WebSearch
#      flows from HPCC's traffic_gen.py at 30 % load (C_SECONDS of arrivals, default 0.005 s,
#      Python's random seeded with 1), FCT slowdown per flow-size bucket as HPCC's
#      analysis/fct_analysis.py bins it (20 buckets of 5 % of the flows by size; p50/p95/p99).
#      quench runs C_RUNS times (default 3) and its median wall and CPU time are shown.
# Times: wall seconds and CPU seconds (user + system; the steadier figure on a loaded machine).
# Both simulators read one config.txt, the one run.py writes for `--cc dcqcn --bw 100` (DCQCN,
# RED per link speed, ACK per packet, PFC, 32 MB buffer): quench through `--ns3-config`.
# ns-3 runs only when NS3_HPCC_DIR points at a checkout of alibaba-edu/High-Precision-Congestion-
# Control (its code is never part of this repository); the script builds it there on first use
# (Python 2.7 + waf, reference/dcqcn.md). Without it, only quench's A and B are run; C needs the
# checkout's fat.txt and traffic_gen.py. SKIP_NS3=1 runs quench alone on all three.
# NS3_CACHE=DIR keeps each ns-3 run's FCT file, wall and CPU time and peak memory under DIR,
# keyed by what decides them (ns-3's binary, the config without its output paths, the topology,
# flow and trace files); a later run on the same inputs reuses them and says so. The fat tree's
# ns-3 run takes ~6 min of CPU, so a rerun that changes only quench takes ~2 min instead of ~9.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p engine --bin quench >/dev/null 2>&1 || cargo build --release -p engine --bin quench
T0=$(date +%s)
Q=${QUENCH:-$PWD/target/release/quench}
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
mkdir -p "$W/mix"
printf '4 1 3\n3\n0 3 100Gbps 0.001ms 0\n1 3 100Gbps 0.001ms 0\n2 3 100Gbps 0.001ms 0\n' > "$W/mix/topo_incast.txt"
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
# config TOPO FLOWS OUT: run.py's config.txt for --cc dcqcn --bw 100 (its template, with the
# values run.py derives for 100 Gb/s), inputs and outputs under $W.
config() {
  cat <<C
ENABLE_QCN 1
USE_DYNAMIC_PFC_THRESHOLD 1
PACKET_PAYLOAD_SIZE 1000
TOPOLOGY_FILE mix/$1.txt
FLOW_FILE mix/$2.txt
TRACE_FILE mix/trace.txt
TRACE_OUTPUT_FILE $3/mix.tr
FCT_OUTPUT_FILE $3/fct.txt
PFC_OUTPUT_FILE $3/pfc.txt
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
PINT_LOG_BASE 1.01
PINT_PROB 1.0
RATE_BOUND 1
ACK_HIGH_PRIO 1
LINK_DOWN 0 0 0
ENABLE_TRACE 0
KMAX_MAP 2 100000000000 1600 400000000000 6400
KMIN_MAP 2 100000000000 400 400000000000 1600
PMAX_MAP 2 100000000000 0.20 400000000000 0.20
BUFFER_SIZE 32
QLEN_MON_FILE $3/qlen.txt
QLEN_MON_START 2000000000
QLEN_MON_END 3000000000
C
}
echo 0 > "$W/mix/trace.txt"
# timed OUT CMD...: runs CMD from $W, records wall seconds, CPU seconds (user + system) and peak
# RSS (MB) in OUT/{wall,cpu,rss}. On a loaded machine the CPU time is the steadier figure.
timed() {
  local out=$1; shift
  mkdir -p "$out"
  local t0 t1; t0=$(now)
  (cd "$W" && /usr/bin/time -f '%M %U %S' -o "$out/time.txt" "$@" >"$out/log.txt" 2>&1)
  t1=$(now)
  echo "$t1 - $t0" | bc -l > "$out/wall"
  set -- $(tail -1 "$out/time.txt")
  echo $(( $1 / 1024 )) > "$out/rss"
  echo "$2 + $3" | bc -l > "$out/cpu"
}
# median_of OUT RUN_DIRS...: OUT/{wall,cpu,rss} = the median wall and CPU time of the runs and
# their largest RSS; OUT/fct.txt from the first (the runs are deterministic: the same file).
median_of() {
  local out=$1; shift
  mkdir -p "$out"
  local k
  for k in wall cpu; do
    for d in "$@"; do cat "$d/$k"; done | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}' > "$out/$k"
  done
  for d in "$@"; do cat "$d/rss"; done | sort -n | tail -1 > "$out/rss"
  cp "$1/fct.txt" "$out/fct.txt"
}
quench_run() { timed "$2" "$Q" sim -q --ns3-config "$1" --out "$2/quench-out"; }
# The simulator binary itself, not `waf --run` (which first re-checks the whole build): the
# wall time is ns-3's simulation alone, as quench's is. ns3_run CONFIG OUT, through NS3_CACHE.
ns3_run() {
  local d=$NS3_HPCC_DIR/simulation
  local bin=$d/build/scratch/third
  if [ -z "${NS3_CACHE:-}" ]; then
    timed "$2" env LD_LIBRARY_PATH="$d/build" "$bin" "$1"
    return
  fi
  local key f
  key=$( { sha256sum "$bin" | cut -d' ' -f1
           grep -Ev '^(FCT_OUTPUT_FILE|PFC_OUTPUT_FILE|TRACE_OUTPUT_FILE|QLEN_MON_FILE) ' "$1"
           for f in TOPOLOGY_FILE FLOW_FILE TRACE_FILE; do
             cat "$W/$(awk -v k=$f '$1 == k {print $2}' "$1")"
           done; } | sha256sum | cut -c1-16)
  local c=$NS3_CACHE/$key
  if [ -s "$c/fct.txt" ]; then
    mkdir -p "$2"
    cp "$c/wall" "$c/cpu" "$c/rss" "$c/fct.txt" "$2/"
    echo "bench-sim.sh: ns-3 on $(basename "$1"): reused $c ($(cat "$c/when" 2>/dev/null))" >&2
    return
  fi
  timed "$2" env LD_LIBRARY_PATH="$d/build" "$bin" "$1"
  mkdir -p "$c"
  cp "$2/wall" "$2/cpu" "$2/rss" "$2/fct.txt" "$c/"
  echo "ran $(date -u '+%F %T') UTC on $(hostname), load $(cut -d' ' -f1-3 /proc/loadavg)" > "$c/when"
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
RUN_NS3=0
if [ -n "${NS3_HPCC_DIR:-}" ] && [ -z "${SKIP_NS3:-}" ]; then ns3_build; RUN_NS3=1; fi
printf '%-22s %9s %9s %8s %9s %9s %8s %7s %7s   %s\n' scenario "quench s" "ns-3 s" speedup "q cpu s" "n cpu s" "cpu x" "q MB" "ns3 MB" "FCT us (quench | ns-3 | quench vs ns-3)"
row() { # row NAME DIR
  local qs qc ns="-" nc="-" sp="-" cx="-" qm nm="-" nf="-" df="-"
  qs=$(cat "$2/q/wall"); qc=$(printf '%.2f' "$(cat "$2/q/cpu")"); qm=$(cat "$2/q/rss")
  if [ "$RUN_NS3" = 1 ]; then
    ns=$(printf '%.2f' "$(cat "$2/n/wall")"); nm=$(cat "$2/n/rss")
    nc=$(printf '%.2f' "$(cat "$2/n/cpu")")
    sp=$(printf '%.1fx' "$(echo "$(cat "$2/n/wall") / $qs" | bc -l)")
    cx=$(printf '%.1fx' "$(echo "$(cat "$2/n/cpu") / $(cat "$2/q/cpu")" | bc -l)")
  fi
  local cols
  cols=$(printf '%-22s %9.3f %9s %8s %9s %9s %8s %7s %7s' "$1" "$qs" "$ns" "$sp" "$qc" "$nc" "$cx" "$qm" "$nm")
  if [ "${3:-}" = fcts ]; then
    if [ "$RUN_NS3" = 1 ]; then nf=$(fcts "$2/n/fct.txt"); df=$(fct_diff "$2/q/fct.txt" "$2/n/fct.txt"); fi
    printf '%s   %s | %s | %s\n' "$cols" "$(fcts "$2/q/fct.txt")" "$nf" "$df"
  else
    printf '%s   %s flows\n' "$cols" "$(wc -l < "$2/q/fct.txt")"
  fi
}
for sc in "A 20000000" "B 200000000"; do
  set -- $sc
  printf '2\n0 2 3 100 %s 2\n1 2 3 100 %s 2\n' "$2" "$2" > "$W/mix/flow$1.txt"
  for who in q n; do config topo_incast "flow$1" "$W/$1/$who" > "$W/$1-$who.txt"; done
  quench_run "$W/$1-q.txt" "$W/$1/q"
  [ "$RUN_NS3" = 1 ] && ns3_run "$W/$1-n.txt" "$W/$1/n"
  row "$1: 2 x $(( $2 / 1000000 )) MB incast" "$W/$1" fcts
done
[ -n "${NS3_HPCC_DIR:-}" ] || exit 0
# C: the fat tree.
cp "$NS3_HPCC_DIR/simulation/mix/fat.txt" "$W/mix/fat.txt"
(cd "$NS3_HPCC_DIR/traffic_gen" && "$(py2)" -c "
import random, sys
random.seed(1)
sys.argv = ['traffic_gen.py', '-c', 'WebSearch_distribution.txt', '-n', '320', '-l', '0.3',
            '-b', '100G', '-t', '${C_SECONDS:-0.005}', '-o', '$W/mix/flow_fat.txt']
execfile('traffic_gen.py')")
# quench C_RUNS times (default 3; the median wall and CPU time), ns-3 once.
runs=()
for i in $(seq "${C_RUNS:-3}"); do
  config fat flow_fat "$W/C/q$i" > "$W/C-q$i.txt"
  quench_run "$W/C-q$i.txt" "$W/C/q$i"
  runs+=("$W/C/q$i")
done
median_of "$W/C/q" "${runs[@]}"
config fat flow_fat "$W/C/n" > "$W/C-n.txt"
[ "$RUN_NS3" = 1 ] && ns3_run "$W/C-n.txt" "$W/C/n"
row "C: fat tree, $(head -1 "$W/mix/flow_fat.txt" | tr -d ' ') flows" "$W/C"
# Slowdown per size bucket, as HPCC's analysis/fct_analysis.py: flows sorted by size, 20 buckets
# of 5 % of them, slowdown = max(1, fct / standalone fct), p50/p95/p99 at index int(n x p).
python3 - "$W/C/q/fct.txt" "$([ "$RUN_NS3" = 1 ] && echo "$W/C/n/fct.txt")" <<'PY'
import sys
def buckets(path):
    rows = []
    for line in open(path):
        c = line.split()
        if len(c) >= 8 and c[3] == "100" and int(c[5]) + int(c[6]) < 3000000000:
            rows.append((int(c[4]), max(1.0, int(c[6]) / int(c[7]))))
    rows.sort(key=lambda r: r[0])
    n, out = len(rows), []
    for i in range(0, 100, 5):
        part = rows[i * n // 100:(i + 5) * n // 100]
        s = sorted(r[1] for r in part)
        pct = lambda p: s[int(len(s) * p)]
        out.append((part[-1][0], pct(0.5), pct(0.95), pct(0.99)))
    return out
q = buckets(sys.argv[1])
n = buckets(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2] else None
print("   bucket max size | quench p50 p95 p99 | ns-3 p50 p95 p99 | p50 diff p99 diff")
close = [0, 0]
for i, b in enumerate(q):
    line = "   %3d%% %10d | %6.2f %6.2f %6.2f" % (5 * (i + 1), b[0], b[1], b[2], b[3])
    if n:
        m = n[i]
        d50, d99 = 100 * (b[1] - m[1]) / m[1], 100 * (b[3] - m[3]) / m[3]
        close[0] += abs(d50) <= 10
        close[1] += abs(d99) <= 10
        line += " | %6.2f %6.2f %6.2f | %+6.1f%% %+6.1f%%" % (m[1], m[2], m[3], d50, d99)
    print(line)
if n:
    print("   within 10 %%: p50 %d of 20 buckets, p99 %d of 20" % (close[0], close[1]))
PY
echo "bench-sim.sh: $(( $(date +%s) - T0 )) s in all"
