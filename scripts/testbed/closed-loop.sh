#!/usr/bin/env bash
# The closed loop on real frames: testbed up (2 senders, switch with a 1 Gbit/s bottleneck toward
# 1 receiver), then for each congestion control (QCN, then DCQCN): quench switch with that
# congestion point, quench recv (the DCQCN notification point), one long flow from each sender;
# prints the receiver's summary and writes its report directory; tears the testbed down.
#
#   scripts/testbed/closed-loop.sh [flags] [SECONDS (10)] [OUT_DIR (out/closed-loop)]      (root)
#
#   --senders N        N senders, one long flow each (default 2)
#   --ccs LIST         congestion controls, run in turn (default "qcn dcqcn"; commas or spaces;
#                      also hpcc and dctcp, whose receiver acknowledges every frame)
#   --pfc              PFC on priority 3 as the lossless backstop (below)
#   --capture          the switch's frames on port s0 (data out, CNMs / CNPs back) into
#                      OUT_DIR/s0-CC.pcap
#   --send-wrap CMD    runs the sender under CMD (e.g. "chrt -f 1" for SCHED_FIFO)
#   --sender-procs     a process per host instead of one quench send for all (below)
#   --shield           on two CPUs, moves the machine's other work onto the switch's CPU first
#                      and puts it back at the end (scripts/testbed/cpu-shield.sh)
#   --forge FILE.pcap  adds a forger (below)
#   --forge-delay S    seconds into each run the forger starts (default 3)
#   --forge-rate RATE  the forger's bit rate (default 80mbit)
#   --prefix P         the testbed's prefix (default qnl)
#   QUENCH=PATH        (environment) the quench binary (default: this tree's release build)
#
# Uses the release binary (built if missing). Ends with one JSON line per run. Per run, OUT_DIR
# holds switch-CC.log, queue-CC.jsonl (`quench stats --json` every 50 ms: the bottleneck's queue
# depth over time), send-CC-all.log (send-CC-I.log with --sender-procs), recv-CC.log and the
# receiver's report directory CC/.
# CPU placement (a machine with fewer cores than hosts): the switch has the last CPU; one
# quench send drives every sender port and the receiver port (--sink) from one poll loop on the
# others. --sender-procs runs a process per host instead (the receiver beside the switch).
# --forge FILE.pcap: one more namespace (s<SENDERS>, on the switch's port of that name) that,
# --forge-delay seconds into each run, sends FILE's frames round and round at --forge-rate with
# `quench blast --from-pcap` until the senders stop; its JSON line is OUT_DIR/forge-CC.log
# (engine/quench/tests/forged_feedback.rs writes the file).
set -euo pipefail
cd "$(dirname "$0")/../.."

. scripts/testbed/lib.sh

senders=2
ccs="qcn dcqcn"
pfc=
capture=
send_wrap=
sender_procs=
shield=
forge=
forge_delay=3
forge_rate=80mbit
prefix=qnl
pos=()
while [ $# -gt 0 ]; do
  case $1 in
    --senders|--ccs|--send-wrap|--forge|--forge-delay|--forge-rate|--prefix)
      [ $# -ge 2 ] || qn_bad closed-loop.sh "$1 needs a value" ;;&
    --senders) senders=$2; shift ;;
    --ccs) ccs=${2//,/ }; shift ;;
    --pfc) pfc=1 ;;
    --capture) capture=1 ;;
    --send-wrap) send_wrap=$2; shift ;;
    --sender-procs) sender_procs=1 ;;
    --shield) shield=1 ;;
    --forge) forge=$2; shift ;;
    --forge-delay) forge_delay=$2; shift ;;
    --forge-rate) forge_rate=$2; shift ;;
    --prefix) prefix=$2; shift ;;
    *) qn_arg closed-loop.sh "$1" ;;
  esac
  shift
done
secs=${pos[0]:-10}
qn_setup closed-loop.sh "${pos[1]:-out/closed-loop}"
ncpu=$(nproc)
shield_state=$(mktemp /tmp/quench-shield.XXXXXX)
qn_cleanup_hook() {
  scripts/testbed/cpu-shield.sh off "$shield_state" || true
  rm -f "$shield_state"
}
# --shield (two CPUs): the sender has CPU 0 to itself, the rest of the machine's work (other
# processes, kernel reclaim and RCU threads) waiting on the switch's CPU. Every stop of the
# sender's loop over 1 ms costs a pacing window its 1 %; the switch's ingress rings and PFC
# headroom absorb its stops, but not always its queue target: with 4 QCN flows one run in four
# went over 2 x Qeq (a 2.3 MB queue spike), so it is not the default.
if [ "$ncpu" -eq 2 ] && [ -n "$shield" ]; then
  echo "== $(scripts/testbed/cpu-shield.sh on "$sw_cpus" "$shield_state")"
fi

echo "== testbed up (prefix $prefix)"
hosts=$senders
[ -n "$forge" ] && hosts=$((senders + 1))
scripts/testbed/testbed.sh up --senders "$hosts" --receivers 1 --prefix "$prefix"

for cc in $ccs; do
  echo "== $cc: switch, receiver, $senders senders for ${secs}s"
  cfg="$out/switch-$cc.toml"
  sed -e "s/qn-sw-/$prefix-sw-/" -e "s|/run/quench/switch.sock|/run/quench/$prefix-$cc.sock|" \
    -e 's/^driver = .*//' "configs/switch-$cc.toml" > "$cfg"
  # AF_PACKET ports everywhere: the same on every kernel.
  sed -i '/^iface = /a driver = "af_packet"' "$cfg"
  # Senders (and the forger) beyond the two the shipped configs name.
  for ((i = 2; i < hosts; i++)); do
    printf '\n[[ports]]\nname = "s%d"\niface = "%s-sw-s%d"\ndriver = "af_packet"\n' "$i" "$prefix" "$i" >> "$cfg"
  done
  # --pfc: PFC on priority 3 as the lossless backstop (the congestion point acts first: Qeq
  # 50 KB, RED from 30 KB; PAUSE at 150 KB per ingress); the egress queue then holds every
  # port's XOFF + headroom, so nothing is tail-dropped. Headroom covers what a sender can send
  # between the switch's XOFF and the PAUSE taking effect. On a shared 2-core VM that is not a
  # cable's delay but a scheduling stall: the switch's loop stops for up to ~9 ms (kernel threads,
  # other tasks), its receive rings fill meanwhile, and the frames are accounted only when it
  # runs again. 1.25 MB is 10 ms at the 1 Gbit/s line rate; 250 KB lost 17-41 frames in some
  # 10 s DCQCN runs (pfc-drops on the sender ports).
  if [ -n "$pfc" ]; then
    sed -i "s/^queue_bytes = .*/queue_bytes = $(( (senders + 1) * 1420000 ))/" "$cfg"
    printf '\n[[static_macs]]\nmac = "02:71:6e:02:00:00"\nport = "r0"\n' >> "$cfg"
    printf '\n[pfc]\nlossless_priorities = [3]\nthreshold = "static"\nxoff_bytes = 150000\n' >> "$cfg"
    printf 'xon_bytes = 147000\nheadroom_bytes = 1250000\nlink_rate = "1gbit"\n' >> "$cfg"
  fi
  capture_args=()
  if [ -n "$capture" ]; then capture_args=(--capture "s0=$out/s0-$cc.pcap"); fi
  # The ACK-driven controls: the receiver acknowledges every frame (ns-3's L2_ACK_INTERVAL 1).
  ack=()
  case $cc in hpcc|dctcp|timely) ack=(--ack-interval 1) ;; esac
  sock=/run/quench/$prefix-$cc.sock
  # The CPUs' backlog drops over the run (frames a veth handed to a backlog that was full).
  qn_backlog_drops > "$out/softnet-$cc.before"
  ip netns exec "$prefix-sw" taskset -c "$sw_cpus" "$quench" switch --config "$cfg" \
    "${capture_args[@]}" --duration $((secs + 4))s > "$out/switch-$cc.log" 2>&1 &
  swpid=$!
  pids+=($swpid)
  sleep 1
  # The bottleneck queue over time, for the summary's mean / p99 depth.
  : > "$out/queue-$cc.jsonl"
  "$quench" stats --json --watch --interval 50ms --control-socket "$sock" >> "$out/queue-$cc.jsonl" 2>/dev/null &
  pids+=($!)
  if [ -n "$sender_procs" ]; then
    # One process per host (--sender-procs): the receiver shares the switch's CPU, the senders
    # the others, and they take turns on them, milliseconds at a time.
    ip netns exec "$prefix-r0" taskset -c "$sw_cpus" "$quench" recv --iface eth0 --duration $((secs + 2))s \
      "${ack[@]}" --out "$out/$cc" > "$out/recv-$cc.log" 2>&1 &
    rpid=$!
    pids+=($rpid)
    sleep 0.5
    for ((i = 0; i < senders; i++)); do
      ip netns exec "$prefix-s$i" taskset -c "$tx_cpus" "$quench" send --iface eth0 --config configs/send.toml --cc "$cc" \
        --src-ip "10.71.0.$((1 + i))" --flow-base $((1 + 100 * i)) --duration "${secs}s" \
        > "$out/send-$cc-$i.log" 2>&1 &
      pids+=($!)
    done
    wait "$rpid" || true
  else
    # One quench send drives every sender namespace's eth0 and the receiver's (--sink) from
    # one poll loop on the CPUs the switch leaves: with more busy-polling processes than CPUs
    # they would stall one another for milliseconds, and the receiver would read its frames
    # (and answer CE marks with CNPs) that late.
    ports=()
    for ((i = 0; i < senders; i++)); do
      ports+=(--iface "$prefix-s$i/eth0" --src-ip "10.71.0.$((1 + i))")
    done
    if [ -n "$forge" ]; then
      delay=$forge_delay
      (sleep "$delay"; exec ip netns exec "$prefix-s$senders" "$quench" blast --iface eth0 \
        --engine af_xdp --from-pcap "$forge" --rate "$forge_rate" --core "${tx_cpus%%-*}" \
        --duration "$((secs - delay))s") > "$out/forge-$cc.log" 2>&1 &
      pids+=($!)
    fi
    $send_wrap taskset -c "$tx_cpus" "$quench" send "${ports[@]}" --sink "$prefix-r0/eth0" --sink-out "$out/$cc" \
      ${ack[@]+"--sink-ack-interval" 1} \
      --config configs/send.toml --cc "$cc" --flow-base 1 --flow-stride 100 --duration "${secs}s" \
      > "$out/send-$cc-all.log" 2>&1 &
    spid=$!
    pids+=($spid)
    wait "$spid" || true
    # The receiver's part of the report, as `quench recv` prints it.
    sed -n '/^== sink/,$p' "$out/send-$cc-all.log" | sed -e '1d' > "$out/recv-$cc.log"
  fi
  sleep 3
  qn_backlog_drops > "$out/softnet-$cc.after"
  echo "-- receiver ($cc)"
  grep -v '^{' "$out/recv-$cc.log" || true
  echo "-- senders ($cc)"
  grep -h '^sent' "$out"/send-"$cc"-*.log || true
  echo "{\"cc\":\"$cc\",\"recv\":$(grep '^{' "$out/recv-$cc.log" | tail -1 || echo null)}"
done
