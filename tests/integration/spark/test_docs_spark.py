"""The pages with Spark blocks run as written (:mod:`tests.integration._docs`), in the Spark
session's worker: their ``session()`` returns the run's session instead of starting a JVM."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from .._docs import PRODUCING_PAGES, REPO, SPARK_PAGES, count_code_blocks, name, run_page
from .._ingest_util import create_topic
from ._util import SPARK

pytestmark = SPARK


@pytest.mark.parametrize("path", [REPO / page for page in SPARK_PAGES], ids=name)
def test_page_runs(path: Path, spark: Any, bootstrap: str, admin: AdminClient, tmp_path: Path) -> None:
    page = run_page(
        path,
        bootstrap=bootstrap,
        tmp=tmp_path,
        make_topic=lambda t: create_topic(admin, t, partitions=2),
        seeded=name(path) not in PRODUCING_PAGES,
    )
    assert len(page.ran) + len(page.skipped) == count_code_blocks(path), (page.ran, page.skipped)
    if name(path) == "README.md":
        # the first example prints the record it produced
        assert "b'd1' {'device': 'd1', 'lat': 52.1, 'lon': 4.3}" in "".join(page.printed)
    if name(path) == "docs/reading-tables.md":
        # after parka optimize, the compacted file holds both Kafka partitions' segments
        coordinates = page.namespace["coordinates"]
        live = [c for p, c in coordinates.items() if not p.startswith(page.topic)]
        assert live and {p for (_, p) in live[-1]} == {0, 1}, coordinates
        iceberg = page.namespace["iceberg_coordinates"]  # after parka optimize --catalog, too
        assert [{p for (_, p) in spans} for spans in iceberg.values()] == [{0, 1}], iceberg
