"""The ingest benchmark's figures (:mod:`benchmarks.ingest_throughput`): its variants, their
keys in results.json, the paired ratios of each ingest to its references, and the summary lines
it prints. Pure: no Kafka, no table.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .measure import paired_ratio, summarize
from .objectstore import WRITE_THREADS

__all__ = [
    "ARMS",
    "FETCH_AND_PUT",
    "FETCH_AND_WRITE",
    "GOAL",
    "RATIOS",
    "S3_VARIANTS",
    "VARIANTS",
    "summarize_runs",
    "summary_lines",
]

GOAL = 0.8
VARIANTS = ("parka ingest", "raw fetch", "fetch + write")
S3_VARIANTS = ("parka ingest (s3)", "fetch + PUT (s3)")
FETCH_AND_WRITE = "poll every message, write it to a file of its own, one syncfs once all are written"
FETCH_AND_PUT = (
    f"poll every message, PUT it as an object of its own, {WRITE_THREADS} PUTs in flight "
    "(parka ingest's --write-threads), done once all are acknowledged"
)
# results.json's key of each variant's measures
ARMS = {
    "parka ingest": "parka_ingest",
    "raw fetch": "raw_fetch",
    "fetch + write": "fetch_and_write",
    "parka ingest (s3)": "parka_ingest_s3",
    "fetch + PUT (s3)": "fetch_and_put_s3",
}
# paired per-repeat ratios: key, numerator, denominator, measure; kept when both variants ran
RATIOS = (
    ("ratio_steady_mb_per_s", "parka ingest", "raw fetch", "steady_mb_per_s"),
    ("ratio_mb_per_s", "parka ingest", "raw fetch", "mb_per_s"),
    ("ratio_to_fetch_and_write_steady_mb_per_s", "parka ingest", "fetch + write", "steady_mb_per_s"),
    ("ratio_to_fetch_and_put_steady_mb_per_s", "parka ingest (s3)", "fetch + PUT (s3)", "steady_mb_per_s"),
)


def summarize_runs(
    dataset: str,
    topics: Mapping[int, Mapping[str, Any]],
    samples: Mapping[tuple[int, str], list[dict[str, float]]],
) -> dict[str, Any]:
    """The section's figures: per segment size, each variant that ran (:data:`ARMS`) summarized
    over its repeats and each ratio of :data:`RATIOS` whose two variants ran, paired repeat by
    repeat (the variants ran interleaved). Raises ``ValueError`` when two paired variants ran a
    different number of times."""
    sizes = []
    for size, topic in topics.items():
        out: dict[str, Any] = {
            "segment_rows": size,
            "copies": topic["copies"],
            "rows": topic["rows"],
            "segments": topic["segments"],
            "bytes": topic["bytes"],
        }
        ran = {variant: samples[(size, variant)] for variant in ARMS if samples.get((size, variant))}
        for variant, runs in ran.items():
            out[ARMS[variant]] = {k: summarize([r[k] for r in runs], k) for k in runs[0]}
        for key, num, den, measure in RATIOS:
            if num in ran and den in ran:
                out[key] = paired_ratio([r[measure] for r in ran[num]], [r[measure] for r in ran[den]])
        sizes.append(out)
    section: dict[str, Any] = {
        "dataset": dataset,
        "goal_ratio": GOAL,
        "fetch_and_write": FETCH_AND_WRITE,
        "segment_sizes": sizes,
    }
    if any("fetch_and_put_s3" in s for s in sizes):
        section["fetch_and_put"] = FETCH_AND_PUT
    return section


def summary_lines(section: Mapping[str, Any]) -> list[str]:
    """The lines ``main`` prints: per segment size, ingest against its floor on disk (and the
    raw fetch) and, when the object-store arms ran, against fetch + PUT, with the goal."""

    def fmt(v: float | None, spec: str) -> str:
        return "-" if v is None or math.isnan(v) else format(v, spec)  # None: no steady window in any repeat

    def ratio(r: Mapping[str, Any]) -> str:
        return f"{fmt(r['median'], '.2f')} ({fmt(r['min'], '.2f')}-{fmt(r['max'], '.2f')})"

    def rate(arm: Mapping[str, Any]) -> str:
        return f"{fmt(arm['steady_mb_per_s']['median'], '8.1f')} MB/s"

    lines = []
    for s in section["segment_sizes"]:
        lines.append(
            f"{s['segment_rows']:>7} rows/segment, disk: ingest {rate(s['parka_ingest'])}, fetch + write "
            f"{rate(s['fetch_and_write'])}, ratio {ratio(s['ratio_to_fetch_and_write_steady_mb_per_s'])}; "
            f"raw fetch {rate(s['raw_fetch'])}, ratio {ratio(s['ratio_steady_mb_per_s'])}; goal {GOAL}"
        )
        if "ratio_to_fetch_and_put_steady_mb_per_s" in s:
            lines.append(
                f"{s['segment_rows']:>7} rows/segment, s3:   ingest {rate(s['parka_ingest_s3'])}, fetch + PUT "
                f"{rate(s['fetch_and_put_s3'])}, ratio {ratio(s['ratio_to_fetch_and_put_steady_mb_per_s'])}; "
                f"goal {GOAL}"
            )
    return lines
