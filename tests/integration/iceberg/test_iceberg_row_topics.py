"""``parka ingest --value-format json --catalog``: a topic of JSON records and segments lands in an
Iceberg table (the embedded SQL catalog) as into a Delta one, through the same writer and
committer: two runs racing under one app id land each record once, whatever runs of records one
of them committed part of."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from .._ingest_util import EVENTS, EVENTS_AVRO, events, last_json, produce_events, produce_json
from ._lake import Lake, race


def test_json_records_and_segments_raced_by_two_runs_land_each_record_once(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    lake = Lake(tmp_path / "warehouse")
    topic = new_topic(partitions=2)
    produce_json(bootstrap, topic, 0, 1500)
    produce_events(bootstrap, topic, 1500, 1000, batch=100)
    produce_json(bootstrap, topic, 2500, 1500)
    schema = tmp_path / "event.avsc"
    schema.write_text(json.dumps(EVENTS_AVRO))
    flags = ("--end-at-latest", "--value-format", "json", "--value-schema", str(schema))
    flags += ("--min-bytes-per-commit", "100000", "-a", "racing")
    results = race(lake, topic, lake.name("rows"), bootstrap, *flags)
    got = lake.rows(lake.name("rows")).select(EVENTS.names).sort_by("id")
    assert got.cast(EVENTS).equals(events(0, 4000))  # each record once, as produced
    assert sum(last_json(r)["records"] for r in results) == 4000  # no overlap
