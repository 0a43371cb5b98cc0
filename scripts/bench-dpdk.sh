#!/usr/bin/env bash
# Forwarding between two net_null ports: quench's DPDK port path (engine/benches/dpdk_fwd.rs:
# walk, forwarding-table learn + lookup, egress enqueue/dequeue per frame) against a bare C
# forwarding loop over the same ports (engine/benches/dpdk_fwd.c), in the same run, alternating
# ROUNDS times. Prints each run's Mpps, the medians and the ratio quench / C (target >= 0.7).
# The C loop runs twice per round: with DPDK's default mbuf pool (the ratio the target is about)
# and with --packed-pool, the layout quench's own pools have without hugepages (one mbuf per
# 4 KiB page puts every mbuf in one L1 set; see quench_dpdk_pool_create in
# engine/src/port/dpdk/shim.c), so the second ratio compares like with like.
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
# queue pair w of both ports: without crossing (every worker holds both ports' egress: no frame
# changes core) and with crossing (worker w holds port w mod 2's egress alone, as for a port with a
# pacer or a congestion point: half the frames cross to the other worker on the rings). Per row:
# Mpps (median of ROUNDS), per-worker Mpps, the ratio to n x one worker's Mpps, and Mpps per
# CPU-second the workers had (on a loaded machine the workers get less than their cores; frames
# per CPU-second still compare: ratio_cpu, that figure over the one-worker row's, is the ratio to
# n x one worker that n workers with a core each to themselves would reach), and CPU ns per frame
# received; a last line gives what a crossing frame costs, twice the crossing run's excess CPU per
# frame over the run without (half the frames cross).
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
cc -O3 -Wall -o "$out/dpdk_fwd_c" engine/benches/dpdk_fwd.c \
  $(pkg-config --cflags libdpdk) $(pkg-config --libs libdpdk) \
  -Wl,--no-as-needed -lrte_net_null -lrte_net_ring -Wl,--as-needed
cargo bench -p engine --features dpdk --bench dpdk_fwd --no-run 2>&1 | tail -n 1
quench=$(cargo bench -p engine --features dpdk --bench dpdk_fwd --no-run --message-format=json 2>/dev/null |
  sed -n 's/.*"executable":"\([^"]*dpdk_fwd[^"]*\)".*/\1/p' | tail -n 1)

# The same EAL arguments for both: no hugepages, no PCI, two net_null vdevs, main lcore on CPU.
EAL=(--no-huge -m 512 --no-pci --no-shconf --no-telemetry -l "$CPU" --log-level=lib.eal:error
  --vdev=net_null0 --vdev=net_null1)

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

if [ -n "$WORKERS" ]; then
  ncpu=$(nproc)
  rows=()
  for n in $(seq "$WORKERS"); do
    cores=$(for w in $(seq 0 $((n - 1))); do echo $(((CPU + w) % ncpu)); done | paste -sd,)
    for cross in 0 1; do
      [ "$n" = 1 ] && [ "$cross" = 1 ] && continue # one worker: nothing to cross to
      flag=$([ "$cross" = 1 ] && echo --cross || true)
      m=()
      c=()
      f=()
      for r in $(seq "$ROUNDS"); do
        # shellcheck disable=SC2086 # $flag is empty or one word
        line=$("$quench" "$SECS" --workers "$n" $flag --cores "$cores" "${EAL[@]}" | grep '^quench_workers')
        echo "workers $n cross $cross round $r: $line"
        x=${line##*mpps=}
        m+=("$x")
        x=${line##*mpps_per_cpu=}
        c+=("${x%% *}")
        x=${line##*cpu_ns_per_rx_frame=}
        f+=("${x%% *}")
      done
      rows+=("$n $cross $(median "${m[@]}") $(median "${c[@]}") $(median "${f[@]}")")
    done
  done
  printf '%s\n' "${rows[@]}" | awk '
    BEGIN { print "| workers | frames crossing cores | Mpps | per-worker Mpps | ratio to n x one worker | Mpps per CPU-second | ratio_cpu | CPU ns per frame |"
            print "|---|---|---|---|---|---|---|---|" }
    $1 == 1 { one = $3; onec = $4 }
    $2 == 0 { plain[$1] = $5 }
    $2 == 1 { crossing[$1] = 2 * ($5 - plain[$1]) }
    { printf "| %d | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f |\n", $1, ($2 ? "half" : "none"), $3, $3 / $1,
        $3 / ($1 * one), $4, $4 / onec, $5 }
    END { for (n in crossing)
            printf "crossing cost, %d workers: %.1f ns of CPU per frame that crosses (twice the excess per frame, half of them cross)\n", n, crossing[n] }'
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
