#!/usr/bin/env bash
# Latency through quench switch on the veth testbed: one-way (receiver) and round trip (sender)
# for the same frames. Testbed up (1 sender, 1 receiver), quench switch between them (AF_PACKET),
# quench recv --reflect in the receiver's namespace, quench send --out in the sender's; prints
# both latency lines and writes the two report directories; tears the testbed down.
#
#   scripts/testbed/latency.sh [flags] [SECONDS (10)] [RATE (100mbit)] [OUT_DIR (out/latency)]  (root)
#
#   --prefix P    the testbed's prefix (default qnlat)
#   QUENCH=PATH   (environment) the quench binary (default: this tree's release build)
#
# Uses the release binary (built if missing). OUT_DIR/recv holds the receiver's report
# (latency.hgrm: one-way), OUT_DIR/rtt the sender's (rtt.hgrm); OUT_DIR/*.jsonl their --json
# output (progress lines, then the summaries).
set -euo pipefail
cd "$(dirname "$0")/../.."

. scripts/testbed/lib.sh   # qn_bad, qn_arg
prefix=qnlat
pos=()
while [ $# -gt 0 ]; do
  case $1 in
    --prefix) [ $# -ge 2 ] || qn_bad latency.sh "$1 needs a value"; prefix=$2; shift ;;
    *) qn_arg latency.sh "$1" ;;
  esac
  shift
done
secs=${pos[0]:-10}
rate=${pos[1]:-100mbit}
out=${pos[2]:-out/latency}
if [ "$(id -u)" -ne 0 ]; then
  echo "latency.sh: needs root (network namespaces); skipping" >&2
  exit 0
fi
quench=${QUENCH:-$PWD/target/release/quench}
[ -x "$quench" ] || cargo build --release -p quench
mkdir -p "$out"
out=$(realpath "$out")
rm -rf "$out/recv" "$out/rtt"

scripts/testbed/testbed.sh up --senders 1 --receivers 1 --prefix "$prefix" >/dev/null
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  scripts/testbed/testbed.sh down --prefix "$prefix" >/dev/null
}
trap cleanup EXIT

cat > "$out/switch.toml" <<EOF
control_socket = "$out/ctl.sock"
[[ports]]
name = "s0"
iface = "$prefix-sw-s0"
driver = "af_packet"
[[ports]]
name = "r0"
iface = "$prefix-sw-r0"
driver = "af_packet"
EOF
ip netns exec "$prefix-sw" "$quench" switch --config "$out/switch.toml" >"$out/switch.log" 2>&1 &
pids+=($!)
sleep 1
ip netns exec "$prefix-r0" "$quench" recv --iface eth0 --no-cnp --reflect --json \
  --duration "$((secs + 3))s" --out "$out/recv" >"$out/recv.jsonl" 2>"$out/recv.log" &
recv=$!
sleep 1
"$quench" send --iface "$prefix-s0/eth0" --cc none --rate "$rate" --duration "${secs}s" \
  --out "$out/rtt" --json >"$out/send.jsonl" 2>"$out/send.log"
wait "$recv"
echo "one-way (receiver, $(date -u +%F), $(uname -n)):"
grep -E "^total|receive timestamps|refused" "$out/recv.log"
echo "round trip (sender):"
grep -E "^total|receive timestamps" "$out/send.log"
