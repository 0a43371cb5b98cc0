#!/usr/bin/env bash
# TCD (seed 004) on real frames: a congested port and a port paused by PFC, side by side in
# quench switch, with TCD marking on both (TCD-capable traffic, ECN 01).
#   hot:    senders s0, s1 at 700 Mb/s each -> receiver r0 behind a 1 Gbit/s egress: congestion,
#           frames marked CE (11);
#   victim: sender s2 at 400 Mb/s -> receiver r1, whose link pauses (r1 sends a PFC PAUSE of
#           200 us every 400 us: `quench send --sink-pfc-pause r1/eth0=400:200`): the port toward r1 goes OFF
#           and ON with ON periods shorter than max(Ton), so its queue is "undetermined", and
#           the victim's frames are marked UE (10), never CE.
#
#   scripts/testbed/tcd-victim.sh [flags] [SECONDS (10)] [OUT_DIR (out/tcd-victim)]      (root)
#
#   --prefix P    the testbed's prefix (default qnt)
#   QUENCH=PATH   (environment) the quench binary (default: this tree's release build)
#
# Prints the ECN codepoints each receiver saw and one JSON line
# {"hot": {"ue", "ce", "frames"}, "victim": {...}}.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/testbed/lib.sh
prefix=qnt
pos=()
while [ $# -gt 0 ]; do
  case $1 in
    --prefix) [ $# -ge 2 ] || qn_bad tcd-victim.sh "$1 needs a value"; prefix=$2; shift ;;
    *) qn_arg tcd-victim.sh "$1" ;;
  esac
  shift
done
secs=${pos[0]:-10}
qn_setup tcd-victim.sh "${pos[1]:-out/tcd-victim}"
scripts/testbed/testbed.sh up --senders 3 --receivers 2 --prefix "$prefix" >/dev/null

# TCD at 1 Gbit/s: B1 - B0 = 2 MTU, tau 8 us, epsilon 0.05 -> max(Ton) = 3 KB x 8 / (1 Gbit/s x
# 0.05) + 8 us = 488 us, longer than the victim port's 200 us ON periods. PFC on priority 3 so
# that the switch honours r1's PAUSE frames (and pauses s2 rather than drop when r1's queue
# fills).
cat > "$out/switch.toml" <<T
workers = 1
queue_bytes = 3000000
control_socket = "/run/quench/$prefix.sock"
$(for i in 0 1 2; do printf '[[ports]]\nname = "s%d"\niface = "%s-sw-s%d"\ndriver = "af_packet"\n' $i "$prefix" $i; done)
$(for i in 0 1; do printf '[[ports]]\nname = "r%d"\niface = "%s-sw-r%d"\ndriver = "af_packet"\nrate = "1gbit"\n' $i "$prefix" $i; done)
[[static_macs]]
mac = "02:71:6e:02:00:00"
port = "r0"
[[static_macs]]
mac = "02:71:6e:02:00:01"
port = "r1"
$(for r in r0 r1; do printf '[[congestion]]\nport = "%s"\npriorities = [3]\ntcd = { link_rate = "1gbit", b1_bytes = 100000, b0_bytes = 97000, tau_ns = 8000, epsilon = 0.05, period_ns = 50000, congestion_threshold_bytes = 40000, non_congestion_threshold_bytes = 10000 }\n' $r; done)
[pfc]
lossless_priorities = [3]
threshold = "static"
xoff_bytes = 150000
xon_bytes = 147000
headroom_bytes = 250000
link_rate = "1gbit"
T
sed -e 's/^dst_ip = .*/dst_ip = "10.71.0.102"/' -e 's/^destination = .*/destination = "02:71:6e:02:00:01"/' \
  configs/send.toml > "$out/send-victim.toml"
echo 'ecn = "ect1"' | cat - configs/send.toml > "$out/send-hot.toml"
sed -i '1i ecn = "ect1"' "$out/send-victim.toml"
# No catch-up bursts: after a scheduling stall a sender would owe up to send.toml's
# max_catch_up_us of frames at once, and a burst into the paused port would be congestion
# there, not a victim's queue.
sed -i 's/^max_catch_up_us = .*/max_catch_up_us = 50/' "$out/send-hot.toml" "$out/send-victim.toml"

ip netns exec "$prefix-sw" taskset -c "$sw_cpus" "$quench" switch --config "$out/switch.toml" \
  --duration $((secs + 5))s > "$out/switch.log" 2>&1 &
pids+=($!)
sleep 1
echo "== tcd-victim: hot s0, s1 -> r0 (congested); victim s2 -> r1 (paused 200 us of every 400 us); ${secs}s"
# Every host in one quench send on the CPU the switch does not use: the three senders' ports,
# each with its own config and rate, and both receivers (--sink), r1 the one whose link pauses.
# A receiver in a process of its own shared the switch's CPU, and a late PAUSE there stretches
# an ON period of the victim port past max(Ton), which TCD then rightly calls congestion.
taskset -c "$tx_cpus" "$quench" send \
  --iface "$prefix-s0/eth0" --config "$out/send-hot.toml" --rate 700mbit --src-ip 10.71.0.1 \
  --iface "$prefix-s1/eth0" --config "$out/send-hot.toml" --rate 700mbit --src-ip 10.71.0.2 \
  --iface "$prefix-s2/eth0" --config "$out/send-victim.toml" --rate 400mbit --src-ip 10.71.0.3 \
  --cc none --flow-base 1 --flow-stride 100 \
  --sink "$prefix-r0/eth0" --sink "$prefix-r1/eth0" --sink-no-cnp \
  --sink-pfc-pause "$prefix-r1/eth0=400:200" --duration "${secs}s" > "$out/send.log" 2>&1 &
send=$!
pids+=($send)
wait "$send" || { tail -n 20 "$out/send.log" >&2; exit 1; }
python3 - "$out" "$prefix" <<'PY'
import json, sys
out, prefix = sys.argv[1], sys.argv[2]
sinks, label = {}, None
for line in open(f"{out}/send.log"):
    if line.startswith("== sink "):
        label = line.split()[2]
    elif label and line.startswith("{"):
        d = json.loads(line)
        if d.get("type") == "sink":
            sinks[label] = d
res = {}
for name, host in (("hot", "r0"), ("victim", "r1")):
    r = sinks[f"{prefix}-{host}/eth0"]
    not_ect, capable, ue, ce = r["ecn"]
    res[name] = {"frames": sum(r["ecn"]), "capable": capable, "ue": ue, "ce": ce,
                 "mbps": round(r["aggregate_bps"] / 1e6, 1)}
    print(f"{name:>7}: {res[name]['frames']} frames, ECN 01 {capable}, UE (10) {ue}, CE (11) {ce}, {res[name]['mbps']} Mb/s")
print(json.dumps(res))
PY
