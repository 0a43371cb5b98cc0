"""The `quench` package against the `quench` binary: the same FCTs to the nanosecond, a sweep on a
Dask cluster of separate processes over TCP with the CLI sweep's rows, and the CLI's messages as
ValueErrors.

    python python/tests/test_quench.py QUENCH_BINARY

run by scripts/test-python.sh (in a fresh venv with the wheel installed)."""
import csv
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import quench

# ns-3's incast (engine/quench/tests/sim_ns3.rs): two senders to one receiver at 100 Gb/s.
TOPO = "4 1 3\n3\n0 3 100Gbps 0.001ms 0\n1 3 100Gbps 0.001ms 0\n2 3 100Gbps 0.001ms 0\n"
FLOWS = "2\n0 2 3 100 300000 2\n1 2 3 100 300000 2\n"
FCT_COLUMNS = ["flow", "src", "dst", "size", "start_ns", "fct_ns", "ideal_ns", "slowdown"]


def cli(binary, *args):
    p = subprocess.run([binary, "sim", "-q", *args], capture_output=True, text=True)
    return p


def test_sim_matches_cli(binary, d, topo, flows):
    out = os.path.join(d, "cli")
    p = cli(binary, "--topology", topo, "--flows", flows, "--cc", "dcqcn",
            "--preset", "dcqcn-paper", "--out", out)
    assert p.returncode == 0, p.stderr
    with open(os.path.join(out, "fct.csv")) as f:
        want = list(csv.DictReader(f))
    r = quench.sim(topology=topo, flows=flows, cc="dcqcn", preset="dcqcn-paper")
    assert list(r.fct.columns) == FCT_COLUMNS, list(r.fct.columns)
    assert len(r.fct) == len(want) == 2, (len(r.fct), len(want))
    for row, w in zip(r.fct.itertuples(index=False), want):
        for c in ["flow", "src", "dst", "size", "start_ns", "fct_ns", "ideal_ns"]:
            assert int(getattr(row, c)) == int(w[c]), (c, getattr(row, c), w[c])
        assert abs(row.slowdown - float(w["slowdown"])) < 1e-12
    assert r.summary["totals"]["flows_done"] == 2, r.summary["totals"]
    assert r.out is None  # the temporary directory is gone
    # A stop bound above the run's end and kept files: the same FCTs.
    kept = os.path.join(d, "kept")
    r2 = quench.sim(topology=topo, flows=flows, cc="dcqcn", preset="dcqcn-paper",
                    stop="3s", out=kept)
    assert r2.fct.fct_ns.tolist() == [int(w["fct_ns"]) for w in want]
    assert os.path.exists(os.path.join(kept, "summary.json"))
    print("ok: quench.sim gives the CLI's FCTs:", r.fct.fct_ns.tolist())


def cli_message(p):
    assert p.returncode != 0
    msg = p.stderr.strip()
    assert msg.startswith("error: "), msg
    return msg[len("error: "):]


def test_errors(binary, d, topo, flows):
    out = os.path.join(d, "bad")
    cases = [
        (["--topology", topo, "--flows", flows, "--cc", "dcqcn", "--preset", "nosuch"],
         dict(topology=topo, flows=flows, cc="dcqcn", preset="nosuch")),
    ]
    broken = os.path.join(d, "broken.txt")
    with open(broken, "w") as f:
        f.write("4 1 3\n3\n0 3 100Gbps\n")
    cases.append((["--topology", broken, "--flows", flows, "--cc", "dcqcn"],
                  dict(topology=broken, flows=flows, cc="dcqcn")))
    for args, kwargs in cases:
        want = cli_message(cli(binary, *args, "--out", out))
        try:
            quench.sim(**kwargs)
        except ValueError as e:
            assert str(e) == want, (str(e), want)
        else:
            raise AssertionError(f"no ValueError for {kwargs}")
    for bad in [dict(scenario="incast", stop="10"), dict(scenario="incast", overrides={"x": [1]})]:
        try:
            quench.sim(**bad)
        except ValueError:
            pass
        else:
            raise AssertionError(f"no ValueError for {bad}")
    print("ok: bad input raises ValueError with the CLI's message")


def wait_for(path, timeout=60):
    t0 = time.time()
    while not os.path.exists(path) or os.path.getsize(path) == 0:
        if time.time() - t0 > timeout:
            raise AssertionError(f"{path} did not appear")
        time.sleep(0.2)


def tsv_cell(v):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3f}"
    return str(v)


def test_sweep_on_dask(binary, d, topo, flows):
    from distributed import Client

    grid = {"dcqcn_rp.rpg_ai_rate": [5, 40], "red.kmax_bytes": [40000, 400000]}
    out = os.path.join(d, "sweep-cli")
    p = cli(binary, "--topology", topo, "--flows", flows, "--cc", "dcqcn", "--preset",
            "dcqcn-paper", "--sweep", "dcqcn_rp.rpg_ai_rate=5,40", "--sweep",
            "red.kmax_bytes=40000,400000", "--seeds", "2", "--seed", "1", "--out", out)
    assert p.returncode == 0, p.stderr
    with open(os.path.join(out, "sweep.tsv")) as f:
        want = list(csv.DictReader(f, delimiter="\t"))
    assert len(want) == 8

    bindir = os.path.dirname(sys.executable)
    sched_file = os.path.join(d, "scheduler.json")
    procs = []
    try:
        procs.append(subprocess.Popen(
            [os.path.join(bindir, "dask"), "scheduler", "--host", "127.0.0.1", "--port", "0",
             "--no-dashboard", "--scheduler-file", sched_file],
            cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_for(sched_file)
        import json
        with open(sched_file) as f:
            address = json.load(f)["address"]
        assert address.startswith("tcp://127.0.0.1:"), address
        for _ in range(2):
            procs.append(subprocess.Popen(
                [os.path.join(bindir, "dask"), "worker", address, "--host", "127.0.0.1",
                 "--nworkers", "1", "--nthreads", "1", "--no-dashboard", "--no-nanny"],
                cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=120)
            workers = set(client.scheduler_info()["workers"])
            assert len(workers) == 2, workers
            df = quench.sweep(grid=grid, seeds=[1, 2], client=client, topology=topo,
                              flows=flows, cc="dcqcn", preset="dcqcn-paper")
            test_study_on_dask(d, client)
    finally:
        for p in reversed(procs):
            p.send_signal(signal.SIGTERM)
        for p in reversed(procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    assert len(df) == 8, df
    assert set(df.worker) <= workers, (set(df.worker), workers)
    compared = [c for c in quench._quench.columns() if c != "wall_ns"]
    for (_, row), w in zip(df.iterrows(), want):
        for c in compared:
            assert tsv_cell(row[c]) == w[c], (c, row[c], w[c])
    assert df["dcqcn_rp.rpg_ai_rate"].tolist() == [5, 5, 5, 5, 40, 40, 40, 40]
    assert df["seed"].tolist() == [1, 2] * 4
    print("ok: an 8-run sweep on a Dask scheduler and two worker processes equals sweep.tsv;",
          "runs per worker:", df.worker.value_counts().to_dict())


def test_study_on_dask(d, client):
    """python/examples/kmin_kmax.py's reduced grid on the cluster: a row per point, each run's
    short-flow tail measured on its worker equal to the same run's measured here, and the plot
    an SVG document."""
    import importlib.util
    import xml.etree.ElementTree as ET

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples",
                        "kmin_kmax.py")
    spec = importlib.util.spec_from_file_location("kmin_kmax", path)
    study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(study)
    work = os.path.join(d, "study")
    os.makedirs(work)
    df = study.study([5000, 40000], [100000, 400000], [1], 1.0, client=client, workdir=work)
    assert len(df) == 4, df
    assert (df.flows_done > 0).all() and (df.short_flows > 0).all(), df
    assert (df.p99_short_slowdown >= 1.0).all(), df
    first = df.iloc[0]
    here = quench.sim(scenario=os.path.join(work, "fat_tree_websearch.toml"), seed=1,
                      overrides={"red.kmin_bytes": 5000, "red.kmax_bytes": 100000})
    want = study.short_flow_tail(here)
    assert first.short_flows == want["short_flows"], (first.short_flows, want)
    assert first.p99_short_slowdown == want["p99_short_slowdown"], (first, want)
    svg = os.path.join(work, "kmin_kmax.svg")
    study.plot(df, svg)
    assert ET.parse(svg).getroot().tag.endswith("svg")
    print("ok: the Kmin/Kmax study's reduced grid on Dask:",
          df.p99_short_slowdown.round(3).tolist())


def main():
    binary = os.path.abspath(sys.argv[1])
    d = tempfile.mkdtemp(prefix="quench-py-")
    try:
        topo = os.path.join(d, "topo_incast.txt")
        flows = os.path.join(d, "flow_incast.txt")
        with open(topo, "w") as f:
            f.write(TOPO)
        with open(flows, "w") as f:
            f.write(FLOWS)
        assert "dcqcn-paper" in quench.presets()
        test_sim_matches_cli(binary, d, topo, flows)
        test_errors(binary, d, topo, flows)
        test_sweep_on_dask(binary, d, topo, flows)
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
