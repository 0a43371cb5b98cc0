#!/usr/bin/env bash
# Forwarding rate through `quench switch` (one worker, AF_XDP) against the Linux bridge and
# dpdk-testpmd io-forwarding (net_af_packet and net_af_xdp), on the same veth testbed in the same
# run, at 64 B and 1500 B frames; then egress shaping accuracy at 1 Gbit/s and 100 Mbit/s.
#
#   scripts/bench-forward.sh [--secs S]      (root; ~2.5 minutes)
#
# Traffic: `quench blast` (XDP live frames: the kernel replays one frame into the sender's veth,
# no skb per frame; pinned to the last core) in the sender namespace towards the receiver's MAC;
# the forwarder runs pinned to core 0. The table's first column is what the source offers with
# no forwarder (the ingress veth's receive count, the stack dropping the frames): 2.3-2.9 Mpps,
# well above every forwarder here, so the figures measure the forwarders. (The AF_XDP source,
# `--engine af-xdp`, offered 1.1-1.2 Mpps: an skb per frame plus the ingress veth's receive work on
# its own core; every forwarder then ran at the source's rate.) Moving the ingress veth's receive
# work onto core 0 with threaded NAPI was tried: the NAPI thread and a busy-polling forwarder then
# share one core, and quench fell to 0.36 Mpps against testpmd's 0.63. The rate is the receiver
# veth's rx_packets delta over the middle of each run. Ends with a table (Mpps, ratios of quench
# to the bridge and to each testpmd) and a last line of JSON.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=4
while [ $# -gt 0 ]; do
  case "$1" in
    --secs) secs=$2; shift 2 ;;
    *) echo "bench-forward.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ "$(id -u)" -ne 0 ]; then echo "bench-forward.sh: needs root" >&2; exit 1; fi

scripts/setup.sh >/dev/null
# dpdk-testpmd is the benchmark's peer only (not a test dependency): installed here.
if ! command -v dpdk-testpmd >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dpdk >/dev/null
fi
cargo build --release -p engine >/dev/null 2>&1 || cargo build --release -p engine
Q=target/release/quench
P=qb
R0=02:71:6e:02:00:00
out=$(mktemp -d)
cleanup() {
  for pid in $(jobs -p); do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  scripts/testbed.sh down --prefix $P >/dev/null
  rm -rf "$out"
}
trap cleanup EXIT
scripts/testbed.sh down --prefix $P >/dev/null
scripts/testbed.sh up --senders 1 --receivers 1 --prefix $P >/dev/null
ncores=$(nproc)
last=$((ncores - 1))

# window COUNTER SECS [NETNS DEV]: COUNTER of DEV in NETNS (default: the receiver's eth0) per
# second over SECS, counter and clock read in one process so that the window is exact.
window() {
  ip netns exec "${3:-$P-r0}" python3 -c "
import time
f = '/sys/class/net/${4:-eth0}/statistics/$1'
a, t0 = int(open(f).read()), time.monotonic()
time.sleep($2)
b, t1 = int(open(f).read()), time.monotonic()
print((b - a) / (t1 - t0))"
}

# measure LEN [NETNS DEV]: blasts for $secs s and prints the Mpps that DEV in NETNS (default:
# the receiver's eth0) received over the middle (secs - 2) s.
measure() {
  local len=$1 a b
  ip netns exec $P-s0 $Q blast --iface eth0 --dst $R0 --len "$len" --duration "$secs" \
    --core $last >"$out/blast.json" 2>"$out/blast.err" &
  local bp=$! pps
  sleep 1
  pps=$(window rx_packets $((secs - 2)) "${2:-}" "${3:-}")
  wait $bp || { cat "$out/blast.err" >&2; echo 0; return; }
  python3 -c "print(f'{$pps / 1e6:.3f}')"
}

switch_cfg() { # RATE
  cat >"$out/sw.toml" <<TOML
control_socket = "$out/ctl.sock"
[[ports]]
name = "s0"
iface = "$P-sw-s0"
[[ports]]
name = "r0"
iface = "$P-sw-r0"
$( [ -n "${1:-}" ] && echo "rate = \"$1\"" )
[[static_macs]]
mac = "$R0"
port = "r0"
TOML
}

declare -A res
# Frame lengths without FCS: 60 (64 B on the wire) and 1500.
for len in 60 1500; do
  # What the source offers: the ingress veth's receive count with no forwarder (the stack drops
  # the frames); a forwarder near this figure is limited by the source, not by itself.
  res[source_$len]=$(measure "$len" $P-sw $P-sw-s0)
  # quench switch, one worker on core 0.
  switch_cfg ""
  ip netns exec $P-sw $Q switch --config "$out/sw.toml" --workers 1 >"$out/sw.out" 2>"$out/sw.err" &
  sp=$!
  sleep 1.5
  res[quench_$len]=$(measure "$len")
  kill -TERM $sp; wait $sp || true
  # Linux bridge in the switch namespace.
  ip -n $P-sw link add br0 type bridge
  ip -n $P-sw link set $P-sw-s0 master br0
  ip -n $P-sw link set $P-sw-r0 master br0
  ip -n $P-sw link set br0 up
  res[bridge_$len]=$(measure "$len")
  ip -n $P-sw link del br0
  # dpdk-testpmd, io forwarding between two ports of one PMD, one forwarding core: core 0, as
  # quench's worker (the blast source spins on the last core; testpmd's forwarding lcore there
  # measured the two fighting over one CPU: 0.064 Mpps). Its main lcore, which only waits,
  # shares the source's core. net_af_xdp takes the same kernel transmit path as quench (an
  # AF_XDP socket in copy mode); net_af_packet a TPACKET ring.
  # testpmd exits when its stdin closes ("Press enter to exit"): keep it open with sleep.
  for pmd in af_packet af_xdp; do
    sleep $((secs + 5)) | ip netns exec $P-sw timeout -s INT $((secs + 6)) dpdk-testpmd \
      --no-huge -m 1024 --no-pci -l 0,$last --main-lcore $last \
      --vdev=net_${pmd}0,iface=$P-sw-s0 --vdev=net_${pmd}1,iface=$P-sw-r0 --file-prefix=qb \
      -- --forward-mode=io --nb-cores=1 --auto-start >"$out/pmd.out" 2>&1 &
    tp=$!
    sleep 3
    res[${pmd}_$len]=$(measure "$len")
    kill -INT $tp 2>/dev/null || true; wait $tp 2>/dev/null || true
  done
done

# Shaping: quench with r0 paced, 1500 B frames offered above the rate; receiver bit rate.
shape() { # RATE BPS
  switch_cfg "$1"
  ip netns exec $P-sw $Q switch --config "$out/sw.toml" --workers 1 >"$out/sw.out" 2>"$out/sw.err" &
  local sp=$!
  sleep 1.5
  ip netns exec $P-s0 $Q blast --iface eth0 --dst $R0 --len 1500 --duration "$secs" --core $last \
    >/dev/null 2>&1 &
  local bp=$! bps
  sleep 1.5
  bps=$(window rx_bytes 1)
  wait $bp || true
  kill -TERM $sp; wait $sp || true
  # rx_bytes counts frames without FCS, the octets quench paces.
  python3 -c "print(f'{$bps * 8 / $2:.5f}')"
}
shape_1g=$(shape 1gbit 1e9)
shape_100m=$(shape 100mbit 1e8)

python3 - "${res[source_60]}" "${res[quench_60]}" "${res[bridge_60]}" "${res[af_packet_60]}" \
  "${res[af_xdp_60]}" "${res[source_1500]}" "${res[quench_1500]}" "${res[bridge_1500]}" \
  "${res[af_packet_1500]}" "${res[af_xdp_1500]}" "$shape_1g" "$shape_100m" <<'PY'
import json, sys
v = list(map(float, sys.argv[1:]))
s1g, s100 = v[10], v[11]
r = lambda a, b: a / b if b > 0 else float("nan")
rows, out = {}, {"mpps": {}}
print()
print("| frame | source offers Mpps | quench Mpps | bridge Mpps | testpmd af_packet Mpps "
      "| testpmd af_xdp Mpps | quench/bridge | quench/testpmd af_packet | quench/testpmd af_xdp |")
print("|---|---|---|---|---|---|---|---|---|")
for i, frame in enumerate(["64", "1500"]):
    o, q, b, tp, tx = v[5 * i:5 * i + 5]
    print(f"| {frame} B | {o:.3f} | {q:.3f} | {b:.3f} | {tp:.3f} | {tx:.3f} "
          f"| {r(q,b):.2f} | {r(q,tp):.2f} | {r(q,tx):.2f} |")
    out["mpps"][frame] = {"source": o, "quench": q, "bridge": b,
                          "testpmd_af_packet": tp, "testpmd_af_xdp": tx}
    out[f"ratio_{frame}"] = {"bridge": r(q, b), "testpmd_af_packet": r(q, tp),
                             "testpmd_af_xdp": r(q, tx)}
print(f"shaping: 1gbit -> {s1g*100:.2f} % of rate, 100mbit -> {s100*100:.2f} % of rate")
out["shaping_fraction"] = {"1gbit": s1g, "100mbit": s100}
print(json.dumps(out))
PY
