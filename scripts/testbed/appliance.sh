#!/usr/bin/env bash
# The sender appliance with unmodified applications as the traffic: two host namespaces run
# iperf3 (UDP offered above the bottleneck, then TCP), each behind `quench appliance`, through
# `quench switch` with a congestion point on its 1 Gbit/s egress to a receiver namespace running
# `iperf3 -s`. QCN (the appliance adds CN-TAGs, the switch's CP sends CNMs), then DCQCN (the
# appliance marks ECT(0), the switch's RED marks CE, an appliance in the notification-point role
# in front of the receiver answers with CNPs). Prints a table like scripts/demo.sh's and one JSON
# line; tears everything down.
#
#   scripts/testbed/appliance.sh [flags] [SECONDS per run (10)] [OUT_DIR (out/appliance)]   (root)
#
#   --ccs LIST             congestion controls, run in turn (default "qcn dcqcn"; commas or
#                          spaces); "none" is the same path with no reaction point in the
#                          appliance (the switch keeps its QCN config): what the testbed forwards
#                          without congestion control
#   --driver D             af_xdp (default) or af_packet for every port (below)
#   --mtu MTU              every host-facing link's MTU (default 3502 with af_xdp, else 1500; below)
#   --udp-rate R           what each host offers over UDP (iperf3 -b; default 800M)
#   --no-pfc               no PFC between the switch and the appliances (the lossy run; below)
#   --idle MODE            both the switch and the appliance take `--idle MODE` (spin, yield,
#                          wait, auto or a duration; wait: both wait in the kernel for a frame
#                          when idle); default: each its own `auto` (on a shared machine the
#                          switch yields, the appliance sleeps)
#   --switch-rt            the switch at a real-time priority (SCHED_FIFO 1) waiting in the kernel
#                          when idle (`--idle wait`), as a hardware switch's dataplane, which no
#                          other task deschedules (docs/design.md, "Sender appliance"; off by
#                          default: it takes CPU from the receivers)
#   --switch-args ARGS     adds options to `quench switch` (e.g. "--idle 50us")
#   --appliance-args ARGS  adds options to `quench appliance` (e.g. "--idle spin")
#   --appliance-config F   `quench appliance --config` (default configs/appliance.toml)
#   --switch-wrap CMD, --appliance-wrap CMD
#                          run the switch or the appliance under CMD (e.g. "chrt -f 1")
#   --place P              CPU placement: none (default) pins nothing; split pins the appliance to
#                          the first CPUs and the switch, the iperf3 servers and the stats pollers
#                          to the last one, the iperf3 clients to --client-cpus
#   --client-cpus LIST     the iperf3 clients' CPUs with --place split (default: the appliance's)
#   --capture              writes OUT_DIR/outside-CC.pcap (the outside link, by the switch) and
#                          decodes it
#   --prefix P             the testbed's prefix (default qap)
#   QUENCH=PATH            (environment) the quench binary (default: this tree's release build)
#
# Topology (scripts/testbed/testbed.sh --appliance): P-s0, P-s1, P-r0 -- P-ap -- P-sw. Each run's logs:
# OUT_DIR/{switch,appliance,queue,appliance-trace}-CC*.{log,jsonl}, iperf3 JSON in
# OUT_DIR/iperf-CC-PROTO-I.json (its warnings in .err: at a large MTU iperf3 warns that the
# datagram exceeds the TCP MSS of its control connection, which UDP does not care about).
# OUT_DIR/cpu-CC.txt: two samples of every testbed process's CPU time, the machine's and the
# switch's counters in the UDP phase; the summary prints the CPU budget from them
# (scripts/analysis/cpu-budget.py: % of a CPU per process and role, us per delivered frame).
# PFC (the default) makes priority 0 lossless between the switch and the appliances for qcn and
# dcqcn (below, where the switch's config is written; docs/design.md, "Sender appliance", says
# why).
# --driver af_packet: TCP suffers: the testbed's veths have GRO on (XDP redirects need it), so an
# AF_PACKET socket reads merged TCP segments larger than a frame; XDP sees frames before GRO.
# --place split: the clients' sendto also runs the appliance's receive (veth + XDP copy) on their
# CPU; pinning alone left whichever CPU holds the clients saturated, so none is the default.
# --mtu: the appliance-to-switch links get MTU + 4 for a CN-TAG; UDP datagrams fill it (iperf3 -l
# MTU - 28) and TCP's MSS follows it. 3502 is the largest a veth with XDP on its far end takes
# (scripts/testbed/testbed.sh --mtu), 1500 fits an AF_PACKET ring slot (2 KiB). The testbed's CPU
# goes per frame, so fewer, larger frames are what lets it fit two CPUs (docs/design.md, "Sender
# appliance").
set -euo pipefail
cd "$(dirname "$0")/../.."

. scripts/testbed/lib.sh
bad() { qn_bad appliance.sh "$1"; }
ccs="qcn dcqcn"
driver=af_xdp
mtu=
udp_rate=800M
pfc=1
idle=
switch_rt=
switch_args=
appliance_args=
appliance_config=configs/appliance.toml
switch_wrap=
appliance_wrap=
place=none
client_cpus=
capture=
prefix=qap
pos=()
while [ $# -gt 0 ]; do
  case $1 in
    --ccs|--driver|--mtu|--udp-rate|--idle|--switch-args|--appliance-args|--appliance-config|\
    --switch-wrap|--appliance-wrap|--place|--client-cpus|--prefix)
      [ $# -ge 2 ] || bad "$1 needs a value" ;;&
    --ccs) ccs=${2//,/ }; shift ;;
    --driver) driver=$2; shift ;;
    --mtu) mtu=$2; shift ;;
    --udp-rate) udp_rate=$2; shift ;;
    --no-pfc) pfc= ;;
    --idle) idle=$2; shift ;;
    --switch-rt) switch_rt=1 ;;
    --switch-args) switch_args=$2; shift ;;
    --appliance-args) appliance_args=$2; shift ;;
    --appliance-config) appliance_config=$2; shift ;;
    --switch-wrap) switch_wrap=$2; shift ;;
    --appliance-wrap) appliance_wrap=$2; shift ;;
    --place) place=$2; shift ;;
    --client-cpus) client_cpus=$2; shift ;;
    --capture) capture=1 ;;
    --prefix) prefix=$2; shift ;;
    *) qn_arg appliance.sh "$1" ;;
  esac
  shift
done
secs=${pos[0]:-10}
case $driver in af_xdp|af_packet) ;; *) bad "--driver $driver: af_xdp or af_packet" ;; esac
if [ -z "$mtu" ]; then
  if [ "$driver" = af_xdp ]; then mtu=3502; else mtu=1500; fi
fi
case $mtu in
  *[!0-9]*) bad "--mtu $mtu: a number of octets" ;;
esac
if [ "$mtu" -lt 576 ]; then bad "--mtu $mtu: at least 576"; fi
case $idle in
  '') ;;
  auto|spin|yield|wait|[0-9]*) switch_args="--idle $idle $switch_args"; appliance_args="--idle $idle $appliance_args" ;;
  *) bad "--idle $idle: auto, spin, yield, wait or a duration" ;;
esac
case $place in split|none) ;; *) bad "--place $place: split or none" ;; esac
if [ -n "$switch_rt" ]; then
  switch_wrap="chrt -f 1 $switch_wrap"
  switch_args="--idle wait $switch_args"
fi
if [ "$(id -u)" -eq 0 ]; then
  command -v iperf3 >/dev/null || { echo "appliance.sh: iperf3 missing; run scripts/setup.sh" >&2; exit 1; }
fi
qn_setup appliance.sh "${pos[1]:-out/appliance}"
# Command prefixes that pin (all empty with PLACE=none).
on_ap=()
on_last=()
on_client=()
if [ "$place" = split ]; then
  on_ap=(taskset -c "$tx_cpus")
  on_last=(taskset -c "$sw_cpus")
  on_client=(taskset -c "${client_cpus:-$tx_cpus}")
fi

scripts/testbed/testbed.sh up --senders 2 --receivers 1 --prefix "$prefix" --appliance --mtu "$mtu"
# What the summary needs to know of the testbed: the MTU, the UDP datagram, the offered rate.
printf '{"mtu": %d, "udp_len": %d, "udp_rate": "%s"}\n' "$mtu" $((mtu - 28)) "$udp_rate" \
  > "$out/testbed.json"
ap="$prefix-ap"

# cpu_sample FILE LABEL: one sample of the CPU budget (scripts/analysis/cpu-budget.py reads it): the
# machine's /proc/stat line, utime + stime of every process in `roles` (ROLE=PID words; the
# process's own stat line counts every thread's time, exited threads' included) and of the
# ksoftirqd threads, and the switch's counters (frames delivered at the bottleneck).
cpu_sample() {
  local file=$1 rp rest pid
  {
    echo "sample $(date +%s.%N) $2"
    echo "hz $(getconf CLK_TCK)"
    head -1 /proc/stat
    for rp in "${roles[@]}" $(pgrep -x 'ksoftirqd/[0-9]+' | sed 's/^/ksoftirqd=/'); do
      pid=${rp#*=}
      read -r rest < "/proc/$pid/stat" 2>/dev/null || continue
      echo "proc ${rp%%=*} $pid ${rest##*) }"
    done
    echo "switch $("$quench" stats --json --control-socket "$sock" 2>/dev/null | tail -1)"
  } >> "$file"
}

# iperf_round NAME [CLIENT_ARGS...]: one iperf3 server per host on r0 and one client per host,
# for $secs; waits for the clients. Servers are jobs of this script (not -D daemons: those would
# outlive it and keep any lock it inherited), one test each, killed by the cleanup if a client
# never came.
iperf_round() {
  local name=$1 port i
  shift
  for port in 5201 5202; do
    "${on_last[@]}" ip netns exec "$prefix-r0" iperf3 -s -p "$port" -1 > "$out/iperf-server-$cc-$name-$port.log" 2>&1 &
    pids+=($!)
    roles+=("server=$!")
  done
  sleep 0.5
  # The receiver's UDP counters before and after (OUT_DIR/udp-CC.txt): datagrams its kernel
  # dropped for a full socket buffer (RcvbufErrors) are frames the switch delivered that an
  # iperf3 server did not read in time.
  if [ "$name" = udp ]; then ip netns exec "$prefix-r0" grep '^Udp:' /proc/net/snmp > "$out/udp-$cc.txt"; fi
  for i in 0 1; do
    "${on_client[@]}" ip netns exec "$prefix-s$i" iperf3 -c 10.71.0.101 -p $((5201 + i)) "$@" \
      -t "$secs" -J --connect-timeout 3000 > "$out/iperf-$cc-$name-$i.json" \
      2> "$out/iperf-$cc-$name-$i.err" &
    pids+=($!)
    roles+=("client=$!")
  done
  # The UDP phase's CPU budget: from 1 s after the clients start to 1 s before they stop (a
  # fifth of the run each side when it is shorter than 5 s).
  if [ "$name" = udp ]; then
    local lead
    lead=$(awk -v s="$secs" 'BEGIN { print (s >= 5 ? 1 : s / 5) }')
    rm -f "$out/cpu-$cc.txt"
    sleep "$lead"
    cpu_sample "$out/cpu-$cc.txt" start
    sleep "$(awk -v s="$secs" -v l="$lead" 'BEGIN { print s - 2 * l }')"
    cpu_sample "$out/cpu-$cc.txt" end
  fi
  wait "${pids[@]: -2}" || true
  if [ "$name" = udp ]; then ip netns exec "$prefix-r0" grep '^Udp:' /proc/net/snmp >> "$out/udp-$cc.txt"; fi
  # The round's clients and servers are gone: the next round's replace them.
  roles=("${roles[@]:0:$base_roles}")
}

for cc in $ccs; do
  echo "== $cc: switch (CP on r0's 1 Gbit/s egress), appliance, iperf3 UDP then TCP, ${secs}s each, MTU $mtu"
  cfg="$out/switch-$cc.toml"
  # The shipped switch config with this testbed's ports, the chosen driver, the congestion
  # point on priority 0 (iperf3's frames are untagged) and the control socket of this run.
  sed -e "s/qn-sw-/$prefix-sw-/" -e "s|/run/quench/switch.sock|/run/quench/$prefix-$cc.sock|" \
    -e 's/^priorities = .*/priorities = [0]/' "configs/switch-${cc/none/qcn}.toml" > "$cfg"
  sed -i "/^iface = /a driver = \"$driver\"" "$cfg"
  # Every host's MAC pinned to its port (scripts/testbed/testbed.sh's addresses): no frame floods while
  # the switch has not yet heard from a host (the receiver's appliance also announces it).
  for h in s0:01:00:00 s1:01:00:01 r0:02:00:00; do
    printf '\n[[static_macs]]\nmac = "02:71:6e:%s"\nport = "%s"\n' "${h#*:}" "${h%%:*}" >> "$cfg"
  done
  # PFC (the default; --no-pfc: none): priority 0 (iperf3's untagged frames) is lossless between the switch and the
  # appliances, as a RoCE fabric runs DCQCN over PFC: the switch pauses an appliance whose
  # frames waiting in it reach XOFF, and the appliance holds that priority's releases (its
  # config's `pfc = true`), so the excess waits in the appliance's flow queues. XOFF 100 KB a
  # port (the two ingress ports' 200 KB lie above QCN's 2 x Qeq and DCQCN's Kmax, so PFC is the
  # backstop, not the controller); headroom 200 KB: what the appliance may still send after the
  # PAUSE, before its loop reads it (1.6 ms at 1 Gbit/s; configs/switch-pfc.toml says why that
  # long); the buffer holds every port's XOFF + headroom (the switch checks it).
  apcfg=$out/appliance-$cc.toml
  cp "$appliance_config" "$apcfg"
  # "none" stays lossy: without reaction points the appliance forwards each frame at once and
  # has no queue to hold a pause in.
  if [ -n "$pfc" ] && [ "$cc" != none ]; then
    sed -i 's/^queue_bytes = .*/queue_bytes = 1048576/' "$cfg"
    printf '%s\n' '[pfc]' 'lossless_priorities = [0]' 'threshold = "static"' 'xoff_bytes = 100000' \
      "xon_bytes = $((100000 - 2 * mtu))" 'headroom_bytes = 200000' 'link_rate = "1gbit"' \
      'pause = "until_resume"' 'pause_quanta = 65535' >> "$cfg"
    if grep -q '^pfc = ' "$apcfg"; then sed -i 's/^pfc = .*/pfc = true/' "$apcfg"; else sed -i '1i pfc = true' "$apcfg"; fi
  fi
  sock=/run/quench/$prefix-$cc.sock
  total=$((2 * secs + 8))
  # --capture: the switch records what crosses its port toward host 0's appliance (data with
  # CN-TAGs in, CNMs out), i.e. the outside link (an AF_XDP port is invisible to a capture on
  # the veth). Every frame of the run: about 100 MB per second at the bottleneck's rate.
  capture_args=()
  if [ -n "$capture" ]; then capture_args=(--capture "s0=$out/outside-$cc.pcap"); fi
  "${on_last[@]}" $switch_wrap ip netns exec "$prefix-sw" "$quench" switch --config "$cfg" --duration "${total}s" \
    "${capture_args[@]}" $switch_args > "$out/switch-$cc.log" 2>&1 &
  swpid=$!
  pids+=($swpid)
  apsock=/run/quench/$prefix-ap-$cc.sock
  # One process, one loop: the hosts' pairs (reaction points) and, in front of the receiver,
  # the notification-point pair (CE marks become CNPs under DCQCN; CN-TAGs are removed). The
  # reaction points' tables: configs/appliance.toml's, i.e. the preset the testbed's senders
  # share (configs/testbed-1g.toml); APPLIANCE_CONFIG names another file (a copy of it is the
  # run's OUT_DIR/appliance-CC.toml).
  "${on_ap[@]}" $appliance_wrap "$quench" appliance --config "$apcfg" \
    --driver "$driver" --cc "$cc" --duration "${total}s" --control-socket "$apsock" \
    --inside "$ap/$ap-is0" --outside "$ap/$ap-os0" --inside "$ap/$ap-is1" --outside "$ap/$ap-os1" \
    --np-inside "$ap/$ap-ir0" --np-outside "$ap/$ap-or0" $appliance_args \
    > "$out/appliance-$cc.log" 2>&1 &
  appid=$!
  pids+=($appid)
  roles=("switch=$swpid" "appliance=$appid")
  sleep 1.5
  : > "$out/queue-$cc.jsonl"
  "${on_last[@]}" "$quench" stats --json --watch --interval 50ms --control-socket "$sock" >> "$out/queue-$cc.jsonl" 2>/dev/null &
  statpid=$!
  pids+=($statpid)
  # The appliance's flows over time (RP rates, queues, drops, feedback by outcome).
  : > "$out/appliance-trace-$cc.jsonl"
  "${on_last[@]}" "$quench" stats --json --watch --interval 100ms --control-socket "$apsock" >> "$out/appliance-trace-$cc.jsonl" 2>/dev/null &
  apstatpid=$!
  pids+=($apstatpid)
  roles+=("stats=$statpid" "stats=$apstatpid")
  base_roles=${#roles[@]}
  # UDP: each host offers UDP_RATE, default 800 Mb/s (1.6 Gb/s into the 1 Gbit/s
  # bottleneck), in datagrams that fill the MTU (IPv4 and UDP headers: 28 octets); then TCP:
  # one connection per host.
  iperf_round udp -u -b "$udp_rate" -l $((mtu - 28))
  sleep 1
  iperf_round tcp
  kill -INT "$appid" 2>/dev/null || true
  wait "$appid" 2>/dev/null || true
  kill "$statpid" "$apstatpid" 2>/dev/null || true
  # The switch (started by this script, the only job left).
  for p in $(jobs -p); do kill -INT "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
done

# The outside captures (written by the switch) in tshark, with the project's dissector.
lua=tools/wireshark/quench.lua
targs=()
if [ -f "$lua" ]; then targs=(-X "lua_script:$lua"); fi
for cc in $ccs; do
  [ -s "$out/outside-$cc.pcap" ] || continue
  tshark "${targs[@]}" -r "$out/outside-$cc.pcap" -T fields -e frame.protocols 2>/dev/null \
    | sort | uniq -c | sort -rn | head -5 | sed "s/^/  outside-$cc.pcap: /"
  tshark "${targs[@]}" -r "$out/outside-$cc.pcap" -c 3 -V 2>/dev/null | grep -E "CN-TAG|Flow ID|QntzFb" | head -4 || true
done
python3 scripts/analysis/appliance-summary.py "$out" $ccs
