#!/usr/bin/env python3
"""docs/results.md from the benchmarks' outputs (scripts/bench/bench-all.sh calls it).

    bench-results.py parse PART STDOUT --dir DIR --command CMD [--stderr FILE] [--criterion DIR]
    bench-results.py render DIR OUT.md

`parse` reads one benchmark's output (PART: forward, latency, passthrough, dpdk, dpdk-workers,
sim, appliance) and writes DIR/PART.json: the command, the date, the machine and the figures
(`data`: the benchmark's own JSON where it prints one, else what its lines say). The
simulator's ns-3 figures also go to DIR/sim-ns3.json, written only by a run that had ns-3, so
a run without it keeps the previous ns-3 tables.

`render` writes OUT.md from every DIR/*.json: the machine and the date at the head, then each
part's tables, each with the command that reproduces it and when it ran. Peers are read
generically: every key of a benchmark's JSON (every forwarder, every DPDK program) is a row or
a column, so a new peer needs no change here.
"""
import argparse
import datetime
import glob
import json
import os
import platform
import re
import statistics
import sys

# The parts in the order results.md shows them; files of other names follow, sorted.
ORDER = ["forward", "latency", "passthrough", "dpdk", "dpdk-workers", "sim", "sim-ns3",
         "appliance"]


def machine():
    """CPU model, CPUs, memory and kernel of this machine."""
    model = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = None
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal:"):
                mem = round(int(line.split()[1]) / 2**20)
                break
    except OSError:
        pass
    return {"cpu": model, "cpus": os.cpu_count(), "memory_gib": mem,
            "kernel": platform.release(), "os": os_name()}


def os_name():
    try:
        for line in open("/etc/os-release"):
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return platform.system()


def machine_line(m):
    mem = f", {m['memory_gib']} GiB" if m.get("memory_gib") else ""
    return f"{m['cpu']}, {m['cpus']} CPUs{mem}, {m['os']}, kernel {m['kernel']}"


def json_lines(text):
    """Every line of `text` that is a JSON object, in order."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def fmt(x, digits=2):
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    return f"{x:.{digits}f}"


def ratio(a, b):
    return a / b if a is not None and b else None


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def last_json(out, has, what):
    """The last JSON line of `out` with key `has`, else an error naming `what`."""
    js = [j for j in json_lines(out) if has in j]
    if not js:
        raise ValueError(f"no JSON line with \"{has}\" in {what}'s output")
    return js[-1]


# --- parsers: a benchmark's output -> the figures kept in PART.json ------------------------------

def parse_forward(out, err, _):
    return last_json(out, "mpps", "bench-forward.sh")


def parse_latency(out, err, _):
    return last_json(out, "latency", "bench-forward.sh --latency-only")


def parse_passthrough(out, err, _):
    js = [j for j in json_lines(out) if any(k.startswith("mpps") for k in j)]
    if not js:
        raise ValueError("no JSON line with Mpps in bench-forward.sh --appliance's output")
    return js[-1]


ROUND = re.compile(r"^round (\d+): (\S+)(.*?)(?:\((.*)\))?\s*$")


def parse_dpdk(out, err, _):
    """{"mpps": {program: [Mpps of each round]}, "floor_mpps": {...}}: from the benchmark's JSON
    line if it prints one (the C loop, which decides nothing, under "floor_mpps"), else from its
    `round R: PROGRAM ... mpps=X [(qualifier)]` lines."""
    js = [j for j in json_lines(out) if isinstance(j.get("mpps"), dict)]
    if js:
        return {key: {k: v if isinstance(v, list) else [v] for k, v in js[-1][key].items()}
                for key in ("mpps", "floor_mpps") if isinstance(js[-1].get(key), dict)}
    runs = {}
    for line in out.splitlines():
        m = ROUND.match(line.strip())
        x = re.search(r"\bmpps=([0-9.]+)", line)
        if m and x:
            name = m.group(2) + (f" ({m.group(4)})" if m.group(4) else "")
            runs.setdefault(name, []).append(float(x.group(1)))
    if not runs:
        raise ValueError("no Mpps in bench-dpdk.sh's output")
    return {"mpps": runs}


WORKERS = re.compile(r"^(\S+) workers (\d+) round (\d+): quench_workers (.*)$")


def parse_dpdk_workers(out, err, _):
    """{"runs": [{scenario, workers, round, and every key=value of the line}]}."""
    runs = []
    for line in out.splitlines():
        m = WORKERS.match(line.strip())
        if m:
            r = dict(re.findall(r"(\w+)=(\S+)", m.group(4)))
            r.update(scenario=m.group(1), workers=int(m.group(2)), round=int(m.group(3)))
            runs.append(r)
    if not runs:
        raise ValueError("no quench_workers line in bench-dpdk.sh --workers' output")
    return {"runs": runs}


def parse_sim(out, err, _):
    return last_json(out, "rows", "bench-sim.sh")


FLOWS_LINE = re.compile(r"(\d+) flows: (\d+) octets of table per flow; RSS grew ([0-9.]+) MiB")


def parse_appliance(out, err, criterion):
    """{"estimates": {"KIND/FLOWS": {ns, lower, upper}}, "memory": {FLOWS: {octets, rss_mib}}}
    from criterion's files and the bench's stderr."""
    if not criterion:
        raise ValueError("the appliance part needs --criterion DIR")
    est = {}
    for path in glob.glob(os.path.join(criterion, "appliance*", "*", "*", "new",
                                       "estimates.json")):
        parts = path.split(os.sep)
        e = json.load(open(path))
        pick = e.get("slope") or e["mean"]
        est[f"{parts[-4]}/{parts[-3]}"] = {
            "ns": pick["point_estimate"], "lower": pick["confidence_interval"]["lower_bound"],
            "upper": pick["confidence_interval"]["upper_bound"]}
    if not est:
        raise ValueError(f"no criterion estimates under {criterion}/appliance*")
    mem = {m.group(1): {"octets": int(m.group(2)), "rss_mib": float(m.group(3))}
           for m in FLOWS_LINE.finditer(err or "")}
    return {"estimates": est, "memory": mem}


PARSERS = {"forward": parse_forward, "latency": parse_latency,
           "passthrough": parse_passthrough, "dpdk": parse_dpdk,
           "dpdk-workers": parse_dpdk_workers, "sim": parse_sim, "appliance": parse_appliance}


# --- tables: PART.json's figures -> results.md's tables ------------------------------------------

def table(title, note, header, rows):
    return {"title": title, "note": note, "header": header, "rows": rows}


def tables_forward(j):
    out = []
    frames = list(j["mpps"])
    names = []
    for f in frames:
        names += [k for k in j["mpps"][f] if k not in names]
    # quench against every other forwarder (its own variants, `quench_*`, are columns too).
    peers = [k for k in names if k != "source" and not k.startswith("quench")]
    ours = "quench" in names
    header = ["frame"] + [f"{k} Mpps" for k in names] + \
        [f"quench / {k}" for k in peers if ours]
    rows = []
    for f in frames:
        v = j["mpps"][f]
        rows.append([f"{f} B"] + [fmt(v.get(k), 3) for k in names]
                    + [fmt(ratio(v.get("quench"), v.get(k))) for k in peers if ours])
    out.append(table("Forwarding rate", "Mpps at the receiver through each forwarder, one "
                     "core, veth testbed; `source` is what the sender offers with no forwarder.",
                     header, rows))
    if j.get("shaping_fraction"):
        out.append(table("Egress shaping", "A port paced to the rate, 1500 B frames offered "
                         "above it: what the receiver got.",
                         ["rate", "delivered, % of the rate"],
                         [[k, fmt(100 * v, 2)] for k, v in j["shaping_fraction"].items()]))
    return out


def tables_latency(j):
    lat = j["latency"]
    loads = list(lat)
    fwds = []
    for load in loads:
        fwds += [f for f in lat[load] if f not in fwds]

    def cells(load, f):
        c = lat[load].get(f)
        return c if isinstance(c, list) else [c] if c else []

    others = [f for f in fwds if f != "bridge"] if "bridge" in fwds else []
    header = ["load (of 1 Gbit/s)"] + [f"{f} p50 / p99 / p99.9 us" for f in fwds] + \
        [f"{f} / bridge, p99" for f in others]
    rows = []
    for load in loads:
        row = [f"{load} %"]
        for f in fwds:
            cs = [c for c in cells(load, f) if c and c.get("frames")]
            row.append(" / ".join(fmt(med([c[k] for c in cs]), 1)
                                  for k in ("p50_us", "p99_us", "p999_us"))
                       if cs else "no frame received")
        for f in others:
            row.append(fmt(med([ratio(a["p99_us"], b["p99_us"])
                                for a, b in zip(cells(load, f), cells(load, "bridge"))
                                if a and b and a.get("frames") and b.get("frames")])))
        rows.append(row)
    n = j.get("rounds", 1)
    return [table("Forwarding latency", "One paced flow of 1500-octet frames through each "
                  "forwarder (`af_xdp`: testpmd's net_af_xdp), the sink's kernel receive stamp; "
                  + (f"medians over {n} rounds, a ratio the median of the per-round ratios."
                     if n > 1 else "one round."), header, rows)]


def tables_passthrough(j):
    rows, header = [], None
    for key, v in j.items():
        if not key.startswith("mpps") or not isinstance(v, dict):
            continue
        both = "appliance" in v and "switch" in v
        header = header or ["frame"] + [f"{k} Mpps" for k in v] + \
            (["appliance / switch"] if both else [])
        rows.append([f"{key.split('_')[-1]} B"] + [fmt(x, 3) for x in v.values()]
                    + ([fmt(ratio(v["appliance"], v["switch"]))] if both else []))
    return [table("Appliance pass-through", "Frames through `quench appliance` (no congestion "
                  "control) and through `quench switch`, same testbed; `source` is what the "
                  "sender offers.", header, rows)]


def tables_dpdk(j):
    floors = j.get("floor_mpps", {})
    runs = {**j["mpps"], **floors}
    quench = [k for k in runs if k.startswith("quench")]
    rows = []
    for name, xs in runs.items():
        # quench's run on the same ports: the key's suffix names them (none: net_null; _mix:
        # ring ports; _mix_pcap: net_pcap ports), the longest that ends this key.
        base = max((k for k in quench if name.endswith(k[len("quench"):])), key=len,
                   default=None)
        # On the mix the C loop never reads a frame: quench over it compares nothing.
        bare = name == base or (name in floors and "mix" in name)
        rows.append([name + (" (floor)" if name in floors else ""), fmt(med(xs)),
                     f"{fmt(min(xs))}-{fmt(max(xs))}", str(len(xs)),
                     "-" if bare else fmt(ratio(med(runs.get(base, [])), med(xs)))])
    return [table("DPDK forwarding, one core", "Between two net_null ports (`_mix`: two ring "
                  "ports, 1,024 stations a side, 64 / 576 / 1500 B; `_mix_pcap`: the same mix "
                  "replayed through two net_pcap ports, the ports OVS-DPDK forwards on too, one "
                  "PMD, actions=NORMAL); `c_loop` is a bare C forwarding loop over the same "
                  "ports, a floor (it decides nothing), not a peer. Medians of the rounds; "
                  "quench / program against quench on the same ports.",
                  ["program", "Mpps", "range", "rounds", "quench / program"], rows)]


def tables_dpdk_workers(j):
    runs, order = {}, []
    for r in j["runs"]:
        key = (r["scenario"], r["workers"])
        if key not in runs:
            order.append(key)
        runs.setdefault(key, []).append(r)

    def m(key, field):
        return med([float(r[field]) for r in runs.get(key, []) if field in r])

    rows = []
    for sc, n in order:
        base = "plain" if sc == "split" else "cp" if sc.startswith("cp") else sc
        one, mpps = m((base, 1), "mpps"), m((sc, n), "mpps")
        per_cpu, ns = m((sc, n), "mpps_per_cpu"), m((sc, n), "cpu_ns_per_rx_frame")
        # Frames sent over frames received: Mpps per CPU-second x CPU ns per received frame.
        dropped = max(0.0, 100 * (1 - per_cpu * ns / 1000)) if per_cpu and ns else None
        rows.append([sc, str(n), fmt(mpps), fmt(mpps / n if mpps else None),
                     fmt(ratio(mpps, n * one) if one else None),
                     fmt(per_cpu), fmt(ns, 1), fmt(dropped, 1)])
    return [table("DPDK forwarding, workers",
                  "quench's workers between two net_null ports, a queue pair each. plain: no "
                  "congestion point; cp: QCN on both ports, the depth shared; cp_local: without "
                  "the sum; cp_cross: frames crossing to the port's owner; split: plain with "
                  "the egress split as cp_cross. The ratio is to n x one worker of the same "
                  "scenario (split: plain); Mpps per CPU-second is what the workers forward "
                  "per second of CPU they had, the figure a loaded machine still gives. Medians "
                  "of the rounds.",
                  ["scenario", "workers", "Mpps", "per worker", "ratio to n x one",
                   "Mpps per CPU-second", "CPU ns per frame", "% dropped"], rows)]


def fcts(xs):
    return " / ".join(fmt(x, 1) for x in xs) if xs else "-"


def tables_sim(j):
    return [table("Simulator", "`quench sim --ns3-config` on run.py's DCQCN config at "
                  "100 Gb/s (A, B: 2:1 incasts; C: HPCC's fat tree, when an HPCC checkout was "
                  "given); wall and CPU seconds, peak RSS.",
                  ["scenario", "wall s", "CPU s", "MB", "FCT us"],
                  [[r["scenario"], fmt(r["quench_wall_s"], 3), fmt(r["quench_cpu_s"]),
                    fmt(r["quench_mb"], 0), fcts(r.get("quench_fct_us"))] for r in j["rows"]])]


def tables_sim_ns3(j):
    rows = [r for r in j["rows"] if r.get("ns3_wall_s") is not None]
    out = [table("Simulator against ns-3", "The same config.txt through ns-3 HPCC "
                 "(`scratch/third`) and `quench sim`.",
                 ["scenario", "ns-3 wall s", "ns-3 CPU s", "ns-3 MB", "wall ns-3 / quench",
                  "CPU ns-3 / quench", "FCT us, ns-3"],
                 [[r["scenario"], fmt(r["ns3_wall_s"]), fmt(r["ns3_cpu_s"]), fmt(r["ns3_mb"], 0),
                   fmt(ratio(r["ns3_wall_s"], r["quench_wall_s"]), 1),
                   fmt(ratio(r["ns3_cpu_s"], r["quench_cpu_s"]), 1), fcts(r.get("ns3_fct_us"))]
                  for r in rows])]
    if j.get("buckets"):
        out.append(table("Simulator against ns-3: fat-tree slowdown buckets",
                         "Buckets (of 20, by flow size as HPCC's fct_analysis.py) whose p50 and "
                         "p99 slowdown agree within 10 %.",
                         ["comparison", "p50 within 10 %", "p99 within 10 %"],
                         [[k, f"{v['p50']} of 20", f"{v['p99']} of 20"]
                          for k, v in j["buckets"].items()]))
    return out


def tables_appliance(j):
    est = {tuple(k.split("/")): v for k, v in j["estimates"].items()}
    kinds = sorted({k for k, _ in est}, key=lambda k: (k != "one", k))
    names = {"one": "one at a time, ns per frame", "burst32": "bursts of 32, ns per frame"}
    rows = []
    for flows in sorted({f for _, f in est}, key=int):
        row = [f"{int(flows):,}"]
        for k in kinds:
            e = est.get((k, flows))
            row.append(f"{e['ns']:.1f} ({e['lower']:.1f}-{e['upper']:.1f})" if e else "-")
        mem = j.get("memory", {}).get(flows, {})
        row += [str(mem.get("octets", "-")), fmt(mem.get("rss_mib"), 1)]
        rows.append(row)
    return [table("Appliance cost per frame", "Classify, enqueue and release in `quench "
                  "appliance`'s core, flows visited in a scattered order; wall clock, "
                  "criterion's estimate (interval).",
                  ["flows"] + [names.get(k, k) for k in kinds]
                  + ["table octets per flow", "RSS grown, MiB"], rows)]


TABLES = {"forward": tables_forward, "latency": tables_latency,
          "passthrough": tables_passthrough, "dpdk": tables_dpdk,
          "dpdk-workers": tables_dpdk_workers, "sim": tables_sim, "sim-ns3": tables_sim_ns3,
          "appliance": tables_appliance}


def write(dirname, part, command, data):
    doc = {"part": part, "command": command,
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "machine": machine(), "data": data}
    TABLES[part](data)  # figures that cannot be shown are an error now, not at the next render
    path = os.path.join(dirname, f"{part}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(path + ".tmp", path)


def cmd_parse(a):
    if a.part not in PARSERS:
        sys.exit(f"bench-results.py: unknown part {a.part!r} (of {', '.join(PARSERS)})")
    out = open(a.stdout).read()
    err = open(a.stderr).read() if a.stderr and os.path.exists(a.stderr) else ""
    data = PARSERS[a.part](out, err, a.criterion)
    write(a.dir, a.part, a.command, data)
    if a.part != "sim":
        return
    if any(r.get("ns3_wall_s") is not None for r in data["rows"]):
        write(a.dir, "sim-ns3", a.command, data)
    elif os.path.exists(os.path.join(a.dir, "sim-ns3.json")):
        print("bench-results.py: ns-3 did not run (bench-sim.sh without --ns3-dir): the previous ns-3 "
              "tables stay", file=sys.stderr)
    else:
        print("bench-results.py: ns-3 did not run (bench-sim.sh without --ns3-dir): no ns-3 table",
              file=sys.stderr)


def md_table(t):
    lines = ["| " + " | ".join(t["header"]) + " |", "|" + "---|" * len(t["header"])]
    lines += ["| " + " | ".join(r) + " |" for r in t["rows"]]
    return lines


def cmd_render(a):
    docs = []
    for path in glob.glob(os.path.join(a.dir, "*.json")):
        try:
            d = json.load(open(path))
        except ValueError as e:
            sys.exit(f"bench-results.py: {path}: {e}")
        if d.get("part") not in TABLES:
            sys.exit(f"bench-results.py: {path}: unknown part {d.get('part')!r}")
        docs.append(d)
    if not docs:
        sys.exit(f"bench-results.py: no figures in {a.dir}/*.json: run scripts/bench/bench-all.sh")
    docs.sort(key=lambda d: ORDER.index(d["part"]))
    latest = max(docs, key=lambda d: d["date"])
    lines = ["# Results", "",
             f"Machine: {machine_line(latest['machine'])}. Last written {latest['date']}.", "",
             "The current figures, one table per measure, each with the command that reproduces",
             "it. `scripts/bench/bench-all.sh` writes this file from docs/results/*.json (`--only PART`",
             "reruns one part; `--help` lists them).", ""]
    for d in docs:
        for t in TABLES[d["part"]](d["data"]):
            lines += [f"## {t['title']}", ""]
            if t.get("note"):
                lines += [t["note"], ""]
            lines += md_table(t)
            where = ("" if d["machine"] == latest["machine"]
                     else f"; {machine_line(d['machine'])}")
            lines += ["", f"`{d['command']}` ({d['date']}{where})", ""]
    with open(a.out, "w") as f:
        f.write("\n".join(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("parse")
    p.add_argument("part")
    p.add_argument("stdout")
    p.add_argument("--dir", required=True)
    p.add_argument("--command", required=True)
    p.add_argument("--stderr")
    p.add_argument("--criterion")
    r = sub.add_parser("render")
    r.add_argument("dir")
    r.add_argument("out")
    a = ap.parse_args()
    try:
        cmd_parse(a) if a.cmd == "parse" else cmd_render(a)
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.exit(f"bench-results.py: {a.cmd} {getattr(a, 'part', '')}: {e}")


if __name__ == "__main__":
    main()
