"""parka.metrics without a broker: the ingestion collector, the producer's metrics through
``columnar.metrics.registry`` / ``register_metrics``, librdkafka's statistics reaching the
user's ``stats_cb`` as confluent-kafka delivers them, the progress bar, and the CLI flag."""

from __future__ import annotations

import io
import json
import logging
import time
import types
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from parka.consumer._cli import build_parser as ingest_parser
from parka.consumer._ingest import IngestStats
from parka.ops.cli_util import setup_logging
from parka.ops.progress import ProgressBar, bar_text
from parka.producer import ParquetProducer
from parka.spark_ext._cli import build_parser as spark_parser
from parka.spark_ext._lag import progress_lag, source_offsets
from prometheus_client import CollectorRegistry, generate_latest

from parka.errors import ConfigError
from parka.metrics import INGEST_COUNTERS, STALL_S, IngestMetrics, serve

SCHEMA = pa.schema([("id", pa.int64(), False), ("s", pa.string())])
# Nothing listens on port 9: segments queue in the client and never leave.
OFFLINE = {"bootstrap.servers": "127.0.0.1:9", "message.timeout.ms": 200}


def test_ingest_metrics_read_the_daemon_counters_at_each_scrape() -> None:
    registry = CollectorRegistry()
    metrics = IngestMetrics(registry, topic="gps")
    stats = IngestStats()
    metrics.watch(lambda: vars(stats))
    assert registry.get_sample_value("parka_records_total", {"topic": "gps"}) == 0
    stats.records, stats.commits, stats.bytes, stats.conflicts = 120, 2, 4096, 1
    for seconds in (0.02, 0.3):
        metrics.observe_commit(seconds)
    metrics.set_lag({0: 5, 1: 0})
    got = {name: registry.get_sample_value(f"{name}_total", {"topic": "gps"}) for name, _ in INGEST_COUNTERS.values()}
    assert got == {
        "parka_records": 120,
        "parka_bytes": 4096,
        "parka_segments": 0,
        "parka_files": 0,
        "parka_commits": 2,
        "parka_dead_letters": 0,
        "parka_split_segments": 0,
        "parka_commit_conflicts": 1,
        "parka_compactions": 0,
        "parka_compaction_failures": 0,
        "parka_files_compacted": 0,
        "parka_vacuums": 0,
        "parka_files_vacuumed": 0,
        "parka_vacuum_failures": 0,
    }
    assert registry.get_sample_value("parka_commit_latency_seconds_count", {"topic": "gps"}) == 2
    assert registry.get_sample_value("parka_commit_latency_seconds_bucket", {"topic": "gps", "le": "0.025"}) == 1
    assert registry.get_sample_value("parka_checkpoint_seconds_count", {"topic": "gps"}) == 0
    metrics.observe_checkpoint(1.5)
    assert registry.get_sample_value("parka_checkpoint_seconds_count", {"topic": "gps"}) == 1
    assert registry.get_sample_value("parka_checkpoint_seconds_bucket", {"topic": "gps", "le": "1.0"}) == 0
    assert registry.get_sample_value("parka_checkpoint_seconds_bucket", {"topic": "gps", "le": "2.5"}) == 1
    assert registry.get_sample_value("parka_consumer_lag", {"topic": "gps", "partition": "0"}) == 5
    # a partition this worker no longer holds leaves the metric
    metrics.set_lag({1: 0})
    assert registry.get_sample_value("parka_consumer_lag", {"topic": "gps", "partition": "0"}) is None
    # one ingestion per registry; a second registry is independent (no process-wide state)
    with pytest.raises(ValueError, match="Duplicated"):
        IngestMetrics(registry, topic="other")
    other = CollectorRegistry()
    IngestMetrics(other, topic="gps")
    assert other.get_sample_value("parka_records_total", {"topic": "gps"}) == 0


def _producer(registry: CollectorRegistry | None = None, **conf: Any) -> ParquetProducer:
    base = {**OFFLINE, "columnar.encoding": "parquet", "columnar.batch.records": 100, "linger.ms": 60_000}
    if registry is not None:
        base["columnar.metrics.registry"] = registry
    p = ParquetProducer({**base, **conf})
    p.set_schema("t", SCHEMA)
    return p


def _close(p: ParquetProducer) -> None:
    p.purge()
    p.close(timeout=2)


def test_producer_metrics_count_segments_rows_bytes_and_the_buffered_records() -> None:
    registry = CollectorRegistry()
    p = _producer(registry, **{"client.id": "feeder"})
    try:
        rows = [{"id": i, "s": "x" * (i % 13)} for i in range(250)]
        p.produce_batch("t", pa.Table.from_pylist(rows, SCHEMA), partition=0)  # 100 + 100 + 50, sent at once
        labels = {"client_id": "feeder", "topic": "t"}

        def sample(name: str) -> float | None:
            return registry.get_sample_value(name, labels)

        assert sample("parka_producer_segments_total") == 3 == p.stats()["segments"]
        assert sample("parka_producer_segment_rows_count") == 3
        assert sample("parka_producer_segment_rows_sum") == 250
        assert registry.get_sample_value("parka_producer_segment_rows_bucket", {**labels, "le": "10.0"}) == 0
        assert registry.get_sample_value("parka_producer_segment_rows_bucket", {**labels, "le": "100.0"}) == 3
        encode_count = sample("parka_producer_encode_seconds_count")
        assert encode_count is not None and encode_count >= 3
        assert sample("parka_producer_segment_bytes_per_row_count") == 3
        per_row = sample("parka_producer_segment_bytes_per_row_sum")
        # the mean of three segments' bytes per record, close to all bytes over all records
        assert per_row is not None and per_row / 3 == pytest.approx(p.stats()["segment_bytes"] / 250, rel=0.5)
        buffered = {"client_id": "feeder"}
        assert registry.get_sample_value("parka_producer_buffered_records", buffered) == 0
        for i in range(7):  # staged until linger.ms (60 s) or a flush
            p.produce("t", value={"id": i, "s": None}, partition=0)
        assert registry.get_sample_value("parka_producer_buffered_records", buffered) == 7
        p.flush(0)  # cuts them into a segment (it cannot be delivered: no broker)
        assert registry.get_sample_value("parka_producer_buffered_records", buffered) == 0
        assert sample("parka_producer_segments_total") == 4
    finally:
        _close(p)


def test_producers_share_a_registry_by_client_id_and_register_metrics_does_the_same() -> None:
    registry = CollectorRegistry()
    a = _producer(registry, **{"client.id": "a"})
    b = _producer(**{"client.id": "b"})
    b.register_metrics(registry)
    try:
        for p in (a, b):
            p.produce("t", value={"id": 1, "s": None}, partition=0)
            p.flush(0)
        text = generate_latest(registry).decode()
        assert 'parka_producer_segments_total{client_id="a",topic="t"} 1.0' in text
        assert 'parka_producer_segments_total{client_id="b",topic="t"} 1.0' in text
    finally:
        _close(a)
        _close(b)


def test_a_metrics_registry_that_is_not_one_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"columnar\.metrics\.registry"):
        ParquetProducer({**OFFLINE, "columnar.encoding": "parquet", "columnar.metrics.registry": "yes"})


def _first_stats(make: Callable[[dict[str, Any]], Any]) -> str:
    got: list[Any] = []
    client = make({**OFFLINE, "statistics.interval.ms": 100, "stats_cb": got.append})
    deadline = time.monotonic() + 20
    while not got and time.monotonic() < deadline:
        client.poll(0.1)  # librdkafka serves statistics from poll(), as confluent-kafka documents
    client.purge()
    client.flush(1)
    assert got, "no statistics within 20 s"
    assert isinstance(got[0], str)
    return str(got[0])


@pytest.mark.parametrize("encoding", ["parquet", "none"])
def test_stats_cb_gets_librdkafka_statistics_as_confluent_kafka_gives_them(encoding: str) -> None:
    ours = json.loads(_first_stats(lambda conf: ParquetProducer({**conf, "columnar.encoding": encoding})))
    theirs = json.loads(_first_stats(Producer))
    assert ours["type"] == theirs["type"] == "producer"
    assert set(ours) == set(theirs)  # the same JSON document, unchanged


def test_progress_bar_draws_only_on_a_terminal() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    now = [0.0]
    tty = Tty()
    with ProgressBar(200, label="ingest", unit="messages", stream=tty, clock=lambda: now[0]) as bar:
        now[0] = 10.0
        bar.update(50)
        assert tty.getvalue().endswith("ingest [#######.....................]  25% 50/200 messages 10 s, eta 30 s")
        now[0] = 10.1  # within the redraw interval: nothing new
        bar.update(60)
        assert "60/200" not in tty.getvalue()
        bar.advance(140)
    assert tty.getvalue().endswith("100% 200/200 messages 10 s\n")
    pipe = io.StringIO()
    with ProgressBar(10, stream=pipe) as bar:
        bar.update(5)
    assert pipe.getvalue() == ""
    assert bar_text(3, 0, unit="records") == "3 records"


def test_staleness_counts_from_the_last_advance_or_from_taking_the_partition() -> None:
    now = [100.0]
    registry = CollectorRegistry()
    metrics = IngestMetrics(registry, topic="gps", clock=lambda: now[0])

    def stale(p: int) -> float | None:
        return registry.get_sample_value("parka_table_staleness_seconds", {"topic": "gps", "partition": str(p)})

    assert stale(0) is None  # no partition held: no series
    metrics.hold({0, 1})
    now[0] = 130.0
    assert stale(0) == stale(1) == 30.0  # never advanced: since they were taken
    metrics.advanced([1])
    now[0] = 135.0
    assert (stale(0), stale(1)) == (35.0, 5.0)
    metrics.hold({1, 2})  # 0 revoked, 2 taken; 1 keeps its last advance
    assert (stale(0), stale(1), stale(2)) == (None, 5.0, 0.0)


def test_health_checks_say_starting_ok_blocked_and_stalled() -> None:
    now = [0.0]
    blockers: dict[str, str] = {}
    metrics = IngestMetrics(CollectorRegistry(), topic="gps", clock=lambda: now[0])
    metrics.watch_blockers(lambda: blockers)
    assert metrics.live()[0] is True
    assert metrics.ready() == (
        False,
        {"status": "starting", "loop_seconds_ago": None, "blockers": [], "staleness_seconds": {}},
    )
    metrics.beat()
    metrics.hold([0])
    now[0] = 2.0
    ok, body = metrics.ready()
    assert ok and body["status"] == "ok" and body["staleness_seconds"] == {"0": 2.0}
    blockers["broker"] = "no Kafka broker answers at 127.0.0.1:9"
    ok, body = metrics.ready()
    assert not ok and body["status"] == "blocked"
    assert body["blockers"] == [{"cause": "broker", "message": "no Kafka broker answers at 127.0.0.1:9"}]
    assert metrics.live()[0] is True  # waiting on a cause is alive
    now[0] = STALL_S
    assert metrics.live() == (False, {"status": "stalled", "loop_seconds_ago": STALL_S})
    assert metrics.ready()[1]["status"] == "stalled"


def test_serve_answers_checks_as_json_and_everything_else_with_the_metrics() -> None:
    state = {"ok": True}
    registry = CollectorRegistry()
    IngestMetrics(registry, topic="gps")
    server = serve(0, registry, addr="127.0.0.1", checks={"/healthz": lambda: (state["ok"], {"status": "x"})})
    try:
        host, port = server.server_address[:2]
        assert host == "127.0.0.1"
        base = f"http://127.0.0.1:{port}"
        with urllib.request.urlopen(f"{base}/healthz", timeout=5) as answer:
            assert answer.status == 200 and json.loads(answer.read()) == {"status": "x"}
        state["ok"] = False
        with pytest.raises(urllib.error.HTTPError) as failed:
            urllib.request.urlopen(f"{base}/healthz", timeout=5)
        assert failed.value.code == 503 and json.loads(failed.value.read()) == {"status": "x"}
        with urllib.request.urlopen(f"{base}/metrics", timeout=5) as answer:
            assert b"parka_records_total" in answer.read()
    finally:
        server.shutdown()
        server.server_close()


def test_metrics_port_is_a_flag_of_both_daemons() -> None:
    for parser in (ingest_parser(), spark_parser()):
        assert parser.parse_args(["t", "/tmp/x", "--metrics-port", "0"]).metrics_port == 0
        assert parser.parse_args(["t", "/tmp/x"]).metrics_port is None
        assert parser.parse_args(["t", "/tmp/x"]).metrics_bind_address == "0.0.0.0"
        given = parser.parse_args(["t", "/tmp/x", "--metrics-bind-address", "127.0.0.1"])
        assert given.metrics_bind_address == "127.0.0.1"
        with pytest.raises(SystemExit):
            parser.parse_args(["t", "/tmp/x", "--metrics-port", "70000"])


def test_spark_lag_comes_from_the_progress_reports_offsets() -> None:
    assert source_offsets('{"gps": {"0": 12, "1": 3}}', "gps") == {0: 12, 1: 3}
    assert source_offsets(str({"gps": {"0": 12}}), "gps") == {0: 12}  # pyspark's str() of the dict
    assert source_offsets("None", "gps") == {}
    report = {"sources": [{"endOffset": '{"gps": {"0": 10, "1": 7}}', "latestOffset": '{"gps": {"0": 12, "1": 7}}'}]}
    assert progress_lag(report, "gps") == {0: 2, 1: 0}


def test_spark_ingest_counts_each_completed_batch_once_from_the_progress_reports() -> None:
    from parka.spark_ext._decode import OBSERVED
    from parka.spark_ext._ingest import _Reports

    class Report(dict[str, Any]):  # pyspark's progress: its fields as attributes, its JSON as a dict
        def __init__(self, batch: int, segments: int, records: int, end: int | None, latest: int) -> None:
            offsets = {"endOffset": f'{{"gps": {{"0": {end}}}}}', "latestOffset": f'{{"gps": {{"0": {latest}}}}}'}
            super().__init__(sources=[offsets] if end is not None else [])
            self.batchId, self.numInputRows, self.batchDuration = batch, segments, 100
            self.observedMetrics = {OBSERVED: {"records": records}}

    class JavaReport:  # the JVM's progress, as py4j hands it out
        def __init__(self, report: Report, time: str) -> None:
            self.report, self.time = report, time

        def batchId(self) -> int:
            return int(self.report.batchId)

        def timestamp(self) -> str:
            return self.time

    class JavaQuery:
        def __init__(self) -> None:
            self.kept: list[JavaReport] = []

        def lastProgress(self) -> JavaReport | None:
            return self.kept[-1] if self.kept else None

        def recentProgress(self) -> list[JavaReport]:
            return list(self.kept)

    converted: list[str] = []

    def convert(java: JavaReport) -> Report:
        converted.append(java.time)
        return java.report

    jquery = JavaQuery()
    reports = _Reports(types.SimpleNamespace(_jsq=jquery), "gps", log_batches=True, convert=convert)
    assert reports.read() is None and reports.counts == {}  # no report yet
    jquery.kept = [JavaReport(Report(0, 5, 50, 5, 9), "t0"), JavaReport(Report(1, 0, 0, 5, 9), "t1")]  # t1 idle
    assert reports.read() == {0: 4}
    assert (reports.done, reports.counts) == (5, {"commits": 1, "segments": 5, "records": 50})
    assert reports.read() == {0: 4} and converted == ["t1", "t0"]  # nothing new: nothing converted again
    jquery.kept += [JavaReport(Report(2, 4, 40, 9, 9), "t2"), JavaReport(Report(3, 0, 0, None, 9), "t3")]
    del jquery.kept[0]  # the JVM keeps the last reports only
    assert reports.read() == {0: 0}  # the newest report naming the offsets; batch 0 counted once
    assert (reports.done, reports.counts) == (9, {"commits": 2, "segments": 9, "records": 90})
    assert converted == ["t1", "t0", "t3", "t2"]  # each report once
    jquery.kept += [JavaReport(Report(3, 0, 0, None, 9), "t4")]  # idle, naming no offsets
    assert reports.read() == {0: 0} and reports.counts["records"] == 90


def test_a_log_line_to_a_closed_stream_never_raises_into_the_caller(capsys: pytest.CaptureFixture[str]) -> None:
    """Found in a full run: a test ran a daemon's main() in-process, its handler kept pytest's
    captured stderr, and once that was closed every later parka log call raised ValueError from
    the handler's terminal check (the committer's log.error among them). StreamHandler's rule:
    a handler reports its own failure and returns."""
    stream = io.StringIO()
    setup_logging(quiet=False, log_format="text")
    handler = logging.getLogger("parka").handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(stream)
    stream.close()
    try:
        logging.getLogger("parka.commit").error("stopped at %s", "t[0]@1")  # must not raise
    finally:
        logging.getLogger("parka").handlers[:] = []
    assert "Logging error" in capsys.readouterr().err  # reported, as StreamHandler reports it
