"""quench's simulator from Python.

    import quench
    r = quench.sim(scenario="incast", cc="dcqcn")
    r.fct.slowdown.quantile(0.99)

`sim` and `ns3` run the simulator in this process (without the GIL) and return a `Result`: the
run's output files as pandas DataFrames (`fct`, `flows`, `queues`) and its summary as a dict.
`sweep` runs a grid of them on Dask: a local cluster on this machine's cores, or the cluster of
the `dask.distributed.Client` given. Bad input raises `ValueError` with `quench sim`'s message.
Times are integer nanoseconds; `stop` is a duration with its unit: `ns`, `us`, `ms`, `s`, `min`
(`"10ms"`, `"1.5s"`).
"""
import itertools
import json
import os
import shutil
import tempfile

import pandas as pd

from . import _quench

__all__ = ["Result", "sim", "ns3", "presets", "sweep"]


class Result:
    """One run: `fct` (flow, src, dst, size, start_ns, fct_ns, ideal_ns, slowdown), `flows`
    and `queues` (the run's time series) as DataFrames, `summary` (summary.json) as a dict, `row`
    (its row of `quench sim --sweep`'s table) as a dict, and `out`, the directory the files were
    written to (None when it was a temporary one, since removed)."""

    def __init__(self, out, row, keep):
        self.fct = _csv(os.path.join(out, "fct.csv"))
        self.flows = _csv(os.path.join(out, "flows.csv"))
        self.queues = _csv(os.path.join(out, "queues.csv"))
        with open(os.path.join(out, "summary.json")) as f:
            self.summary = json.load(f)
        self.row = row
        self.out = out if keep else None

    def __repr__(self):
        done = self.summary.get("totals", {}).get("flows_done")
        return f"<quench.Result: {len(self.fct)} flows, {done} done>"


def _csv(path):
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return pd.DataFrame()
    return pd.read_csv(path)


def _spec(topology=None, flows=None, scenario=None, cc=None, preset=None, bw=None, seed=None,
          stop=None, config=None, ns3_config=None, ns3_dir=None):
    fs = lambda p: None if p is None else os.fspath(p)
    return {
        "topology": fs(topology), "flows": fs(flows), "scenario": fs(scenario), "cc": cc,
        "preset": fs(preset), "bw": bw, "seed": seed, "stop": stop, "config": fs(config),
        "ns3_config": fs(ns3_config), "ns3_dir": fs(ns3_dir),
    }


def _run(spec, overrides, seed, out):
    keep = out is not None
    d = os.fspath(out) if keep else tempfile.mkdtemp(prefix="quench-")
    try:
        names = _quench.columns()
        row = dict(zip(names, json.loads(_quench.run(spec, list(overrides), seed, d))))
        return Result(d, row, keep)
    finally:
        if not keep:
            shutil.rmtree(d, ignore_errors=True)


def sim(topology=None, flows=None, scenario=None, cc=None, preset=None, bw=None, seed=None,
        overrides=None, stop=None, out=None, config=None):
    """Runs the simulator as `quench sim` does. `topology`/`flows`: ns-3 HPCC files;
    `scenario`: a bundled name or a TOML file; `preset`: a bundled name or a TOML file; `bw`: Gb/s
    for run.py's presets; `overrides`: {dotted scenario key: value}, the keys of
    `quench sim --sweep` (`"dcqcn_rp.rpg_ai_rate"`); `stop`: an upper bound on virtual time with
    its unit (`"10ms"`); `out`: keep the files there (else a temporary directory)."""
    spec = _spec(topology, flows, scenario, cc, preset, bw, seed, stop, config)
    return _run(spec, _items(overrides), None, out)


def ns3(config_path, ns3_dir=None, out=None):
    """Runs an HPCC ns-3 config.txt unchanged, as `quench sim --ns3-config`; its own output files
    (FCT_OUTPUT_FILE, ...) are written where it names them, relative to `ns3_dir`."""
    return _run(_spec(ns3_config=config_path, ns3_dir=ns3_dir), [], None, out)


def presets(kind="preset"):
    """The bundled names of one kind: preset (default), scenario, cdf, send, switch, appliance."""
    return list(_quench.presets(kind))


def _items(overrides):
    return [] if not overrides else [(str(k), v) for k, v in dict(overrides).items()]


def _task(spec, overrides, seed, out, measure=None):
    """One run of a sweep, on a Dask worker: its row, what `measure` makes of its Result, and
    the worker's address."""
    if measure is None:
        row = dict(zip(_quench.columns(), json.loads(_quench.run(spec, overrides, seed, out))))
    else:
        result = _run(spec, overrides, seed, out)
        row = dict(result.row)
        extra = measure(result)
        if not isinstance(extra, dict):
            raise TypeError(f"measure must return a dict, not {type(extra).__name__}")
        row.update(extra)
    try:
        from distributed import get_worker
        row["worker"] = get_worker().address
    except (ImportError, ValueError):
        row["worker"] = None
    return row


def sweep(grid, seeds=None, client=None, keep_files=False, out=None, measure=None, **sim_args):
    """Runs `sim(**sim_args)` at every point of `grid` ({key: [values, ...]}, the cross product
    in key order, as `quench sim --sweep KEY=V1,V2 ...`) times every seed of `seeds`, on Dask.
    Returns one DataFrame, a row per run in grid order: its parameters, its seed, the columns of
    `quench sim --sweep`'s sweep.tsv (times in ns) and the `worker` that ran it. Without `client`
    a `dask.distributed.LocalCluster` on this machine's cores runs it. `keep_files`: each run's
    files go to `out/<run name>` on the worker that ran it (`out` defaults to `quench-sweep`).
    `measure`: a function of a run's `Result` returning a dict, called on the worker while the
    run's DataFrames are at hand; its keys become columns (a figure the summary does not hold,
    such as the p99 slowdown of short flows, without moving any run's files)."""
    from distributed import Client, LocalCluster

    spec = _spec(**sim_args)
    keys = [str(k) for k in grid]
    values = [list(grid[k]) for k in grid]
    seed_list = list(seeds) if seeds is not None else [None]
    points = [(list(zip(keys, combo[:-1])), combo[-1])
              for combo in itertools.product(*values, seed_list)]
    names = _quench.check(spec, points)
    base = os.path.abspath(os.fspath(out or "quench-sweep")) if keep_files else None

    own = client is None
    cluster = None
    if own:
        cluster = LocalCluster(n_workers=os.cpu_count() or 1, threads_per_worker=1,
                               processes=True, dashboard_address=None)
        client = Client(cluster)
    try:
        futures = []
        for (overrides, seed), name in zip(points, names):
            d = os.path.join(base, name) if base else None
            futures.append(client.submit(_run_task, spec, overrides, seed, d, measure,
                                         pure=False))
        rows = client.gather(futures)
    finally:
        if own:
            client.close()
            cluster.close()
    table = []
    for (overrides, seed), row in zip(points, rows):
        r = dict(overrides)
        r["seed"] = seed
        r.update(row)
        table.append(r)
    return pd.DataFrame(table)


def _run_task(spec, overrides, seed, out, measure=None):
    if out is not None:
        return _task(spec, overrides, seed, out, measure)
    d = tempfile.mkdtemp(prefix="quench-")
    try:
        return _task(spec, overrides, seed, d, measure)
    finally:
        shutil.rmtree(d, ignore_errors=True)
