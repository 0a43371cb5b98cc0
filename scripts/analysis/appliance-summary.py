#!/usr/bin/env python3
"""Summary table of scripts/testbed/appliance.sh runs.

usage: appliance-summary.py OUT_DIR CC [CC ...]     (prints the table, then one JSON line)

Per run (congestion control): the UDP flows' goodput at the receiver (iperf3), their Jain index
and the bottleneck's utilisation; the bottleneck queue's mean / p99 depth against its set point
and the frames the switch dropped, with the tail drops at its queues and the PFC headroom
overruns among them, and the PAUSE frames it sent (all from the `quench stats` samples, as
scripts/analysis/loop-summary.py reads them); the appliance's queue drops, accepted feedback and added
latency and the PAUSE frames it honoured; the TCP flows' goodput (iperf3); what each UDP client offered (its own count: on a
busy machine the clients may not get the CPU to offer their -b); the datagrams the receiver's
kernel dropped for a full socket buffer (OUT_DIR/udp-CC.txt: delivered by the switch, not read
by iperf3 in time); the appliance's pacing audit
(its reaction-point pairs' 100 ms windows against their RP rates' integrals, over the windows no
stall of its loop touched). Then issue 17's targets per run with congestion control, yes or no
(also in the JSON line, `targets`): Jain >= 0.95, utilisation >= 90 %, the switch's mean queue
within its bound (QCN: 2 x Qeq; DCQCN: Kmax, as scripts/testbed/e2e.sh: the queue settles inside the
RED band; both read from the run's switch config), no drop at the switch, every unstalled
pacing window within 1 %, both TCP transfers completed. Then, per run with a `cpu-CC.txt`, the
UDP phase's CPU budget (scripts/analysis/cpu-budget.py), also in the JSON line (`cpu`). The testbed's
MTU and UDP datagram (OUT_DIR/testbed.json, written by appliance.sh) head the table.
"""
import importlib.util
import json
import sys
import tomllib
from pathlib import Path

LINK_BPS = 1e9
HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("loop_summary", HERE / "loop-summary.py")
loop_summary = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(loop_summary)
_spec = importlib.util.spec_from_file_location("cpu_budget", HERE / "cpu-budget.py")
cpu_budget = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cpu_budget)


def iperf(path, udp):
    try:
        v = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    end = v.get("end", {})
    if udp:
        # The server's view (iperf3 >= 3.?: sum_received); else the client's sum less its loss.
        s = end.get("sum_received") or end.get("sum") or {}
        return s.get("bits_per_second")
    return (end.get("sum_received") or {}).get("bits_per_second")


def offered(path):
    """What a UDP client sent (its own `sum`), in bits per second and frames."""
    try:
        s = json.loads(Path(path).read_text()).get("end", {}).get("sum") or {}
    except (OSError, ValueError):
        return None, None
    return s.get("bits_per_second"), s.get("packets")


def jain(xs):
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs)) if xs and any(xs) else 0.0


def last_json(path):
    try:
        lines = [l for l in Path(path).read_text().splitlines() if l.startswith("{")]
    except OSError:
        return None
    return json.loads(lines[-1]) if lines else None


def queue_bound(path):
    """(set point label, bound on the mean queue in octets) from a switch config's congestion
    point: QCN 2 x Qeq, DCQCN (RED) Kmax; (None, None) without one or an unreadable config."""
    try:
        cps = tomllib.loads(Path(path).read_text()).get("congestion", [])
    except (OSError, tomllib.TOMLDecodeError):
        return None, None
    for cp in cps:
        if "qcn" in cp:
            qeq = cp["qcn"].get("queue_size_set_point", 26000)
            return f"Qeq {qeq / 1e3:g} KB", 2 * qeq
        if "red" in cp:
            red = cp["red"]
            return f"RED {red['kmin_bytes'] / 1e3:g}-{red['kmax_bytes'] / 1e3:g} KB", red["kmax_bytes"]
    return None, None


def switch_drops_by_kind(path):
    """Tail drops at every egress queue of the switch and PFC headroom overruns at its ingress
    ports (a PAUSE that took effect too late), from its last `quench stats` sample."""
    last = None
    try:
        for line in Path(path).read_text().splitlines():
            try:
                last = json.loads(line)
            except ValueError:
                continue
    except OSError:
        return 0, 0
    if not last:
        return 0, 0
    return (sum(p["queue_drops"] for p in last["ports"]),
            sum(p.get("pfc_headroom_drops", 0) for p in last["ports"]))


def receiver_udp_drops(path):
    """Datagrams the receiver's kernel dropped in the UDP phase, full socket buffer
    (RcvbufErrors) and all input errors (InErrors), from two /proc/net/snmp samples
    (a header and a value line each); None without both."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return None
    if len(lines) < 4:
        return None
    a = dict(zip(lines[0].split()[1:], map(int, lines[1].split()[1:])))
    b = dict(zip(lines[2].split()[1:], map(int, lines[3].split()[1:])))
    return {k: b[k] - a[k] for k in ("RcvbufErrors", "InErrors") if k in a and k in b}


def targets(r, bound):
    """Issue 17's done-when for one run with congestion control (see the module doc)."""
    dev = r["pacing_unstalled_max_dev"]
    return {
        "jain>=0.95": r["jain"] >= 0.95,
        "util>=0.90": r["utilisation"] >= 0.90,
        "queue_mean<=bound": bound is not None and r["queue_mean_kb"] * 1e3 <= bound,
        "no_switch_drops": r["switch_drops"] == 0,
        "no_unicast_flood_after_1s": r["flooded_unicast_after_1s"] == 0,
        "paced_within_1pct": r["pacing_unstalled_windows"] > 0 and dev is not None and dev <= 0.01,
        "tcp_completed": all(x is not None and x > 0 for x in r["tcp_mbps"]),
    }


def run(out, cc):
    udp = [iperf(out / f"iperf-{cc}-udp-{i}.json", True) for i in (0, 1)]
    tcp = [iperf(out / f"iperf-{cc}-tcp-{i}.json", False) for i in (0, 1)]
    sent = [offered(out / f"iperf-{cc}-udp-{i}.json") for i in (0, 1)]
    mean, p99, n, drops, pauses, flooded = loop_summary.queue_stats(out / f"queue-{cc}.jsonl")
    queue_drops, headroom_drops = switch_drops_by_kind(out / f"queue-{cc}.jsonl")
    app = last_json(out / f"appliance-{cc}.log") or {}
    # The hosts' pairs (reaction points) and the receiver's (notification point), one process.
    every = app.get("appliance", [])
    pairs = [p for p in every if p.get("role") != "np"]
    nps = [p for p in every if p.get("role") == "np"]
    tab = [p["table"] for p in pairs]
    cnt = [p["counters"] for p in pairs]
    lat = [p["latency_us"] for p in pairs]
    ok_udp = [x for x in udp if x is not None]
    # The "none" run uses the QCN switch config (scripts/testbed/appliance.sh) but has no loop to hold.
    label, bound = queue_bound(out / f"switch-{cc}.toml") if cc != "none" else (None, None)
    r = {
        "cc": cc,
        "udp_mbps": [None if x is None else round(x / 1e6, 1) for x in udp],
        # What each host offered: "above the bottleneck" only if the clients got the CPU.
        "offered_mbps": [None if b is None else round(b / 1e6, 1) for b, _ in sent],
        "jain": round(jain(ok_udp), 4),
        "utilisation": round(sum(ok_udp) / LINK_BPS, 4),
        "queue_mean_kb": round(mean / 1e3, 1),
        "queue_p99_kb": round(p99 / 1e3, 1),
        "queue_samples": n,
        "set_point": label or "",
        "queue_bound_kb": None if bound is None else bound / 1e3,
        "switch_drops": drops,
        # Of them, tail drops at the switch's egress queues (a queue that outgrew its octets:
        # the loop let too much in); the rest were refused on receive or transmit or dropped by
        # the kernel before the receive rings (a worker that did not get the CPU to read them).
        "switch_queue_drops": queue_drops,
        # With PFC (appliance.sh without --no-pfc): frames that arrived after the PAUSE beyond the
        # headroom, the PAUSE frames the switch sent and those the appliance honoured.
        "switch_headroom_drops": headroom_drops,
        "pfc_pauses_sent": pauses,
        # Unicast frames the switch flooded after the first second of traffic (every host's MAC
        # is pinned, and the receiver's appliance announces it).
        "flooded_unicast_after_1s": flooded,
        "appliance_pfc_rx": sum(c.get("pfc_rx", 0) for c in cnt),
        "appliance_queue_drops": sum(t["queue_drops"] for t in tab),
        "receiver_udp_drops": receiver_udp_drops(out / f"udp-{cc}.txt"),
        "cnms_accepted": sum(c["cnms_accepted"] for c in cnt),
        "cnps_accepted": sum(c["cnps_accepted"] for c in cnt),
        "feedback_refused": sum(c["unknown_flow"] + c["forged"]["total"] for c in cnt),
        "np_cnps_sent": sum(p["counters"]["cnps_sent"] for p in nps),
        "appliance_latency_us": [max((l[k] for l in lat), default=None) for k in ("p50", "p99")],
        "tcp_mbps": [None if x is None else round(x / 1e6, 1) for x in tcp],
        # The reaction-point pairs' pacing audit (the NP pair paces nothing).
        **loop_summary.pacing_figures(pairs),
        "cpu": cpu(out / f"cpu-{cc}.txt"),
    }
    r["targets"] = targets(r, bound) if cc != "none" else None
    return r


def paced(r):
    """The pacing cell: the worst pair's share of unstalled windows within 1 %, the largest
    deviation, and how many unstalled windows there were."""
    n = r["pacing_unstalled_windows"]
    if not n:
        return "no window"
    return (f"{loop_summary.pct(r['pacing_unstalled_within_1pct'])}, max "
            f"{100 * (r['pacing_unstalled_max_dev'] or 0):.2f} % of {n}")


def cpu(path):
    """The UDP phase's CPU budget, or None without samples (or with unreadable ones, said)."""
    try:
        return cpu_budget.budget(cpu_budget.parse(path.read_text()))
    except OSError:
        return None
    except cpu_budget.BudgetError as e:
        print(f"appliance-summary.py: {path}: {e}", file=sys.stderr)
        return None


def main():
    out = Path(sys.argv[1])
    rows = [run(out, cc) for cc in sys.argv[2:]]
    try:
        tb = json.loads((out / "testbed.json").read_text())
        print(f"MTU {tb['mtu']}, UDP datagrams of {tb['udp_len']} octets, each host offers "
              f"{tb['udp_rate']}")
    except (OSError, ValueError, KeyError):
        tb = None
    head = ("cc", "offered Mb/s", "UDP Mb/s", "Jain", "util", "queue mean/p99 KB", "set point",
            "switch drops (queue, headroom)", "PAUSEs sent/honoured",
            "appl. drops", "rcv buf drops", "CNMs/CNPs", "appl. latency p50/p99 us", "paced 1 % (unstalled)", "TCP Mb/s")
    table = [head]
    for r in rows:
        table.append((
            r["cc"], " ".join("-" if v is None else f"{v:.0f}" for v in r["offered_mbps"]),
            " ".join("-" if v is None else f"{v:.0f}" for v in r["udp_mbps"]),
            f"{r['jain']:.3f}", f"{100 * r['utilisation']:.0f} %",
            f"{r['queue_mean_kb']:.1f} / {r['queue_p99_kb']:.1f}", r["set_point"],
            f"{r['switch_drops']} ({r['switch_queue_drops']}, {r['switch_headroom_drops']})",
            f"{r['pfc_pauses_sent']}/{r['appliance_pfc_rx']}", str(r["appliance_queue_drops"]),
            "-" if r["receiver_udp_drops"] is None else str(r["receiver_udp_drops"].get("RcvbufErrors", "-")),
            f"{r['cnms_accepted']}/{r['cnps_accepted']}",
            "/".join("-" if v is None else f"{v:.0f}" for v in r["appliance_latency_us"]),
            paced(r),
            " ".join("-" if v is None else f"{v:.0f}" for v in r["tcp_mbps"]),
        ))
    loop_summary.print_table(table)
    for r in rows:
        if r["targets"] is not None:
            print(f"{r['cc']} targets: " + ", ".join(
                f"{k} {'yes' if v else 'NO'}" for k, v in r["targets"].items()))
    for r in rows:
        if r["cpu"] is not None:
            print(f"{r['cc']}:")
            print("\n".join(cpu_budget.table(r["cpu"])))
    print(json.dumps({"testbed": tb, "runs": rows}))


if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):
        print(__doc__.strip())
        sys.exit(0)
    main()
