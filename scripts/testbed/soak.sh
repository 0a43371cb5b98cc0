#!/usr/bin/env bash
# Soak (issue 18, item 6): the QCN loop and a PFC incast through one `quench switch` for MINUTES,
# with a link flap every 30 s and a stats client polling the control socket 100 times a second;
# then one JSON line of what was sent, received and dropped (by place), the loss no counter
# explains (must be 0), and the resident memory and open descriptors of every process at the
# start and the end.
#
#   scripts/testbed/soak.sh [flags] [MINUTES (10)] [OUT_DIR (out/soak)]        (root)
#
#   --seconds S       run S seconds instead of MINUTES (a short trial: --seconds 60 --flap-every 5)
#   --no-flap         no link flaps
#   --flap-every S    seconds between flaps (default 30)
#   --sample-at S     the first sample of memory and descriptors at the first flap time at or
#                     after S seconds in (default 30)
#   --prefix P        the testbed's prefix (default qsk)
#   QUENCH=PATH       (environment) the quench binary (default: this tree's release build)
#
# Topology (scripts/testbed/testbed.sh): senders s0, s1 run one QCN flow each to r0 (`quench send --cc
# qcn`, with r0 as its --sink); senders s2..s4 send 300 Mb/s each without congestion control to
# r1 (a second `quench send`, r1 as its sink, no CNPs). The switch: 1 Gbit/s egress to r0 and r1,
# QCN's congestion point on r0, PFC on priority 3 (every flow's) with static thresholds, static
# MAC entries for r0 and r1. Every 30 s the switch's end of s1's link goes down for 1 s (--no-flap:
# no flaps). `quench stats --json --watch --interval 10ms` runs throughout.
#
# Loss accounting, per place a counter sees it ("dropped"): the switch's queues toward the
# receivers and its PFC headroom, its receive rings and transmits toward the receivers the kernel
# dropped, the senders' transmits the kernel dropped or had no buffer for, the sinks' receive
# rings, and the links. Each link is counted from both ends ("links": [frames handed to it,
# frames its device transmitted, frames the far end's socket took or its ring dropped]; a
# sender's link: its `quench send` port's frames less unsent and unbuffered, its eth0's
# tx_packets, the switch port's rx_pkts + rx_kernel_drops; a receiver's link: the switch port's
# tx_pkts, its veth end's tx_packets, the sink's frames + ring drops); dropped.links is what the
# far ends never saw. On the flapped link that is the kernel's: `ip link set up` opens the veth
# (carrier on at both ends, its NAPI polling) before it tells the switch's AF_PACKET socket,
# which NETDEV_DOWN unbound, to bind again (NETDEV_UP, net/packet/af_packet.c packet_notifier),
# and frames the veth delivers in between reach no socket: the device counts them transmitted,
# the switch never sees them ("flap_link": that difference for s1 while each flap's link is
# down, and at the end; it rises only across an up). The veths' own rx_dropped cannot tell them
# apart: it also counts every VLAN-tagged frame no protocol takes (all of them here).
# "unexplained" is the receivers' lost frames less everything dropped, floored at 0: a frame
# lost where no counter saw it; "counted_not_lost" the other way round (a counter that counts
# what was not lost). The CPUs' backlog drops are reported beside ("cpu_backlog_drops"): a veth
# whose peer's backlog is full refuses the frame, and an AF_PACKET sender sends it again.
# Memory and descriptors are sampled at the first flap time at or after --sample-at seconds in
# (default 30: after the first flap, once the receivers' tables have filled) and 5 s before the
# end. "stats_polls_per_s" is the stats client's answers over its run.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/testbed/lib.sh

secs=
flap=1
flap_every=30
sample_at=30
prefix=qsk
pos=()
while [ $# -gt 0 ]; do
  case $1 in
    --seconds|--flap-every|--sample-at|--prefix) [ $# -ge 2 ] || qn_bad soak.sh "$1 needs a value" ;;&
    --seconds) secs=$2; shift ;;
    --no-flap) flap=0 ;;
    --flap-every) flap_every=$2; shift ;;
    --sample-at) sample_at=$2; shift ;;
    --prefix) prefix=$2; shift ;;
    *) qn_arg soak.sh "$1" ;;
  esac
  shift
done
minutes=${pos[0]:-10}
secs=${secs:-$((minutes * 60))}
qn_setup soak.sh "${pos[1]:-out/soak}"
# Seconds after the last sample of memory and descriptors.
settle=5

echo "== soak: testbed up (prefix $prefix)"
scripts/testbed/testbed.sh up --senders 5 --receivers 2 --prefix "$prefix" >/dev/null
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
# snap TAG: every link's counters of the testbed and the switch's, into OUT/snap-TAG.jsonl.
snap() {
  local ns
  {
    for ns in $(qn_namespaces); do
      echo "{\"ns\": \"$ns\", \"links\": $(ip -n "$ns" -s -j link show)}"
    done
    echo "{\"switch\": $("$quench" stats --json --control-socket "$sock")}"
  } > "$out/snap-$1.jsonl"
}
snap start
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
# The stats client: 100 polls a second; the lines it got are counted, over the time from its
# start to the switch's end.
date +%s.%N > "$out/stats-client.start"
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
# The schedule is read off the wall clock (bash's SECONDS), so the snapshots' own time does not
# push the last sample past the senders' end: flaps at every --flap-every s from the senders'
# start while one more (1 s down) ends SETTLE s before the end, the last sample then.
flaps=0
sampled=0
t0=$SECONDS
while :; do
  t=$((SECONDS - t0))
  if [ "$sampled" = 0 ] && [ "$t" -ge "$sample_at" ]; then
    sample > "$out/sample.start"
    sampled=1
  fi
  next=$(((t / flap_every + 1) * flap_every))
  if [ $((next + 1 + settle)) -ge "$secs" ]; then
    [ $((secs - settle - t)) -le 0 ] || sleep $((secs - settle - t))
    break
  fi
  sleep $((next - t))
  [ "$flap" = 1 ] || continue
  # Counters of every link before the switch's end goes down, while it is down (no frame
  # moves on it then) and just after it is up again.
  snap "flap$flaps-before"
  ip -n "$prefix-sw" link set "$prefix-sw-s1" down
  sleep 1
  snap "flap$flaps-down"
  ip -n "$prefix-sw" link set "$prefix-sw-s1" up
  snap "flap$flaps-up"
  flaps=$((flaps + 1))
done
[ "$sampled" = 1 ] || sample > "$out/sample.start"
sample > "$out/sample.end"
wait "$qcnpid" "$incpid" || true
qn_backlog_drops > "$out/softnet.after"
# The switch runs on (its --duration has two minutes to spare) until its counters are read.
"$quench" stats --json --control-socket "$sock" > "$out/stats.json"
snap end
for log in send-qcn send-incast; do
  sed -n '/^== sink/,$p' "$out/$log.log" | sed -e '1d' > "$out/$log.sink"
done
kill "$swpid" 2>/dev/null || true
date +%s.%N > "$out/stats-client.end"
sleep 1
python3 - "$out" "$minutes" "$flaps" "$prefix" <<'PY'
import glob, json, re, sys
out, minutes, flaps, prefix = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
st = json.load(open(out + "/stats.json"))
ports = {p["name"]: p for p in st["ports"]}
def switch_sum(key):
    return sum(p.get(key, 0) or 0 for p in st["ports"])
sent = unsent = no_buffer = senders_tx = 0
handed = {}   # per sender port: frames its socket handed to the kernel, which took them
for log in ("send-qcn", "send-incast"):
    for l in open("%s/%s.log" % (out, log)):
        if l.startswith("{") and '"port"' in l and '"frames"' in l:
            s = json.loads(l)
            sent += s["frames"]
            unsent += s.get("unsent", 0)
            no_buffer += s.get("no_buffer", 0)
            senders_tx += s.get("tx_kernel_drops") or 0
            port = re.search(r"-(s[0-9]+)/eth0$", s["port"]).group(1)
            handed[port] = (s["frames"] - s.get("unsent", 0) - s.get("no_buffer", 0)
                            - (s.get("tx_kernel_drops") or 0))
sinks = [json.loads([l for l in open("%s/%s.sink" % (out, log)) if l.startswith("{")][-1])
         for log in ("send-qcn", "send-incast")]
received = sum(f["frames"] for s in sinks for f in s["flows"])
lost = sum(f["lost"] for s in sinks for f in s["flows"])
def snap(tag):
    """Transmitted frames of every veth end, by (namespace, device), and the switch's stats."""
    tx, sw = {}, None
    for l in open("%s/snap-%s.jsonl" % (out, tag)):
        o = json.loads(l)
        if "switch" in o:
            sw = {p["name"]: p for p in o["switch"]["ports"]}
        else:
            for link in o["links"]:
                tx[(o["ns"], link["ifname"])] = link.get("stats64", {}).get("tx", {}).get("packets", 0)
    return tx, sw
tx0, _ = snap("start")
tx1, _ = snap("end")
def dev_tx(ns, dev):
    return tx1[(prefix + "-" + ns, dev)] - tx0[(prefix + "-" + ns, dev)]
# Each link counted from both ends: [frames handed to it, frames its device transmitted (the
# far end polled them), frames the far end's socket took or its ring dropped].
links = {}
for p in sorted(handed):
    links[p] = [handed[p], dev_tx(p, "eth0"),
                ports[p]["rx_pkts"] + (ports[p].get("rx_kernel_drops") or 0)]
for r, s in zip(("r0", "r1"), sinks):
    links[r] = [ports[r]["tx_pkts"], dev_tx("sw", "%s-sw-%s" % (prefix, r)),
                sum(f["frames"] for f in s["flows"]) + (s.get("rx_kernel_drops") or 0)]
# The flapped link's frames the veth delivered but the switch's socket did not take, before
# each flap (no frame moves on it while it is down) and at the end: a rise across a flap is
# frames delivered while the switch's end came up, before its socket was bound again.
flap_link = []
for tag in ["flap%d-down" % k for k in range(flaps)] + ["end"]:
    tx, sw = snap(tag)
    flap_link.append(tx[(prefix + "-s1", "eth0")] - tx0[(prefix + "-s1", "eth0")]
                     - sw["s1"]["rx_pkts"] - (sw["s1"].get("rx_kernel_drops") or 0))
before = [int(x) for x in open(out + "/softnet.before")]
after = [int(x) for x in open(out + "/softnet.after")]
# Only frames the sinks count: the switch's queues and transmits toward the receivers (what it
# queues or sends toward a sender is feedback and PAUSE frames).
def receivers_sum(key):
    return sum(ports[r].get(key, 0) or 0 for r in ("r0", "r1"))
dropped = {
    "switch_queues": receivers_sum("queue_drops"),
    "pfc_headroom": switch_sum("pfc_headroom_drops"),
    "switch_rx_rings": switch_sum("rx_kernel_drops") + switch_sum("rx_drops"),
    "switch_tx": receivers_sum("tx_kernel_drops") + receivers_sum("tx_drops"),
    "senders_tx": senders_tx,
    "senders_no_buffer": no_buffer,
    "receivers_rx_rings": sum(s.get("rx_kernel_drops") or 0 for s in sinks),
    "links": sum(max(0, l[0] - l[2]) for l in links.values()),
}
def samples(name):
    return {l.split()[0]: (int(l.split()[1]), int(l.split()[2])) for l in open(out + "/" + name)}
s0, s1 = samples("sample.start"), samples("sample.end")
try:
    polls = int(open(out + "/stats-polls").read().strip() or 0)
    client_s = (float(open(out + "/stats-client.end").read())
                - float(open(out + "/stats-client.start").read()))
    polls_per_s = round(polls / client_s, 1)
except (OSError, ValueError):
    polls = polls_per_s = None
res = {
    "minutes": minutes, "flaps": flaps, "sent": sent - unsent, "received": received,
    "lost": lost, "dropped": dropped, "links": links, "flap_link": flap_link,
    "unexplained": max(0, lost - sum(dropped.values())),
    "counted_not_lost": max(0, sum(dropped.values()) - lost),
    "cpu_backlog_drops": sum(a - b for a, b in zip(after, before)),
    "rss_kb": {k: [s0[k][0], s1[k][0]] for k in s0},
    "fds": {k: [s0[k][1], s1[k][1]] for k in s0},
    "stats_polls": polls, "stats_polls_per_s": polls_per_s,
}
print(json.dumps(res))
PY
