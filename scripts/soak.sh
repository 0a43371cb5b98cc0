#!/usr/bin/env bash
# Soak (issue 18, item 6): the QCN loop and a PFC incast through one `quench switch` for MINUTES,
# with a link flap every 30 s and a stats client polling the control socket 100 times a second;
# then one JSON line of what was sent, received and dropped (by place), the loss no counter
# explains (must be 0), and the resident memory and open descriptors of every process at the
# start and the end.
#
#   scripts/soak.sh [MINUTES (10)] [OUT_DIR (out/soak)]        (root)
#
# Topology (scripts/testbed.sh): senders s0, s1 run one QCN flow each to r0 (`quench send --cc
# qcn`, with r0 as its --sink); senders s2..s4 send 300 Mb/s each without congestion control to
# r1 (a second `quench send`, r1 as its sink, no CNPs). The switch: 1 Gbit/s egress to r0 and r1,
# QCN's congestion point on r0, PFC on priority 3 (every flow's) with static thresholds, static
# MAC entries for r0 and r1. Every 30 s the switch's end of s1's link goes down for 1 s (FLAP=0:
# no flaps). `quench stats --json --watch --interval 10ms` runs throughout.
#
# Loss accounting, per place a counter sees it: the switch's queues and PFC headroom, its receive
# rings and transmits the kernel dropped, the senders' transmits the kernel dropped or had no
# buffer for, the sinks' receive rings, the CPUs' backlogs. "unexplained" is the receivers' lost
# frames less all of those, floored at 0: a frame lost where no counter saw it. The veths' drop
# counters ("veth_dropped") are reported beside, not counted: they include every transmit attempt
# a device refused, which an AF_PACKET sender (quench send, quench switch) makes again.
# Memory and descriptors are sampled at the first 30 s step at or after SAMPLE_AT seconds in
# (default 30: after the first flap, once the receivers' tables have filled) and 5 s before the end.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

minutes=${1:-10}
prefix=${QN_PREFIX:-qsk}
qn_setup soak.sh "${2:-out/soak}"
secs=${SOAK_SECONDS:-$((minutes * 60))}   # SOAK_SECONDS: a short trial
flap=${FLAP:-1}
# Seconds before the first sample of memory and descriptors, and after the last.
sample_at=${SAMPLE_AT:-30}
settle=5

echo "== soak: testbed up (prefix $prefix)"
scripts/testbed.sh up --senders 5 --receivers 2 --prefix "$prefix" >/dev/null
sock=/run/quench/$prefix.sock
cfg=$out/switch.toml
{
  echo "workers = 1"
  # Every ingress's XOFF + headroom fits at one egress (PFC, not the queue, bounds it).
  echo "queue_bytes = $((7 * 1400000))"
  echo "control_queue_bytes = 65536"
  echo "control_socket = \"$sock\""
  for p in s0 s1 s2 s3 s4; do
    printf '[[ports]]\nname = "%s"\niface = "%s-sw-%s"\ndriver = "af_packet"\n' "$p" "$prefix" "$p"
  done
  for p in r0 r1; do
    printf '[[ports]]\nname = "%s"\niface = "%s-sw-%s"\ndriver = "af_packet"\nrate = "1gbit"\n' "$p" "$prefix" "$p"
  done
  printf '[[static_macs]]\nmac = "02:71:6e:02:00:00"\nport = "r0"\n'
  printf '[[static_macs]]\nmac = "02:71:6e:02:00:01"\nport = "r1"\n'
  printf '[[congestion]]\nport = "r0"\npriorities = [3]\n'
  printf 'qcn = { queue_size_set_point = 50000, min_sample_base = 30000, feedback_weight = 1 }\n'
  printf '[pfc]\nlossless_priorities = [3]\nthreshold = "static"\nxoff_bytes = 150000\n'
  printf 'xon_bytes = 147000\nheadroom_bytes = 1250000\nlink_rate = "1gbit"\n'
} > "$cfg"
# The incast's senders address r1.
sed -e 's/^destination = .*/destination = "02:71:6e:02:00:01"/' -e 's/^dst_ip = .*/dst_ip = "10.71.0.102"/' \
  configs/send.toml > "$out/send-incast.toml"

ip netns exec "$prefix-sw" taskset -c "$sw_cpus" "$quench" switch --config "$cfg" \
  --duration $((secs + 120))s > "$out/switch.log" 2>&1 &
swpid=$!
pids+=($swpid)
sleep 1
taskset -c "$tx_cpus" "$quench" send --iface "$prefix-s0/eth0" --src-ip 10.71.0.1 \
  --iface "$prefix-s1/eth0" --src-ip 10.71.0.2 --config configs/send.toml --cc qcn \
  --flow-base 1 --flow-stride 100 --duration "${secs}s" \
  --sink "$prefix-r0/eth0" --sink-out "$out/r0" --sink-linger 500ms > "$out/send-qcn.log" 2>&1 &
qcnpid=$!
pids+=($qcnpid)
taskset -c "$tx_cpus" "$quench" send --iface "$prefix-s2/eth0" --src-ip 10.71.0.3 \
  --iface "$prefix-s3/eth0" --src-ip 10.71.0.4 --iface "$prefix-s4/eth0" --src-ip 10.71.0.5 \
  --config "$out/send-incast.toml" --cc none --rate 300mbit --rate 300mbit --rate 300mbit \
  --flow-base 1001 --flow-stride 100 --duration "${secs}s" \
  --sink "$prefix-r1/eth0" --sink-no-cnp --sink-out "$out/r1" --sink-linger 500ms > "$out/send-incast.log" 2>&1 &
incpid=$!
pids+=($incpid)
# The stats client: 100 polls a second; the lines it got are counted.
("$quench" stats --json --watch --interval 10ms --control-socket "$sock" 2>"$out/stats-client.err" | wc -l > "$out/stats-polls") &
pids+=($!)

# RSS (kB) and open descriptors of each process.
sample() {
  local name pid
  for name in switch qcn incast; do
    case $name in switch) pid=$swpid ;; qcn) pid=$qcnpid ;; incast) pid=$incpid ;; esac
    echo "$name $(awk '/^VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0) $(ls "/proc/$pid/fd" 2>/dev/null | wc -l)"
  done
}
qn_backlog_drops > "$out/softnet.before"
flaps=0
t=0
sampled=0
while [ $((t + settle)) -lt "$secs" ]; do
  if [ "$sampled" = 0 ] && [ "$t" -ge "$sample_at" ]; then
    sample > "$out/sample.start"
    sampled=1
  fi
  step=$((secs - settle - t < 30 ? secs - settle - t : 30))
  sleep "$step"
  t=$((t + step))
  if [ "$flap" = 1 ] && [ $((t + settle + 1)) -lt "$secs" ]; then
    ip -n "$prefix-sw" link set "$prefix-sw-s1" down
    sleep 1
    ip -n "$prefix-sw" link set "$prefix-sw-s1" up
    t=$((t + 1))
    flaps=$((flaps + 1))
  fi
done
[ "$sampled" = 1 ] || sample > "$out/sample.start"
sample > "$out/sample.end"
wait "$qcnpid" "$incpid" || true
qn_backlog_drops > "$out/softnet.after"
qn_save_links
# The switch runs on (its --duration has two minutes to spare) until its counters are read.
"$quench" stats --json --control-socket "$sock" > "$out/stats.json"
for log in send-qcn send-incast; do
  sed -n '/^== sink/,$p' "$out/$log.log" | sed -e '1d' -e 's/^{"sink":\(.*\)}$/\1/' > "$out/$log.sink"
done
kill "$swpid" 2>/dev/null || true
sleep 1
python3 - "$out" "$minutes" "$flaps" <<'PY'
import glob, json, sys
out, minutes, flaps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
st = json.load(open(out + "/stats.json"))
def switch_sum(key):
    return sum(p.get(key, 0) or 0 for p in st["ports"])
sent = unsent = no_buffer = senders_tx = 0
for log in ("send-qcn", "send-incast"):
    for l in open("%s/%s.log" % (out, log)):
        if l.startswith("{") and '"port"' in l:
            s = json.loads(l)
            sent += s["frames"]
            unsent += s.get("unsent", 0)
            no_buffer += s.get("no_buffer", 0)
            senders_tx += s.get("tx_kernel_drops") or 0
sinks = [json.loads([l for l in open("%s/%s.sink" % (out, log)) if l.startswith("{")][-1])
         for log in ("send-qcn", "send-incast")]
received = sum(f["frames"] for s in sinks for f in s["flows"])
lost = sum(f["lost"] for s in sinks for f in s["flows"])
veth = 0
for path in glob.glob(out + "/links-*.json"):
    for link in json.load(open(path)):
        if link.get("ifname") != "lo":
            s64 = link.get("stats64", {})
            veth += s64.get("rx", {}).get("dropped", 0) + s64.get("tx", {}).get("dropped", 0)
before = [int(x) for x in open(out + "/softnet.before")]
after = [int(x) for x in open(out + "/softnet.after")]
dropped = {
    "switch_queues": switch_sum("queue_drops"),
    "pfc_headroom": switch_sum("pfc_headroom_drops"),
    "switch_rx_rings": switch_sum("rx_kernel_drops") + switch_sum("rx_drops"),
    "switch_tx": switch_sum("tx_kernel_drops") + switch_sum("tx_drops"),
    "senders_tx": senders_tx,
    "senders_no_buffer": no_buffer,
    "receivers_rx_rings": sum(s.get("rx_kernel_drops") or 0 for s in sinks),
    "cpu_backlogs": sum(a - b for a, b in zip(after, before)),
}
def samples(name):
    return {l.split()[0]: (int(l.split()[1]), int(l.split()[2])) for l in open(out + "/" + name)}
s0, s1 = samples("sample.start"), samples("sample.end")
try:
    polls = int(open(out + "/stats-polls").read().strip() or 0)
except Exception:
    polls = None
res = {
    "minutes": minutes, "flaps": flaps, "sent": sent - unsent, "received": received,
    "lost": lost, "dropped": dropped, "veth_dropped": veth,
    "unexplained": max(0, lost - sum(dropped.values())),
    "rss_kb": {k: [s0[k][0], s1[k][0]] for k in s0},
    "fds": {k: [s0[k][1], s1[k][1]] for k in s0},
    "stats_polls": polls,
}
print(json.dumps(res))
PY
