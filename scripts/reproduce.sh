#!/usr/bin/env bash
# Reproduces published results with `quench sim` and prints the paper's value beside ours.
#   DCQCN fixed point (reference/dcqcn.md): N = 2, 4, 8, 10 at 40 Gb/s, paper parameters.
#   DCQCN stability: N = 10 with 4 us vs 85 us feedback delay (queue coefficient of variation).
#   QCN (seed 001): one 10 Gb/s source, capacity 10 -> 0.5 -> 10 Gb/s, RTT 50..500 us.
#   TCD (seed 004): a PFC congestion tree; victim flow UE, congested flows CE.
#
#   scripts/reproduce.sh [--quick]
#
#   --quick   30 ms instead of 100 ms per DCQCN run
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { sed -n '2,/^set -/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
STOP=100; FROM=30
case ${1:-} in
  '') ;;
  --quick) STOP=30; FROM=10 ;;
  -h|--help) usage; exit 0 ;;
  *) echo "reproduce.sh: unknown flag $1 (--help lists the flags)" >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "reproduce.sh: one flag at most (--help)" >&2; exit 2; }
cargo build --release -p quench --bin quench >/dev/null 2>&1 || cargo build --release -p quench --bin quench
Q=target/release/quench
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT

star() { # star N RATE DELAY -> topology with hosts 0..N-1 on switch N
  local n=$1 rate=$2 delay=$3
  { echo "$((n+1)) 1 $n"; echo "$n"; for ((h=0; h<n; h++)); do echo "$h $n $rate $delay 0"; done; } 
}
incast() { # incast N -> N long flows from hosts 0..N-1 to host N
  local n=$1
  { echo "$n"; for ((h=0; h<n; h++)); do echo "$h $n 3 100 100000000000 0"; done; }
}
summary() { python3 - "$@" <<'PY'
import json, sys
d, n, what = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = json.load(open(d + "/summary.json"))
port = [p for p in s["ports"] if p["peer"] == n][0]
rates = [f["window_rate_bps"] / 1e9 for f in s["flows"]]
if what == "fp":
    print("jain %.4f  per-flow %.2f..%.2f Gb/s (C/N payload %.2f)  queue mean %.1f KB  p99 %.1f KB"
          % (s["jain"], min(rates), max(rates), 40 * 1000 / 1048 / n,
             port["queue_mean_bytes"] / 1e3, port["queue_p99_bytes"] / 1e3))
else:
    print("queue mean %.1f KB  CV %.2f  total %.1f Gb/s  jain %.3f"
          % (port["queue_mean_bytes"] / 1e3, port["queue_cv"], sum(rates), s["jain"]))
PY
}
printf 'stop_ms = %s\nstats_from_ms = %s\nsample_us = 10.0\n' "$STOP" "$FROM" > "$W/run.toml"

echo "== DCQCN fixed point, 40 Gb/s, paper parameters (preset dcqcn-paper, RED 5/200 KB, 1 %)"
echo "   measured over [$FROM, $STOP] ms; paper: per-flow C/N, Jain >= 0.99, queue near q*"
for pair in "2 20" "4 42" "8 94" "10 123"; do
  set -- $pair; n=$1; qstar=$2
  star $((n+1)) 40Gbps 1us > "$W/t$n"; incast $n > "$W/f$n"
  $Q sim -q --topology "$W/t$n" --flows "$W/f$n" --cc dcqcn --preset dcqcn-paper \
     --overrides "$W/run.toml" --out "$W/fp$n"
  printf 'N=%-3s paper q* %4s KB | ours: %s\n' "$n" "$qstar" "$(summary "$W/fp$n" "$n" fp)"
done

echo "== DCQCN stability, N = 10 (paper: stable at 4 us feedback delay, oscillates at 85 us)"
echo "   oscillation metric: coefficient of variation of the sampled bottleneck queue"
for pair in "4us 1us" "85us 21250ns"; do
  set -- $pair
  star 11 40Gbps "$2" > "$W/ts"; incast 10 > "$W/fs"
  $Q sim -q --topology "$W/ts" --flows "$W/fs" --cc dcqcn --preset dcqcn-paper \
     --overrides "$W/run.toml" --out "$W/st$1"
  printf 'feedback %-5s | ours: %s\n' "$1" "$(summary "$W/st$1" 10 st)"
done

echo "== QCN (seed 001): 10 Gb/s source, bottleneck 10 -> 0.5 (at 20 ms) -> 10 Gb/s (at 60 ms), IEEE defaults, 300 KB buffer, PFC off"
echo "   paper: queue near Qeq 26 KB; the source follows within a few ms; no overflow"
echo "   loop = CP -> RP -> CP propagation; the excess 9.5 Gb/s runs for at least one loop after the step,"
echo "   so no-overflow needs a buffer above 9.5 Gb/s x loop + Qeq"
echo "   RTT    | loop excess | down: <=0.55 Gb/s after  min rate  | queue 30-60 ms mean | max     drops CNMs | up: >=9 Gb/s after"
for rtt in 50 100 250 500; do
  star 2 10Gbps "$(python3 -c "print($rtt/4)")us" > "$W/tq"; echo -e "1\n0 1 3 100 100000000000 0" > "$W/fq"
  cat > "$W/q.toml" <<'T'
stop_ms = 300.0
sample_us = 20.0
[host]
mtu = 1500
[switch]
queue_limit_bytes = 300000
[[link_change]]
at_ms = 20.0
from = 2
to = 1
rate = "0.5gbit"
[[link_change]]
at_ms = 60.0
from = 2
to = 1
rate = "10gbit"
T
  $Q sim -q --topology "$W/tq" --flows "$W/fq" --cc qcn --preset ieee-8021qau --overrides "$W/q.toml" --out "$W/qcn$rtt"
  python3 - "$W/qcn$rtt" "$rtt" <<'PY'
import csv, json, sys
d, rtt = sys.argv[1], float(sys.argv[2])
s = json.load(open(d + "/summary.json"))
rates = [(int(r["time_ns"]) / 1e6, int(r["rate_bps"]) / 1e9) for r in csv.DictReader(open(d + "/flows.csv"))]
queue = [(int(r["time_ns"]) / 1e6, int(r["bytes"])) for r in csv.DictReader(open(d + "/queues.csv"))
         if r["node"] == "2" and r["port"] == "1"]
def first(after, pred):
    t = next((t for t, r in rates if t >= after and pred(r)), None)
    return "never" if t is None else "%.2f ms" % (t - after)
settled = [b for t, b in queue if 30 <= t < 60]
q = [p for p in s["ports"] if p["peer"] == 1][0]
print("   %3d us | %6.0f KB   | %-19s %6.3f Gb/s | %7.1f KB          | %5.1f KB %5d %4d | %s"
      % (rtt, 9.5e9 / 8 * rtt / 2 / 1e6 / 1e3, first(20, lambda r: r <= 0.55),
         min(r for t, r in rates if 20 <= t < 60), sum(settled) / len(settled) / 1e3,
         q["queue_max_bytes"] / 1e3, s["totals"]["drops"], s["totals"]["cnms"], first(60, lambda r: r >= 9)))
PY
done

echo "== TCD congestion tree (seed 004): hot flows 0->2, 1->2; victim 6->3 crosses the paused 4->5"
cat > "$W/tt" <<'T'
7 2 6
4 5
0 4 40Gbps 1us 0
6 4 40Gbps 1us 0
4 5 40Gbps 1us 0
1 5 40Gbps 1us 0
2 5 40Gbps 1us 0
3 5 40Gbps 1us 0
T
echo -e "3\n0 2 3 100 100000000000 0\n1 2 3 100 100000000000 0\n6 3 3 100 100000000000 0" > "$W/ft"
printf 'stop_ms = 10.0\n[pfc]\nthreshold = "static"\nxoff_bytes = 100000\nxon_bytes = 97000\n[tcd]\n' > "$W/t.toml"
$Q sim -q --topology "$W/tt" --flows "$W/ft" --cc none --overrides "$W/t.toml" --out "$W/tcd"
python3 - "$W/tcd" <<'PY'
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
print("paper: victim flows UE, congested flows CE | ours: pauses %d, drops %d" % (s["totals"]["pauses"], s["totals"]["drops"]))
for f, name in zip(s["flows"], ["hot 0->2", "hot 1->2", "victim 6->3"]):
    print("  %-12s CE %7d  UE %7d" % (name, f["ce_received"], f["ue_received"]))
PY
