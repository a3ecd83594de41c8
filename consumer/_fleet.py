"""``parka ingest`` of several topics in one process: a lane per topic, each its own table.

A lane is one :class:`._ingest.IngestionConsumer`, on a thread of its own, with the settings of
one topic: the command line's, its table (and dead-letter table, app id, consumer group) from the
templates' ``{topic}``, and the topic's own settings from ``--topics-config``. So each lane keeps
the one-table protocol as it is (its table's offsets, its own consumer group, the table's
default one, and its own commits): one table's conflict, refused segment, dead letters or failed
commit never reach another lane. A lane that ends (a run-once at its end, or an error) ends alone;
the others go on. A daemon starts a lane an error ended again, after a pause that grows.

The topics are the ones named, or those whose name matches ``--topics-regex``, listed again every
``--topics-refresh-interval`` seconds by a daemon, so that a topic created later gets its lane (its
table is created when its first segment arrives, as for one topic). A stop (SIGTERM) stops every
lane; each commits what it holds, within the one stop bound of the process.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from parka.ops.settings import Setting

from parka.errors import ConfigError

from ._settings import FLAGS, IngestSettings

if sys.version_info >= (3, 11):
    import tomllib
else:  # the lake extra has it on 3.10
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

__all__ = ["TOPIC_FIELD", "Fleet", "LaneEnd", "check_templates", "list_topics", "read_topics_config", "topic_settings"]

TOPIC_FIELD = "{topic}"
RESTART_S = 5.0
"""A daemon's lane that an error ended starts again after this, then twice as long each time..."""
RESTART_MAX_S = 300.0
"""... up to this."""
log = logging.getLogger("parka.ingest")


@dataclass(frozen=True)
class LaneEnd:
    """How one topic's lane ended: its exit code and its closing JSON line's fields."""

    topic: str
    code: int
    line: dict[str, Any]


def _templates(settings: IngestSettings) -> dict[str, str | None]:
    return {
        "TABLE_URI": settings.table_uri,
        "--dlq-table": settings.dlq_table_uri,
        "--app-id": settings.app_id,
        "--consumer-group": settings.kafka_conf.get("group.id"),
    }


def check_templates(settings: IngestSettings) -> None:
    """Each per-table name given must hold ``{topic}``: two tables may not share a table, a
    dead-letter table, an app id or a consumer group.

    Raises:
        ConfigError: naming the flag whose value lacks it.
    """
    for flag, value in _templates(settings).items():
        if value is not None and TOPIC_FIELD not in value:
            raise ConfigError(flag, value, f"a name holding {TOPIC_FIELD} (several topics: one table each)")


def read_topics_config(path: str, flags: tuple[Setting, ...] = FLAGS) -> dict[str, dict[str, Any]]:
    """``--topics-config``: topic -> {setting name: value}, each value read and checked as its
    flag's (a list given for a comma-separated flag, a boolean for a switch, a table for
    ``KEY=VALUE`` pairs).

    Raises:
        ConfigError: the file cannot be read or parsed, a key is no flag of a topic's own, or a
            value the flag refuses (naming the topic, the flag and the value).
    """
    own = {f.name for f in dataclasses.fields(IngestSettings)} - _PROCESS_WIDE
    by_flag = {f.lstrip("-"): s for s in flags if s.name in own for f in s.flags if f.startswith("--")}
    try:
        document = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError("--topics-config", path, f"a readable TOML file ({exc})") from None
    topics = document.get("topics", {})
    unknown = set(document) - {"topics"}
    if unknown or not isinstance(topics, dict):
        raise ConfigError("--topics-config", path, '[topics."NAME"] tables only')
    out: dict[str, dict[str, Any]] = {}
    for topic, table in topics.items():
        if not isinstance(table, dict):
            raise ConfigError("--topics-config", f"topics.{topic}", "a table of flags without their dashes")
        values: dict[str, Any] = {}
        for key, given in table.items():
            setting = by_flag.get(key)
            if setting is None:
                raise ConfigError(
                    f"--topics-config [topics.{topic!r}]",
                    key,
                    "a flag of one topic's run: " + ", ".join(sorted(by_flag)),
                )
            values[setting.name] = _read(setting, given, topic)
        out[topic] = values
    return out


def _read(setting: Setting, given: Any, topic: str) -> Any:
    where = f"--topics-config [topics.{topic!r}] {setting.flag.lstrip('-')}"
    try:
        if setting.kind == "switch":
            if not isinstance(given, bool):
                raise ValueError("true or false")
            value: Any = given
        elif setting.kind == "pairs":
            if not isinstance(given, dict):
                raise ValueError("a table of KEY = VALUE")
            value = {str(k): str(v) for k, v in given.items()}
        else:
            text = (
                ",".join(map(str, given))
                if isinstance(given, list)
                else str(given).lower()
                if isinstance(given, bool)
                else str(given)
            )
            value = setting.read(text)
        setting.validate(value)
    except (ValueError, TypeError) as exc:
        raise ConfigError(where, given, str(exc)) from None
    except ConfigError as exc:
        raise ConfigError(where, given, str(exc)) from None
    return value


def topic_settings(base: IngestSettings, topic: str, overrides: Mapping[str, Any] = {}) -> IngestSettings:
    """``base`` for one topic: the templates' ``{topic}`` filled in, the topic's own settings
    on top (checked again as a whole)."""

    def fill(value: str | None) -> str | None:
        return None if value is None else value.replace(TOPIC_FIELD, topic)

    kafka = dict(base.kafka_conf)
    if "group.id" in kafka:
        kafka["group.id"] = fill(kafka["group.id"])
    table_uri = fill(base.table_uri)
    assert table_uri is not None
    return dataclasses.replace(
        base,
        topic=topic,
        table_uri=table_uri,
        dlq_table_uri=fill(base.dlq_table_uri),
        app_id=fill(base.app_id),
        kafka_conf=kafka,
        **overrides,
    )


class Fleet:
    """The lanes of one process: :meth:`run` until every lane ended (a run-once) or :meth:`stop`.

    ``list_topics()`` gives the broker's topic names (raising on a broker that does not
    answer); ``run_lane(settings)`` runs one topic's ingestion to its end on the calling
    thread, returning its end, and ``stop_lane(topic)`` asks it to stop (safe from any thread).
    A daemon's lane that an error ended starts again after ``restart_s`` (see :meth:`_lane`).
    """

    def __init__(
        self,
        base: IngestSettings,
        *,
        topics: tuple[str, ...],
        pattern: re.Pattern[str] | None,
        overrides: Mapping[str, Mapping[str, Any]],
        refresh_s: float,
        list_topics: Callable[[], list[str]],
        run_lane: Callable[[IngestSettings], LaneEnd],
        stop_lane: Callable[[str], None],
        restart_s: float = RESTART_S,
    ) -> None:
        self._base = base
        self._restart_s = restart_s
        self._topics = tuple(dict.fromkeys(topics))  # a topic named twice is one lane
        self._pattern = pattern
        self._overrides = overrides
        self._refresh_s = refresh_s
        self._list_topics = list_topics
        self._run_lane = run_lane
        self._stop_lane = stop_lane
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._lanes: dict[str, threading.Thread] = {}
        self.ends: dict[str, LaneEnd] = {}

    def stop(self) -> None:
        """Stop every lane and the listing of topics (signal-handler safe)."""
        self._stopped.set()
        with self._lock:
            topics = list(self._lanes)
        for topic in topics:
            self._stop_lane(topic)

    def run(self) -> list[LaneEnd]:
        """Start a lane per topic (a daemon: again for each new topic at each listing) and
        return each lane's end, in topic order, once all ended."""
        said_none = False
        while not self._stopped.is_set():
            try:
                wanted = self._wanted()
            except Exception as exc:  # a broker away: a daemon lists again later, a run-once ends
                if self._base.end_at_latest and not self._lanes:
                    raise
                log.warning("cannot list the topics (%s); trying again in %.0f s", exc, self._refresh_s)
                wanted = []
            for topic in wanted:
                self._start(topic)
            if not self._lanes and self._pattern is not None and not said_none:
                log.warning("no topic matches %s%s", self._pattern.pattern, "" if self._base.end_at_latest else " yet")
                said_none = True
            if self._base.end_at_latest or self._pattern is None:
                break  # the topics named, or those there were at start, are all there is to land
            self._stopped.wait(self._refresh_s)
        for thread in list(self._lanes.values()):
            thread.join()
        return [self.ends[t] for t in sorted(self.ends)]

    def _wanted(self) -> list[str]:
        if self._pattern is None:
            return [t for t in self._topics if t not in self._lanes]
        names = self._list_topics()
        found = sorted(t for t in names if not t.startswith("__") and self._pattern.fullmatch(t))
        return [t for t in found if t not in self._lanes]

    def _start(self, topic: str) -> None:
        settings = topic_settings(self._base, topic, self._overrides.get(topic, {}))
        log.info("topic %s: landing into %s", topic, settings.table_uri)
        thread = threading.Thread(target=self._lane, args=(settings,), name=f"parka-lane-{topic}", daemon=True)
        with self._lock:
            if self._stopped.is_set():  # a stop came while this lane was being made
                return
            self._lanes[topic] = thread
            thread.start()

    def _lane(self, settings: IngestSettings) -> None:
        """One topic's lane. A daemon's lane that an error ended starts again after a pause that
        doubles each time, up to :data:`RESTART_MAX_S` (as a supervisor restarts a one-topic
        daemon that exited): a table unwritable for a while, an object store away."""
        pause = self._restart_s
        while True:
            end = self._run_lane(settings)
            if end.code == 0 or self._base.end_at_latest:
                break
            if not self._stopped.is_set():
                log.warning("the lane stopped with exit code %d; it starts again in %.0f s", end.code, pause)
            if self._stopped.wait(pause):
                # a daemon asked to stop exits 0 (a supervisor's stop), a lane it was to start again too
                end = LaneEnd(end.topic, 0, end.line)
                break
            pause = min(pause * 2, RESTART_MAX_S)
        with self._lock:
            self.ends[settings.topic] = end


# settings of the whole process, or made from the templates: never one topic's own
_PROCESS_WIDE = frozenset({"topic", "table_uri", "kafka_conf", "end_at_latest", "stop_timeout_s"})


def list_topics(settings: IngestSettings) -> list[str]:
    """The broker's topic names, through a client of ``settings``' Kafka settings (security
    included; it joins no group).

    Raises:
        KafkaException: no broker answered within ``--broker-timeout``.
    """
    from confluent_kafka import Consumer

    conf = {k: v for k, v in settings.kafka_conf.items() if k not in ("error_cb", "logger")}
    conf["group.id"] = conf.get("group.id") or "parka-topics"
    client = Consumer(conf)
    try:
        return list(client.list_topics(timeout=settings.broker_timeout_s).topics)
    finally:
        client.close()
