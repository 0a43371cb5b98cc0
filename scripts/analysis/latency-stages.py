#!/usr/bin/env python3
"""Splits each frame's forwarding latency into stages from a kernel trace (bench-forward --stages).

    perf script --ns -F comm,tid,cpu,time,event,trace -i CELL.perf | \
        latency-stages.py --forwarder quench|bridge|af_xdp --sink-json CELL/summary.json

The trace (`perf record -k mono -a`, so its times are CLOCK_MONOTONIC, the clock the sender's
test header and the sink's converted kernel stamps are in) covers one latency cell from before the
sender's first frame to after its last. Per frame, in the order the frame meets them:

  send   the sender's sendto(2) enters (syscalls:sys_enter_sendto on the sender's thread)
  in     the forwarder has it: an XDP redirect into its AF_XDP socket (xdp:xdp_redirect, run
         on the sender's CPU inside its sendto) or, for the bridge, its ingress port's receive
         (net:netif_receive_skb, dev <prefix>-sw-s0)
  kick   the forwarder's sendto(2) enters (AF_XDP forwarders: the transmit kick on its core)
  sink   the sink's veth receives it (net:netif_rx, dev eth0): where the kernel stamps the frame
         for the sink's AF_PACKET socket (net_timestamp_check with netdev_tstamp_prequeue = 1),
         the receive time bench-forward's latency uses

The veths' transmit has no trace point here: AF_PACKET with PACKET_QDISC_BYPASS and AF_XDP's
copy-mode transmit both go through __dev_direct_xmit, which does not fire net_dev_start_xmit.
Frames are matched by order: each stream is FIFO, nothing is lost (bench-forward reports any
loss) and the trace starts before the first frame, so the k-th event of each stream is the k-th
frame's. Frames of other lengths (ARP, control) are left out. The report gives each stage's p50 /
p99 / p99.9, the whole (send -> sink), and for the frames above the whole's p99 which stage held
the excess (each frame is filed under the stage furthest above its own median) and what else ran
on the two CPUs while they were in flight (sched_switch, softirq and timer events). Stdout ends
with one JSON line.
"""
import argparse
import bisect
import collections
import json
import math
import re
import sys

LINE = re.compile(
    r"^\s*(?P<comm>.+?)\s+(?P<tid>\d+)\s+\[(?P<cpu>\d+)\]\s+(?P<t>\d+\.\d+):\s+"
    r"(?P<ev>[\w]+:[\w]+):\s*(?P<rest>.*)$")
FIELD = re.compile(r"(\w+)=(\S+)")
MIN_LEN = 1000  # the test frames are 1500 octets; anything shorter is not one


def pct(xs, p):
    """The nearest-rank percentile: the smallest value with at least p % of xs at or below it."""
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


def parse(lines, prefix):
    """-> streams {stage: [times]}, sender and forwarder tids, and the CPU events."""
    st = collections.defaultdict(list)
    sendto = collections.defaultdict(list)  # tid -> enter times
    cpu_ev = collections.defaultdict(list)  # cpu -> [(t, what)]
    for ln in lines:
        m = LINE.match(ln)
        if not m:
            continue
        t = int(round(float(m["t"]) * 1e9))
        ev, rest, cpu = m["ev"], m["rest"], int(m["cpu"])
        if ev == "syscalls:sys_enter_sendto":
            sendto[(m["comm"].strip(), int(m["tid"]), cpu)].append(t)
            continue
        if ev == "sched:sched_switch":
            f = dict(FIELD.findall(rest))
            cpu_ev[cpu].append((t, "run " + f.get("next_comm", "?")))
            continue
        if ev in ("irq:softirq_entry", "irq_vectors:local_timer_entry", "irq:irq_handler_entry"):
            f = dict(FIELD.findall(rest))
            cpu_ev[cpu].append((t, ev.split(":")[1] + " " + f.get("action", f.get("name", ""))))
            continue
        f = dict(FIELD.findall(rest))
        dev, ln_ = f.get("dev", ""), int(f.get("len", "0") or 0)
        if ev == "xdp:xdp_redirect":
            st["in"].append(t)
        elif ln_ < MIN_LEN:
            continue
        elif ev == "net:netif_receive_skb" and dev == f"{prefix}-sw-s0":
            st["in_bridge"].append(t)
        elif ev == "net:netif_rx" and dev == "eth0":
            st["sink"].append(t)
    return st, sendto, cpu_ev


def last_before(times, t):
    """The latest of sorted `times` at or before t, or None."""
    i = bisect.bisect_right(times, t)
    return times[i - 1] if i else None


def match(first, later):
    """FIFO matching: for each time in `first`, the first unmatched time in `later` at or after
    it. -> list of (first, later or None)."""
    out, j = [], 0
    for t in first:
        while j < len(later) and later[j] < t:
            j += 1
        out.append((t, later[j] if j < len(later) else None))
        j += 1 if j < len(later) else 0
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--forwarder", required=True, choices=["quench", "bridge", "af_xdp"])
    ap.add_argument("--prefix", default="qb")
    ap.add_argument("--sink-json", help="the cell's summary.json: its frame count is checked")
    a = ap.parse_args()
    st, sendto, cpu_ev = parse(sys.stdin, a.prefix)
    inn = st["in_bridge"] if a.forwarder == "bridge" else st["in"]
    sink = st["sink"]
    if not inn or not sink:
        sys.exit(f"latency-stages: no frames in the trace (in {len(inn)}, sink {len(sink)})")

    def calls_before(stream, keys):
        """The sendto thread of `keys` whose call most often comes just before `stream`."""
        best = None
        for key in keys:
            ts = sendto[key]
            n = sum(1 for t in stream[:2000] if (x := last_before(ts, t)) is not None
                    and t - x < 200_000)
            if best is None or n > best[0]:
                best = (n, key)
        return best[1] if best and best[0] else None
    sender = calls_before(inn, list(sendto))
    # An AF_XDP forwarder's kick: a sendto on another thread, just before the sink's receive.
    kicker = None
    if a.forwarder != "bridge":
        kicker = calls_before(sink, [k for k in sendto if k != sender])
    frames = []
    for t_in, t_sink in match(inn, sink):
        if t_sink is None:
            continue
        f = {"in": t_in, "sink": t_sink}
        if sender:
            f["send"] = last_before(sendto[sender], t_in)
        if kicker:
            f["kick"] = last_before(sendto[kicker], t_sink)
        if any(v is None for v in f.values()):
            continue
        frames.append(f)
    order = ["send", "in", "kick", "sink"]
    names = [s for s in order if all(s in f for f in frames)]
    stages = list(zip(names, names[1:]))
    lat = {f"{x}->{y}": [(f[y] - f[x]) / 1e3 for f in frames] for x, y in stages}
    whole_key = f"{names[0]}->sink"
    whole = [(f["sink"] - f[names[0]]) / 1e3 for f in frames]
    bad = [x for k, xs in lat.items() for x in xs if x < -1.0]
    print(f"{a.forwarder}: {len(frames)} frames matched ({len(inn)} into the forwarder, "
          f"{len(sink)} at the sink); stages in us (p50 / p99 / p99.9 / max)")
    res = {"forwarder": a.forwarder, "frames": len(frames), "stages": {}}
    for k, xs in list(lat.items()) + [(whole_key, whole)]:
        q = [pct(xs, 50), pct(xs, 99), pct(xs, 99.9), max(xs)]
        res["stages"][k] = {"p50_us": q[0], "p99_us": q[1], "p999_us": q[2], "max_us": q[3]}
        print(f"  {k:14s} {q[0]:8.1f} {q[1]:8.1f} {q[2]:8.1f} {q[3]:9.1f}")
    # The FIFO matching holds only if both streams have one event per frame. An extra event
    # in one (a frame of another length redirected into the AF_XDP socket: xdp_redirect has no
    # length to filter on) or a missing one (an event the trace lost) shifts every later frame
    # onto its neighbour's events: the streams' counts differ, or, where frames queue, a stage
    # comes out negative (beyond the clocks' microsecond), which no frame's can be. Such a
    # cell's stages are not reported as figures (latency-table.py).
    res["negative"] = len(bad)
    res["matching_slipped"] = len(inn) != len(sink) or len(bad) > len(frames) / 1000
    if bad:
        print(f"  warning: {len(bad)} negative stage times: the matching slipped", file=sys.stderr)
    # The tail: frames above the whole's p99, filed under the stage furthest above its median.
    p99 = pct(whole, 99)
    med = {k: pct(xs, 50) for k, xs in lat.items()}
    held = collections.Counter()
    ran = collections.Counter()
    tail = [i for i, w in enumerate(whole) if w > p99]
    for i in tail:
        k = max(lat, key=lambda k: lat[k][i] - med[k])
        held[k] += 1
        t0, t1 = frames[i][names[0]], frames[i]["sink"]
        for cpu, evs in cpu_ev.items():
            j = bisect.bisect_left(evs, (t0, ""))
            seen = set()
            while j < len(evs) and evs[j][0] <= t1:
                seen.add(f"cpu{cpu} {evs[j][1]}")
                j += 1
            ran.update(seen)
    print(f"  tail: {len(tail)} frames above p99 {p99:.1f} us; the stage furthest above its "
          "median: " + ", ".join(f"{k} {n}" for k, n in held.most_common()))
    if ran:
        print("  during them (frames with the event): " + ", ".join(
            f"{k} {n}" for k, n in ran.most_common(8)))
    res["tail"] = {"p99_us": p99, "frames": len(tail), "held_by": dict(held),
                   "cpu_events": dict(ran.most_common(12))}
    if a.sink_json:
        s = json.load(open(a.sink_json))
        lat_s = s["latency"]
        print(f"  sink's own histogram (sender's stamp -> kernel stamp): p50 "
              f"{lat_s['p50_ns'] / 1e3:.1f} / p99 {lat_s['p99_ns'] / 1e3:.1f} us, "
              f"{lat_s['count']} frames")
        res["sink"] = {"p50_us": lat_s["p50_ns"] / 1e3, "p99_us": lat_s["p99_ns"] / 1e3,
                       "frames": lat_s["count"]}
    print(json.dumps(res))


if __name__ == "__main__":
    main()
