#!/usr/bin/env bash
# Wall time, peak memory and FCTs of `quench sim` beside the HPCC ns-3 simulator on the same files:
#   A: 2 x 20 MB 2:1 incast at 100 Gb/s;  B: 2 x 200 MB 2:1 incast at 100 Gb/s;
#   C: HPCC's fat tree (mix/fat.txt: 320 hosts, 56 switches, 100G and 400G links) with WebSearch
#      flows from HPCC's traffic_gen.py at 30 % load (--c-seconds of arrivals, default 0.005 s,
#      Python's random seeded with 1), FCT slowdown per flow-size bucket as HPCC's
#      analysis/fct_analysis.py bins it (20 buckets of 5 % of the flows by size; p50/p95/p99).
#      quench runs --c-runs times (default 3) and its median wall and CPU time are shown.
# Times: wall seconds and CPU seconds (user + system; the steadier figure on a loaded machine).
# Both simulators read one config.txt, the one run.py writes for `--cc CC --bw 100` (default
# dcqcn: DCQCN, RED per link speed, ACK per packet, PFC, 32 MB buffer): quench through
# `--ns3-config`.
#
#   scripts/bench/bench-sim.sh [flags]
#
#   --ns3-dir DIR     a checkout of HPCC's ns-3 to run beside quench (below; default none)
#   --skip-ns3        with --ns3-dir: quench alone on all three (C needs the checkout's files)
#   --ns3-cache DIR   keep and reuse ns-3's runs under DIR (below)
#   --fat-seeds K     flow files (and ns-3 and quench seeds) for C (default 1; below)
#   --c-seconds S     seconds of arrivals in C's flow files (default 0.005)
#   --c-runs N        quench's runs of C (default 3)
#   --cc CC           run.py's --cc for both simulators: dcqcn (default), hp, dctcp or timely
#   QUENCH=PATH       (environment) another build's quench (default: this tree's release build)
#
# ns-3 runs only when --ns3-dir points at a checkout of alibaba-edu/High-Precision-Congestion-
# Control (its code is never part of this repository); the script builds it there on first use
# (Python 2.7 + waf, reference/dcqcn.md). Without it, only quench's A and B are run; C needs the
# checkout's fat.txt and traffic_gen.py. --skip-ns3 runs quench alone on all three.
# --ns3-cache DIR keeps each ns-3 run's FCT file, wall and CPU time and peak memory under DIR,
# keyed by what decides them (ns-3's binary, the config without its output paths, the topology,
# flow and trace files); a later run on the same inputs reuses them and says so. The fat tree's
# ns-3 run takes ~6 min of CPU, so a rerun that changes only quench takes ~2 min instead of ~9.
# --fat-seeds K (default 1) adds K - 1 more flow files for C (traffic_gen.py seeded with 2..K, same
# load and duration), a second ns-3 random run (NS_GLOBAL_VALUE=RngRun=2, which reseeds its RED
# coin) and a second quench run (`--seed 2`, which reseeds quench's) on every file, then prints
# the buckets pooled over the K files: ns-3 run 2 against ns-3 run 1 and quench seed 2 against
# seed 1 (how far each simulator is from itself), quench against each ns-3 run, and last both
# runs of each pooled, quench's two against ns-3's two: the same number of runs on each side,
# the comparison the done-when figure is read from. A bucket of one file holds 160 flows, so its
# p99 is the 2nd-largest slowdown; pooled over K files it is the ~1.6K-th, over both runs the
# ~3.2K-th. That is 2K - 1 more ns-3 runs (cached in --ns3-cache like the others).
# Stdout ends with one JSON line: every row's figures (`rows`: wall and CPU seconds, peak MB and
# FCTs of each simulator) and, with ns-3, each bucket comparison's count of buckets within 10 %
# (`buckets`).
set -euo pipefail
cd "$(dirname "$0")/../.."
usage() { sed -n '2,/^set -/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
bad() { echo "bench-sim.sh: $*" >&2; exit 2; }
ns3_dir=
skip_ns3=
ns3_cache=
K=1
cc=dcqcn
c_seconds=0.005
c_runs=3
while [ $# -gt 0 ]; do
  case $1 in
    --ns3-dir|--ns3-cache|--fat-seeds|--c-seconds|--c-runs|--cc) [ $# -ge 2 ] || bad "$1 needs a value" ;;&
    --ns3-dir) ns3_dir=$2; shift ;;
    --skip-ns3) skip_ns3=1 ;;
    --ns3-cache) ns3_cache=$2; shift ;;
    --fat-seeds) K=$2; shift ;;
    --c-seconds) c_seconds=$2; shift ;;
    --c-runs) c_runs=$2; shift ;;
    --cc) cc=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    *) bad "unknown argument $1 (--help lists the flags)" ;;
  esac
  shift
done
[[ "$K" =~ ^[1-9][0-9]*$ ]] || bad "--fat-seeds must be a positive integer, not '$K'"
# What run.py writes for each --cc at --bw 100 (Python 2's integer division): CC_MODE, EWMA_GAIN,
# RATE_AI, RATE_HAI, DCTCP_RATE_AI, HAS_WIN = VAR_WIN, FAST_REACT, INT_MULTI, ACK_HIGH_PRIO and
# the 100G K_min / K_max in KB (the 400G ones are 4x) and P_max.
g=0.00390625 dctcp_ai=1000 win=0 fast_react=0 int_multi=1 ack_prio=1 kmin=400 kmax=1600 pmax=0.20
case $cc in
  dcqcn) mode=1 ai=20 hai=200 ;;
  hp) mode=3 ai=40 hai=40 win=1 fast_react=1 int_multi=4 ack_prio=0 ;;
  dctcp) mode=8 g=0.0625 ai=10 hai=10 dctcp_ai=615 win=1 ack_prio=0 kmin=300 kmax=300 pmax=1.00 ;;
  timely) mode=7 ai=100 hai=500 ;;
  *) bad "--cc must be dcqcn, hp, dctcp or timely, not '$cc'" ;;
esac
cargo build --release -p quench --bin quench >/dev/null 2>&1 || cargo build --release -p quench --bin quench
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
  local d=$ns3_dir/simulation
  if [ ! -e "$d/build/scratch/third" ] && ! ls "$d"/build/scratch/third* >/dev/null 2>&1; then
    local py; py=$(py2)
    echo "bench-sim.sh: building ns-3 in $d (once; ~15 min on 2 cores)" >&2
    (cd "$d" && CC=gcc CXX=g++ "$py" ./waf configure --disable-python --disable-tests \
       --disable-examples --build-profile=optimized >/dev/null && "$py" ./waf build >/dev/null)
  fi
}
# config TOPO FLOWS OUT: run.py's config.txt for --cc $cc --bw 100 (its template, with the values
# run.py derives for that CC at 100 Gb/s, below), inputs and outputs under $W.
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
CC_MODE $mode
ALPHA_RESUME_INTERVAL 1
RATE_DECREASE_INTERVAL 4
CLAMP_TARGET_RATE 0
RP_TIMER 300
EWMA_GAIN $g
FAST_RECOVERY_TIMES 1
RATE_AI ${ai}Mb/s
RATE_HAI ${hai}Mb/s
MIN_RATE 1000Mb/s
DCTCP_RATE_AI ${dctcp_ai}Mb/s
ERROR_RATE_PER_LINK 0.0000
L2_CHUNK_SIZE 4000
L2_ACK_INTERVAL 1
L2_BACK_TO_ZERO 0
HAS_WIN $win
GLOBAL_T 1
VAR_WIN $win
FAST_REACT $fast_react
U_TARGET 0.95
MI_THRESH 0
INT_MULTI $int_multi
MULTI_RATE 0
SAMPLE_FEEDBACK 0
PINT_LOG_BASE 1.01
PINT_PROB 1.0
RATE_BOUND 1
ACK_HIGH_PRIO $ack_prio
LINK_DOWN 0 0 0
ENABLE_TRACE 0
KMAX_MAP 2 100000000000 $kmax 400000000000 $((4 * kmax))
KMIN_MAP 2 100000000000 $kmin 400000000000 $((4 * kmin))
PMAX_MAP 2 100000000000 $pmax 400000000000 $pmax
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
# quench_run CONFIG OUT [SEED]: SEED (default 1, quench's own default) goes to --seed.
quench_run() { timed "$2" "$Q" sim -q --ns3-config "$1" --out "$2/quench-out" --seed "${3:-1}"; }
# The simulator binary itself, not `waf --run` (which first re-checks the whole build): the
# wall time is ns-3's simulation alone, as quench's is. Through --ns3-cache.
# ns3_run CONFIG OUT [RNGRUN]: RNGRUN (default 1, ns-3's own default) goes to ns-3's RngRun.
ns3_run() {
  local d=$ns3_dir/simulation
  local bin=$d/build/scratch/third rng=${3:-1}
  if [ -z "$ns3_cache" ]; then
    timed "$2" env NS_GLOBAL_VALUE="RngRun=$rng" LD_LIBRARY_PATH="$d/build" "$bin" "$1"
    return
  fi
  local key f
  key=$( { sha256sum "$bin" | cut -d' ' -f1
           grep -Ev '^(FCT_OUTPUT_FILE|PFC_OUTPUT_FILE|TRACE_OUTPUT_FILE|QLEN_MON_FILE) ' "$1"
           for f in TOPOLOGY_FILE FLOW_FILE TRACE_FILE; do
             cat "$W/$(awk -v k=$f '$1 == k {print $2}' "$1")"
           done
           [ "$rng" = 1 ] || echo "RngRun $rng"; } | sha256sum | cut -c1-16)
  local c=$ns3_cache/$key
  if [ -s "$c/fct.txt" ]; then
    mkdir -p "$2"
    cp "$c/wall" "$c/cpu" "$c/rss" "$c/fct.txt" "$2/"
    echo "bench-sim.sh: ns-3 on $(basename "$1"): reused $c ($(cat "$c/when" 2>/dev/null))" >&2
    return
  fi
  timed "$2" env NS_GLOBAL_VALUE="RngRun=$rng" LD_LIBRARY_PATH="$d/build" "$bin" "$1"
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
if [ -n "$ns3_dir" ] && [ -z "$skip_ns3" ]; then ns3_build; RUN_NS3=1; fi
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
  local qf=-
  if [ "${3:-}" = fcts ]; then
    if [ "$RUN_NS3" = 1 ]; then nf=$(fcts "$2/n/fct.txt"); df=$(fct_diff "$2/q/fct.txt" "$2/n/fct.txt"); fi
    qf=$(fcts "$2/q/fct.txt")
    printf '%s   %s | %s | %s\n' "$cols" "$qf" "$nf" "$df"
  else
    printf '%s   %s flows\n' "$cols" "$(wc -l < "$2/q/fct.txt")"
  fi
  # The row for the JSON line: name, quench wall / CPU / MB, ns-3 wall / CPU / MB, FCTs (us).
  local nw=-
  [ "$RUN_NS3" = 1 ] && nw=$(cat "$2/n/wall")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$qs" "$(cat "$2/q/cpu")" "$qm" "$nw" \
    "$([ "$RUN_NS3" = 1 ] && cat "$2/n/cpu" || echo -)" "$nm" "$qf" "$nf" >>"$W/rows.tsv"
}
# json_line: the last line of stdout, every row and bucket count as JSON.
json_line() {
  python3 - "$W/rows.tsv" "$W/buckets.json" <<'PY'
import json, os, sys
num = lambda x: None if x == "-" else float(x)
fcts = lambda x: None if x == "-" else [float(v) for v in x.split()]
rows = []
for line in open(sys.argv[1]):
    c = line.rstrip("\n").split("\t")
    rows.append({"scenario": c[0], "quench_wall_s": num(c[1]), "quench_cpu_s": num(c[2]),
                 "quench_mb": num(c[3]), "ns3_wall_s": num(c[4]), "ns3_cpu_s": num(c[5]),
                 "ns3_mb": num(c[6]), "quench_fct_us": fcts(c[7]), "ns3_fct_us": fcts(c[8])})
out = {"rows": rows}
if os.path.exists(sys.argv[2]):
    out["buckets"] = json.load(open(sys.argv[2]))
print(json.dumps(out))
PY
}
for sc in "A 20000000" "B 200000000"; do
  set -- $sc
  printf '2\n0 2 3 100 %s 2\n1 2 3 100 %s 2\n' "$2" "$2" > "$W/mix/flow$1.txt"
  for who in q n; do config topo_incast "flow$1" "$W/$1/$who" > "$W/$1-$who.txt"; done
  quench_run "$W/$1-q.txt" "$W/$1/q"
  [ "$RUN_NS3" = 1 ] && ns3_run "$W/$1-n.txt" "$W/$1/n"
  row "$1: 2 x $(( $2 / 1000000 )) MB incast" "$W/$1" fcts
done
[ -n "$ns3_dir" ] || { json_line; exit 0; }
# C: the fat tree, on flow file 1 (random.seed(1)) and, with --fat-seeds K, files 2..K.
cp "$ns3_dir/simulation/mix/fat.txt" "$W/mix/fat.txt"
flows() { if [ "$1" = 1 ]; then echo flow_fat; else echo "flow_fat$1"; fi; }
for s in $(seq "$K"); do
  (cd "$ns3_dir/traffic_gen" && "$(py2)" -c "
import random, sys
random.seed($s)
sys.argv = ['traffic_gen.py', '-c', 'WebSearch_distribution.txt', '-n', '320', '-l', '0.3',
            '-b', '100G', '-t', '$c_seconds', '-o', '$W/mix/$(flows "$s").txt']
execfile('traffic_gen.py')")
done
# quench --c-runs times (default 3; the median wall and CPU time), ns-3 once.
runs=()
for i in $(seq "$c_runs"); do
  config fat flow_fat "$W/C/q$i" > "$W/C-q$i.txt"
  quench_run "$W/C-q$i.txt" "$W/C/q$i"
  runs+=("$W/C/q$i")
done
median_of "$W/C/q" "${runs[@]}"
config fat flow_fat "$W/C/n" > "$W/C-n.txt"
[ "$RUN_NS3" = 1 ] && ns3_run "$W/C-n.txt" "$W/C/n"
row "C: fat tree, $(head -1 "$W/mix/flow_fat.txt" | tr -d ' ') flows" "$W/C"
# The other files: quench once, ns-3 with RngRun 1 and 2 (file 1's run 2 too), FCTs only: their
# config has QLEN_MON_END = QLEN_MON_START. ns-3's monitor_buffer (third.cc) walks every switch
# port every 100 ns of the window (run.py's: one simulated second, long after the last flow), a
# cost that does not depend on the flows; it only reads the queues, so the FCTs are the same.
fct_config() { config "$@" | sed 's/^QLEN_MON_END .*/QLEN_MON_END 2000000000/'; }
qf=$W/C/q/fct.txt n1=$W/C/n/fct.txt n2= q2=
for s in $(seq "$K"); do
  [ "$K" = 1 ] && break
  o=$W/C/s$s
  if [ "$s" != 1 ]; then
    fct_config fat "$(flows "$s")" "$o/q" > "$o-q.txt"
    quench_run "$o-q.txt" "$o/q"
    qf+=,$o/q/fct.txt
  fi
  fct_config fat "$(flows "$s")" "$o/q2" > "$o-q2.txt"
  quench_run "$o-q2.txt" "$o/q2" 2
  q2+=${q2:+,}$o/q2/fct.txt
  [ "$RUN_NS3" = 1 ] || continue
  if [ "$s" != 1 ]; then
    fct_config fat "$(flows "$s")" "$o/n" > "$o-n.txt"
    ns3_run "$o-n.txt" "$o/n" 1
    n1+=,$o/n/fct.txt
  fi
  fct_config fat "$(flows "$s")" "$o/n2" > "$o-n2.txt"
  ns3_run "$o-n2.txt" "$o/n2" 2
  n2+=${n2:+,}$o/n2/fct.txt
done
[ "$RUN_NS3" = 1 ] || n1=
# Slowdown per size bucket, as HPCC's analysis/fct_analysis.py: flows sorted by size, 20 buckets
# of 5 % of them, slowdown = max(1, fct / standalone fct), p50/p95/p99 at index int(n x p).
# Pooled over files: each file binned on its own (its flows' ranks by size, as HPCC bins one
# run), a bucket's slowdowns from every file together; the size shown is the bucket's largest.
# The files come from one size distribution, so bucket i of each covers the same sizes but for
# the sampling of 3,200 flows (the 5 % bucket ends at 3,050 octets in file 1).
python3 - "$qf" "$n1" "$n2" "$q2" "$W/buckets.json" <<'PY'
import json
import sys
def rows(path):
    rows = []
    for line in open(path):
        c = line.split()
        if len(c) >= 8 and c[3] == "100" and int(c[5]) + int(c[6]) < 3000000000:
            rows.append((int(c[4]), max(1.0, int(c[6]) / int(c[7]))))
    rows.sort(key=lambda r: r[0])
    return rows
def buckets(paths):
    files = [rows(p) for p in paths.split(",")]
    out = []
    for i in range(0, 100, 5):
        part = [r for f in files for r in f[i * len(f) // 100:(i + 5) * len(f) // 100]]
        s = sorted(r[1] for r in part)
        pct = lambda p: s[int(len(s) * p)]
        out.append((max(r[0] for r in part), pct(0.5), pct(0.95), pct(0.99)))
    return out
within = {}
def table(a, b, names):
    head = "   bucket max size | %s p50 p95 p99" % names[0]
    print(head + (" | %s p50 p95 p99 | p50 diff p99 diff" % names[1] if b else ""))
    close = [0, 0]
    for i, x in enumerate(a):
        line = "   %3d%% %10d | %6.2f %6.2f %6.2f" % (5 * (i + 1), x[0], x[1], x[2], x[3])
        if b:
            m = b[i]
            d50, d99 = 100 * (x[1] - m[1]) / m[1], 100 * (x[3] - m[3]) / m[3]
            close[0] += abs(d50) <= 10
            close[1] += abs(d99) <= 10
            line += " | %6.2f %6.2f %6.2f | %+6.1f%% %+6.1f%%" % (m[1], m[2], m[3], d50, d99)
        print(line)
    if b:
        print("   within 10 %%: p50 %d of 20 buckets, p99 %d of 20" % (close[0], close[1]))
        within["%s against %s%s" % (names[0], names[1], pooled)] = {"p50": close[0], "p99": close[1]}
qf, n1, n2, q2 = sys.argv[1:5]
k = len(qf.split(","))
pooled = ""
table(buckets(qf.split(",")[0]), n1 and buckets(n1.split(",")[0]), ("quench", "ns-3"))
if k > 1:
    print("C pooled over %d flow files (seeds 1-%d):" % (k, k))
    pooled = ", %d flow files pooled" % k
    print(" quench --seed 2 against quench --seed 1:")
    table(buckets(q2), buckets(qf), ("quench seed 2", "quench seed 1"))
    if n1:
        print(" ns-3 RngRun 2 against ns-3 RngRun 1:")
        table(buckets(n2), buckets(n1), ("ns-3 run 2", "ns-3 run 1"))
        print(" quench against ns-3 RngRun 1:")
        table(buckets(qf), buckets(n1), ("quench", "ns-3 run 1"))
        print(" quench against ns-3 RngRun 2:")
        table(buckets(qf), buckets(n2), ("quench", "ns-3 run 2"))
        print(" both runs of each pooled, quench seeds 1 and 2 against ns-3 RngRun 1 and 2:")
        pooled = ", %d flow files and both runs pooled" % k
        table(buckets(qf + "," + q2), buckets(n1 + "," + n2), ("quench", "ns-3"))
    else:
        table(buckets(qf), None, ("quench", None))
json.dump(within, open(sys.argv[5], "w"))
PY
echo "bench-sim.sh: $(( $(date +%s) - T0 )) s in all"
json_line
