#!/usr/bin/env bash
# Forwarding between two net_null ports: quench's DPDK port path (engine/runtime/benches/dpdk_fwd.rs:
# walk, forwarding-table learn + lookup, egress enqueue/dequeue per frame) against a bare C
# forwarding loop over the same ports (engine/runtime/benches/dpdk_fwd.c), in the same run, alternating
# ROUNDS times. The C loop is a floor, not a peer: it receives and transmits and decides nothing,
# so its rows say what the ports cost; quench / floor on net_null has a target (>= 0.7). The C
# loop runs twice per round: with DPDK's default mbuf pool (the ratio the target is about) and
# with --packed-pool, the layout quench's own pools have without hugepages (one mbuf per 4 KiB
# page puts every mbuf in one L1 set; see quench_dpdk_pool_create in
# engine/port/src/dpdk/shim.c), so the second ratio compares like with like.
#
# Then the realistic mix (`--mix` of both programs): two ring-backed ports (rte_eth_from_rings,
# rings crossed so that frames circulate without allocation or free), 2,048 frames each way
# between 1,024 stations on each side, 64 / 576 / 1500 octets at random; the C loop on the same
# ports and frames. The C loop never reads a frame and a ring port's rx/tx only moves pointers,
# so its row is the rings' cost, no ratio is printed against it; quench's mix rate beside its
# repeated-header rate is the cost of the mix.
#
# Then the peer, Open vSwitch with DPDK (Debian's openvswitch-switch-dpdk, ovs-vswitchd-dpdk, run
# by scripts/testbed/ovs.sh: a private ovsdb-server and ovs-vswitchd, dpdk-init=true, in a temporary
# directory and a network namespace of its own, stopped after each run): one bridge, one flow
# (actions=NORMAL: MAC learning), one PMD thread pinned to CPU (pmd-cpu-mask), the same EAL
# memory as quench's (no hugepages; the script says why). OVS cannot open the ring ports (they
# live inside the measuring process) and net_null's frames are unwritten mbufs (all-zero
# addresses), so the same mix is replayed from capture files (`dpdk_fwd --write-mix`) through
# two net_pcap ports (`rx_pcap=...,infinite_rx=1`: each frame received is copied from the
# capture into a new mbuf; transmit frees it) for quench (`--ports`), OVS-DPDK and the C loop
# (the floor of these ports) alike, 2 s of learning before OVS-DPDK's window. Prints the
# medians, each program's cost per frame above the floor, `quench / OVS-DPDK = X`, and a last
# line of JSON (peers under "mpps", the floors under "floor_mpps", each a list of the rounds).
#
#   scripts/bench/bench-dpdk.sh [--workers N] [SECONDS_PER_RUN (default 3)] [ROUNDS (default 3)]
#                               [CPU (default 1)]
# Needs DPDK (installs it with scripts/setup-dpdk.sh); no NIC, no hugepages. OVS-DPDK needs root
# (its bridge's port is a tap device) and Open vSwitch (scripts/setup.sh installs it): without
# root its runs are skipped with a message; without Open vSwitch the script stops with one.
#
# --workers N: the scaling table instead. For n = 1..N, quench's workers (`dpdk_fwd --workers n`)
# over net_null0 and net_null1 with n queue pairs each, worker w on CPU (CPU + w) mod nproc and on
# queue pair w of both ports, in these scenarios:
# - plain: plain ports, every worker holds both ports' egress, no frame changes core;
# - cp: both ports have a congestion point (`--cp`: QCN on the frames' priority; every frame goes
#   through the egress queue), as `quench switch` runs it: every worker holds both ports' egress
#   with its own congestion point, deciding on the port's depth summed over the workers
#   (switch::depth). Each port's frames come from every worker (mixed: half of what a port
#   sends was received by the other worker); the decision state is shared, no frame crosses.
#   With one worker this is the baseline of the cp rows;
# - cp_local (n > 1 only): cp without the sum (`--cp-local`): each worker's CP sees only its own
#   queue, i.e. each worker's destinations as its own ports: not a correct switch, the bound
#   cp can reach ("without crossing" below; cp is "with");
# - cp_cross (n > 1 only): the design before the sum (`--cp-cross`): port p's
#   egress on worker p mod n, (n - 1)/n of the frames cross to it as mbufs (what a paced port's
#   frames still do);
# - split (n > 1 only): plain ports with the egress split as in cp_cross (`--cross`, no congestion
#   point): the crossing measured against the plain scenario's one worker.
# Each round runs every row once (1-worker and n-worker runs alternate). Per row: Mpps (median of
# ROUNDS), per-worker Mpps, the ratio to n x the one-worker Mpps of the
# same scenario (split: of plain), Mpps per CPU-second the workers had (on a loaded machine the
# workers get less than their cores; frames per CPU-second still compare: ratio_cpu, that figure
# over the baseline's, is the ratio to n x one worker that n workers with a core each to
# themselves would reach), CPU ns per frame received, the share of received frames dropped
# (full crossing rings, full queues), and what a crossing frame costs: the excess CPU per frame
# over the baseline, divided by the share of frames that cross. A frame dropped at a full ring
# costs less than one forwarded: the cost is the crossing's only where few frames are dropped
# (a loaded machine deschedules one worker while the other fills its ring).
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/testbed/ovs.sh
usage() { sed -n '2,/^set -/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
WORKERS=
pos=()
while [ $# -gt 0 ]; do
  case $1 in
    --workers) [ $# -ge 2 ] || { echo "bench-dpdk.sh: --workers needs N" >&2; exit 2; }; WORKERS=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "bench-dpdk.sh: unknown flag $1 (--help lists the flags)" >&2; exit 2 ;;
    *) pos+=("$1") ;;
  esac
  shift
done
SECS=${pos[0]:-3}
ROUNDS=${pos[1]:-3}
CPU=${pos[2]:-1}

scripts/setup-dpdk.sh >/dev/null
# OVS-DPDK, the peer of the mix (not in the --workers table).
ovs=0
if [ -z "$WORKERS" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "bench-dpdk: OVS-DPDK not measured: it needs root (its bridge's port is a tap device, made in a network namespace of its own)" >&2
  else
    ovs_require bench-dpdk.sh dpdk
    ovs=1
  fi
fi
out=target/bench-dpdk
mkdir -p "$out"
# shellcheck disable=SC2046 # pkg-config prints several flags on purpose
cc -O3 -Wall -o "$out/dpdk_fwd_c" engine/runtime/benches/dpdk_fwd.c \
  $(pkg-config --cflags libdpdk) $(pkg-config --libs libdpdk) \
  -Wl,--no-as-needed -lrte_net_null -lrte_net_ring -Wl,--as-needed
cargo bench -p quench-runtime --features dpdk --bench dpdk_fwd --no-run 2>&1 | tail -n 1
quench=$(cargo bench -p quench-runtime --features dpdk --bench dpdk_fwd --no-run --message-format=json 2>/dev/null |
  sed -n 's/.*"executable":"\([^"]*dpdk_fwd[^"]*\)".*/\1/p' | tail -n 1)

# The same EAL arguments for both: no hugepages, no PCI, two net_null vdevs, main lcore on CPU.
EAL=(--no-huge -m 512 --no-pci --no-shconf --no-telemetry -l "$CPU" --log-level=lib.eal:error
  --vdev=net_null0 --vdev=net_null1)

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

if [ -n "$WORKERS" ]; then
  ncpu=$(nproc)
  rows=()
  if [ "$WORKERS" -gt "$ncpu" ]; then
    # nproc counts the CPUs this process may run on (a CPU shield leaves one): workers would
    # share CPUs and the table would measure time slicing.
    echo "bench-dpdk: $WORKERS workers but $ncpu CPU(s) allowed ($(taskset -pc $$ | sed 's/.*: //')): workers share CPUs" >&2
  fi
  # Rounds outermost: each round runs every (n, scenario) once, so 1-worker and n-worker runs
  # alternate and a change of the machine's load during the run falls on both.
  declare -A M C F CORES
  keys=()
  for r in $(seq "$ROUNDS"); do
    for n in $(seq "$WORKERS"); do
      cores=$(for w in $(seq 0 $((n - 1))); do echo $(((CPU + w) % ncpu)); done | paste -sd,)
      for scenario in plain cp cp_local cp_cross split; do
        # One worker: nothing crosses and nothing is shared; the other scenarios are plain or cp.
        [ "$n" = 1 ] && [ "$scenario" != plain ] && [ "$scenario" != cp ] && continue
        case $scenario in
          plain) flags=() ;;
          cp) flags=(--cp) ;;
          cp_local) flags=(--cp-local) ;;
          cp_cross) flags=(--cp-cross) ;;
          split) flags=(--cross) ;;
        esac
        line=$("$quench" "$SECS" --workers "$n" "${flags[@]}" --cores "$cores" "${EAL[@]}" | grep '^quench_workers')
        echo "$scenario workers $n round $r: $line"
        k="$scenario $n"
        [ "$r" = 1 ] && keys+=("$k")
        CORES[$k]=$cores
        x=${line##*mpps=}
        M[$k]+="$x "
        x=${line##*mpps_per_cpu=}
        C[$k]+="${x%% *} "
        x=${line##*cpu_ns_per_rx_frame=}
        F[$k]+="${x%% *} "
      done
    done
  done
  for k in "${keys[@]}"; do
    # shellcheck disable=SC2086 # the lists are space-separated on purpose
    rows+=("$k $(median ${M[$k]}) $(median ${C[$k]}) $(median ${F[$k]}) ${CORES[$k]}")
  done
  printf '%s\n' "${rows[@]}" | awk '
    BEGIN { print "| scenario | workers | CPUs | frames crossing cores | Mpps | per-worker Mpps | ratio to n x one worker (same scenario) | Mpps per CPU-second | ratio_cpu | CPU ns per frame | frames dropped | ns per crossing frame |"
            print "|---|---|---|---|---|---|---|---|---|---|---|---|" }
    $2 == 1 { one[$1] = $3; onec[$1] = $4; onef[$1] = $5 }
    { base = ($1 == "split") ? "plain" : ($1 ~ /^cp/) ? "cp" : $1
      share = ($1 == "cp_cross" || $1 == "split") ? ($2 - 1) / $2 : 0
      cost = "-"
      crossing = "none"
      dropped = 100 * (1 - $4 * $5 / 1000)
      if (dropped < 0.05) dropped = 0
      if (share > 0) {
        cost = sprintf("%.1f", ($5 - onef[base]) / share)
        crossing = sprintf("%d/%d", $2 - 1, $2)
      }
      cpus = $6
      printf "| %s | %d | %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f | %.1f %% | %s |\n", $1, $2,
        cpus, crossing, $3, $3 / $2, $3 / ($2 * one[base]), $4, $4 / onec[base], $5, dropped, cost
      if ($1 == "cp") with[$2] = $3 / one[base]
      if ($1 == "cp_local") without[$2] = $3 / one[base]
      if ($1 == "plain") plainr[$2] = $3 / one[base] }
    END { print "(cp: every worker its own egress queue and congestion point on both ports, the port depth summed over workers, against cp one worker; cp_local: the same without the sum; cp_cross: each port egress on one worker, crossing frames moved as mbufs; split: plain ports with the egress split as for cp_cross, against plain one worker; ns per crossing frame: CPU ns per frame over the baseline one worker, divided by the share that crosses)"
          for (k in with) if (k > 1) printf "bench-dpdk: %d workers against one worker of the same scenario: cp with crossing (mixed destinations, depth shared) %.2fx, without crossing (cp_local) %.2fx, plain %.2fx (target >= 1.80x with crossing)\n", k, with[k], without[k], plainr[k] }'
  exit 0
fi

# The mix on net_pcap ports, for quench, the C loop and OVS-DPDK alike (see the header).
mixdir=$(realpath "$out")
"$quench" --write-mix "$mixdir"
pmds=("$(pkg-config --variable=libdir libdpdk)"/dpdk/pmds-*/librte_net_pcap.so)
pcap_pmd=${pmds[0]}
if [ ! -e "$pcap_pmd" ]; then
  echo "bench-dpdk: DPDK's net_pcap driver is missing (Debian: librte-net-pcap23, which libdpdk-dev depends on)" >&2
  exit 1
fi
PCAP_VDEVS=("net_pcap0,rx_pcap=$mixdir/mix0.pcap,infinite_rx=1"
  "net_pcap1,rx_pcap=$mixdir/mix1.pcap,infinite_rx=1")
EAL_PCAP=(--no-huge -m 512 --no-pci --no-shconf --no-telemetry -l "$CPU" --log-level=lib.eal:error
  -d "$pcap_pmd" --vdev="${PCAP_VDEVS[0]}" --vdev="${PCAP_VDEVS[1]}")

# OVS-DPDK: its EAL as quench's and the C loop's (no hugepages, no PCI), its one PMD thread on
# CPU, ovs-vswitchd's other threads on the other CPUs. OVS 3.1 adds --in-memory to the EAL
# arguments unless --legacy-mem is among them, and the EAL refuses --in-memory with the legacy
# memory --no-huge implies ("Option --legacy-mem is not compatible with --in-memory"): hence
# --legacy-mem, and --no-shconf for what --in-memory would have given.
ovs_eal="--no-huge -m 1024 --legacy-mem --no-shconf --no-pci --no-telemetry"
ovs_mask=$(printf '0x%x' $((1 << CPU)))
ovs_cpus=$(seq 0 $(($(nproc) - 1)) | grep -vx "$CPU" | paste -sd, -)
[ -n "$ovs_cpus" ] || ovs_cpus=$CPU
if [ "$ovs" = 1 ]; then
  hp_total=$(awk '/^HugePages_Total:/ {print $2}' /proc/meminfo)
  hp_free=$(awk '/^HugePages_Free:/ {print $2}' /proc/meminfo)
  if [ "${hp_free:-0}" = 0 ]; then
    echo "bench-dpdk: OVS-DPDK runs without hugepages (EAL $ovs_eal): this machine has none free (HugePages_Total $hp_total, HugePages_Free 0 in /proc/meminfo), and OVS-DPDK's default start fails there in rte_eal_init (\"No free 2048 kB hugepages reported\", \"Cannot get hugepage information\"); quench and the C loop run without them too, and the EAL picks IOVA as VA"
  else
    echo "bench-dpdk: OVS-DPDK runs without hugepages (EAL $ovs_eal) although $hp_free are free, as quench and the C loop run"
  fi
  echo "bench-dpdk: OVS-DPDK cannot open the ring ports (rte_eth_from_rings makes them inside the measuring process) nor learn from net_null's frames (unwritten mbufs: every frame from and to 00:00:00:00:00:00): the mix is replayed from capture files through two net_pcap ports (infinite_rx: each frame received is copied into a new mbuf; transmit frees it), for quench, the C loop and OVS-DPDK alike"
fi
trap ovs_stop EXIT

# ovs_tx: the clock and the frames OVS-DPDK's two ports have transmitted.
ovs_tx() {
  echo "$(date +%s.%N) $(ovs_appctl dpctl/show -s | awk '
    /^  port [0-9]+: / { p = ($3 == "p0" || $3 == "p1") }
    p && /TX packets:/ { split($2, a, ":"); s += a[2] }
    END { print s + 0 }')"
}
# ovs_dpdk_run: OVS-DPDK forwarding the mix between its two net_pcap ports for SECS after 2 s
# of learning; prints `ovs_dpdk_ports frames=... seconds=... mpps=...` and its PMD's counters.
ovs_dpdk_run() {
  ovs_start --new-netns --cpus "$ovs_cpus" --dpdk "$ovs_eal" "pmd-cpu-mask=$ovs_mask" || exit 1
  ovs_bridge br0 netdev >/dev/null
  ovs_port br0 p0 dpdk "dpdk-devargs=${PCAP_VDEVS[0]}" || exit 1
  ovs_port br0 p1 dpdk "dpdk-devargs=${PCAP_VDEVS[1]}" || exit 1
  sleep 2
  local a b st
  a=$(ovs_tx)
  ovs_appctl dpif-netdev/pmd-stats-clear >/dev/null
  sleep "$SECS"
  b=$(ovs_tx)
  st=$(ovs_appctl dpif-netdev/pmd-stats-show)
  ovs_stop
  echo "$a $b" | awk '{ printf "ovs_dpdk_ports frames=%d seconds=%.3f mpps=%.2f", $4 - $2, $3 - $1, ($4 - $2) / ($3 - $1) / 1e6 }'
  # The PMD thread's section (the main thread's follows it).
  echo "$st" | awk -F': *' '
    /^main thread/ { exit }
    /emc hits/ { e = $2 } /smc hits/ { s = $2 } /megaflow hits/ { m = $2 }
    /miss with success upcall/ { u = $2 } /avg processing cycles per packet/ { split($2, c, " "); cy = c[1] }
    END { printf " emc_hits=%s smc_hits=%s megaflow_hits=%s upcalls=%s cycles_per_frame=%s\n", e, s, m, u, cy }'
}

c_runs=()
p_runs=()
q_runs=()
cm_runs=()
qm_runs=()
cp_runs=()
qp_runs=()
op_runs=()
mpps_of() { local x=${1##*mpps=}; echo "${x%% *}"; }
for r in $(seq "$ROUNDS"); do
  c=$("$out/dpdk_fwd_c" "$SECS" "${EAL[@]}" | grep '^c_loop')
  q=$("$quench" "$SECS" "${EAL[@]}" | grep '^quench')
  p=$("$out/dpdk_fwd_c" "$SECS" --packed-pool "${EAL[@]}" | grep '^c_loop')
  echo "round $r: $c (floor)"
  echo "round $r: $q"
  echo "round $r: $p (floor, packed pool)"
  cx=$("$out/dpdk_fwd_c" "$SECS" --mix "${EAL[@]}" | grep '^c_loop_mix')
  qx=$("$quench" "$SECS" --mix "${EAL[@]}" | grep '^quench_mix')
  echo "round $r: $cx (floor)"
  echo "round $r: $qx"
  qp=$("$quench" "$SECS" --ports net_pcap0,net_pcap1 "${EAL_PCAP[@]}" | grep '^quench_ports')
  cp=$("$out/dpdk_fwd_c" "$SECS" --ports net_pcap0,net_pcap1 "${EAL_PCAP[@]}" | grep '^c_loop_ports')
  echo "round $r: $qp (mix, net_pcap)"
  echo "round $r: $cp (floor, mix, net_pcap)"
  if [ "$ovs" = 1 ]; then
    # Not in a command substitution: its instance is stopped by this shell's EXIT trap if the
    # run fails.
    ovs_dpdk_run >"$out/ovs.line"
    op=$(cat "$out/ovs.line")
    echo "round $r: $op (mix, net_pcap)"
    op_runs+=("$(mpps_of "$op")")
  fi
  c_runs+=("$(mpps_of "$c")")
  p_runs+=("$(mpps_of "$p")")
  q_runs+=("$(mpps_of "$q")")
  cm_runs+=("$(mpps_of "$cx")")
  qm_runs+=("$(mpps_of "$qx")")
  cp_runs+=("$(mpps_of "$cp")")
  qp_runs+=("$(mpps_of "$qp")")
done
cm=$(median "${c_runs[@]}")
pm=$(median "${p_runs[@]}")
qm=$(median "${q_runs[@]}")
awk -v c="$cm" -v p="$pm" -v q="$qm" 'BEGIN {
  printf "bench-dpdk: net_null, one repeated header: quench %.2f Mpps; floor (the C loop: receive and transmit, no forwarding decision) %.2f Mpps, quench/floor = %.2f (target >= 0.70); floor with a packed pool %.2f Mpps, quench/it = %.2f (medians)\n", q, c, q / c, p, q / p }'
cxm=$(median "${cm_runs[@]}")
qxm=$(median "${qm_runs[@]}")
awk -v c="$cxm" -v q="$qxm" -v r="$qm" 'BEGIN {
  printf "bench-dpdk: mix on ring ports (1,024 stations a side, 64/576/1500 B): quench %.2f Mpps, mix / repeated header = %.2f; floor (the C loop, which never reads a frame: the rings cost) %.2f Mpps (medians)\n", q, q / r, c }'
cpm=$(median "${cp_runs[@]}")
qpm=$(median "${qp_runs[@]}")
opm=
[ "$ovs" = 1 ] && opm=$(median "${op_runs[@]}")
awk -v c="$cpm" -v q="$qpm" -v o="$opm" 'BEGIN {
  printf "bench-dpdk: mix on net_pcap ports: quench %.2f Mpps", q
  if (o != "") printf ", OVS-DPDK (one PMD, NORMAL) %.2f Mpps", o
  printf ", floor (the C loop: the ports cost) %.2f Mpps (medians)\n", c
  if (o != "") {
    printf "bench-dpdk: per frame above the floor: quench %.1f ns, OVS-DPDK %.1f ns\n", 1e3 / q - 1e3 / c, 1e3 / o - 1e3 / c
    printf "quench / OVS-DPDK = %.2f\n", q / o }
}'
# The runs as JSON: peers under "mpps", the C loop's floors under "floor_mpps", one key per
# program and ports (no suffix: net_null; _mix: ring ports; _mix_pcap: net_pcap ports).
python3 - "${q_runs[*]}" "${qm_runs[*]}" "${qp_runs[*]}" "${op_runs[*]:-}" "${c_runs[*]}" \
  "${p_runs[*]}" "${cm_runs[*]}" "${cp_runs[*]}" <<'PY'
import json, statistics, sys
v = [[float(x) for x in a.split()] for a in sys.argv[1:]]
mpps = {"quench": v[0], "quench_mix": v[1], "quench_mix_pcap": v[2]}
if v[3]:
    mpps["ovs_dpdk_mix_pcap"] = v[3]
floor = {"c_loop": v[4], "c_loop_packed": v[5], "c_loop_mix": v[6], "c_loop_mix_pcap": v[7]}
out = {"mpps": mpps, "floor_mpps": floor}
if v[3]:
    out["quench_over_ovs_dpdk"] = statistics.median(v[2]) / statistics.median(v[3])
print(json.dumps(out))
PY
