"""PNG plots of a results document (matplotlib, no display needed)."""

from __future__ import annotations

import math
import os
from typing import Any

__all__ = ["write_plots"]

_CODEC_COLORS = {"none": "#7f7f7f", "lz4": "#1f77b4", "snappy": "#2ca02c", "zstd": "#d62728", "gzip": "#9467bd"}
_FORMAT_STYLES = {"json": ":", "avro": "--", "parquet": "-"}
_FORMAT_MARKERS = {"json": "s", "avro": "^", "parquet": "o"}


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("the benchmark plots need matplotlib: pip install -e '.[bench]'") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _matrix_plot(results: dict[str, Any], measure: str, ylabel: str, title: str, path: str, log_y: bool) -> None:
    plt = _pyplot()
    datasets = [d["name"] for d in results["datasets"]]
    fig, axes = plt.subplots(1, len(datasets), figsize=(5.2 * len(datasets), 4.4), squeeze=False)
    for ax, ds in zip(axes[0], datasets, strict=True):
        lines: dict[str, list[tuple[int, float]]] = {}
        styles: dict[str, dict[str, Any]] = {}
        for cell in results["matrix"]["cells"]:
            m = cell["measures"].get(measure)
            e = cell["encoding"]
            variant = e.get("tuning", "auto") != "auto" or e.get("sort_by")  # one batch size: no line
            if cell["dataset"] != ds or m is None or m["median"] is None or e["per_record"] or variant:
                continue
            lines.setdefault(e["name"], []).append((cell["batch_rows"], m["median"]))
            styles[e["name"]] = {
                "color": _CODEC_COLORS.get(e["codec"], "black"),
                "linestyle": _FORMAT_STYLES[e["format"]],
                "marker": _FORMAT_MARKERS[e["format"]],
            }
        for name in sorted(lines):
            points = sorted(lines[name])
            ax.plot([p[0] for p in points], [p[1] for p in points], label=name, markersize=4, **styles[name])
        ax.set_xscale("log")
        if log_y:
            ax.set_yscale("log")
        ax.set_xlabel("rows per batch (record batch / segment)")
        ax.set_ylabel(ylabel)
        ax.set_title(ds)
        ax.grid(True, which="both", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="center right", fontsize=8, frameon=False)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, 0.86, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _e2e_plot(results: dict[str, Any], path: str) -> None:
    plt = _pyplot()
    section = results["end_to_end"]["datasets"]
    variants = list(section[0]["variants"])
    fig, ax = plt.subplots(figsize=(9, 4.4))
    width = 0.8 / len(variants)
    for i, variant in enumerate(variants):
        values = [ds["variants"][variant]["cpu_s_per_million_rows"] for ds in section]
        xs = [j + i * width for j in range(len(section))]
        medians = [v["median"] for v in values]
        errors = [[v["median"] - v["min"] for v in values], [v["max"] - v["median"] for v in values]]
        ax.bar(xs, medians, width, yerr=errors, label=variant, capsize=2)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(section))], [ds["dataset"] for ds in section])
    ax.set_yscale("log")
    ax.set_ylabel("CPU-seconds per million rows (log)")
    ax.set_title("End to end into Delta: CPU per million rows (lower is better)")
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _ingest_plot(results: dict[str, Any], path: str) -> None:
    plt = _pyplot()
    sizes = results["ingest_throughput"]["segment_sizes"]
    fig, ax = plt.subplots(figsize=(7, 4.4))
    xs = list(range(len(sizes)))
    variants = [("parka_ingest", "parka ingest"), ("fetch_and_write", "fetch + write"), ("raw_fetch", "raw fetch")]
    if all("fetch_and_put_s3" in s for s in sizes):  # the object-store arms ran
        variants += [("parka_ingest_s3", "parka ingest (s3)"), ("fetch_and_put_s3", "fetch + PUT (s3)")]
    width = 0.8 / len(variants)
    for i, (key, label) in enumerate(variants):
        values = [s[key]["steady_mb_per_s"] for s in sizes]  # median None: no steady window, no bar
        medians = [math.nan if v["median"] is None else v["median"] for v in values]
        errors = [
            [0.0 if v["median"] is None else v["median"] - v["min"] for v in values],
            [0.0 if v["median"] is None else v["max"] - v["median"] for v in values],
        ]
        offset = (i - (len(variants) - 1) / 2) * width
        ax.bar([x + offset for x in xs], medians, width, yerr=errors, label=label, capsize=3)
    ax.set_xticks(xs, [f"{s['segment_rows']:,} rows/segment" for s in sizes])
    ax.set_yscale("log")
    ax.set_ylabel("MB/s, steady (log)")
    ax.set_title("parka ingest vs fetching (and writing) the same bytes")
    ax.legend()
    ax.grid(True, axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _freshness_plot(results: dict[str, Any], path: str) -> None:
    plt = _pyplot()
    runs = results["freshness"]["runs"]
    labels = [f"{r['rate']}\n({r['achieved_rows_per_s']:,.0f} rows/s)" for r in runs]
    xs = list(range(len(runs)))
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.4))
    for i, (key, label) in enumerate((("p50", "p50"), ("p99", "p99"))):
        values = [math.nan if r["latency_s"][key] is None else r["latency_s"][key] for r in runs]
        left.bar([x + (i - 0.5) * 0.35 for x in xs], values, 0.35, label=label)
    left.set_xticks(xs, labels)
    left.set_xlabel("target rows/s (achieved)")
    left.set_ylabel("produce-to-visible latency, s")
    left.set_title("Latency per row")
    left.legend()
    left.grid(True, axis="y", alpha=0.3)
    for i, (key, label) in enumerate((("versions", "versions"), ("files", "files"), ("row_groups", "row groups"))):
        right.bar([x + (i - 1) * 0.27 for x in xs], [r["per_hour"][key] for r in runs], 0.27, label=label)
    right.set_xticks(xs, labels)
    right.set_yscale("log")
    right.set_xlabel("target rows/s (achieved)")
    right.set_ylabel("per hour (log)")
    right.set_title("The table, scaled per hour")
    right.legend()
    right.grid(True, axis="y", which="both", alpha=0.3)
    fig.suptitle("parka ingest with second-level latency")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_plots(results: dict[str, Any], out_dir: str) -> list[str]:
    """Write every plot the results allow; returns the file names written."""
    written = []
    if "matrix" in results:
        for measure, ylabel, title, name, log_y in (
            ("bytes_per_row", "bytes per row on the broker's disk", "Broker bytes per row", "bytes_per_row", False),
            ("producer_cpu_us_per_row", "producer CPU µs per row (log)", "Producer CPU per row", "producer_cpu", True),
            ("consumer_cpu_us_per_row", "consumer CPU µs per row (log)", "Consumer CPU per row", "consumer_cpu", True),
        ):
            _matrix_plot(results, measure, ylabel, title, os.path.join(out_dir, name + ".png"), log_y)
            written.append(name + ".png")
    if results.get("end_to_end"):
        _e2e_plot(results, os.path.join(out_dir, "end_to_end.png"))
        written.append("end_to_end.png")
    if results.get("ingest_throughput"):
        _ingest_plot(results, os.path.join(out_dir, "ingest_throughput.png"))
        written.append("ingest_throughput.png")
    if results.get("freshness"):
        _freshness_plot(results, os.path.join(out_dir, "freshness.png"))
        written.append("freshness.png")
    return written
