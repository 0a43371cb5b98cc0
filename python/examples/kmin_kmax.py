"""DCQCN's ECN thresholds against the tail of short flows: a parameter study on Dask.

A k = 4 fat tree (16 hosts, 8 edge, 8 aggregation and 4 core switches, 100 Gb/s links of 1 us)
carries web-search traffic (the DCTCP paper's flow sizes, bundled as `websearch`) with Poisson
arrivals at 30 % load, under DCQCN with HPCC ns-3's parameters (preset `hpcc-ns3`). The grid
sweeps RED's Kmin and Kmax at every switch port and, for every run, takes the 99th percentile of
the FCT slowdown of short flows (under 100 KB, HPCC's fct_analysis.py's first buckets) from the
run's `fct` DataFrame on the worker that ran it (`quench.sweep(..., measure=...)`).

    python python/examples/kmin_kmax.py --out docs/study            # the grid of docs/study.md
    python python/examples/kmin_kmax.py --small --out /tmp/s        # the reduced grid the tests run
    python python/examples/kmin_kmax.py --scheduler tcp://HOST:8786 --out DIR   # on a cluster

writes `kmin_kmax.csv` (a row per run) and `kmin_kmax.svg` (p99 short-flow slowdown against Kmax,
a line per Kmin, the mean over seeds with the seeds' range) into `--out`.
"""
import argparse
import os
import sys
import tempfile

import quench

SHORT_BYTES = 100_000
HOST_RATE = "100Gbps"
DELAY = "0.001ms"


def fat_tree(k=4):
    """A k-ary fat tree in ns-3 HPCC's topology format: hosts first (ids 0 .. k^3/4 - 1), then
    edge, aggregation and core switches; every link HOST_RATE with DELAY."""
    hosts = k ** 3 // 4
    half = k // 2
    edge0 = hosts
    agg0 = edge0 + k * half
    core0 = agg0 + k * half
    cores = half * half
    links = []
    for pod in range(k):
        for e in range(half):
            edge = edge0 + pod * half + e
            for h in range(half):
                links.append((pod * half * half + e * half + h, edge))
            for a in range(half):
                links.append((edge, agg0 + pod * half + a))
        for a in range(half):
            for c in range(half):
                links.append((agg0 + pod * half + a, core0 + a * half + c))
    nodes = core0 + cores
    switches = list(range(edge0, nodes))
    lines = [f"{nodes} {len(switches)} {len(links)}", " ".join(map(str, switches))]
    lines += [f"{a} {b} {HOST_RATE} {DELAY} 0" for a, b in links]
    return "\n".join(lines) + "\n"


def scenario(path, load=0.3, arrivals_ms=5.0):
    """The study's scenario file: the fat tree, DCQCN with preset hpcc-ns3, web-search flows at
    `load` arriving for `arrivals_ms`, the run bounded at four times that."""
    topo = fat_tree().replace("\n", "\\n")
    with open(path, "w") as f:
        f.write(
            f'topology_text = "{topo}"\n'
            'cc = "dcqcn"\n'
            'preset = "hpcc-ns3"\n'
            f"stop_ms = {4 * arrivals_ms}\n"
            "[[poisson]]\n"
            'cdf = "websearch"\n'
            f"load = {load}\n"
            f"duration_ms = {arrivals_ms}\n"
        )
    return path


def short_flow_tail(result):
    """Runs on the worker: the p99 FCT slowdown of the finished flows under SHORT_BYTES."""
    fct = result.fct
    short = fct[fct["size"] < SHORT_BYTES] if len(fct) else fct
    return {
        "short_flows": int(len(short)),
        "p99_short_slowdown": float(short.slowdown.quantile(0.99)) if len(short) else None,
    }


def study(kmin, kmax, seeds, arrivals_ms, client=None, workdir=None):
    """The grid Kmin x Kmax x seeds as a DataFrame, a row per run (quench.sweep's columns plus
    short_flows and p99_short_slowdown)."""
    workdir = workdir or tempfile.mkdtemp(prefix="quench-study-")
    scen = scenario(os.path.join(workdir, "fat_tree_websearch.toml"), arrivals_ms=arrivals_ms)
    grid = {"red.kmin_bytes": kmin, "red.kmax_bytes": kmax}
    return quench.sweep(grid, seeds=seeds, client=client, scenario=scen,
                        measure=short_flow_tail)


def plot(df, path):
    """p99 short-flow slowdown against Kmax, a line per Kmin: the mean over seeds, the seeds'
    range as a band."""
    import matplotlib
    matplotlib.use("svg")
    import matplotlib.pyplot as plt

    # The same data draws the same file: fixed element ids, no date.
    matplotlib.rcParams["svg.hashsalt"] = "kmin_kmax"

    g = (df.groupby(["red.kmin_bytes", "red.kmax_bytes"])["p99_short_slowdown"]
         .agg(["mean", "min", "max"]).reset_index())
    fig, ax = plt.subplots(figsize=(6, 4))
    for kmin, part in g.groupby("red.kmin_bytes"):
        x = part["red.kmax_bytes"] / 1000
        ax.plot(x, part["mean"], marker="o", label=f"Kmin {kmin / 1000:g} KB")
        ax.fill_between(x, part["min"], part["max"], alpha=0.2)
    ax.set_xscale("log")
    ticks = sorted(g["red.kmax_bytes"].unique() / 1000)
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("Kmax (KB)")
    ax.set_ylabel("p99 FCT slowdown, flows < 100 KB")
    ax.set_title("DCQCN on a k=4 fat tree, web search at 30 % load")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, metadata={"Date": None})
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="directory for kmin_kmax.csv and .svg")
    ap.add_argument("--small", action="store_true",
                    help="the reduced grid the tests run: 2 x 2 points, 1 seed, 1 ms of arrivals")
    ap.add_argument("--scheduler", help="a Dask scheduler's address, tcp://HOST:PORT "
                    "(default: a local cluster on this machine's cores)")
    a = ap.parse_args(argv)
    if a.small:
        kmin, kmax, seeds, ms = [5_000, 40_000], [100_000, 400_000], [1], 1.0
    else:
        kmin = [5_000, 20_000, 80_000]
        kmax = [100_000, 200_000, 400_000, 1_600_000]
        seeds, ms = [1, 2, 3, 4], 20.0
    client = None
    if a.scheduler:
        from distributed import Client
        client = Client(a.scheduler)
    os.makedirs(a.out, exist_ok=True)
    df = study(kmin, kmax, seeds, ms, client=client)
    df.to_csv(os.path.join(a.out, "kmin_kmax.csv"), index=False)
    plot(df, os.path.join(a.out, "kmin_kmax.svg"))
    cols = ["red.kmin_bytes", "red.kmax_bytes", "seed", "flows_done", "short_flows",
            "p99_short_slowdown"]
    print(df[cols].to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
