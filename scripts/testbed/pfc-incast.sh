#!/usr/bin/env bash
# PFC incast on real frames: N senders (no congestion control, each at RATE) into one receiver
# through quench switch with a 1 Gbit/s egress (--bottleneck to change it) and PFC on
# priority 3. With PFC the switch pauses the senders instead of dropping: the receiver must see
# every sequence number, but for frames a kernel counter saw dropped outside the switch's queues
# (reported by place under "kernel_drops").
#
#   scripts/testbed/pfc-incast.sh [flags] [SECONDS (30)] [SENDERS (8)] [OUT_DIR (out/pfc-incast)]
#                                 [RATE (250mbit)]
#
#   --bottleneck RATE  the switch's egress rate toward the receiver (default 1gbit)
#   --capture PORT     that switch port's frames (PAUSE frames included) into OUT_DIR/PORT.pcap
#   --sender-procs     a quench send per sender namespace and a quench recv, instead of one
#                      quench send for all with the receiver as its sink
#   --prefix P         the testbed's prefix (default qnp)
#   QUENCH=PATH        (environment) the quench binary (default: this tree's release build)
#
# Root (network namespaces). Prints the receiver's per-flow table, the switch's PFC counters, the
# kernel's drop counters along the path (where a lost frame died) and one JSON line:
# {"senders", "seconds", "sent", "frames", "lost", "queue_drops", "headroom_drops", "pauses_sent",
#  ..., "kernel_drops": {...}}.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/testbed/lib.sh
bottleneck=1gbit
capture_port=
sender_procs=
prefix=qnp
pos=()
while [ $# -gt 0 ]; do
  case $1 in
    --bottleneck|--capture|--prefix) [ $# -ge 2 ] || qn_bad pfc-incast.sh "$1 needs a value" ;;&
    --bottleneck) bottleneck=$2; shift ;;
    --capture) capture_port=$2; shift ;;
    --sender-procs) sender_procs=1 ;;
    --prefix) prefix=$2; shift ;;
    *) qn_arg pfc-incast.sh "$1" ;;
  esac
  shift
done
secs=${pos[0]:-30}
n=${pos[1]:-8}
rate=${pos[3]:-250mbit}
qn_setup pfc-incast.sh "${pos[2]:-out/pfc-incast}"

echo "== pfc-incast: testbed up ($n senders, prefix $prefix)"
scripts/testbed/testbed.sh up --senders "$n" --receivers 1 --prefix "$prefix" >/dev/null

# Static thresholds per (ingress port, priority 3): XOFF 60 KB, XON 57 KB, 600 KB headroom.
# Headroom covers what arrives between crossing XOFF and the sender stopping: here mostly the
# switch process being off its CPU (kernel threads take it for up to ~8 ms on a 2-core VM, and
# it reads its receive rings only afterwards), 400 KB at 400 Mb/s; 250 KB lost a few frames in
# 4 s once one quench send drove every sender at full rate. The egress queue holds every
# port's XOFF + headroom, so PFC, not the queue, bounds it.
cfg=$out/switch.toml
{
  echo "workers = 1"
  echo "queue_bytes = $(( (n + 1) * 670000 ))"
  echo "control_socket = \"/run/quench/$prefix.sock\""
  for ((i = 0; i < n; i++)); do
    printf '[[ports]]\nname = "s%d"\niface = "%s-sw-s%d"\ndriver = "af_packet"\n' "$i" "$prefix" "$i"
  done
  printf '[[ports]]\nname = "r0"\niface = "%s-sw-r0"\ndriver = "af_packet"\nrate = "%s"\n' "$prefix" "$bottleneck"
  # The receiver sends nothing (--no-cnp): without a static entry its frames would be flooded,
  # and flooded frames are not PFC-accounted.
  printf '[[static_macs]]\nmac = "02:71:6e:02:00:00"\nport = "r0"\n'
  printf '[pfc]\nlossless_priorities = [3]\nthreshold = "static"\nxoff_bytes = 60000\n'
  printf 'xon_bytes = 57000\nheadroom_bytes = 600000\nlink_rate = "1gbit"\n'
} > "$cfg"

# --capture PORT writes that switch port's frames (PAUSE frames included) to OUT_DIR/PORT.pcap.
capture=()
if [ -n "$capture_port" ]; then capture=(--capture "$capture_port=$out/$capture_port.pcap"); fi
ip netns exec "$prefix-sw" taskset -c "$sw_cpus" "$quench" switch --config "$cfg" \
  "${capture[@]}" --duration $((secs + 5))s > "$out/switch.log" 2>&1 &
swpid=$!
pids+=($swpid)
sleep 1
echo "== pfc-incast: $n senders at $rate each into $bottleneck for ${secs}s (no congestion control)"
if [ -n "$sender_procs" ]; then
  # One quench send per sender namespace (--sender-procs), and quench recv, which shares the
  # switch's CPU: a second busy-polling process there has been kept off it for 140 ms while the
  # switch ran, overflowing its receive ring (counted under kernel_drops).
  ip netns exec "$prefix-r0" taskset -c "$sw_cpus" "$quench" recv --iface eth0 --no-cnp \
    --duration $((secs + 3))s --out "$out/recv" > "$out/recv.log" 2>&1 &
  rpid=$!
  pids+=($rpid)
  sleep 0.5
  for ((i = 0; i < n; i++)); do
    ip netns exec "$prefix-s$i" taskset -c "$tx_cpus" "$quench" send --iface eth0 \
      --config configs/send.toml --cc none --rate "$rate" --src-ip "10.71.0.$((1 + i))" \
      --flow-base $((1 + 100 * i)) --duration "${secs}s" > "$out/send-$i.log" 2>&1 &
    pids+=($!)
  done
else
  # One quench send drives every sender namespace's eth0 and the receiver's (--sink) from one
  # poll loop (more hosts than CPUs: separate processes would stall one another for
  # milliseconds at a time), and leaves the switch a CPU of its own. The sink reads on for
  # 500 ms after the last frame is sent: what PFC held in the switch then arrives.
  ports=()
  for ((i = 0; i < n; i++)); do
    ports+=(--iface "$prefix-s$i/eth0" --src-ip "10.71.0.$((1 + i))")
  done
  taskset -c "$tx_cpus" "$quench" send "${ports[@]}" --config configs/send.toml --cc none \
    --rate "$rate" --flow-base 1 --flow-stride 100 --duration "${secs}s" \
    --sink "$prefix-r0/eth0" --sink-no-cnp --sink-out "$out/recv" --sink-linger 500ms \
    > "$out/send-all.log" 2>&1 &
  rpid=$!
  pids+=($rpid)
fi
"$quench" stats --json --control-socket "/run/quench/$prefix.sock" > /dev/null 2>&1 || true
qn_backlog_drops > "$out/softnet.before"
sleep $((secs + 1))
"$quench" stats --json --control-socket "/run/quench/$prefix.sock" > "$out/stats.json" 2>/dev/null || true
wait "$rpid" || true
if [ -z "$sender_procs" ]; then
  # The receiver's part of the report, as `quench recv` prints it.
  sed -n '/^== sink/,$p' "$out/send-all.log" | sed -e '1d' > "$out/recv.log"
  sed -i '/^== sink/,$d' "$out/send-all.log"
fi
qn_backlog_drops > "$out/softnet.after"
# Every veth end's drop counters, read before the testbed goes.
qn_save_links
grep -v '^{' "$out/recv.log" | head -n $((n + 3)) || true
python3 - "$out" "$n" "$secs" <<'PY'
import glob, json, sys
out, n, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
recv = [json.loads(l) for l in open(out + "/recv.log") if l.startswith("{")][-1]
try:
    st = json.load(open(out + "/stats.json"))
except Exception:
    # No snapshot from the switch: its counters are unknown (null), never zero.
    print("pfc-incast: the switch's control socket gave no stats (see switch.log)", file=sys.stderr)
    st = None

def switch_sum(key):
    return None if st is None else sum(p.get(key, 0) for p in st["ports"])
sent = 0
pfc_rx = 0
no_buffer = 0
unsent = 0
senders_tx = 0
# One JSON line per sender port (several in send-all.log when one quench send drove them all).
for path in sorted(glob.glob(out + "/send-*.log")):
    for s in (json.loads(l) for l in open(path) if l.startswith("{")):
        sent += s["frames"]
        pfc_rx += s.get("pfc_rx", 0)
        no_buffer += s.get("no_buffer", 0)
        senders_tx += s.get("tx_kernel_drops") or 0
        unsent += s.get("unsent", 0)
frames = sum(f["frames"] for f in recv["flows"])
# Loss outside the switch's queues, by place (besides frames a sender numbered but had no
# buffer for): frames the kernel took from a sender or the switch and dropped unsent (AF_XDP),
# the switch's and the receiver's receive rings, the per-CPU backlogs. The veths' drop counters
# come along as a clue only: they count transmit attempts a device refused, and an AF_PACKET
# sender (quench send, quench switch) sends the refused frame again.
veth = 0
for path in glob.glob(out + "/links-*.json"):
    for link in json.load(open(path)):
        if link.get("ifname") == "lo":
            continue
        st64 = link.get("stats64", {})
        veth += st64.get("rx", {}).get("dropped", 0) + st64.get("tx", {}).get("dropped", 0)
try:
    before = [int(x) for x in open(out + "/softnet.before")]
    after = [int(x) for x in open(out + "/softnet.after")]
    backlog = sum(a - b for a, b in zip(after, before))
except Exception:
    backlog = None
kernel = {
    "senders_tx": senders_tx,
    "switch_tx": switch_sum("tx_kernel_drops"),
    "switch_rx_rings": switch_sum("rx_kernel_drops"),
    "receiver_rx_ring": recv.get("rx_kernel_drops", 0),
    "veth_dropped": veth,
    "cpu_backlogs": backlog,
}
res = {
    "senders": n, "seconds": secs, "sent": sent - unsent, "frames": frames,
    "lost": sum(f["lost"] for f in recv["flows"]),
    "queue_drops": switch_sum("queue_drops"),
    "headroom_drops": switch_sum("pfc_headroom_drops"),
    "pauses_sent": switch_sum("pfc_pauses_sent"),
    "pfc_frames_at_senders": pfc_rx,
    "goodput_mbps": round(recv["aggregate_bps"] / 1e6, 1),
    "jain": None if recv["jain_index"] is None else round(recv["jain_index"], 4),
    "sender_no_buffer": no_buffer,
    "kernel_drops": kernel,
}
print("pfc-incast: %(frames)d of %(sent)d frames received, %(lost)d lost, %(queue_drops)s queue drops, "
      "%(headroom_drops)s headroom drops, %(pauses_sent)s PAUSE frames sent, %(goodput_mbps)s Mb/s" % res)
print("pfc-incast: kernel drops: %s" % ", ".join("%s %s" % kv for kv in kernel.items()))
print(json.dumps(res))
PY
