"""``parka ingest`` of several topics into Iceberg tables of one catalog: TABLE_URI is an
identifier holding ``{topic}``, each topic's lane its own table (``consumer/_fleet.py``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from .._ingest_util import produce_events
from ._lake import Lake, ingest


@pytest.mark.parametrize("lake", ["sql", "rest"], indirect=True)
def test_two_topics_land_each_in_its_own_iceberg_table(
    bootstrap: str, new_topic: Callable[..., str], lake: Lake
) -> None:
    topics = [new_topic(partitions=2) for _ in range(2)]
    for i, topic in enumerate(topics):
        produce_events(bootstrap, topic, 0, 150 + 100 * i, batch=50)
    ingest(lake, ",".join(topics), lake.name("{topic}"), bootstrap, "--end-at-latest")
    for i, topic in enumerate(topics):
        ids = lake.rows(lake.name(topic))["id"].to_pylist()
        assert sorted(ids) == list(range(150 + 100 * i))
