#!/usr/bin/env bash
# Forwarding between two net_null ports: quench's DPDK port path (engine/runtime/benches/dpdk_fwd.rs:
# walk, forwarding-table learn + lookup, egress enqueue/dequeue per frame) against a bare C
# forwarding loop over the same ports (engine/runtime/benches/dpdk_fwd.c), in the same run, alternating
# ROUNDS times. Prints each run's Mpps, the medians and the ratio quench / C (target >= 0.7).
# The C loop runs twice per round: with DPDK's default mbuf pool (the ratio the target is about)
# and with --packed-pool, the layout quench's own pools have without hugepages (one mbuf per
# 4 KiB page puts every mbuf in one L1 set; see quench_dpdk_pool_create in
# engine/port/src/dpdk/shim.c), so the second ratio compares like with like.
#
# Then the realistic mix (`--mix` of both programs): two ring-backed ports (rte_eth_from_rings,
# rings crossed so that frames circulate without allocation or free), 2,048 frames each way
# between 1,024 stations on each side, 64 / 576 / 1500 octets at random; the C loop on the same
# ports and frames. The C loop never reads a frame and a ring port's rx/tx only moves pointers,
# so that ratio is quench's whole per-frame cost (classify, learn, look up, queue) against bare
# pointer moves; quench's mix rate beside its repeated-header rate is the cost of the mix.
#
# Usage: scripts/bench-dpdk.sh [--workers N] [SECONDS_PER_RUN (default 3)] [ROUNDS (default 3)]
#        [CPU (default 1)]
# Needs DPDK (installs it with scripts/setup-dpdk.sh); no NIC, no hugepages, no root.
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
# - cp_cross (n > 1 only): the design before the sum (`--cp-cross --cross-mbufs`): port p's
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
cd "$(dirname "$0")/.."
WORKERS=
if [ "${1:-}" = "--workers" ]; then
  WORKERS=${2:?--workers takes N}
  shift 2
fi
SECS=${1:-3}
ROUNDS=${2:-3}
CPU=${3:-1}

scripts/setup-dpdk.sh >/dev/null
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
          cp_cross) flags=(--cp-cross --cross-mbufs) ;;
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

c_runs=()
p_runs=()
q_runs=()
cm_runs=()
qm_runs=()
for r in $(seq "$ROUNDS"); do
  c=$("$out/dpdk_fwd_c" "$SECS" "${EAL[@]}" | grep '^c_loop')
  q=$("$quench" "$SECS" "${EAL[@]}" | grep '^quench')
  p=$("$out/dpdk_fwd_c" "$SECS" --packed-pool "${EAL[@]}" | grep '^c_loop')
  echo "round $r: $c"
  echo "round $r: $q"
  echo "round $r: $p (packed pool)"
  cx=$("$out/dpdk_fwd_c" "$SECS" --mix "${EAL[@]}" | grep '^c_loop_mix')
  qx=$("$quench" "$SECS" --mix "${EAL[@]}" | grep '^quench_mix')
  echo "round $r: $cx"
  echo "round $r: $qx"
  cm_runs+=("${cx##*mpps=}")
  qx=${qx##*mpps=}
  qm_runs+=("${qx%% *}")
  c_runs+=("${c##*mpps=}")
  p_runs+=("${p##*mpps=}")
  q=${q##*mpps=}
  q_runs+=("${q%% *}")
done
cm=$(median "${c_runs[@]}")
pm=$(median "${p_runs[@]}")
qm=$(median "${q_runs[@]}")
awk -v c="$cm" -v q="$qm" 'BEGIN {
  printf "bench-dpdk: C loop %.2f Mpps, quench %.2f Mpps (medians), ratio quench/C = %.2f (target >= 0.70)\n", c, q, q / c }'
awk -v c="$pm" -v q="$qm" 'BEGIN {
  printf "bench-dpdk: C loop with a packed pool %.2f Mpps (median), ratio quench/C = %.2f\n", c, q / c }'
cxm=$(median "${cm_runs[@]}")
qxm=$(median "${qm_runs[@]}")
awk -v c="$cxm" -v q="$qxm" -v r="$qm" 'BEGIN {
  printf "bench-dpdk: mix (1,024 stations a side, 64/576/1500 B, ring ports): C loop %.2f Mpps, quench %.2f Mpps (medians), ratio quench/C = %.3f; quench mix / repeated header = %.2f\n", c, q, q / c, q / r }'
