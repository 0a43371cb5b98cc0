#!/usr/bin/env python3
"""docs/results.md from the benchmarks' outputs (scripts/bench-all.sh calls it).

    bench-results.py parse PART STDOUT --dir DIR --command CMD [--stderr FILE] [--criterion DIR]
    bench-results.py render DIR OUT.md

`parse` reads one benchmark's output (PART: forward, latency, passthrough, dpdk, dpdk-workers,
sim, appliance) and writes DIR/PART.json: the command, the date, the machine, the benchmark's
own JSON where it prints one (`raw`), and `tables`, each a title, a header and rows, as
results.md shows them. Peers are read generically: every key of a benchmark's JSON (every
forwarder, every DPDK program) is a row or a column, so a new peer needs no change here. The
simulator's ns-3 columns go to DIR/sim-ns3.json, written only by a run that had ns-3, so a run
without it keeps the previous ns-3 table.

`render` writes OUT.md from every DIR/*.json: the machine and the date at the head, then each
table with the command that reproduces it and when it ran under it.
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


def label(key):
    return key.replace("_", " ")


# --- parsers: each returns (raw, tables) ---------------------------------------------------------

def parse_forward(out, err):
    js = [j for j in json_lines(out) if "mpps" in j]
    if not js:
        raise ValueError("no JSON line with \"mpps\" in bench-forward.sh's output")
    j = js[-1]
    tables = []
    frames = list(j["mpps"])
    names = []
    for f in frames:
        names += [k for k in j["mpps"][f] if k not in names]
    peers = [k for k in names if k not in ("source", "quench")]
    header = ["frame"] + [f"{label(k)} Mpps" for k in names] + \
        [f"quench / {label(k)}" for k in peers if "quench" in names]
    rows = []
    for f in frames:
        v = j["mpps"][f]
        row = [f"{f} B"] + [fmt(v.get(k), 3) for k in names]
        if "quench" in names:
            row += [fmt(ratio(v.get("quench"), v.get(k))) for k in peers]
        rows.append(row)
    tables.append({"title": "Forwarding rate", "note": "Mpps at the receiver, one worker, "
                   "veth testbed; `source` is what the sender offers with no forwarder.",
                   "header": header, "rows": rows})
    shaping = j.get("shaping_fraction")
    if shaping:
        tables.append({"title": "Egress shaping", "note": "A port paced to the rate, 1500 B "
                       "frames offered above it: what the receiver got.",
                       "header": ["rate", "delivered, % of the rate"],
                       "rows": [[k, fmt(100 * v, 2)] for k, v in shaping.items()]})
    return j, tables


def parse_latency(out, err):
    js = [j for j in json_lines(out) if "latency" in j]
    if not js:
        raise ValueError("no JSON line with \"latency\" in bench-forward.sh's output")
    j = js[-1]
    lat = j["latency"]
    loads = list(lat)
    fwds = []
    for load in loads:
        fwds += [f for f in lat[load] if f not in fwds]

    def cells(load, f):
        c = lat[load].get(f)
        return c if isinstance(c, list) else [c] if c else []

    header = ["load (of 1 Gbit/s)"] + [f"{label(f)} p50 / p99 / p99.9 us" for f in fwds]
    others = [f for f in fwds if f != "bridge"] if "bridge" in fwds else []
    header += [f"{label(f)} / bridge, p99" for f in others]
    rows = []
    for load in loads:
        row = [f"{load} %"]
        for f in fwds:
            cs = [c for c in cells(load, f) if c and c.get("frames")]
            if not cs:
                row.append("no frame received")
                continue
            row.append(" / ".join(fmt(med([c[k] for c in cs]), 1)
                                  for k in ("p50_us", "p99_us", "p999_us")))
        for f in others:
            per_round = [ratio(a["p99_us"], b["p99_us"])
                         for a, b in zip(cells(load, f), cells(load, "bridge"))
                         if a and b and a.get("frames") and b.get("frames")]
            row.append(fmt(med(per_round)))
        rows.append(row)
    n = j.get("rounds", 1)
    note = ("One paced flow of 1500-octet frames through each forwarder; "
            + (f"medians over {n} rounds, the ratio the median of the per-round ratios."
               if n > 1 else "one round."))
    return j, [{"title": "Forwarding latency", "note": note, "header": header, "rows": rows}]


def parse_passthrough(out, err):
    js = [j for j in json_lines(out) if any(k.startswith("mpps") for k in j)]
    if not js:
        raise ValueError("no JSON line with Mpps in bench-forward.sh --appliance's output")
    j = js[-1]
    rows = []
    header = None
    for key, v in j.items():
        if not key.startswith("mpps") or not isinstance(v, dict):
            continue
        names = list(v)
        header = header or ["frame"] + [f"{label(k)} Mpps" for k in names] + \
            (["appliance / switch"] if "appliance" in v and "switch" in v else [])
        row = [f"{key.split('_')[-1]} B"] + [fmt(v[k], 3) for k in names]
        if "appliance" in v and "switch" in v:
            row.append(fmt(ratio(v["appliance"], v["switch"])))
        rows.append(row)
    return j, [{"title": "Appliance pass-through",
                "note": "64 B frames through `quench appliance` (no congestion control) and "
                        "through `quench switch`, same testbed.",
                "header": header, "rows": rows}]


ROUND = re.compile(r"^round (\d+): (\S+)(.*?)(?:\((.*)\))?\s*$")


def parse_dpdk(out, err):
    js = [j for j in json_lines(out) if isinstance(j.get("mpps"), dict)]
    runs = {}
    if js:
        raw = js[-1]
        for k, v in raw["mpps"].items():
            runs[k] = v if isinstance(v, list) else [v]
    else:
        raw = None
        for line in out.splitlines():
            m = ROUND.match(line.strip())
            if not m or "mpps=" not in line:
                continue
            name = m.group(2) + (f" ({m.group(4)})" if m.group(4) else "")
            x = re.search(r"\bmpps=([0-9.]+)", line)
            runs.setdefault(name, []).append(float(x.group(1)))
    if not runs:
        raise ValueError("no Mpps in bench-dpdk.sh's output")
    rows = []
    for name, xs in runs.items():
        base = "quench_mix" if "mix" in name else "quench"
        q = med(runs.get(base, []))
        rows.append([name, fmt(med(xs)), f"{fmt(min(xs))}-{fmt(max(xs))}", str(len(xs)),
                     "-" if name == base else fmt(ratio(q, med(xs)))])
    return raw, [{"title": "DPDK forwarding, one core",
                  "note": "Between two net_null ports (`mix`: two ring ports, 1,024 stations "
                          "a side, 64 / 576 / 1500 B); `c_loop` is a bare C forwarding loop "
                          "over the same ports. Medians of the rounds.",
                  "header": ["program", "Mpps", "range", "rounds", "quench / program"],
                  "rows": rows}]


WORKERS = re.compile(r"^(\S+) workers (\d+) round (\d+): quench_workers (.*)$")


def parse_dpdk_workers(out, err):
    runs = {}
    order = []
    for line in out.splitlines():
        m = WORKERS.match(line.strip())
        if not m:
            continue
        kv = dict(re.findall(r"(\w+)=(\S+)", m.group(4)))
        key = (m.group(1), int(m.group(2)))
        if key not in runs:
            order.append(key)
        runs.setdefault(key, []).append(kv)
    if not runs:
        raise ValueError("no quench_workers line in bench-dpdk.sh --workers' output")

    def m(key, field):
        return med([float(r[field]) for r in runs.get(key, []) if field in r])

    rows = []
    for sc, n in order:
        base = "plain" if sc == "split" else "cp" if sc.startswith("cp") else sc
        one = m((base, 1), "mpps")
        rows.append([sc, str(n), fmt(m((sc, n), "mpps")), fmt(m((sc, n), "mpps") / n),
                     fmt(ratio(m((sc, n), "mpps"), n * one) if one else None),
                     fmt(m((sc, n), "mpps_per_cpu")), fmt(m((sc, n), "cpu_ns_per_rx_frame"), 1)])
    return None, [{"title": "DPDK forwarding, workers",
                   "note": "quench's workers between two net_null ports, a queue pair each. "
                           "plain: no congestion point; cp: QCN on both ports, the depth shared; "
                           "cp_local: without the sum; cp_cross: frames crossing to the port's "
                           "owner; split: plain with the egress split as cp_cross. The ratio is "
                           "to n x one worker of the same scenario (split: plain). Medians.",
                   "header": ["scenario", "workers", "Mpps", "per worker", "ratio to n x one",
                              "Mpps per CPU-second", "CPU ns per frame"],
                   "rows": rows}]


def parse_sim(out, err):
    js = [j for j in json_lines(out) if "rows" in j]
    if not js:
        raise ValueError("no JSON line with \"rows\" in bench-sim.sh's output")
    j = js[-1]
    fct = lambda xs: " / ".join(fmt(x, 1) for x in xs) if xs else "-"
    tables = [{"title": "Simulator", "note": "`quench sim --ns3-config` on run.py's DCQCN "
               "config at 100 Gb/s; wall and CPU seconds, peak RSS.",
               "header": ["scenario", "wall s", "CPU s", "MB", "FCT us"],
               "rows": [[r["scenario"], fmt(r["quench_wall_s"], 3), fmt(r["quench_cpu_s"]),
                         fmt(r["quench_mb"], 0), fct(r.get("quench_fct_us"))]
                        for r in j["rows"]]}]
    ns3 = [r for r in j["rows"] if r.get("ns3_wall_s") is not None]
    extra = []
    if ns3:
        t = {"title": "Simulator against ns-3", "note": "The same config.txt through ns-3 HPCC "
             "(`scratch/third`) and `quench sim`.",
             "header": ["scenario", "ns-3 wall s", "ns-3 CPU s", "ns-3 MB", "wall ns-3 / quench",
                        "CPU ns-3 / quench", "FCT us, ns-3"],
             "rows": [[r["scenario"], fmt(r["ns3_wall_s"]), fmt(r["ns3_cpu_s"]),
                       fmt(r["ns3_mb"], 0), fmt(ratio(r["ns3_wall_s"], r["quench_wall_s"]), 1),
                       fmt(ratio(r["ns3_cpu_s"], r["quench_cpu_s"]), 1),
                       fct(r.get("ns3_fct_us"))] for r in ns3]}
        extra.append(t)
        if j.get("buckets"):
            extra.append({"title": "Simulator against ns-3: fat-tree slowdown buckets",
                          "note": "Buckets (of 20, by flow size as HPCC's fct_analysis.py) "
                                  "whose p50 and p99 slowdown agree within 10 %.",
                          "header": ["comparison", "p50 within 10 %", "p99 within 10 %"],
                          "rows": [[k, f"{v['p50']} of 20", f"{v['p99']} of 20"]
                                   for k, v in j["buckets"].items()]})
    return j, tables, extra


FLOWS_LINE = re.compile(r"(\d+) flows: (\d+) octets of table per flow; RSS grew ([0-9.]+) MiB")


def parse_appliance(out, err, criterion):
    est = {}
    for path in glob.glob(os.path.join(criterion, "appliance*", "*", "*", "new",
                                       "estimates.json")):
        parts = path.split(os.sep)
        kind, flows = parts[-4], parts[-3]
        e = json.load(open(path))
        pick = e.get("slope") or e["mean"]
        est[(kind, int(flows))] = (pick["point_estimate"],
                                   pick["confidence_interval"]["lower_bound"],
                                   pick["confidence_interval"]["upper_bound"])
    if not est:
        raise ValueError(f"no criterion estimates under {criterion}/appliance*")
    mem = {int(m.group(1)): (int(m.group(2)), float(m.group(3)))
           for m in FLOWS_LINE.finditer(err or "")}
    kinds = sorted({k for k, _ in est}, key=lambda k: (k != "one", k))
    rows = []
    for flows in sorted({f for _, f in est}):
        row = [f"{flows:,}"]
        for k in kinds:
            e = est.get((k, flows))
            row.append(f"{e[0]:.1f} ({e[1]:.1f}-{e[2]:.1f})" if e else "-")
        octets, rss = mem.get(flows, (None, None))
        row += [str(octets) if octets else "-", fmt(rss, 1)]
        rows.append(row)
    names = {"one": "one at a time, ns per frame", "burst32": "bursts of 32, ns per frame"}
    raw = {f"{k}/{f}": {"ns": e[0], "lower": e[1], "upper": e[2]} for (k, f), e in est.items()}
    return raw, [{"title": "Appliance cost per frame",
                  "note": "Classify, enqueue and release in `quench appliance`'s core, flows "
                          "visited in a scattered order; wall clock, criterion's estimate "
                          "(interval).",
                  "header": ["flows"] + [names.get(k, k) for k in kinds]
                            + ["table octets per flow", "RSS grown, MiB"],
                  "rows": rows}]


def write(dirname, part, command, raw, tables):
    doc = {"part": part, "command": command,
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "machine": machine(), "raw": raw, "tables": tables}
    path = os.path.join(dirname, f"{part}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(path + ".tmp", path)


def cmd_parse(a):
    out = open(a.stdout).read()
    err = open(a.stderr).read() if a.stderr and os.path.exists(a.stderr) else ""
    p = a.part
    extra = None
    if p == "forward":
        raw, tables = parse_forward(out, err)
    elif p == "latency":
        raw, tables = parse_latency(out, err)
    elif p == "passthrough":
        raw, tables = parse_passthrough(out, err)
    elif p == "dpdk":
        raw, tables = parse_dpdk(out, err)
    elif p == "dpdk-workers":
        raw, tables = parse_dpdk_workers(out, err)
    elif p == "sim":
        raw, tables, extra = parse_sim(out, err)
    elif p == "appliance":
        if not a.criterion:
            sys.exit("bench-results.py: the appliance part needs --criterion DIR")
        raw, tables = parse_appliance(out, err, a.criterion)
    else:
        sys.exit(f"bench-results.py: unknown part {p!r} (of {', '.join(ORDER)})")
    write(a.dir, p, a.command, raw, tables)
    if p == "sim":
        if extra:
            write(a.dir, "sim-ns3", a.command, None, extra)
        elif os.path.exists(os.path.join(a.dir, "sim-ns3.json")):
            print("bench-results.py: ns-3 did not run (NS3_HPCC_DIR unset): the previous ns-3 "
                  "tables stay", file=sys.stderr)
        else:
            print("bench-results.py: ns-3 did not run (NS3_HPCC_DIR unset): no ns-3 table",
                  file=sys.stderr)


def md_table(t):
    lines = ["| " + " | ".join(t["header"]) + " |", "|" + "---|" * len(t["header"])]
    lines += ["| " + " | ".join(r) + " |" for r in t["rows"]]
    return lines


def cmd_render(a):
    docs = []
    for path in glob.glob(os.path.join(a.dir, "*.json")):
        try:
            docs.append(json.load(open(path)))
        except ValueError as e:
            sys.exit(f"bench-results.py: {path}: {e}")
    if not docs:
        sys.exit(f"bench-results.py: no figures in {a.dir}/*.json: run scripts/bench-all.sh")
    rank = lambda d: (ORDER.index(d["part"]) if d["part"] in ORDER else len(ORDER), d["part"])
    docs.sort(key=rank)
    latest = max(docs, key=lambda d: d["date"])
    lines = ["# Results", "",
             f"Machine: {machine_line(latest['machine'])}. Last written {latest['date']}.",
             "", "The current figures, one table per measure, each with the command that "
             "reproduces it. `scripts/bench-all.sh` writes this file from docs/results/*.json "
             "(`--only PART` reruns one part; `--help` lists them).", ""]
    for d in docs:
        for t in d["tables"]:
            lines += [f"## {t['title']}", ""]
            if t.get("note"):
                lines += [t["note"], ""]
            lines += md_table(t)
            lines += ["", f"`{d['command']}` ({d['date']}" + (
                f"; {machine_line(d['machine'])}" if d["machine"] != latest["machine"] else "")
                + ")", ""]
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
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"bench-results.py: {a.cmd} {getattr(a, 'part', '')}: {e}")


if __name__ == "__main__":
    main()
