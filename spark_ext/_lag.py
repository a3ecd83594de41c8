"""What a Structured Streaming progress report says about a Kafka source: its offsets per
partition (:func:`source_offsets`) and the messages not yet in the table (:func:`progress_lag`),
for the lag metric and the progress bar of ``parka spark-ingest``."""

from __future__ import annotations

import ast
import json
from typing import Any

__all__ = ["progress_lag", "source_offsets"]


def source_offsets(text: Any, topic: str) -> dict[int, int]:
    """Partition -> offset of ``topic`` in a Kafka source's offsets as a progress report gives
    them: Spark's JSON (``{"topic": {"0": 12}}``), or pyspark's ``str()`` of the parsed dict
    (what ``SourceProgress.fromJson`` keeps); ``{}`` for none."""
    if not text or text == "None":
        return {}
    try:
        parsed = json.loads(text)
    except ValueError:
        try:
            parsed = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return {}
    offsets = parsed.get(topic, {}) if isinstance(parsed, dict) else {}
    return {int(p): int(off) for p, off in offsets.items()}


def progress_lag(progress: Any, topic: str) -> dict[int, int]:
    """Messages of each partition not yet in the table after the batch ``progress`` reports:
    the source's latest offset then minus the batch's end offset."""
    lag: dict[int, int] = {}
    for source in progress.get("sources") or ():
        end = source_offsets(source.get("endOffset"), topic)
        latest = source_offsets(source.get("latestOffset"), topic)
        for p, off in latest.items():
            lag[p] = max(0, off - end.get(p, off))
    return lag
