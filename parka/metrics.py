"""Prometheus metrics of parka's ingestion daemons and of ``ParquetProducer``, defined once.

Needs ``prometheus_client`` (parka's ``metrics`` extra); nothing
else in parka imports this module unless metrics are asked for. Every metric goes into a
``CollectorRegistry`` the caller passes in, never the process-wide default one, so two daemons,
tests or libraries in one process do not clash.

Names start with ``parka_``. Labels are the topic, the Kafka partition and the producer's
``client.id``: never a table URI, a setting or anything else that may hold a credential.

* :class:`IngestMetrics`: what ``parka ingest`` and ``parka spark-ingest`` serve with
  ``--metrics-port``. The counters are read, when scraped, from the counters the committer
  already keeps (:class:`parka.lake.CommitStats`, or Spark's progress in decode
  mode); commit latency is a histogram the committer feeds; lag is what the daemon last measured.
* :class:`ProducerMetrics`: segments, rows per segment, encode time, bytes per row and the
  records waiting in the producer's buffers, fed by ``ParquetProducer`` when its config has
  ``columnar.metrics.registry``.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["INGEST_COUNTERS", "IngestMetrics", "ProducerMetrics", "serve"]

log = logging.getLogger("parka.metrics")

INGEST_COUNTERS: dict[str, tuple[str, str]] = {
    # stats field -> (metric name without the _total suffix, help)
    "records": ("parka_records", "records committed to the Delta table"),
    "bytes": ("parka_bytes", "bytes of Kafka values (Parquet segments) committed to the Delta table"),
    "segments": ("parka_segments", "segments (Kafka messages) committed to the Delta table"),
    "files": ("parka_files", "data files committed to the Delta table"),
    "commits": ("parka_commits", "Delta commits that added data or dead letters"),
    "dead_letters": ("parka_dead_letters", "messages written to the dead-letter table"),
    "split_segments": ("parka_split_segments", "segments whose rows spanned several table partitions"),
    "conflicts": ("parka_commit_conflicts", "commit attempts that lost to a concurrent commit and were retried"),
    "compactions": ("parka_compactions", "background compactions that committed a rewrite of small files"),
    "compaction_failures": ("parka_compaction_failures", "background compactions that failed (retried later)"),
    "files_compacted": ("parka_files_compacted", "small files removed by compactions (background, --optimize-every)"),
}
"""What the ingestion counters are: each is read from the daemon's counter of the same name."""

COMMIT_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class IngestMetrics(Collector):
    """The ``parka_*`` metrics of one ingestion of ``topic``, registered in ``registry``.

    The daemon tells it where its counters are (:meth:`watch`), times each commit
    (:meth:`observe_commit`) and checkpoint (:meth:`observe_checkpoint`) and sets the lag it
    measured (:meth:`set_lag`). Scrapes run on
    the HTTP server's thread: they read plain ints and a dict the daemon replaces whole, so
    they never touch the Kafka client.

    Raises:
        ValueError: ``registry`` already holds an ingestion's metrics.
    """

    def __init__(self, registry: CollectorRegistry, *, topic: str) -> None:
        self.topic = topic
        self._counts: Callable[[], Mapping[str, int]] = dict
        self._lag: Mapping[int, int] = {}
        self._latency = Histogram(
            "parka_commit_latency_seconds",
            "seconds from handing segments to the committer to its Delta commit (conflict retries included)",
            ["topic"],
            buckets=COMMIT_LATENCY_BUCKETS,
            registry=registry,
        ).labels(topic)
        self._checkpoint = Histogram(
            "parka_checkpoint_seconds",
            "seconds each checkpoint of the table took (Delta: it grows with the tombstones the log keeps)",
            ["topic"],
            buckets=COMMIT_LATENCY_BUCKETS,
            registry=registry,
        ).labels(topic)
        registry.register(self)

    def watch(self, counts: Callable[[], Mapping[str, int]]) -> None:
        """Read the counters from ``counts()`` (keys: :data:`INGEST_COUNTERS`) at each scrape."""
        self._counts = counts

    def observe_commit(self, seconds: float) -> None:
        self._latency.observe(seconds)

    def observe_checkpoint(self, seconds: float) -> None:
        self._checkpoint.observe(seconds)

    def set_lag(self, lag: Mapping[int, int]) -> None:
        """Messages not yet in the table, per Kafka partition this ingestion holds (a partition
        no longer listed disappears from the metric)."""
        self._lag = dict(lag)

    def describe(self) -> Iterator[Metric]:
        for name, doc in INGEST_COUNTERS.values():
            yield CounterMetricFamily(name, doc, labels=["topic"])
        yield GaugeMetricFamily("parka_consumer_lag", "", labels=["topic", "partition"])

    def collect(self) -> Iterator[Metric]:
        counts = self._counts()
        for key, (name, doc) in INGEST_COUNTERS.items():
            family = CounterMetricFamily(name, doc, labels=["topic"])
            family.add_metric([self.topic], float(counts.get(key, 0)))
            yield family
        lag = GaugeMetricFamily(
            "parka_consumer_lag",
            "messages of the partition not yet in the table: high watermark minus the next offset to commit",
            labels=["topic", "partition"],
        )
        for partition, n in sorted(self._lag.items()):
            lag.add_metric([self.topic, str(partition)], float(n))
        yield lag


ROWS_BUCKETS = (1, 10, 100, 1_000, 5_000, 10_000, 50_000, 100_000, 1_000_000)
ENCODE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
BYTES_PER_ROW_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096, 16384)


class _ProducerFamilies:
    """The producer metrics of one registry, shared by every producer that reports into it
    (a metric name can be registered once per registry; producers differ by ``client_id``)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        by = ["client_id", "topic"]
        self.segments = Counter("parka_producer_segments", "segments handed to the Kafka client", by, registry=registry)
        self.rows = Histogram(
            "parka_producer_segment_rows", "records per segment", by, buckets=ROWS_BUCKETS, registry=registry
        )
        self.encode = Histogram(
            "parka_producer_encode_seconds",
            "seconds to encode one segment as Parquet (each attempt of a segment split for size)",
            by,
            buckets=ENCODE_BUCKETS,
            registry=registry,
        )
        self.bytes_per_row = Histogram(
            "parka_producer_segment_bytes_per_row",
            "encoded segment bytes per record",
            by,
            buckets=BYTES_PER_ROW_BUCKETS,
            registry=registry,
        )
        self.buffered = Gauge(
            "parka_producer_buffered_records",
            "records produced but not yet cut into a segment (the buffers' fill)",
            ["client_id"],
            registry=registry,
        )


_FAMILIES: weakref.WeakKeyDictionary[CollectorRegistry, _ProducerFamilies] = weakref.WeakKeyDictionary()
_FAMILIES_LOCK = threading.Lock()


class ProducerMetrics:
    """One producer's metrics in ``registry``, labelled with its ``client_id`` (give each
    producer reporting into one registry its own ``client.id``). ``buffered()`` is read at
    each scrape."""

    def __init__(self, registry: CollectorRegistry, *, client_id: str, buffered: Callable[[], int]) -> None:
        with _FAMILIES_LOCK:
            families = _FAMILIES.get(registry)
            if families is None:
                families = _FAMILIES[registry] = _ProducerFamilies(registry)
        self._families = families
        self.client_id = client_id
        families.buffered.labels(client_id).set_function(lambda: float(buffered()))

    def segment(self, topic: str, *, rows: int, nbytes: int) -> None:
        """One segment handed to the Kafka client."""
        f = self._families
        f.segments.labels(self.client_id, topic).inc()
        f.rows.labels(self.client_id, topic).observe(rows)
        f.bytes_per_row.labels(self.client_id, topic).observe(nbytes / max(rows, 1))

    def encoded(self, topic: str, seconds: float) -> None:
        self._families.encode.labels(self.client_id, topic).observe(seconds)


def serve(port: int, registry: CollectorRegistry, *, addr: str = "0.0.0.0") -> Any:  # noqa: S104
    """Serve ``registry`` over HTTP on ``port`` (0: a free one) in a daemon thread; logs the
    bound address (``serving metrics on http://<addr>:<port>/metrics``). Returns the server:
    ``shutdown()`` and ``server_close()`` it to stop.

    Raises:
        OSError: the port cannot be bound.
    """
    server, _thread = start_http_server(port, addr=addr, registry=registry)
    host, bound = server.server_address[:2]
    log.info("serving metrics on http://%s:%d/metrics", host, bound)
    return server
