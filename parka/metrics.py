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
  mode); commit latency is a histogram the committer feeds; lag is what the daemon last measured;
  staleness (``parka ingest``) is computed at each scrape from when each partition last advanced.
  It also answers the health endpoints :func:`serve` adds (:meth:`IngestMetrics.live`,
  :meth:`IngestMetrics.ready`).
* :class:`ProducerMetrics`: segments, rows per segment, encode time, bytes per row and the
  records waiting in the producer's buffers, fed by ``ParquetProducer`` when its config has
  ``columnar.metrics.registry``.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import ThreadingWSGIServer
from prometheus_client.registry import Collector

__all__ = ["INGEST_COUNTERS", "STALL_S", "Check", "FleetMetrics", "IngestMetrics", "ProducerMetrics", "serve"]

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
    "vacuums": ("parka_vacuums", "VACUUM runs of the Delta table that ended"),
    "files_vacuumed": ("parka_files_vacuumed", "files VACUUM deleted (removed longer ago than the table's retention)"),
    "vacuum_failures": ("parka_vacuum_failures", "VACUUM runs that failed (retried at the next)"),
}
"""What the ingestion counters are: each is read from the daemon's counter of the same name."""

COMMIT_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

STALL_S = 300.0
"""``/healthz`` fails once the daemon's loop has not turned for this many seconds. The loop turns
many times a second; it waits only for a commit in flight when the memory bound is reached, and a
commit (conflict retries and a checkpoint included) takes seconds, so five minutes means stuck.
One exception: ``--optimize-every`` compacts the whole table on the loop's thread, which on a
large table may take longer."""

Check = Callable[[], tuple[bool, dict[str, Any]]]
"""A health check: whether it passes, and the JSON body that says why."""


class IngestMetrics(Collector):
    """The ``parka_*`` metrics of one ingestion of ``topic``, registered in ``registry``.

    The daemon tells it where its counters are (:meth:`watch`), times each commit
    (:meth:`observe_commit`) and checkpoint (:meth:`observe_checkpoint`), sets the lag it
    measured (:meth:`set_lag`), the partitions it holds (:meth:`hold`) and those a commit
    advanced (:meth:`advanced`), and beats once per turn of its loop (:meth:`beat`). Scrapes
    and health checks run on the HTTP server's thread: they read plain numbers and dicts the
    daemon replaces whole, so they never touch the Kafka client. ``clock`` times staleness
    and the loop's beats.

    Raises:
        ValueError: ``registry`` already holds an ingestion's metrics.
    """

    def __init__(self, registry: CollectorRegistry, *, topic: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.topic = topic
        self._clock = clock
        self._counts: Callable[[], Mapping[str, int]] = dict
        self._lag: Mapping[int, int] = {}
        # partition -> when it last advanced in the table (or when this worker took it);
        # replaced whole, never changed in place: scrapes read it on the server's thread
        self._advanced_at: Mapping[int, float] = {}
        self._beat: float | None = None
        self._blockers: Callable[[], Mapping[str, str]] = dict
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

    def hold(self, partitions: Iterable[int]) -> None:
        """The partitions this worker holds now: a new one's staleness counts from now, one no
        longer held disappears from the metric."""
        now, before = self._clock(), self._advanced_at
        self._advanced_at = {p: before.get(p, now) for p in partitions}

    def advanced(self, partitions: Iterable[int]) -> None:
        """A commit moved these partitions' offsets in the table: their staleness restarts at 0."""
        now = self._clock()
        self._advanced_at = {**self._advanced_at, **dict.fromkeys(partitions, now)}

    def staleness(self) -> dict[int, float]:
        """Seconds since each held partition last advanced in the table (since it was taken, if it
        has not yet): what ``parka_table_staleness_seconds`` serves."""
        now = self._clock()
        return {p: max(now - at, 0.0) for p, at in sorted(self._advanced_at.items())}

    def beat(self) -> None:
        """The daemon's loop turned (:meth:`live` fails when it has not for :data:`STALL_S`)."""
        self._beat = self._clock()

    def watch_blockers(self, blockers: Callable[[], Mapping[str, str]]) -> None:
        """Read the causes the daemon is waiting on (kind -> the line that names it, as logged:
        :meth:`parka.ops.health.HealthLog.active`) at each health check."""
        self._blockers = blockers

    def live(self) -> tuple[bool, dict[str, Any]]:
        """``/healthz``: fails only when the loop has not turned for :data:`STALL_S` (a daemon
        waiting on a cause, or still starting, is alive)."""
        since = None if self._beat is None else round(self._clock() - self._beat, 3)
        stalled = since is not None and since >= STALL_S
        body: dict[str, Any] = {"status": "stalled" if stalled else "ok", "loop_seconds_ago": since}
        return not stalled, body

    def ready(self) -> tuple[bool, dict[str, Any]]:
        """``/readyz``: passes once the loop runs and nothing blocks it (no broker, no topic, a
        table location it cannot use: the same causes the log names)."""
        alive, body = self.live()
        blockers = [{"cause": key, "message": message} for key, message in sorted(self._blockers().items())]
        if not alive:
            status = "stalled"
        elif blockers:
            status = "blocked"
        elif self._beat is None:
            status = "starting"
        else:
            status = "ok"
        staleness = {str(p): round(s, 3) for p, s in self.staleness().items()}
        return status == "ok", {**body, "status": status, "blockers": blockers, "staleness_seconds": staleness}

    def describe(self) -> Iterator[Metric]:
        for name, doc in INGEST_COUNTERS.values():
            yield CounterMetricFamily(name, doc, labels=["topic"])
        yield GaugeMetricFamily("parka_consumer_lag", "", labels=["topic", "partition"])
        yield GaugeMetricFamily("parka_table_staleness_seconds", "", labels=["topic", "partition"])

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
        stale = GaugeMetricFamily(
            "parka_table_staleness_seconds",
            "seconds since a commit last moved the partition's offset in the table (or since this worker took "
            "the partition); it grows while nothing new arrives too: alert on it with parka_consumer_lag > 0",
            labels=["topic", "partition"],
        )
        for partition, seconds in self.staleness().items():
            stale.add_metric([self.topic, str(partition)], seconds)
        yield stale


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


class FleetMetrics(Collector):
    """The metrics of several topics' ingestions in one process (``parka ingest`` of several
    topics): an :class:`IngestMetrics` per topic (:meth:`add`), each in a registry of its own,
    served as one: each family once, with every topic's samples (the ``topic`` label tells them
    apart). :meth:`live` and :meth:`ready` pass when every topic's do, with each topic's body."""

    def __init__(self, registry: CollectorRegistry, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._topics: dict[str, tuple[CollectorRegistry, IngestMetrics]] = {}
        registry.register(self)

    def add(self, topic: str) -> IngestMetrics:
        """The metrics of ``topic``'s ingestion (the same object again for a topic added before)."""
        with self._lock:
            if topic not in self._topics:
                own = CollectorRegistry()
                self._topics[topic] = (own, IngestMetrics(own, topic=topic, clock=self._clock))
            return self._topics[topic][1]

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            registries = [own for own, _ in self._topics.values()]
        families: dict[str, Metric] = {}
        for own in registries:
            for family in own.collect():
                first = families.setdefault(family.name, family)
                if first is not family:
                    first.samples.extend(family.samples)
        yield from families.values()

    def _each(self, check: Callable[[IngestMetrics], tuple[bool, dict[str, Any]]]) -> tuple[bool, dict[str, Any]]:
        with self._lock:
            metrics = {topic: m for topic, (_, m) in self._topics.items()}
        results = {topic: check(m) for topic, m in sorted(metrics.items())}
        ok = all(passed for passed, _ in results.values())
        return ok, {"status": "ok" if ok else "failing", "topics": {t: body for t, (_, body) in results.items()}}

    def live(self) -> tuple[bool, dict[str, Any]]:
        return self._each(IngestMetrics.live)

    def ready(self) -> tuple[bool, dict[str, Any]]:
        """Passes once every topic's ingestion is ready; none yet (no topic found): not ready."""
        ok, body = self._each(IngestMetrics.ready)
        return ok and bool(body["topics"]), body


def serve(
    port: int,
    registry: CollectorRegistry,
    *,
    addr: str = "0.0.0.0",  # noqa: S104
    checks: Mapping[str, Check] | None = None,
) -> Any:
    """Serve ``registry`` over HTTP on ``addr``:``port`` (0: a free one) in a daemon thread; logs
    the bound address (``serving metrics on http://<addr>:<port>/metrics``). Each path of
    ``checks`` (``/healthz``) answers its check's JSON body, with 200 when it passes and 503
    when not; every other path the metrics, as prometheus-client's own server does. Returns the
    server: ``shutdown()`` and ``server_close()`` it to stop.

    Raises:
        OSError: the address cannot be bound.
    """
    metrics_app = make_wsgi_app(registry)
    routes = dict(checks or {})

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        check = routes.get(environ.get("PATH_INFO", ""))
        if check is None or environ.get("REQUEST_METHOD") != "GET":
            return metrics_app(environ, start_response)
        try:
            ok, body = check()
        except Exception as exc:  # a check that fails to run is a failed check, never a dead server
            ok, body = False, {"status": "error", "error": str(exc)}
        start_response("200 OK" if ok else "503 Service Unavailable", [("Content-Type", "application/json")])
        return [json.dumps(body).encode()]

    class Server(ThreadingWSGIServer):
        address_family = socket.AF_INET6 if ":" in addr else socket.AF_INET

    server = make_server(addr, port, app, Server, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name="parka-metrics", daemon=True).start()
    host, bound = str(server.server_address[0]), int(server.server_address[1])
    shown = f"[{host}]" if ":" in host else host
    log.info("serving metrics on http://%s:%d/metrics", shown, bound)
    return server


class _QuietHandler(WSGIRequestHandler):
    """No log line per request (a scrape every few seconds would fill the log)."""

    def log_message(self, format: str, *args: Any) -> None:
        pass
