#!/usr/bin/env bash
# Keeps other work off a CPU while a pacing run uses it, and puts it back afterwards.
#
#   scripts/testbed/cpu-shield.sh on TO STATE [--irqs]
#                                         (root) move other work onto CPUs TO, noting it in STATE
#   scripts/testbed/cpu-shield.sh off STATE       give every thread noted in STATE its CPUs back
#   scripts/testbed/cpu-shield.sh --help
#
#   --irqs   (on) also the devices' interrupts and the unbound workqueues' workers (below)
#
# A busy-polling sender paces to 1 % per 100 ms only if nothing takes its CPU for more than its
# catch-up bound (1 ms), and on a PREEMPT_NONE kernel a thread that gets the CPU keeps it until it
# yields. On the 2-core testbed VM `perf sched timehist` showed three such neighbours: kdamond
# (DAMON proactive reclaim, 0.8-8 ms twice a second), rcu_preempt (1.7-3.6 ms about once a
# second) and the VM's guest daemon's tokio workers (2-3 ms about once a second). What it moves, like
# `tuna isolate` but narrower: every user-space thread allowed on all CPUs (the default; threads
# someone pinned stay), and the kernel threads that do long stretches of work (reclaim,
# compaction, RCU grace periods). Per-CPU kernel threads, workqueue workers and interrupts stay:
# moving those made the sender's stalls worse, not better. Threads started later inherit the
# caller's CPUs, so the caller is moved too.
#
# --irqs also moves the devices' interrupts (/proc/irq/N/smp_affinity_list, where the kernel
# lets it) and the unbound workqueues' workers (/sys/devices/virtual/workqueue/cpumask) onto TO:
# for a forwarder that polls on a CPU of its own, as DPDK deployments isolate their lcores. On the
# testbed VM a trace of a latency run (bench-forward.sh --stages) showed both on the forwarder's
# core: the unbound writeback and flush workers (kworker/u*, up to 1.4 ms at a time on this
# PREEMPT_NONE kernel) and the vsock device's receive interrupt with the per-CPU work it queues
# there (kworker/0:*-virtio_vsock, 0.1-0.5 ms). Per-CPU kernel threads and the local timer stay.
set -euo pipefail

. "$(dirname "$0")/lib.sh"   # qn_usage, qn_bad
usage() { qn_bad cpu-shield.sh "on TO STATE [--irqs] or off STATE (--help)"; }

case "${1:-}" in
-h|--help) qn_usage; exit 0 ;;
on)
  if [ $# -eq 4 ] && [ "$4" != --irqs ]; then
    qn_bad cpu-shield.sh "unknown flag $4 (--help lists the flags)"
  fi
  [ $# -eq 3 ] || [ $# -eq 4 ] || usage
  to=$2 state=$3
  all=$(cat /sys/devices/system/cpu/online)
  : > "$state"
  if [ "${4:-}" = --irqs ]; then
    irqs=0
    for d in /proc/irq/[0-9]*; do
      [ -w "$d/smp_affinity_list" ] || continue
      was=$(cat "$d/smp_affinity_list" 2>/dev/null) || continue
      [ "$was" = "$to" ] && continue
      # Managed interrupts (a multiqueue device's) refuse: they stay.
      if echo "$to" > "$d/smp_affinity_list" 2>/dev/null; then
        echo "irq ${d##*/} $was" >> "$state"
        irqs=$((irqs + 1))
      fi
    done
    wq=/sys/devices/virtual/workqueue/cpumask
    if [ -w "$wq" ]; then
      mask=$(python3 -c "
import sys
m = 0
for part in sys.argv[1].split(','):
    a, _, b = part.partition('-')
    for c in range(int(a), int(b or a) + 1):
        m |= 1 << c
print(f'{m:x}')" "$to")
      was=$(cat "$wq")
      echo "$mask" > "$wq" && echo "wq $was" >> "$state"
    fi
    echo "cpu-shield: moved $irqs interrupts and the unbound workqueues onto CPU $to"
  fi
  moved=0
  for task in /proc/[0-9]*/task/[0-9]*; do
    tid=${task##*/} pid=${task#/proc/}
    pid=${pid%%/*}
    allowed=$(awk '/^Cpus_allowed_list/ {print $2}' "$task/status" 2>/dev/null) || continue
    [ "$allowed" = "$all" ] || continue
    if [ "$(awk '/^Kthread/ {print $2}' "$task/status" 2>/dev/null)" = 1 ] \
      || [ "$(awk '{print $4}' "$task/stat" 2>/dev/null)" = 2 ]; then
      case "$(cat "$task/comm" 2>/dev/null)" in
      kdamond* | rcu_preempt | rcu_sched | kcompactd* | kswapd* | khugepaged | ksmd) ;;
      *) continue ;;
      esac
    fi
    # A thread that exits meanwhile, or refuses (PF_NO_SETAFFINITY), is left alone.
    if taskset -pc "$to" "$tid" >/dev/null 2>&1; then
      echo "$pid $tid $allowed $to" >> "$state"
      moved=$((moved + 1))
    fi
  done
  echo "cpu-shield: moved $moved threads onto CPU $to until the run ends (scripts/testbed/cpu-shield.sh off $state puts them back)"
  # User threads pinned off TO stay where they are: name them, since they share the shielded
  # CPUs with whatever the caller runs there (on the loaded testbed: another run's DPDK lcores,
  # which took the forwarder's core in 4 ms slices).
  python3 - "$to" <<'PY'
import glob, sys
def cpus(spec):
    out = set()
    for part in spec.split(","):
        a, _, b = part.partition("-")
        out |= set(range(int(a), int(b or a) + 1))
    return out
to, left = cpus(sys.argv[1]), []
for st in glob.glob("/proc/[0-9]*/task/[0-9]*/status"):
    try:
        f = dict(l.split(":", 1) for l in open(st) if ":" in l)
    except OSError:
        continue
    if f.get("Kthread", "0").strip() == "1" or "Cpus_allowed_list" not in f:
        continue
    if not cpus(f["Cpus_allowed_list"].strip()) & to:
        left.append(f"{f['Name'].strip()} ({st.split('/')[4]})")
if left:
    print(f"cpu-shield: {len(left)} user threads pinned off CPU {sys.argv[1]} stay: "
          + ", ".join(sorted(left)[:8]) + (" ..." if len(left) > 8 else ""))
PY
  ;;
off)
  [ $# -eq 2 ] || usage
  state=$2
  [ -f "$state" ] || exit 0
  # Threads a moved process started meanwhile inherited TO: they go back too.
  while read -r pid tid allowed to; do
    case "$pid" in
    irq) echo "$allowed" > "/proc/irq/$tid/smp_affinity_list" 2>/dev/null || true; continue ;;
    wq) echo "$tid" > /sys/devices/virtual/workqueue/cpumask 2>/dev/null || true; continue ;;
    esac
    taskset -pc "$allowed" "$tid" >/dev/null 2>&1 || true
    for task in /proc/"$pid"/task/[0-9]*; do
      [ "$(awk '/^Cpus_allowed_list/ {print $2}' "$task/status" 2>/dev/null)" = "$to" ] \
        && taskset -pc "$allowed" "${task##*/}" >/dev/null 2>&1 || true
    done
  done < "$state"
  rm -f "$state"
  ;;
*) qn_bad cpu-shield.sh "${1:+unknown command $1: }on TO STATE [--irqs] or off STATE (--help)" ;;
esac
