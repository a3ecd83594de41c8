"""``parka ingest TOPIC TABLE_URI``: the ingestion daemon (of several topics: :mod:`._fleet`).
Every flag can also come from an environment variable (shown in ``--help``); credentials belong
there or in ``-K`` flags, and are never logged."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from parka.ops.cli_util import redacted, serve_metrics, setup_logging, stopped
from parka.ops.health import EXIT_CONFIG, EXIT_OK, exit_code_for, run_status
from parka.ops.progress import ProgressBar
from parka.ops.settings import SettingsParser
from parka.ops.stopping import StopGuard

from parka import logtopic
from parka.errors import ConfigError, ParkaError

from ._fleet import TOPIC_FIELD, Fleet, LaneEnd, check_templates, list_topics, read_topics_config, topic_settings
from ._ingest import IngestionConsumer
from ._settings import FLAGS, IngestSettings

_PROG = "parka ingest"
log = logging.getLogger("parka.ingest")


def build_parser() -> SettingsParser:
    """``parka ingest``'s flags, from :data:`._settings.FLAGS`: each one's value is the flag's,
    else its ``PARKA_*`` variable's, else its default, and is checked (exit 2 naming both)."""
    p = SettingsParser(
        prog=_PROG,
        description="Ingest a topic of parka Parquet segments into a table, exactly once: a Delta table, or with "
        "--catalog an Iceberg table. Several topics (TOPIC a,b or --topics-regex) land each into a table of its "
        "own: TABLE_URI holds {topic}.",
    )
    p.add_settings(FLAGS)
    return p


class ProgressLine:
    """Records/s, MB/s and lag per partition: redrawn in place on a terminal once a second (with
    ``bar``, ``--end-at-latest``: a bar of the messages consumed out of those there were at
    start), else logged as a ``progress:`` line every ``interval_s`` (``--progress-interval``)."""

    def __init__(
        self, stream: Any = sys.stderr, *, bar: bool = False, interval_s: float = 60.0, lines: bool = False
    ) -> None:
        self.started = time.monotonic()
        self.bar = ProgressBar(label="ingest", unit="messages", stream=stream, interval_s=0.0)
        self.tty = self.bar.tty and not lines  # lines: logged lines even on a terminal (several topics)
        self.with_total = bar
        # a terminal's bar is redrawn every second; a log gets a summary line every interval_s
        self.interval_s = 1.0 if self.tty else interval_s
        self.last = self.started

    def __call__(self, ingest: IngestionConsumer) -> None:
        now = time.monotonic()
        if now - self.last < self.interval_s:
            return
        self.last = now
        st = ingest.stats
        elapsed = max(now - self.started, 1e-9)
        lag = ingest.lag()
        lag_text = " ".join(f"p{p}:{n}" for p, n in lag.items()) or "-"
        line = (
            f"{st.records:,} records ({st.records / elapsed:,.0f}/s, {st.bytes / elapsed / 1e6:.1f} MB/s) "
            f"in {st.commits} commits; lag {lag_text}"
        )
        if self.tty:
            done, total = ingest.progress()
            self.bar.update(done, total=total if self.with_total else 0, extra=line)
        else:
            log.info("progress: %s", line)

    def close(self, finished: IngestionConsumer | None = None) -> None:
        """End the terminal line (nothing when not on a terminal); ``finished``: the ingestion
        of an ``--end-at-latest`` run that got to the end, drawn full with its final counts."""
        if finished is not None and self.with_total:
            st, elapsed = finished.stats, max(time.monotonic() - self.started, 1e-9)
            line = f"{st.records:,} records ({st.records / elapsed:,.0f}/s) in {st.commits} commits"
            self.bar.update(self.bar.total, extra=line)
        self.bar.close()


def settings_from_args(args: argparse.Namespace) -> IngestSettings:
    """The :class:`IngestSettings` the parsed flags describe: each field with a flag of its own
    name takes its value; the Kafka client's settings are the ``-K`` ones with ``--kafka`` and
    ``--consumer-group`` (default: the app id given, else the table's default app id, chosen at
    start: :class:`IngestSettings`).

    Raises:
        SystemExit: no topic or table (exit 2).
        ConfigError: a value the settings reject.
    """
    if not args.topic or not args.table_uri:
        build_parser().error("TOPIC and TABLE_URI are required (or PARKA_TOPIC / PARKA_TABLE_URI)")
    kafka = dict(args.kafka_conf)
    kafka.setdefault("bootstrap.servers", args.bootstrap_servers)
    if args.consumer_group:
        kafka.setdefault("group.id", args.consumer_group)
    given = {f.name: getattr(args, f.name) for f in dataclasses.fields(IngestSettings) if hasattr(args, f.name)}
    return IngestSettings(**{**given, "kafka_conf": kafka})


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(quiet=args.quiet, log_format=args.log_format, verbose=args.verbose)
    if args.topics_regex is not None:
        if args.table_uri is not None:  # both positionals given: a TOPIC beside the pattern
            stopped(log, ConfigError("TOPIC", args.topic, "left out with --topics-regex (it names the topics)"))
            return EXIT_CONFIG
        args.table_uri, args.topic = args.topic, TOPIC_FIELD  # TOPIC left out: TABLE_URI came first
    several = args.topics_regex is not None or "," in (args.topic or "")
    try:
        settings = settings_from_args(args)
        if several:
            check_templates(settings)
            overrides = read_topics_config(args.topics_config) if args.topics_config else {}
        elif args.topics_config:
            raise ConfigError("--topics-config", args.topics_config, "several topics (TOPIC a,b or --topics-regex)")
        else:  # one topic: a {topic} in the names is filled in, as for each of several
            settings = topic_settings(settings, settings.topic)
    except ParkaError as exc:
        stopped(log, exc)
        return EXIT_CONFIG
    log.info(
        "ingesting %s into %s (kafka settings: %s; storage options: %s)",
        args.topics_regex.pattern if args.topics_regex is not None else settings.topic,
        settings.table_uri,
        redacted(settings.kafka_conf),
        redacted(settings.storage_options),
    )
    addr = args.metrics_bind_address
    if several:
        topics = () if args.topics_regex is not None else tuple(t for t in settings.topic.split(",") if t)
        with serve_metrics(args.metrics_port, topic=None, prog=_PROG, addr=addr) as metrics:
            return _fleet(args, settings, topics, overrides, metrics)
    with serve_metrics(args.metrics_port, topic=settings.topic, prog=_PROG, addr=addr) as metrics:
        end = _run_one(args, settings, metrics, lambda ingest: ingest.install_signal_handlers())
    if end.line:
        print(json.dumps(end.line))
    return end.code


def _run_one(
    args: argparse.Namespace,
    settings: IngestSettings,
    metrics: Any,
    started: Callable[[IngestionConsumer], None],
    *,
    several: bool = False,
) -> LaneEnd:
    """One topic's ingestion to its end: its exit code and closing line (none when an error
    ended it: the error's one line is logged). ``several``: one topic of several, its lines
    labelled with it and no progress bar."""
    if several:
        logtopic.set_topic(settings.topic)  # its lines, and its threads' (they carry it), name it
    bar = settings.end_at_latest and not several  # one topic's bar; several topics log lines
    progress = None if args.quiet else ProgressLine(bar=bar, interval_s=args.progress_interval_s, lines=several)
    ingest = IngestionConsumer(settings, progress=progress, metrics=metrics)
    started(ingest)
    try:
        stats = ingest.run()
    except Exception as exc:  # one line for the operator, whatever raised; the trace with --verbose
        if progress is not None:
            progress.close()
        stopped(log, exc)
        return LaneEnd(settings.topic, exit_code_for(exc), {})
    if progress is not None:
        progress.close(ingest)
    log.info("done: %s", stats)
    end = run_status(
        segments=stats.segments,
        covered_files=stats.covered_files,
        dead_letters=stats.dead_letters,
        dlq_table=settings.dlq_table_uri,
        run_once=settings.end_at_latest,
    )
    line = {"status": end.status, **stats.__dict__}
    if end.error is not None:
        log.error("%s", end.error)
        return LaneEnd(settings.topic, end.exit_code, line)
    if settings.end_at_latest and stats.commits == 0:
        return LaneEnd(settings.topic, int(args.exit_code_when_empty), line)
    return LaneEnd(settings.topic, EXIT_OK, line)


def _fleet(
    args: argparse.Namespace,
    settings: IngestSettings,
    topics: tuple[str, ...],
    overrides: dict[str, dict[str, Any]],
    metrics: Any,
) -> int:
    """Several topics, a lane each (:class:`._fleet.Fleet`): a closing line per topic, with its
    name, and the exit code of the worst lane (the highest)."""
    ingests: dict[str, IngestionConsumer] = {}
    stopping: set[str] = set()
    lock = threading.Lock()

    def started(ingest: IngestionConsumer) -> None:
        with lock:
            ingests[ingest.settings.topic] = ingest
            if ingest.settings.topic in stopping:  # the stop came before the lane's ingestion was made
                ingest.stop()

    def stop_lane(topic: str) -> None:
        with lock:
            stopping.add(topic)
            ingest = ingests.get(topic)
        if ingest is not None:
            ingest.stop()

    def run_lane(lane: IngestSettings) -> LaneEnd:
        own = None if metrics is None else metrics.add(lane.topic)
        end = _run_one(args, lane, own, started, several=True)
        line = json.dumps({"topic": lane.topic, **(end.line or {"status": "stopped by an error"})})
        with lock:  # one write a line: the lanes' lines never interleave
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
        return end

    fleet = Fleet(
        settings,
        topics=topics,
        pattern=args.topics_regex,
        overrides=overrides,
        refresh_s=args.topics_refresh_s,
        list_topics=lambda: list_topics(settings),
        run_lane=run_lane,
        stop_lane=stop_lane,
    )
    StopGuard(fleet.stop, bound_s=settings.stop_timeout_s, name=_PROG).install()
    try:
        ends = fleet.run()
    except Exception as exc:
        stopped(log, exc)
        return exit_code_for(exc)
    if not ends and settings.end_at_latest:  # no topic matched: nothing new, as an empty topic's run
        return int(args.exit_code_when_empty)
    return max((end.code for end in ends), default=EXIT_OK)


if __name__ == "__main__":
    sys.exit(main())
