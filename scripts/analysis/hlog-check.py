#!/usr/bin/env python3
"""Usage: hlog-check.py REPORT_DIR

Reads the interval log quench wrote (REPORT_DIR/intervals.hlog) with PyPI's `hdrhistogram`
(module `hdrh`), an HdrHistogram implementation independent of quench's, merges the untagged
histogram of every interval (the latency of all flows, nanoseconds) and checks it against what
quench reported for the same run:
- REPORT_DIR/latency.hgrm: total count, max and mean, at every percentile row the count of
  samples up to the row's value (the TotalCount column), and the footer's Buckets / SubBuckets
  line against the one hdrh's own writer prints for a histogram of the log's parameters;
- REPORT_DIR/summary.json: the p50, p99 and p99.9 latencies.
Prints one JSON line; exits 1 on a mismatch, 2 on unreadable input.
"""
import io
import json
import math
import re
import sys

if sys.argv[1:2] in (["-h"], ["--help"]):
    print(__doc__.strip())
    sys.exit(0)

from hdrh.histogram import HdrHistogram  # noqa: E402 (after --help, which needs no hdrh)
from hdrh.log import HistogramLogReader  # noqa: E402

NS_PER_MS = 1e6  # .hgrm values are milliseconds, the log's nanoseconds


def read_hgrm(path):
    rows, total, max_ms, mean_ms, buckets = [], None, None, None, None
    for line in open(path, encoding="utf-8"):
        if line.startswith("#[Buckets"):
            buckets = line.strip()
        m = re.match(r"#\[Mean\s*=\s*([\d.]+),", line)
        if m:
            mean_ms = float(m.group(1))
        m = re.match(r"#\[Max\s*=\s*([\d.]+), Total count\s*=\s*(\d+)\]", line)
        if m:
            max_ms, total = float(m.group(1)), int(m.group(2))
        f = line.split()
        if len(f) >= 3 and re.match(r"^[\d.]+$", f[0]) and re.match(r"^[\d.]+$", f[1]):
            rows.append((float(f[0]), float(f[1]), int(f[2])))
    return rows, total, max_ms, mean_ms, buckets


def hdrh_buckets_line(h):
    """The Buckets / SubBuckets footer line hdrh's output_percentile_distribution writes for a
    histogram with h's bounds and precision."""
    empty = HdrHistogram(h.lowest_trackable_value, h.highest_trackable_value,
                         h.significant_figures)
    out = io.BytesIO()
    empty.output_percentile_distribution(out, 1)
    return next(l for l in out.getvalue().decode().splitlines() if l.startswith("#[Buckets"))


def main():
    report = sys.argv[1]
    log_path, hgrm_path = f"{report}/intervals.hlog", f"{report}/latency.hgrm"
    summary = json.load(open(f"{report}/summary.json", encoding="utf-8"))["latency"]
    # The reference histogram only sets the decoder's defaults; decoded ones carry their own.
    reader = HistogramLogReader(log_path, HdrHistogram(1, 60 * 10**9, 3))
    merged, untagged, tagged, footer = None, 0, 0, None
    while True:
        h = reader.get_next_interval_histogram()
        if h is None:
            break
        if h.get_tag() is not None:
            tagged += 1
            continue
        untagged += 1
        if merged is None:
            merged = HdrHistogram(1, 60 * 10**9, 3)
            footer = hdrh_buckets_line(h)
        merged.add(h)
    rows, total, max_ms, mean_ms, buckets = read_hgrm(hgrm_path)
    if merged is None or total is None:
        print(json.dumps({"ok": False, "why": "no untagged interval or no .hgrm totals",
                          "untagged": untagged, "tagged": tagged}))
        sys.exit(2)
    bad = []
    if buckets != footer:
        bad.append(f".hgrm footer {buckets!r}, hdrh writes {footer!r}")
    if merged.get_total_count() != total:
        bad.append(f"count {merged.get_total_count()} != {total}")
    if abs(merged.get_max_value() / NS_PER_MS - max_ms) > 1e-6:
        bad.append(f"max {merged.get_max_value()} ns != {max_ms} ms")
    if abs(merged.get_mean_value() / NS_PER_MS - mean_ms) > 1e-3 * max(mean_ms, 1e-6):
        bad.append(f"mean {merged.get_mean_value()} ns != {mean_ms} ms")
    # Samples up to each recorded value (the highest value equivalent to its bucket).
    cumulative = {}
    for it in merged.get_recorded_iterator():
        cumulative[it.value_iterated_to] = it.total_count_to_this_value
    checked = 0
    for value_ms, q, total_count in rows:
        value_ns = round(value_ms * NS_PER_MS)
        got = cumulative.get(value_ns)
        if got != total_count:
            bad.append(f"p{q * 100:.4f} at {value_ns} ns: {got} samples up to it, .hgrm says "
                       f"{total_count}")
        checked += 1
    # Nearest rank: the smallest recorded value with at least ceil(q x count) samples up to it
    # (hdrh's own get_value_at_percentile rounds the rank to nearest instead, which moves p99.9
    # by a bucket on small runs).
    def at_quantile(q):
        rank = max(1, math.ceil(q * total - 1e-9))
        return next(v for v, c in sorted(cumulative.items()) if c >= rank)

    pct = {p: at_quantile(p / 100.0) for p in (50, 99, 99.9)}
    for p, key in ((50, "p50_ns"), (99, "p99_ns"), (99.9, "p999_ns")):
        if pct[p] != summary[key]:
            bad.append(f"p{p}: {pct[p]} ns, summary.json says {summary[key]}")
    print(json.dumps({"ok": not bad, "untagged": untagged, "tagged": tagged, "count": total,
                      "percentile_rows_checked": checked,
                      "p50_ns": pct[50], "p99_ns": pct[99], "mismatches": bad[:10]}))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
