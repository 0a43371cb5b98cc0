#!/usr/bin/env bash
# The README's first command: installs what is needed, builds quench (release), and runs the
# closed loop on real frames: a veth testbed in network namespaces (2 senders, quench switch with
# a 1 Gbit/s bottleneck egress and PFC as the lossless backstop, 1 receiver), QCN then DCQCN for
# a while each; prints a summary
# table, writes the report directory with the plots, and tears the testbed down.
#
#   scripts/demo.sh [--seconds N] [OUT_DIR (out/demo)]
#
#   --seconds N   seconds per closed-loop run (default 10)
#
# Without root (network namespaces need it) it says so and runs what needs no privileges: every
# frame kind quench emits, written to a pcap file and decoded by quench and by tshark.
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { sed -n '2,/^set -/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
bad() { echo "demo.sh: $*" >&2; exit 2; }
secs=10
pos=()
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) [ $# -ge 2 ] || bad "$1 needs a value"; secs=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) bad "unknown flag $1 (--help lists the flags)" ;;
    *) pos+=("$1") ;;
  esac
  shift
done
out=${pos[0]:-out/demo}

echo "== demo.sh: installing system packages (scripts/setup.sh)"
scripts/setup.sh
echo "== demo.sh: building quench (cargo build --release)"
cargo build --release -p quench --bin quench
quench=$PWD/target/release/quench
mkdir -p "$out"

echo "== demo.sh: every frame kind quench emits -> $out/frames.pcap, decoded by quench and tshark"
"$quench" frames --out "$out/frames.pcap"
"$quench" frames --decode "$out/frames.pcap" --link-rate 1gbit
tshark -X lua_script:tools/wireshark/quench.lua -r "$out/frames.pcap" 2>/dev/null || true

if [ "$(id -u)" -ne 0 ]; then
  echo "demo.sh: the closed loop needs root (network namespaces, veth pairs); run it as root" >&2
  exit 0
fi

echo "== demo.sh: closed loop, QCN then DCQCN, ${secs} s each (scripts/testbed/closed-loop.sh)"
QUENCH=$quench scripts/testbed/closed-loop.sh --pfc "$secs" "$out" | grep -E '^(==|--)' || true

echo "== demo.sh: summary (bottleneck 1 Gbit/s; details in $out/*.log, plots in $out/qcn and $out/dcqcn)"
python3 scripts/analysis/loop-summary.py "$out" qcn dcqcn
