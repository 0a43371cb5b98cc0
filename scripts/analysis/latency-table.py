#!/usr/bin/env python3
"""The tables of bench-forward.sh's latency part, from its cells' reports.

    latency-table.py ROUND FORWARDER LOAD CELL [ROUND FORWARDER LOAD CELL ...]

Each cell is one paced flow through one forwarder (quench: `quench switch` as a user starts it,
with the kernel fast path; quench_userspace: `quench switch --fast-path off`, every frame through
its worker; bridge, ovs: Open vSwitch's userspace datapath with afxdp ports, ovs_system:
the same with system ports, ovs_kernel: its kernel datapath, af_xdp: testpmd net_af_xdp) at one
load (% of 1 Gbit/s): CELL/summary.json is the sink's report; CELL-stages.txt, when present, is
scripts/analysis/latency-stages.py's output for the same cell run again under a kernel trace (its last
line is JSON). With one round: the table of p50 / p99 / p99.9 per forwarder and load, and
quench's p99 over the bridge's and OVS's (and quench_userspace's, when it ran). With several
(bench-forward --lat-rounds R): each round's p99s and ratios, then per load the median over the
rounds of each forwarder's p99 and of the per-round ratios quench / bridge, quench / ovs and
quench / testpmd af_xdp (a round's ratio compares cells run within a minute of each other;
the median of ratios is what the latency goal is judged on), with their range and in how many
rounds quench's p99 was at or below the peer's. With
stage reports: per load, the kernel's part against the forwarders' own (the medians over the
rounds): the first stage of the AF_XDP forwarders (the sender's sendto -> the frame is in the
forwarder's AF_XDP ring: veth transmit, the ingress veth's NAPI, XDP, the copy into the ring,
all kernel work before any forwarder code runs) against the bridge's whole path, and each
AF_XDP forwarder's own stage (its ring -> its transmit kick); a traced cell whose frame matching
slipped (latency-stages.py's `matching_slipped`) is named and left out. Stdout ends with one
JSON line.
"""
import json
import math
import statistics
import sys

NAMES = {"quench": "quench", "quench_userspace": "quench userspace", "bridge": "bridge",
         "ovs": "OVS afxdp", "ovs_system": "OVS system ports", "ovs_kernel": "OVS kernel",
         "af_xdp": "testpmd af_xdp"}
ORDER = ["quench", "quench_userspace", "bridge", "ovs", "ovs_system", "ovs_kernel", "af_xdp"]
# (forwarder, its label, peer, the peer's label, short form for the rounds' lines): the ratios
# of p99s both tables give, and in the medians table how many rounds the forwarder's p99 was at
# or below the peer's.
RATIOS = [("quench", "quench", "bridge", "bridge", "q/b"),
          ("quench_userspace", "quench userspace", "bridge", "bridge", "u/b"),
          ("quench", "quench", "ovs", "OVS", "q/ovs"),
          ("quench", "quench", "af_xdp", "testpmd af_xdp", "q/x")]


def load_cell(path):
    """-> the cell's latency figures (us), frame count, loss, and its stages' p99s if traced."""
    s = json.load(open(f"{path}/summary.json"))
    lat = s["latency"]
    cell = {"p50_us": lat["p50_ns"] / 1e3, "p99_us": lat["p99_ns"] / 1e3,
            "p999_us": lat["p999_ns"] / 1e3, "frames": lat["count"],
            "lost": sum(f["lost"] for f in s["flows"]), "mbps": s["aggregate_bps"] / 1e6}
    try:
        lines = open(f"{path}-stages.txt").read().strip().splitlines()
        rep = json.loads(lines[-1]) if lines else {}
    except (OSError, ValueError):
        rep = {}
    if rep.get("matching_slipped"):
        cell["stages_slipped"] = True
    elif rep.get("stages"):
        cell["stages_p99_us"] = {k: v["p99_us"] for k, v in rep["stages"].items()}
    return cell


def ratio(a, b):
    """a's p99 over b's, None unless both cells received frames."""
    if not a or not b or not a["frames"] or not b["frames"] or b["p99_us"] <= 0:
        return None
    return a["p99_us"] / b["p99_us"]


def med(xs):
    xs = [x for x in xs if x is not None and not math.isnan(x)]
    return statistics.median(xs) if xs else None


def fmt(x, digits=1):
    return "-" if x is None else f"{x:.{digits}f}"


def span(xs, digits=2):
    """'median (min-max)' of the values present."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    return f"{fmt(med(xs), digits)} ({fmt(min(xs), digits)}-{fmt(max(xs), digits)})"


def ratios_of(fwds):
    """The RATIOS whose two forwarders both ran."""
    return [x for x in RATIOS if x[0] in fwds and x[2] in fwds]


def single(runs, fwds):
    print()
    rs = ratios_of(fwds)
    print("| load (of 1 Gbit/s) | " + " | ".join(
        f"{NAMES[f]} p50 / p99 / p99.9 us" for f in fwds) + " |"
        + "".join(f" {label} p99 / {plabel} p99 |" for _, label, _, plabel, _ in rs))
    print("|---|" + "---|" * (len(fwds) + len(rs)))
    for load, r in runs.items():
        cells = []
        for f in fwds:
            x = r.get(f)
            if not x or not x["frames"]:
                cells.append("no frame received")
                continue
            cells.append(f"{x['p50_us']:.1f} / {x['p99_us']:.1f} / {x['p999_us']:.1f}"
                         + (f" ({x['lost']} lost)" if x["lost"] else ""))
        for f, _, peer, _, _ in rs:
            q = ratio(r.get(f), r.get(peer))
            cells.append(fmt(q, 2) if q else "nan")
        print(f"| {load} % | " + " | ".join(cells) + " |")


def rounds(cells, loads, fwds):
    """Each round's line, then the medians table; -> the medians as JSON."""
    nr = len({k[0] for k in cells})
    rs = ratios_of(fwds)
    print()
    for rnd in sorted({k[0] for k in cells}, key=int):
        parts = []
        for load in loads:
            p = [f"{NAMES[f]} {fmt(cells.get((rnd, f, load), {}).get('p99_us'))}"
                 for f in fwds]
            qs = [f" ({short} "
                  + fmt(ratio(cells.get((rnd, f, load)), cells.get((rnd, peer, load))), 2) + ")"
                  for f, _, peer, _, short in rs]
            parts.append(f"{load} %: " + ", ".join(p) + "".join(qs))
        print(f"round {rnd} p99 us: " + "; ".join(parts))
    out = {}
    print()
    print(f"Median over {nr} rounds of p99 (us) and of the per-round ratios, (min-max):")
    print()
    hdr = [f"{NAMES[f]} p99" for f in fwds]
    for _, label, _, plabel, _ in rs:
        hdr += [f"{label} / {plabel}", f"rounds {label} <= {plabel}"]
    print("| load (of 1 Gbit/s) | " + " | ".join(hdr) + " |")
    print("|---|" + "---|" * len(hdr))
    for load in loads:
        per = {f: [cells.get((r, f, load)) for r in sorted({k[0] for k in cells})]
               for f in fwds}
        row, o = [], {}
        for f in fwds:
            p99s = [c["p99_us"] for c in per[f] if c and c["frames"]]
            row.append(span(p99s, 1))
            o[f"{f}_p99_us"] = med(p99s)
        for f, _, peer, _, _ in rs:
            xs = [ratio(a, b) for a, b in zip(per[f], per[peer])]
            row.append(span(xs))
            n = [x for x in xs if x is not None]
            row.append(f"{sum(x <= 1 for x in n)} of {len(n)}")
            o[f"{f}_over_{peer}"] = med(xs)
            o[f"{f}_over_{peer}_rounds"] = xs
        print(f"| {load} % | " + " | ".join(row) + " |")
        out[load] = o
    return out


def stages(cells, loads):
    """The kernel's part against the forwarders' own, medians over the rounds."""
    def st(f, load, key):
        return med([c["stages_p99_us"].get(key) for (r, ff, ld), c in cells.items()
                    if ff == f and ld == load and "stages_p99_us" in c])
    slipped = [f"round {r} {NAMES[f]} {ld} %" for (r, f, ld), c in cells.items()
               if c.get("stages_slipped")]
    if not any("stages_p99_us" in c for c in cells.values()) and not slipped:
        return None, []
    print()
    print("Traced cells (bench-forward --stages), p99 us, median over the rounds: the AF_XDP "
          "forwarders' first stage (sendto -> in the AF_XDP ring: kernel work only) against the "
          "bridge's whole path (sendto -> sink), and their own stage (ring -> transmit kick):")
    print()
    print("| load | quench sendto -> ring | testpmd sendto -> ring | bridge sendto -> sink "
          "| quench ring -> kick | testpmd ring -> kick | first stage / bridge whole, quench "
          "/ testpmd |")
    print("|---|---|---|---|---|---|---|")
    out = {}
    for load in loads:
        qi, xi = st("quench", load, "send->in"), st("af_xdp", load, "send->in")
        bw = st("bridge", load, "send->sink")
        qk, xk = st("quench", load, "in->kick"), st("af_xdp", load, "in->kick")
        over = [None if a is None or not bw else a / bw for a in (qi, xi)]
        print(f"| {load} % | {fmt(qi)} | {fmt(xi)} | {fmt(bw)} | {fmt(qk)} | {fmt(xk)} "
              f"| {fmt(over[0], 2)}, {fmt(over[1], 2)} |")
        out[load] = {"quench_send_in_p99_us": qi, "af_xdp_send_in_p99_us": xi,
                     "bridge_send_sink_p99_us": bw, "quench_in_kick_p99_us": qk,
                     "af_xdp_in_kick_p99_us": xk}
    if slipped:
        print()
        print("Left out, the trace's frame matching slipped (negative stage times): "
              + ", ".join(slipped))
    return out, slipped


def main():
    a = sys.argv[1:]
    if not a or len(a) % 4:
        sys.exit("usage: latency-table.py ROUND FORWARDER LOAD CELL [...]")
    cells, loads, fwds = {}, [], set()
    for rnd, f, load, path in zip(a[0::4], a[1::4], a[2::4], a[3::4]):
        if f not in NAMES:
            sys.exit(f"latency-table.py: unknown forwarder {f!r} (of {', '.join(ORDER)})")
        cells[(rnd, f, load)] = load_cell(path)
        fwds.add(f)
        if load not in loads:
            loads.append(load)
    fwds = [f for f in ORDER if f in fwds]
    nr = len({k[0] for k in cells})
    res = {}
    if nr == 1:
        runs = {load: {f: c for (r, f, ld), c in cells.items() if ld == load} for load in loads}
        single(runs, fwds)
        res["latency"] = runs
    else:
        res["rounds"] = nr
        res["latency"] = {load: {f: [c for (r, ff, ld), c in sorted(cells.items(),
                                                                  key=lambda kv: int(kv[0][0]))
                                     if ff == f and ld == load] for f in fwds}
                          for load in loads}
        res["median"] = rounds(cells, loads, fwds)
    s, slipped = stages(cells, loads)
    if s:
        res["stages_p99_us"] = s
    if slipped:
        res["stages_slipped"] = slipped
    print(json.dumps(res))


if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):
        print(__doc__.strip())
        sys.exit(0)
    main()
