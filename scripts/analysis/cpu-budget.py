#!/usr/bin/env python3
"""The CPU budget of a testbed run: where the machine's CPU went between two samples.

usage: cpu-budget.py FILE [FILE ...]     (per file: the table, then one JSON line)

FILE holds samples that scripts/testbed/appliance.sh writes (`cpu_sample`), each a block of lines:

    sample UNIX_SECONDS LABEL
    hz TICKS_PER_SECOND
    cpu USER NICE SYSTEM IDLE IOWAIT IRQ SOFTIRQ STEAL ...     (/proc/stat's first line)
    proc ROLE PID FIELDS...        (ROLE one word; /proc/PID/stat from field 3 on: proc(5))
    switch JSON                    (`quench stats --json` of the switch, one line)

The first and the last sample bound the window. The switch's CPU is also given per frame it
received (all ports' `rx_pkts`). Per process: utime + stime (proc(5) fields 14
and 15: every thread's, the exited ones' included) over the window, as a percentage of one CPU,
and in microseconds per frame the switch delivered on the bottleneck port (`r0`, its `tx_pkts`).
A process missing from either sample is left out and named. Per role, the sum of its processes.

The machine (/proc/stat): busy is everything but idle and iowait; the columns are disjoint and
sum to the machine's time (100 % per CPU). With tick-based accounting (no
CONFIG_IRQ_TIME_ACCOUNTING) a tick that lands in a softirq is charged to the softirq column and
also to the interrupted task's stime: the processes' figures include the softirqs that ran in
their context (an iperf3 client's sendto runs the veth and the XDP copy), so the softirq column
is shown beside them, not added. `rest` is busy less every listed process: other tasks and
softirqs that ran in the idle task. The two clocks differ: a process's utime + stime is its exact
run time (the scheduler's, split by the ticks' ratio), /proc/stat's columns are ticks (250 a
second here) filed under whatever ran at each; loops that wake and sleep between ticks
(`--idle wait`, sleeps) are missed by the ticks, so busy is under-counted and idle over-counted,
and `rest` can come out negative: then read the testbed's sum against the capacity, not idle.

`at 1 Gb/s`: each role's CPU if the bottleneck carried its line rate: roles whose work follows
the delivered frames (SCALES_WITH_DELIVERED) scaled by line rate / delivered bit rate, the others
as measured (the clients already offer above the bottleneck; the appliance receives all they
offer). Their sum against the machine's 100 % per CPU says whether the testbed fits.
"""
import json
import sys
from pathlib import Path

BOTTLENECK = "r0"
LINK_BPS = 1e9
# proc(5): utime and stime are fields 14 and 15; the sample starts at field 3.
UTIME, STIME = 14 - 3, 15 - 3
# Roles whose CPU follows the frames the bottleneck delivers.
SCALES_WITH_DELIVERED = {"switch", "server"}


class BudgetError(ValueError):
    pass


def parse(text):
    """The samples of a file, in order: dicts with t, label, hz, cpu (list), procs, switch."""
    samples = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        word, _, rest = line.partition(" ")
        if word == "sample":
            t, _, label = rest.partition(" ")
            samples.append({"t": float(t), "label": label.strip(), "hz": None, "cpu": None,
                            "procs": {}, "switch": None})
            continue
        if not samples:
            raise BudgetError(f"line {n}: {word!r} before the first 'sample' line")
        s = samples[-1]
        try:
            if word == "hz":
                s["hz"] = int(rest)
            elif word == "cpu":
                s["cpu"] = [int(x) for x in rest.split()]
            elif word == "proc":
                role, pid, *stat = rest.split()
                if len(stat) <= STIME:
                    raise BudgetError(f"line {n}: /proc/{pid}/stat has {len(stat) + 2} fields")
                s["procs"][int(pid)] = (role, int(stat[UTIME]) + int(stat[STIME]))
            elif word == "switch":
                s["switch"] = json.loads(rest) if rest.strip() else None
            else:
                raise BudgetError(f"line {n}: unknown line {word!r}")
        except BudgetError:
            raise
        except ValueError as e:
            raise BudgetError(f"line {n}: cannot read {line[:60]!r}: {e}") from None
    return samples


def port(snap, name):
    if not snap:
        return None
    return next((p for p in snap.get("ports", []) if p.get("name") == name), None)


def budget(samples):
    """The budget between the first and the last sample (see the module's docs)."""
    if len(samples) < 2:
        raise BudgetError(f"{len(samples)} sample(s): a window needs two")
    a, b = samples[0], samples[-1]
    for s in (a, b):
        if s["cpu"] is None or len(s["cpu"]) < 7 or not s["hz"]:
            raise BudgetError(f"sample {s['label']!r} lacks its 'cpu' or 'hz' line")
    hz, secs = b["hz"], b["t"] - a["t"]
    if secs <= 0:
        raise BudgetError(f"the window is {secs:.3f} s")
    d = [y - x for x, y in zip(a["cpu"], b["cpu"])]
    total = sum(d)
    if total <= 0:
        raise BudgetError("/proc/stat did not advance over the window")
    # The machine's CPUs: its ticks over the window against the wall clock's.
    ncpu = max(1, round(total / (hz * secs)))
    pct_of_ticks = 100.0 * ncpu / total  # one tick, as % of one CPU

    f0, f1 = port(a["switch"], BOTTLENECK), port(b["switch"], BOTTLENECK)
    frames = (f1["tx_pkts"] - f0["tx_pkts"]) if f0 and f1 else 0
    # What the switch received on all its ports: its own work follows these.
    received = (sum(p.get("rx_pkts", 0) for p in b["switch"]["ports"])
                - sum(p.get("rx_pkts", 0) for p in a["switch"]["ports"])) if f0 and f1 else 0
    bits = 8 * (f1["tx_bytes"] - f0["tx_bytes"]) if f0 and f1 else 0
    delivered_bps = bits / secs
    scale = LINK_BPS / delivered_bps if delivered_bps > 0 else None

    def row(ticks):
        cpu_s = ticks / hz
        return {"cpu_pct": round(ticks * pct_of_ticks, 1),
                "us_per_frame": round(1e6 * cpu_s / frames, 2) if frames else None}

    procs, missing, roles = [], [], {}
    for pid, (role, t0) in a["procs"].items():
        if pid not in b["procs"]:
            missing.append({"role": role, "pid": pid})
            continue
        ticks = b["procs"][pid][1] - t0
        procs.append({"role": role, "pid": pid, **row(ticks)})
        roles[role] = roles.get(role, 0) + ticks
    role_rows = []
    for role, ticks in sorted(roles.items(), key=lambda kv: -kv[1]):
        r = {"role": role, **row(ticks)}
        if scale is None:
            r["at_line_rate_pct"] = None
        else:
            r["at_line_rate_pct"] = round(
                r["cpu_pct"] * (scale if role in SCALES_WITH_DELIVERED else 1.0), 1)
        role_rows.append(r)
    listed = sum(roles.values())
    busy = total - d[3] - d[4]
    machine = {
        "busy_pct": round(busy * pct_of_ticks, 1),
        "softirq_pct": round(d[6] * pct_of_ticks, 1),
        "irq_pct": round(d[5] * pct_of_ticks, 1),
        "idle_pct": round((d[3] + d[4]) * pct_of_ticks, 1),
        "rest_pct": round((busy - listed) * pct_of_ticks, 1),
    }
    need = (None if scale is None
            else round(sum(r["at_line_rate_pct"] for r in role_rows), 1))
    return {
        "window_s": round(secs, 3),
        "ncpu": ncpu,
        "capacity_pct": 100 * ncpu,
        "frames_delivered": frames,
        "switch_frames_received": received,
        "switch_us_per_frame_received": (
            round(1e6 * roles.get("switch", 0) / hz / received, 2) if received else None),
        "delivered_mbps": round(delivered_bps / 1e6, 1),
        "testbed_pct": round(listed * pct_of_ticks, 1),
        "testbed_us_per_frame": row(listed)["us_per_frame"],
        "at_line_rate_pct": need,
        "machine": machine,
        "roles": role_rows,
        "procs": procs,
        "missing": missing,
    }


def table(b):
    """The budget as text lines."""
    head = ("role", "CPU %", "us/frame", "at 1 Gb/s %")
    rows = [head]
    fmt = lambda v, spec: "-" if v is None else format(v, spec)
    for r in b["roles"]:
        rows.append((r["role"], fmt(r["cpu_pct"], ".1f"), fmt(r["us_per_frame"], ".2f"),
                     fmt(r["at_line_rate_pct"], ".1f")))
    rows.append(("testbed (sum)", fmt(b["testbed_pct"], ".1f"),
                 fmt(b["testbed_us_per_frame"], ".2f"), fmt(b["at_line_rate_pct"], ".1f")))
    w = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = [f"  CPU over {b['window_s']:.1f} s of the UDP phase, % of one CPU (the machine: "
             f"{b['capacity_pct']} %); {b['frames_delivered']} frames delivered at "
             f"{BOTTLENECK}, {b['delivered_mbps']:.0f} Mb/s; the switch received "
             f"{b['switch_frames_received']}, {fmt(b['switch_us_per_frame_received'], '.2f')} us "
             f"of its CPU each"]
    lines += ["  " + "  ".join(c.ljust(w[i]) if i == 0 else c.rjust(w[i])
                               for i, c in enumerate(r)) for r in rows]
    m = b["machine"]
    lines.append(f"  machine: busy {m['busy_pct']:.1f} %, of it softirq {m['softirq_pct']:.1f} %"
                 f" (inside the processes' figures too) and irq {m['irq_pct']:.1f} %; rest "
                 f"(not the testbed's processes) {m['rest_pct']:.1f} %; idle {m['idle_pct']:.1f} %")
    if m["rest_pct"] < 0:
        lines.append("  (rest < 0: /proc/stat's ticks missed run time the processes' exact figures "
                     "count; its busy is low and its idle high by at least that much)")
    for p in b["missing"]:
        lines.append(f"  left out: {p['role']} (pid {p['pid']}), gone before the last sample")
    return lines


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    status = 0
    for f in argv[1:]:
        try:
            b = budget(parse(Path(f).read_text()))
        except (OSError, BudgetError) as e:
            print(f"cpu-budget.py: {f}: {e}", file=sys.stderr)
            status = 1
            continue
        print(f"== {f}")
        print("\n".join(table(b)))
        print(json.dumps(b))
    return status


if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):
        print(__doc__.strip())
        sys.exit(0)
    sys.exit(main(sys.argv))
