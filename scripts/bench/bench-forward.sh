#!/usr/bin/env bash
# Forwarding rate through `quench switch` (one worker, AF_XDP) as a user starts it: the row
# "quench", with the kernel fast path (on by default: quench's XDP program redirects the frames
# between the two plain ports), and "quench userspace", `--fast-path off`, every frame through
# the worker; against the Linux bridge,
# Open vSwitch and dpdk-testpmd io-forwarding (net_af_packet and net_af_xdp), on the same veth
# testbed in the same run, at 64 B and 1500 B frames; then egress shaping accuracy at 1 Gbit/s
# and 100 Mbit/s.
#
#   scripts/bench/bench-forward.sh [flags]      (root; ~3 minutes; --help: this text)
#   QUENCH=PATH   (environment) another build's quench, for an A/B of two builds (default: this
#                 tree's release build)
#
# Open vSwitch (Debian's openvswitch-switch, scripts/testbed/ovs.sh: a private ovsdb-server and
# ovs-vswitchd in a temporary directory, ovs-vswitchd in the switch's namespace, both stopped and
# removed after each cell) runs as users run it without a NIC: one bridge holding the two veths,
# one flow (actions=NORMAL: MAC learning), the receiver's MAC entered as a static entry as
# quench's configuration has it (fdb/add). Its rows:
#   ovs          the userspace datapath (datapath_type=netdev) with `afxdp` ports (an AF_XDP
#                socket per veth, the XDP program OVS loads; native mode on a veth), polled by one
#                PMD thread pinned to core 0 (pmd-cpu-mask=0x1), the forwarder's core; its other
#                threads on the last core (they only wait), as quench's main thread
#   ovs_system   the userspace datapath with `system` ports (an AF_PACKET socket per veth), polled
#                by ovs-vswitchd's main thread: the whole process on core 0
#   ovs_kernel   the kernel datapath (datapath_type=system), only where the kernel has the
#                openvswitch module (/sys/module/openvswitch, or `modprobe -n`); the kernel
#                forwards in the sender's transmit, as the bridge does. The script says so when
#                the module is missing
#
# Traffic: `quench blast` (XDP live frames: the kernel replays one frame into the sender's veth,
# no skb per frame; pinned to the last core) in the sender namespace towards the receiver's MAC;
# the forwarder runs pinned to core 0. The table's first column is what the source offers with
# no forwarder (the ingress veth's receive count, the stack dropping the frames): 2.3-2.9 Mpps,
# well above every forwarder here, so the figures measure the forwarders. (The AF_XDP source,
# `--engine af_xdp`, offered 1.1-1.2 Mpps: an skb per frame plus the ingress veth's receive work on
# its own core; every forwarder then ran at the source's rate.) Moving the ingress veth's receive
# work onto core 0 with threaded NAPI was tried: the NAPI thread and a busy-polling forwarder then
# share one core, and quench fell to 0.36 Mpps against testpmd's 0.63. The rate is the receiver
# veth's rx_packets delta over the middle of each run. Ends with a table (Mpps, ratios of quench
# to the bridge and to each testpmd) and a last line of JSON.
#
# Latency: then each forwarder (quench switch, quench switch --fast-path off, the bridge, OVS,
# testpmd net_af_xdp) carries one paced
# flow of 1500-octet frames at 10 %, 50 % and 90 % of the testbed's 1 Gbit/s bottleneck
# (configs/send.toml's line rate; no forwarder shapes, so all see the same offered load):
# `quench send --sink` sends from the sender's namespace and receives in the receiver's from one
# poll loop on the last core (the receiver of `quench recv`; one clock stamps and reads the test
# header), the forwarder runs on core 0. A frame's receive time is the kernel's software stamp
# on the sink's AF_PACKET socket, set as the sink's veth takes the frame (inside the forwarder's
# transmit), not the sink's poll loop (docs/design.md, "Send, receive and latency reports").
# The one-way latency histogram's p50 / p99 / p99.9 (HdrHistogram, 3 digits) go side by side in
# one table; sender, veths and receiver are common to all, so the differences are what the
# forwarders add.
#
#   --secs S         seconds per rate cell (default 4)
#   --appliance      only this: 64 B forwarding through `quench appliance` (no congestion control,
#                    no limit, --idle spin, one inside/outside pair, pinned to core 0) against
#                    `quench switch --fast-path off` (the same kind of loop), same testbed, same
#                    run; prints both, the ratio, and JSON
#   --latency-only   skip the rate and shaping runs
#   --forwarders L   the latency part's forwarders, of quench quench_userspace bridge ovs
#                    ovs_system ovs_kernel af_xdp (default: quench quench_userspace bridge ovs
#                    af_xdp, in that order; the table's ratio columns need bridge and ovs).
#                    quench is `quench switch` as started by default: the flow's source (learned)
#                    and destination (the static entry) are at plain ports, so its frames are
#                    redirected by quench's XDP program in the kernel and never reach the worker;
#                    quench_userspace is `quench switch --fast-path off`
#   --loads L        the latency part's loads in % of 1 Gbit/s (default "10 50 90")
#   --lat-secs S     seconds per latency cell (default 4)
#   --lat-rounds R   R rounds of the latency part instead of one (the forwarders' order reversed
#                    every other round): each round's p99s, then per load the median over the
#                    rounds of each forwarder's p99 and of the per-round ratios quench / bridge,
#                    quench_userspace / bridge, quench / ovs and quench / testpmd af_xdp
#                    (scripts/analysis/latency-table.py).
#                    One 4 s cell moves a ratio 2-3x between runs; the medians are what the
#                    latency goal is judged on. `--latency-only --lat-rounds 5` takes about 7 min
#                    for the four forwarders (--lat-secs 4, the default), with --shield as the
#                    figure wants
#   --shield         the latency part on a shielded core 0 (below); quench's worker then spins
#                    when idle, as `quench switch` does by default on a core of its own
#   --xdp-mode M     quench switch's ports' xdp_mode (auto, the default: native on a veth;
#                    generic: the program runs on the skb, and the fast path's redirect is a
#                    plain transmit on the egress veth, which needs no GRO on its peer)
#   --idle MODE      quench switch --idle MODE (auto, the default; spin; yield; wait; a duration)
#   --napi-threaded  the forwarder's veths' NAPI in kernel threads pinned to
#                    core 0 at SCHED_FIFO 50 (sysfs `threaded`), for quench and testpmd af_xdp
#                    alike, the latency part only: the veth's receive (XDP program, copy into
#                    the UMEM) leaves the sender's core, at the price of a wake-up and two
#                    context switches on core 0 per batch
#   --stages         also record each latency cell with `perf record -k mono -a` (kernel trace
#                    points: the sender's sendto, the veths' transmit and receive, the XDP
#                    redirect, the forwarder's kick, scheduling, softirqs, timer interrupts) and
#                    split every frame's latency into stages (scripts/analysis/latency-stages.py: which
#                    stage holds the p99, what else ran meanwhile); the tracing itself adds
#                    ~1 us per event, so these cells' figures are the stages', not the table's
#   --keep DIR       copy the raw outputs (sink reports, send and forwarder logs) into DIR
#   --workers N      instead: the scaling table of the workers (`--fast-path off`, every frame
#                    through them). The switch's veths get N queues a side
#                    (testbed.sh --queues N: one AF_XDP socket per queue); N blasters, one
#                    pinned to each core 0..N-1 (a veth takes an XDP frame on the receive queue
#                    of the sending CPU, so each blaster fills its own queue), offer the same
#                    64 B load to `quench switch --workers n` for n = 1..N (n = 1 polls every
#                    queue). Per row: Mpps at the receiver, per worker, the ratio to n x one
#                    worker, and where the CPUs' time went over the window (/proc/stat: user =
#                    quench's workers and the blasters' set-up, system + softirq = the kernel's
#                    veth and XDP work, idle).
set -euo pipefail
cd "$(dirname "$0")/../.."
usage() { sed -n '2,/^set -/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
bad() { echo "bench-forward.sh: $*" >&2; exit 2; }
idle=auto
napi_threaded=0
shield=0
xdp_mode=
secs=4
rates=1
keep=
workers=
appliance=0
lat_fwds="quench quench_userspace bridge ovs af_xdp"
lat_loads="10 50 90"
lsecs=4
lat_rounds=1
stages=0
while [ $# -gt 0 ]; do
  case $1 in
    --secs|--keep|--workers|--forwarders|--loads|--lat-secs|--lat-rounds|--xdp-mode|--idle)
      [ $# -ge 2 ] || bad "$1 needs a value" ;;&
    --appliance) appliance=1 ;;
    --secs) secs=$2; shift ;;
    --latency-only) rates=0 ;;
    --keep) keep=$2; shift ;;
    --workers) workers=$2; shift ;;
    --forwarders) lat_fwds=$2; shift ;;
    --loads) lat_loads=$2; shift ;;
    --lat-secs) lsecs=$2; shift ;;
    --lat-rounds) lat_rounds=$2; shift ;;
    --stages) stages=1 ;;
    --shield) shield=1 ;;
    --xdp-mode) xdp_mode=$2; shift ;;
    --idle) idle=$2; shift ;;
    --napi-threaded) napi_threaded=1 ;;
    -h|--help) usage; exit 0 ;;
    *) bad "unknown argument $1 (--help lists the flags)" ;;
  esac
  shift
done
if [ "$(id -u)" -ne 0 ]; then echo "bench-forward.sh: needs root" >&2; exit 1; fi
if [ "$stages" = 1 ] && ! command -v perf >/dev/null; then
  echo "bench-forward.sh: --stages needs perf (Debian: linux-perf)" >&2; exit 1
fi

scripts/setup.sh >/dev/null
. scripts/testbed/ovs.sh
# OVS is a peer of the rates part and of the latency part's default forwarders.
if [ -z "$workers" ] && [ "$appliance" = 0 ] \
   && { [ "$rates" = 1 ] || [[ " $lat_fwds " == *" ovs"* ]]; }; then
  ovs_require bench-forward.sh
fi
# dpdk-testpmd is the benchmark's peer only (not a test dependency): installed here.
if ! command -v dpdk-testpmd >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dpdk >/dev/null
fi
[ -n "${QUENCH:-}" ] || cargo build --release -p quench >/dev/null 2>&1 || cargo build --release -p quench
# QUENCH=<binary>: another build's quench (for an A/B of two builds); default this tree's.
Q=${QUENCH:-$PWD/target/release/quench}
P=qb
R0=02:71:6e:02:00:00
out=$(mktemp -d)
cleanup() {
  ovs_stop
  ovs_kernel_unload
  if [ -n "${shield_state:-}" ]; then scripts/testbed/cpu-shield.sh off "$shield_state" >&2 || true; fi
  if [ -n "$keep" ]; then mkdir -p "$keep" && cp -r "$out"/. "$keep"/; fi
  for pid in $(jobs -p); do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  scripts/testbed/testbed.sh down --prefix $P >/dev/null
  rm -rf "$out"
}
trap cleanup EXIT
if [[ " $lat_fwds " == *" ovs_kernel "* ]] && ! ovs_kernel_datapath load; then
  echo "bench-forward.sh: --forwarders ovs_kernel: no openvswitch kernel module here (/sys/module/openvswitch, modprobe -n)" >&2
  exit 2
fi
scripts/testbed/testbed.sh down --prefix $P >/dev/null
scripts/testbed/testbed.sh up --senders 1 --receivers 1 --prefix $P ${workers:+--queues "$workers"} >/dev/null
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
  ip netns exec $P-s0 $Q blast --iface eth0 --dst $R0 --len "$len" --duration "${secs}s" \
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
$( [ -n "$xdp_mode" ] && echo "xdp_mode = \"$xdp_mode\"" )
[[ports]]
name = "r0"
iface = "$P-sw-r0"
$( [ -n "$xdp_mode" ] && echo "xdp_mode = \"$xdp_mode\"" )
$( [ -n "${1:-}" ] && echo "rate = \"$1\"" )
[[static_macs]]
mac = "$R0"
port = "r0"
TOML
}

# cpu_split SECS: the share of all CPUs' time over SECS spent in user, system + softirq, idle.
cpu_split() {
  python3 -c "
import time
def rd():
    v = list(map(int, open('/proc/stat').readline().split()[1:]))
    return v[0] + v[1], v[2] + v[5] + v[6], v[3] + v[4], sum(v[:8])
a = rd(); time.sleep($1); b = rd()
t = b[3] - a[3]
print(' '.join(f'{100 * (b[i] - a[i]) / t:.0f}' for i in range(3)))"
}

if [ -n "$workers" ]; then
  rows=()
  for n in $(seq "$workers"); do
    switch_cfg ""
    ip netns exec $P-sw $Q switch --config "$out/sw.toml" --workers "$n" --fast-path off \
      >"$out/sw.out" 2>"$out/sw.err" &
    sp=$!
    sleep 1.5
    bps=()
    for c in $(seq 0 $((workers - 1))); do
      ip netns exec $P-s0 $Q blast --iface eth0 --dst $R0 --len 60 --duration "${secs}s" \
        --core "$c" >"$out/blast$c.json" 2>"$out/blast$c.err" &
      bps+=($!)
    done
    sleep 1
    window rx_packets $((secs - 2)) >"$out/rate" &
    wp=$!
    split=$(cpu_split $((secs - 2)))
    wait $wp
    for b in "${bps[@]}"; do wait "$b" || cat "$out"/blast*.err >&2; done
    if ! kill -TERM $sp 2>/dev/null; then
      echo "bench-forward.sh: quench switch --workers $n stopped early:" >&2
      cat "$out/sw.err" >&2
    fi
    wait $sp || true
    grep -h "on worker" "$out/sw.err" >&2 || true
    rows+=("$n $(cat "$out/rate") $split")
  done
  printf '%s\n' "${rows[@]}" | awk -v q="$workers" '
    BEGIN { printf "\n%d-queue veths, %d blasters (cores 0..%d), 64 B frames, AF_XDP\n", q, q, q - 1
            print "| workers | Mpps | per-worker Mpps | ratio to n x one worker | CPU user % | CPU system + softirq % | CPU idle % |"
            print "|---|---|---|---|---|---|---|" }
    $1 == 1 { one = $2 }
    { printf "| %d | %.3f | %.3f | %.2f | %s | %s | %s |\n", $1, $2 / 1e6, $2 / 1e6 / $1, $2 / ($1 * one), $3, $4, $5 }'
  exit 0
fi

# napi_knobs on|off (--napi-threaded): the forwarder's two veths' NAPI in kernel threads
# (sysfs `threaded` 1), pinned to core 0, the forwarder's, at SCHED_FIFO 50, so that the
# sender's transmit only queues a frame and wakes the thread, which runs the XDP program and the
# copy into the forwarder's UMEM on core 0 (preempting the forwarder there); or their values
# from before back. Set while quench or testpmd af_xdp runs, so that the bridge's cells keep the
# defaults.
napi_saved=
napi_knobs() {
  local d f t
  if [ "$1" = on ]; then
    napi_saved=
    for d in $P-sw-s0 $P-sw-r0; do
      napi_saved+="$d/threaded=$(ip netns exec $P-sw cat /sys/class/net/$d/threaded) "
      ip netns exec $P-sw sh -c "echo 1 >/sys/class/net/$d/threaded"
    done
    # The threads are named napi/DEV-ID (the command name cut to 15 characters).
    for t in $(pgrep "^napi/$P-sw-"); do
      taskset -pc 0 "$t" >/dev/null && chrt -f -p 50 "$t" || true
    done
  else
    for f in $napi_saved; do
      ip netns exec $P-sw sh -c "echo ${f#*=} >/sys/class/net/${f%%=*}" 2>/dev/null || true
    done
    napi_saved=
  fi
}
# Whether the forwarder $1 gets napi_knobs in the current part ($napi_part: 1 in the latency
# part with --napi-threaded).
napi_on() { [ "$napi_part" = 1 ] && { [ "$1" = quench ] || [ "$1" = quench_userspace ] || [ "$1" = af_xdp ]; }; }
napi_part=0

declare -A res
# Starts forwarder $1 (quench, quench_userspace, bridge, ovs, ovs_system, ovs_kernel, af_packet,
# af_xdp)
# on core 0 in the switch namespace, for at most $2 seconds (testpmd); stop_forwarder $1 stops it.
# $fwd_pid: the process to stop.
start_forwarder() {
  fwd_pid=
  local sw_args=()
  napi_on "$1" && napi_knobs on
  case "$1" in
    quench | quench_userspace)
      switch_cfg ""
      [ "$1" = quench_userspace ] && sw_args+=(--fast-path off)
      # Every CPU allowed (a shielded caller has only the last): the worker takes core 0, the
      # main and control-socket threads the rest (worker::keep_off_workers).
      # Its idle mode is the default (`--idle auto`): under --shield core 0 is the worker's
      # own and it spins, as it would for a user who shields a core; else it yields (waits in
      # the kernel with the fast path).
      # --idle spin|yield|wait|auto|DURATION sets it (an A/B).
      ip netns exec $P-sw taskset -c 0-$last $Q switch --config "$out/sw.toml" --workers 1 \
        --idle "$idle" "${sw_args[@]}" >"$out/sw.out" 2>"$out/sw.err" &
      fwd_pid=$!
      sleep 1.5 ;;
    appliance)
      # Every frame classified (UDP 5-tuple) and forwarded at once: no reaction point.
      ip netns exec $P-sw taskset -c 0 $Q appliance --config configs/appliance.toml --cc none \
        --idle spin --driver af_xdp --inside $P-sw-s0 --outside $P-sw-r0 >"$out/ap.out" 2>"$out/ap.err" &
      fwd_pid=$!
      sleep 1.5 ;;
    bridge)
      ip -n $P-sw link add br0 type bridge
      ip -n $P-sw link set $P-sw-s0 master br0
      ip -n $P-sw link set $P-sw-r0 master br0
      ip -n $P-sw link set br0 up ;;
    ovs | ovs_system | ovs_kernel)
      # See the header: the PMD thread of `ovs` on core 0, the rest on the last core; the
      # main thread of `ovs_system` (its forwarder) on core 0.
      local dp=netdev type=afxdp cpus=$last cfg=(pmd-cpu-mask=0x1)
      case "$1" in
        ovs_system) type=system cpus=0 cfg=() ;;
        ovs_kernel) dp=system type=system cfg=() ;;
      esac
      ovs_start --netns $P-sw --cpus "$cpus" "${cfg[@]}" || exit 1
      ovs_bridge ovsbr $dp
      ovs_port ovsbr $P-sw-s0 $type
      ovs_port ovsbr $P-sw-r0 $type
      ovs_appctl fdb/add ovsbr $P-sw-r0 0 $R0 >/dev/null
      sleep 1 ;;
    af_packet | af_xdp)
      # dpdk-testpmd, io forwarding between two ports of one PMD, one forwarding core: core 0,
      # as quench's worker (the source spins on the last core; testpmd's forwarding lcore there
      # measured the two fighting over one CPU: 0.064 Mpps). Its main lcore, which only waits,
      # shares the source's core. net_af_xdp takes the same kernel transmit path as quench (an
      # AF_XDP socket in copy mode); net_af_packet a TPACKET ring. testpmd exits when its stdin
      # closes ("Press enter to exit"): kept open with sleep, which ends on its own.
      sleep "$2" | ip netns exec $P-sw timeout -s INT $(($2 + 1)) stdbuf -oL dpdk-testpmd \
        --no-huge -m 1024 --no-pci -l 0,$last --main-lcore $last \
        --vdev=net_${1}0,iface=$P-sw-s0 --vdev=net_${1}1,iface=$P-sw-r0 --file-prefix=qb \
        -- --forward-mode=io --nb-cores=1 --auto-start >"$out/pmd.out" 2>&1 &
      fwd_pid=$!
      # Its stdout line-buffered, so that "Press enter" shows when it starts forwarding (its EAL
      # start took over 3 s on the loaded VM, and a cell then measured no frame at all); frames
      # went through only about a second after that line: 2 s more.
      for _ in $(seq 300); do
        grep -q "Press enter to exit" "$out/pmd.out" 2>/dev/null && break
        kill -0 "$fwd_pid" 2>/dev/null || break
        sleep 0.1
      done
      grep -q "Press enter to exit" "$out/pmd.out" \
        || { echo "bench-forward.sh: testpmd ($1) did not start:" >&2; cat "$out/pmd.out" >&2; exit 1; }
      sleep 2 ;;
  esac
}
stop_forwarder() {
  case "$1" in
    quench | quench_userspace) kill -TERM "$fwd_pid"; wait "$fwd_pid" || true ;;
    appliance) kill -INT "$fwd_pid"; wait "$fwd_pid" || true ;;
    bridge) ip -n $P-sw link del br0 ;;
    ovs*) ovs_stop ;;
    *) kill -INT "$fwd_pid" 2>/dev/null || true; wait "$fwd_pid" 2>/dev/null || true
       cp "$out/pmd.out" "$out/pmd-$1-$(date +%s).out" ;;
  esac
  [ -z "$napi_saved" ] || napi_knobs off
}

if [ "$appliance" = 1 ]; then
  src=$(measure 60 $P-sw $P-sw-s0)
  # The switch's userspace path, the appliance's kind of loop (AF_XDP in, AF_XDP out).
  for fwd in quench_userspace appliance; do
    start_forwarder $fwd $((secs + 5))
    res[$fwd]=$(measure 60)
    stop_forwarder $fwd
  done
  grep -h "direct\|inside" "$out/ap.out" | head -2 >&2 || true
  python3 - "$src" "${res[quench_userspace]}" "${res[appliance]}" <<'PY'
import json, sys
o, q, a = map(float, sys.argv[1:])
print()
print("| frame | source offers Mpps | quench switch --fast-path off Mpps | quench appliance Mpps | appliance/switch |")
print("|---|---|---|---|---|")
print(f"| 64 B | {o:.3f} | {q:.3f} | {a:.3f} | {a / q if q > 0 else float('nan'):.2f} |")
print(json.dumps({"mpps_64": {"source": o, "switch": q, "appliance": a},
                  "appliance_over_switch": a / q if q > 0 else None}))
PY
  exit 0
fi

# OVS's kernel datapath: where the kernel has the module.
ovs_kernel=
if [ "$rates" = 1 ]; then
  if ovs_kernel_datapath load; then
    ovs_kernel=ovs_kernel
  else
    echo "bench-forward.sh: no openvswitch kernel module here (/sys/module/openvswitch, modprobe -n): OVS's kernel datapath not measured" >&2
  fi
fi
# Frame lengths without FCS: 60 (64 B on the wire) and 1500.
[ "$rates" = 1 ] && for len in 60 1500; do
  # What the source offers: the ingress veth's receive count with no forwarder (the stack drops
  # the frames); a forwarder near this figure is limited by the source, not by itself.
  res[source_$len]=$(measure "$len" $P-sw $P-sw-s0)
  for fwd in quench quench_userspace bridge ovs ovs_system $ovs_kernel af_packet af_xdp; do
    start_forwarder $fwd $((secs + 5))
    res[${fwd}_$len]=$(measure "$len")
    stop_forwarder $fwd
  done
done

# Shaping: quench with r0 paced, 1500 B frames offered above the rate; receiver bit rate.
shape() { # RATE BPS
  switch_cfg "$1"
  ip netns exec $P-sw $Q switch --config "$out/sw.toml" --workers 1 >"$out/sw.out" 2>"$out/sw.err" &
  local sp=$!
  sleep 1.5
  ip netns exec $P-s0 $Q blast --iface eth0 --dst $R0 --len 1500 --duration "${secs}s" --core $last \
    >/dev/null 2>&1 &
  local bp=$! bps
  sleep 1.5
  bps=$(window rx_bytes 1)
  wait $bp || true
  kill -TERM $sp; wait $sp || true
  # rx_bytes counts frames without FCS, the octets quench paces.
  python3 -c "print(f'{$bps * 8 / $2:.5f}')"
}
if [ "$rates" = 1 ]; then
  shape_1g=$(shape 1gbit 1e9)
  shape_100m=$(shape 100mbit 1e8)
fi

# Latency: one paced flow through each forwarder at each load; the sink's summary.json.
read -ra loads <<<"$lat_loads"
napi_part=$napi_threaded
# --shield (two CPUs): for the latency part, the machine's other work (other processes, kernel
# reclaim and RCU threads, the devices' interrupts and the unbound workqueues' workers:
# scripts/testbed/cpu-shield.sh --irqs) moves onto the last CPU, the sender's and sink's, leaving core 0
# to the forwarder under test, the same for the three (the bridge forwards on the sender's core
# inside its sendto, so core 0 is idle for it). Without it, on a machine where anything else
# runs, the figures measure who else got core 0.
shield_state=
if [ "$shield" = 1 ] && [ "$ncores" -eq 2 ]; then
  shield_state="$out/shield"
  scripts/testbed/cpu-shield.sh on $last "$shield_state" --irqs | sed 's/^/== /' >&2
fi
lat_args=()
# lat_round R FWD...: round R, every forwarder in the order given at every load; the cells go to
# $out/lat-rR-FWD-LOAD. quench's switch starts afresh for each load, so that its final table
# (sw-rR-LOAD.out) gives that load's loop gaps: where a latency tail comes from the switch's own
# loop, it shows there.
lat_round() {
  local rnd=$1 fwd load d
  shift
  for fwd in "$@"; do
    # testpmd's bound: every cell (two with --stages, the traced one slower) and their start-up.
    per_load $fwd || start_forwarder $fwd $(( ${#loads[@]} * (lsecs + 3) * (1 + 2 * stages) + 5 ))
    for load in "${loads[@]}"; do
      d="$out/lat-r$rnd-$fwd-$load"
      per_load $fwd && start_forwarder $fwd 0
      send_cell() { # OUT: one paced cell into OUT (the sink's report directory)
        taskset -c $last $Q send --iface $P-s0/eth0 --config configs/send.toml --cc none \
          --rate "$((load * 10))mbit" --duration "${lsecs}s" --sink $P-r0/eth0 --sink-no-cnp \
          --sink-out "$1" >"$1.log" 2>&1 || { cat "$1.log" >&2; exit 1; }
      }
      send_cell "$d"
      lat_args+=("$rnd" "$fwd" "$load" "$d")
      if [ "$stages" = 1 ]; then
        # A second cell under the trace, so that the table's cell is not perturbed by it.
        perf record -q -k mono -a -o "$d-stages.perf" -e syscalls:sys_enter_sendto \
          -e net:net_dev_start_xmit -e net:netif_rx -e net:netif_receive_skb -e xdp:xdp_redirect \
          -e sched:sched_switch -e irq:softirq_entry -e irq_vectors:local_timer_entry \
          -- bash -c "$(declare -f send_cell); $(declare -p Q P last load lsecs); send_cell $d-stages" \
          2>"$d-stages.perf.err" || { cat "$d-stages.perf.err" >&2; exit 1; }
        perf script --ns -F comm,tid,cpu,time,event,trace -i "$d-stages.perf" 2>/dev/null \
          | python3 scripts/analysis/latency-stages.py --forwarder "$fwd" --prefix $P \
            --sink-json "$d-stages/summary.json" >"$d-stages.txt" || true
        # The trace is large (tens of MB a cell) and read: only its report stays, unless --keep.
        [ -n "$keep" ] || rm -f "$d-stages.perf"
        sed "s/^/  [$load %] /" "$d-stages.txt" | grep -v '^  \[[0-9]* %\] {' >&2 || true
      fi
      if [ $fwd = quench ]; then
        stop_forwarder quench
        cp "$out/sw.out" "$out/sw-r$rnd-$load.out"
        # The idle decision, and what the program forwarded in the kernel against what reached
        # the worker.
        grep -h -e "when idle" -e "steps of" -e "kernel fast path" -e "frames sent" \
          "$out/sw.err" "$out/sw.out" | sed "s/^/  [round $rnd, $load %] /" >&2 || true
      elif [ $fwd = quench_userspace ]; then
        stop_forwarder quench_userspace
        cp "$out/sw.out" "$out/sw-userspace-r$rnd-$load.out"
        grep -h -e "when idle" "$out/sw.err" \
          | sed "s/^/  [round $rnd, userspace, $load %] /" >&2 || true
      fi
    done
    per_load $fwd || stop_forwarder $fwd
  done
}
# quench's switches start afresh for each load (their exit tables are per load).
per_load() { [ "$1" = quench ] || [ "$1" = quench_userspace ]; }
# One round (the default), or --lat-rounds R: R rounds, the forwarders' order reversed every
# other round, so that no forwarder always runs first (right after the shield moved everything)
# or last.
read -ra fwd_list <<<"$lat_fwds"
for rnd in $(seq "$lat_rounds"); do
  if [ $((rnd % 2)) = 1 ]; then order=("${fwd_list[@]}"); else
    order=(); for ((i = ${#fwd_list[@]} - 1; i >= 0; i--)); do order+=("${fwd_list[$i]}"); done
  fi
  [ "$lat_rounds" = 1 ] || echo "== round $rnd of $lat_rounds: ${order[*]} ($(date -u +%T))" >&2
  lat_round "$rnd" "${order[@]}"
done
if [ -n "$shield_state" ]; then
  scripts/testbed/cpu-shield.sh off "$shield_state" >&2
  shield_state=
fi
python3 scripts/analysis/latency-table.py "${lat_args[@]}"
for load in "${loads[@]}"; do
  for rnd in $(seq "$lat_rounds"); do
    [ -f "$out/sw-r$rnd-$load.out" ] || continue
    sed -n "s/^worker/quench at $load %$([ "$lat_rounds" = 1 ] || echo ", round $rnd"): worker/p" \
      "$out/sw-r$rnd-$load.out"
  done
done
[ "$rates" = 1 ] || exit 0

# Every rate as FORWARDER_LEN=MPPS (the keys of `res`), then the shaping fractions.
rate_args=()
for k in "${!res[@]}"; do rate_args+=("$k=${res[$k]}"); done
python3 - "$shape_1g" "$shape_100m" "${rate_args[@]}" <<'PY'
import json, sys
s1g, s100 = float(sys.argv[1]), float(sys.argv[2])
res = {}
for a in sys.argv[3:]:
    k, v = a.split("=")
    fwd, length = k.rsplit("_", 1)
    res.setdefault(fwd, {})[{"60": "64", "1500": "1500"}[length]] = float(v)
r = lambda a, b: a / b if b > 0 else float("nan")
# Forwarder -> (table label, JSON key); rows in this order, those that ran.
ROWS = [("source", "source offers (no forwarder)", "source"),
        ("quench", "quench switch (kernel fast path, the default)", "quench"),
        ("quench_userspace", "quench switch --fast-path off", "quench_userspace"),
        ("bridge", "Linux bridge", "bridge"),
        ("ovs", "OVS userspace datapath, afxdp ports, 1 PMD", "ovs"),
        ("ovs_system", "OVS userspace datapath, system ports", "ovs_system"),
        ("ovs_kernel", "OVS kernel datapath", "ovs_kernel"),
        ("af_packet", "testpmd net_af_packet", "testpmd_af_packet"),
        ("af_xdp", "testpmd net_af_xdp", "testpmd_af_xdp")]
rows = [row for row in ROWS if row[0] in res]
frames = ["64", "1500"]
print()
print("| forwarder | 64 B Mpps | 1500 B Mpps | quench / it, 64 B | quench / it, 1500 B "
      "| quench userspace / it, 64 B | quench userspace / it, 1500 B |")
print("|---|---|---|---|---|---|---|")
for fwd, label, _ in rows:
    m = res[fwd]
    ratios = []
    for q in ("quench", "quench_userspace"):
        for f in frames:
            ratios.append("-" if fwd in ("source", q) else f"{r(res[q][f], m[f]):.2f}")
    print(f"| {label} | {m['64']:.3f} | {m['1500']:.3f} | " + " | ".join(ratios) + " |")
out = {"mpps": {f: {key: res[fwd][f] for fwd, _, key in rows} for f in frames}}
# ratio_F: quench's rate (as a user starts it) over each peer's; ratio_userspace_F: quench
# userspace's (every frame through the worker).
for f in frames:
    for q, name in (("quench", f"ratio_{f}"), ("quench_userspace", f"ratio_userspace_{f}")):
        out[name] = {key: r(res[q][f], res[fwd][f]) for fwd, _, key in rows
                     if fwd not in ("source", "quench", "quench_userspace")}
print(f"shaping: 1gbit -> {s1g*100:.2f} % of rate, 100mbit -> {s100*100:.2f} % of rate")
out["shaping_fraction"] = {"1gbit": s1g, "100mbit": s100}
print(json.dumps(out))
PY
