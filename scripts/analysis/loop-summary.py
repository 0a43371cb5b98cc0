#!/usr/bin/env python3
"""Summary table of closed-loop runs (scripts/testbed/closed-loop.sh output directory).

usage: loop-summary.py OUT_DIR CC [CC ...]     (prints the table, then one JSON line)

Per run: per-flow goodput, Jain index, bottleneck utilisation, the bottleneck queue's depth
(mean / p99 over `quench stats` samples taken every 50 ms while frames left it) against its set
point, CNMs / CNPs the senders received, data frames the switch dropped (tail drops, PFC
headroom overruns, receive / transmit refusals, kernel drops before the receive rings, on every
port), PFC pauses, one-way latency p50 / p99 / p99.9 at the receiver, and the share of the
senders' 100 ms pacing windows within 1 % of their RP rate, over all windows and over those no
stall of the sender's loop touched (the lowest share among the sender ports).
"""
import json
import re
import sys
from pathlib import Path

BOTTLENECK = "r0"
LINK_BPS = 1e9
SET_POINT = {"qcn": "Qeq 50 KB", "dcqcn": "RED 30-120 KB"}


def last_json(path):
    lines = [l for l in Path(path).read_text().splitlines() if l.startswith("{")]
    return json.loads(lines[-1]) if lines else None


def queue_stats(path):
    depths, drops, pauses, prev_tx = [], 0, 0, None
    # Unicast frames flooded (their destination not in the switch's FDB), on every port: at the
    # last sample within one second of the bottleneck's first frame, and at the last sample.
    first_tx_s, flooded_1s, flooded = None, None, 0
    for line in Path(path).read_text().splitlines():
        try:
            snap = json.loads(line)
        except ValueError:
            continue
        port = next((p for p in snap["ports"] if p["name"] == BOTTLENECK), None)
        if port is None:
            continue
        # Every data frame the switch dropped, on any port: tail drops at the queues, PFC
        # headroom overruns at the ingress (a PAUSE that took effect too late), frames refused
        # on receive or transmit, and frames the kernel dropped before its receive rings. The
        # bottleneck's tail drops alone missed the others.
        drops = sum(p["queue_drops"] + p.get("pfc_headroom_drops", 0) + p["rx_drops"]
                    + p["tx_drops"] + p.get("rx_kernel_drops", 0) for p in snap["ports"])
        pauses = sum(p.get("pfc_pauses_sent", 0) for p in snap["ports"])
        flooded = sum(p.get("flooded_unicast", 0) for p in snap["ports"])
        now_s = snap["uptime_ns"] / 1e9
        if first_tx_s is None and port["tx_pkts"] > 0:
            first_tx_s = now_s
        if first_tx_s is not None and now_s < first_tx_s + 1.0:
            flooded_1s = flooded
        # Only samples while frames were leaving: the idle start and end would pull the mean down.
        if prev_tx is not None and port["tx_pkts"] > prev_tx:
            depths.append(port["queue_depth_bytes"])
        prev_tx = port["tx_pkts"]
    depths.sort()
    mean = sum(depths) / len(depths) if depths else 0.0
    p99 = depths[min(len(depths) - 1, int(0.99 * len(depths)))] if depths else 0
    after_1s = None if flooded_1s is None else flooded - flooded_1s
    return mean, p99, len(depths), drops, pauses, after_1s


def run(out, cc):
    recv = last_json(out / f"recv-{cc}.log")
    if recv is None:
        return None
    # One JSON line per sender port: several in one log when one quench send drove every port.
    senders = [json.loads(l) for p in sorted(out.glob(f"send-{cc}-*.log"))
               for l in p.read_text().splitlines() if l.startswith("{") and '"pacing"' in l]
    mean, p99, n, drops, pauses, flooded = queue_stats(out / f"queue-{cc}.jsonl")
    lat = recv["latency"]
    return {
        "cc": cc,
        "flows_mbps": {str(f["flow"]): round(f["goodput_bps"] / 1e6, 1) for f in recv["flows"]},
        # null (no flow got through) stays null: Jain's index is 0/0 there.
        "jain": None if recv["jain_index"] is None else round(recv["jain_index"], 4),
        "utilisation": round(recv["aggregate_bps"] / LINK_BPS, 4),
        "queue_mean_kb": round(mean / 1e3, 1),
        "queue_p99_kb": round(p99 / 1e3, 1),
        "queue_samples": n,
        "set_point": SET_POINT.get(cc, ""),
        "cnms": sum(s.get("cnms", 0) for s in senders),
        "cnps": sum(s.get("cnps", 0) for s in senders),
        "drops": drops,
        "lost_frames": sum(f["lost"] for f in recv["flows"]),
        "pfc_pauses": pauses,
        "flooded_unicast_after_1s": flooded,
        "latency_us": [round(lat[k] / 1e3, 1) for k in ("p50_ns", "p99_ns", "p999_ns")],
        **pacing_figures(senders),
    }


def pacing_figures(parts):
    """The pacing audit of every part (a `quench send` port, a `quench appliance` pair: each a
    dict with its "pacing"): octets sent per 100 ms window against the RP rate's integral, the
    worst part's share within 1 % and largest deviation, over all windows and over the windows
    no stall of the part's loop over its catch-up bound touched (the pacer's own error, apart
    from the CPU being taken away), and how many of those there were (in all and in the part
    with the fewest)."""
    pc = [s.get("pacing", {}) for s in parts]
    return {
        "pacing_within_1pct": min((p.get("within_1pct") or 0.0 for p in pc), default=None),
        "pacing_max_dev": max((p.get("max_abs_dev") or 0.0 for p in pc), default=None),
        "pacing_unstalled_windows": sum(p.get("unstalled_windows") or 0 for p in pc),
        # The fewest any one part had: a target on the unstalled windows' deviation needs each
        # part to have some (a part with none would otherwise pass on the others' windows).
        "pacing_unstalled_windows_min": min(
            (p.get("unstalled_windows") or 0 for p in pc), default=None),
        "pacing_unstalled_max_dev": max(
            (p.get("unstalled_max_abs_dev") or 0.0 for p in pc), default=None),
        "pacing_unstalled_within_1pct": min(
            (p.get("unstalled_within_1pct") or 0.0 for p in pc), default=None),
    }


def print_table(table):
    """Prints rows of cells as left-aligned columns (the first row is the head)."""
    widths = [max(len(str(row[i])) for row in table) for i in range(len(table[0]))]
    for row in table:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))


def pct(share):
    return "-" if share is None else f"{100 * share:.0f} %"


def main():
    out = Path(sys.argv[1])
    rows = [r for r in (run(out, cc) for cc in sys.argv[2:]) if r]
    if not rows:
        sys.exit(f"loop-summary.py: no run results under {out}")
    head = ("cc", "flows Mb/s", "Jain", "util", "queue mean/p99 KB", "set point", "CNMs",
            "CNPs", "drops", "PFC", "latency p50/p99/p99.9 us", "paced 1 % all/unstalled")
    table = [head]
    for r in rows:
        table.append((
            r["cc"], " ".join(f"{v:.0f}" for v in r["flows_mbps"].values()), "n/a" if r["jain"] is None else f"{r['jain']:.3f}",
            f"{100 * r['utilisation']:.0f} %", f"{r['queue_mean_kb']:.1f} / {r['queue_p99_kb']:.1f}",
            r["set_point"], str(r["cnms"]), str(r["cnps"]), str(r["drops"]), str(r["pfc_pauses"]),
            "/".join(f"{v:.0f}" for v in r["latency_us"]),
            pct(r["pacing_within_1pct"]) + " / " + pct(r["pacing_unstalled_within_1pct"]),
        ))
    print_table(table)
    print(json.dumps({"runs": rows}))


if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):
        print(__doc__.strip())
        sys.exit(0)
    main()
