"""`parka ingest` into Azure Blob Storage as Azure's own emulator, Azurite, serves it: data files
and the Delta log through the same store and credentials (before, az:// data files went through
pyarrow.fs and ignored the storage options)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from parka.lake._storage import list_files

from .._ingest_util import (
    assert_segments_stored_byte_for_byte,
    last_json,
    produce_events,
    referenced_files,
    run_ingest,
    table_ids,
)
from .._objectstores import ObjectStoreServer

pytestmark = pytest.mark.integration


def test_one_worker_into_azurite_each_record_once_byte_for_byte(
    bootstrap: str, new_topic: Callable[..., str], azurite: ObjectStoreServer
) -> None:
    topic = new_topic(partitions=2)
    uri = azurite.table_uri("one-worker")
    options = azurite.storage_options
    flags = [arg for k, v in options.items() for arg in ("--storage-option", f"{k}={v}")]
    segments = produce_events(bootstrap, topic, 0, 600, batch=40)
    proc = run_ingest(topic, uri, bootstrap, "--end-at-latest", "--max-segments-per-commit", "4", *flags)
    result = last_json(proc)
    assert (result["segments"], result["records"]) == (segments, 600)
    assert result["commits"] >= 2  # several commits, so the log really went through the store
    ids = table_ids(uri, options)  # read back by deltalake through the same options
    assert sorted(ids) == list(range(600))
    assert_segments_stored_byte_for_byte(bootstrap, topic, segments, uri, options)
    # every blob under the table is a committed data file: nothing half written or left over;
    # az://container/path names the same blobs as abfss://container@account.dfs.../path
    assert uri.startswith("abfss://lake@")
    az_uri = "az://lake/" + uri.split(".windows.net/", 1)[1]
    assert {f.path for f in list_files(az_uri, options)} == referenced_files(uri, options)
    assert sorted(table_ids(az_uri, options)) == list(range(600))
