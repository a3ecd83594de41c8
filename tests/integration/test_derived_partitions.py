"""A table partitioned by a date derived from a timestamp (``--partition-by day=date(ts)``), on a
real broker into real Delta tables: raw when the producer aligns segments, split when not."""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable
from parka.producer import ParquetProducer

from ._ingest_util import last_json, message_values, referenced_files, row_group_bytes, run_ingest

SPEC = "day=date(ts)"

# kafka-delta-ingest's web_requests payload, flattened, with its timestamp as a timestamp
WEB_REQUESTS = pa.schema(
    [
        ("id", pa.int64(), False),
        ("status", pa.int32(), False),
        ("session_id", pa.string(), False),
        ("method", pa.string(), False),
        ("url", pa.string(), False),
        ("ts", pa.timestamp("us", tz="UTC")),
    ]
)
START = dt.datetime(2026, 11, 21, 22, 0, tzinfo=dt.timezone.utc)


def web_requests(start: int, n: int) -> pa.Table:
    """Requests ``start..start+n`` in time order, 101 s apart from 22:00 on 2026-11-21: every
    few hundred cross a midnight. Id 1000 is at 23:59:59.999999, 1001 at midnight exactly (both
    late); every 997th has no timestamp."""
    ids = list(range(start, start + n))

    def at(i: int) -> dt.datetime | None:
        if i % 997 == 0:
            return None
        if i in (1000, 1001):
            midnight = dt.datetime(2026, 11, 23, tzinfo=dt.timezone.utc)
            return midnight - dt.timedelta(microseconds=1) if i == 1000 else midnight
        return START + dt.timedelta(seconds=101 * i)

    return pa.table(
        {
            "id": ids,
            "status": pa.array([(200, 200, 200, 404, 500)[i % 5] for i in ids], pa.int32()),
            "session_id": [f"s{i // 8}" for i in ids],
            "method": [("GET", "GET", "POST", "PUT")[i % 4] for i in ids],
            "url": [f"https://www.example.com/p/{i % 13}" for i in ids],
            "ts": pa.array([at(i) for i in ids], WEB_REQUESTS.field("ts").type),
        },
        schema=WEB_REQUESTS,
    )


def produce(bootstrap: str, topic: str, data: pa.Table, extra: dict[str, str] | None = None) -> int:
    conf = {
        "bootstrap.servers": bootstrap,
        "columnar.encoding": "parquet",
        "columnar.encoding.compression": "zstd",
        "columnar.batch.records": 150,
        **(extra or {}),
    }
    with ParquetProducer(conf) as producer:
        producer.set_schema(topic, WEB_REQUESTS)
        producer.produce_batch(topic, data, key_column="session_id")
        assert producer.flush(30) == 0
        return int(producer.stats()["segments"])


def day_of(ts: dt.datetime | None) -> dt.date | None:
    return None if ts is None else ts.astimezone(dt.timezone.utc).date()


def check_table(table: Path, produced: pa.Table) -> None:
    """The table is partitioned by ``day``, holds every produced row once, and a reader
    (deltalake's pyarrow) sees ``day`` as the UTC date of ``ts``, though no data file has it."""
    dt_ = DeltaTable(str(table))
    assert dt_.metadata().partition_columns == ["day"]
    rows = dt_.to_pyarrow_table()
    assert rows.schema.field("day").type == pa.date32()
    assert rows.num_rows == produced.num_rows
    got = rows.select(WEB_REQUESTS.names).sort_by("id").cast(WEB_REQUESTS)
    assert got.equals(produced.sort_by("id"))
    for row in rows.select(["ts", "day"]).to_pylist():
        assert row["day"] == day_of(row["ts"])
    days = set(rows["day"].to_pylist())
    assert days == {day_of(ts) for ts in produced["ts"].to_pylist()}
    assert len(days) >= 4 and None in days
    files = referenced_files(table)
    assert all(f.split("/")[0].startswith("day=") for f in files)
    assert all("day" not in pq.read_schema(table / f).names for f in files)  # only in the log
    # the two records a microsecond apart across midnight are on either side of it
    boundary = {r["id"]: r["day"] for r in rows.filter(pc.is_in(rows["id"], pa.array([1000, 1001]))).to_pylist()}
    assert boundary == {1000: dt.date(2026, 11, 22), 1001: dt.date(2026, 11, 23)}


def test_aligned_producer_keeps_every_segment_raw(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=2)
    table = tmp_path / "web_requests"
    data = web_requests(0, 3000)
    segments = produce(bootstrap, topic, data, {"columnar.partition.by": SPEC})
    result = last_json(run_ingest(topic, table, bootstrap, "--end-at-latest", "--partition-by", SPEC))
    assert (result["segments"], result["records"], result["split_segments"]) == (segments, 3000, 0)
    check_table(table, data)
    # raw: every row group of the data files is one of a Kafka message value, byte for byte
    # (segments of one Kafka partition and day are stitched into one file)
    values = message_values(bootstrap, topic, segments)
    in_files = sorted(g for f in referenced_files(table) for g in row_group_bytes((table / f).read_bytes()))
    assert in_files == sorted(g for m in values for g in row_group_bytes(m.value()))
    # and the producer kept each Kafka partition's records in produce order
    for partition in (0, 1):
        mine = sorted((m for m in values if m.partition() == partition), key=lambda m: m.offset())
        ids = [i for m in mine for i in pq.read_table(io.BytesIO(m.value()), columns=["id"])["id"].to_pylist()]
        assert ids == sorted(ids)

    # a restart without the flag takes the table's own partitioning: still raw
    more = web_requests(3000, 600)
    produce(bootstrap, topic, more, {"columnar.partition.by": SPEC})
    again = last_json(run_ingest(topic, table, bootstrap, "--end-at-latest"))
    assert (again["records"], again["split_segments"]) == (600, 0)
    check_table(table, pa.concat_tables([data, more]))
    # another spec for the same table is refused, naming the table's
    other = run_ingest(topic, table, bootstrap, "--end-at-latest", "--partition-by", "day=hour(ts)", check=False)
    assert other.returncode == 2  # bad configuration (docs/operating.md); 1 before the exit codes were split
    assert "'--partition-by'" in other.stderr and "the table's own partition columns (day=date(ts))" in other.stderr


def test_unaligned_segments_crossing_midnight_are_split_and_every_row_lands_once(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=2)
    table = tmp_path / "web_requests"
    data = web_requests(0, 3000)
    segments = produce(bootstrap, topic, data)  # no columnar.partition.by
    result = last_json(run_ingest(topic, table, bootstrap, "--end-at-latest", "--partition-by", SPEC))
    assert (result["segments"], result["records"]) == (segments, 3000)
    assert 0 < result["split_segments"] < segments
    check_table(table, data)


def test_a_bucket_partition_is_refused_for_a_delta_table_at_start(tmp_path: Path) -> None:
    """bucket(col, N) is Iceberg's only: without --catalog, parka ingest exits 2 naming the spec
    before it reads anything (no broker at this address), and no table is made."""
    table = tmp_path / "bucketed"
    proc = run_ingest("t", table, "127.0.0.1:1", "--end-at-latest", "--partition-by", "b=bucket(id, 8)", check=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "'b=bucket(id, 8)'" in proc.stderr and "Iceberg-only" in proc.stderr and "--catalog" in proc.stderr
    assert not table.exists()
