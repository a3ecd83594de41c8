"""Each daemon's settings, declared in one typed place.

A :class:`Setting` is one thing an operator can set: its field name on the settings object, its
flag(s), its ``PARKA_*`` environment variable(s), its help text, its default, how its text is read
and what values it allows. From that one declaration come

* the ``argparse`` flag (:meth:`SettingsParser.add_settings`), its help ending in the environment
  variable's name;
* the environment: a flag not given on the command line takes its variable's value (an empty
  variable counts as unset), read as the flag's text would be, else the default; a repeatable
  ``KEY=VALUE`` flag takes the variable's comma-separated pairs and then the flags';
* the settings object's dataclass field (:func:`declared`) and its validation
  (:func:`validate`, called by the settings' ``__post_init__``; :class:`SettingsParser` runs the
  same checks on what it parsed). An error names the setting (field, flag, variable) and the bad
  value; a value that may hold a secret is masked (:func:`parka._cli_util.redacted`).

The settings both daemons share are defined here once; ``parka.consumer._settings`` and
``parka.spark_ext._settings`` build their own on them, changing a help text or default with
:meth:`Setting.but` where a daemon means something more precise by it. Standard library only.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from ._cli_util import (
    columns,
    integer,
    number,
    parse_pairs,
    port_number,
    redacted,
    redacted_repr,
    seek_offsets_json,
    size_bytes,
)
from .errors import ConfigError
from .partitioning import DELTA_ALLOWED, parse_partition_by

__all__ = [
    "Setting",
    "SettingsParser",
    "declared",
    "validate",
    "TOPIC",
    "TABLE_URI",
    "BOOTSTRAP_SERVERS",
    "CONSUMER_GROUP",
    "APP_ID",
    "ALLOWED_LATENCY",
    "MAX_SEGMENTS_PER_COMMIT",
    "TARGET_FILE_SIZE",
    "AUTO_OFFSET_RESET",
    "SEEK_OFFSETS",
    "KAFKA_CONF",
    "END_AT_LATEST",
    "PARTITION_BY",
    "SCHEMA_EVOLUTION",
    "DLQ_TABLE",
    "STORAGE_OPTIONS",
    "CATALOG",
    "CATALOG_OPTIONS",
    "CHECKPOINT_INTERVAL",
    "METRICS_PORT",
    "BROKER_TIMEOUT",
    "RETRY_LOG_INTERVAL",
    "PROGRESS_INTERVAL",
    "VERBOSE",
    "QUIET",
    "LOG_FORMAT",
    "SHARED",
    "DEFAULT_TARGET_FILE_SIZE",
]

Kind = Literal["value", "positional", "switch", "pairs"]
"""How a setting appears on the command line: ``--flag VALUE``; a positional argument; a flag
without a value (its variable ``1``/``true`` or ``0``/``false``); a repeatable ``KEY=VALUE`` flag
(its variable comma-separated, the flags' pairs after it), read into a dict."""

_TRUE, _FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


@dataclasses.dataclass(frozen=True)
class Setting:
    """One setting: where it comes from, what it means and what it allows.

    ``parse`` turns the command line's or the variable's text into the value (raising
    ``ValueError`` or ``argparse.ArgumentTypeError`` with a message that says why); ``check``
    returns ``None`` for an allowed value, else what would be allowed (or raises
    :class:`~parka.errors.ConfigError` itself for a richer message). ``None`` is never checked: it
    means "not set". ``choices`` is a check too.
    """

    name: str
    flags: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    help: str = ""
    default: Any = None
    parse: Callable[[str], Any] | None = None
    check: Callable[[Any], str | None] | None = None
    choices: tuple[str, ...] = ()
    kind: Kind = "value"
    metavar: str | None = None

    @property
    def env_vars(self) -> tuple[str, ...]:
        return tuple(f"PARKA_{e}" for e in self.env)

    @property
    def flag(self) -> str:
        """Its main flag: the first long one (``--kafka`` of ``-k``, ``--kafka``); a positional
        argument's name in capitals."""
        return next((f for f in self.flags if f.startswith("--")), self.name.upper())

    @property
    def label(self) -> str:
        """How an operator sets it: ``--checkpoint-interval or PARKA_CHECKPOINT_INTERVAL``."""
        return " or ".join((self.flag, *self.env_vars))

    def but(self, **changes: Any) -> Setting:
        """This setting with some of its declaration changed (a daemon's own help or default)."""
        return dataclasses.replace(self, **changes)

    def error(self, value: Any, allowed: str, *, reason: str | None = None) -> ConfigError:
        """A :class:`ConfigError` naming the field, the flag and variable, and the (masked) value."""
        shown = redacted(value) if isinstance(value, Mapping) else redacted({self.name: value})[self.name]
        why = f"set by {self.label}" + (f"; {reason}" if reason else "")
        return ConfigError(self.name, shown, allowed, reason=why)

    def validate(self, value: Any) -> None:
        """Raises :class:`ConfigError` (see :meth:`error`) when ``value`` is not allowed."""
        if value is None:
            return
        if self.choices and value not in self.choices:
            raise self.error(value, " | ".join(self.choices))
        if self.check is not None:
            allowed = self.check(value)
            if allowed is not None:
                raise self.error(value, allowed)

    def read(self, text: str) -> Any:
        """The value of a flag's or variable's ``text``.

        Raises:
            ValueError: (or ``argparse.ArgumentTypeError``) text that is not such a value.
        """
        if self.kind == "switch":
            if text.strip().lower() not in (*_TRUE, *_FALSE):
                raise ValueError(f"{text!r} is neither 1/true nor 0/false")
            return text.strip().lower() in _TRUE
        return self.parse(text) if self.parse is not None else text

    def help_text(self) -> str:
        if not self.env_vars:
            return self.help
        if self.kind == "pairs":
            where = f"{' or '.join(self.env_vars)}, comma-separated"
        elif self.kind == "switch":
            where = " or ".join(f"{e}=1" for e in self.env_vars)
        else:
            where = " or ".join(self.env_vars)
        return f"{self.help} [{where}]" if self.help else f"[{where}]"


def declared(setting: Setting, *, required: bool = False) -> Any:
    """A settings dataclass's field for ``setting``: its default (none when ``required``), and the
    declaration in the field's metadata, where :func:`validate` finds it."""
    meta = {"setting": setting}
    if required:
        return dataclasses.field(metadata=meta)
    default = setting.default
    if isinstance(default, (dict, list)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def validate(settings: Any) -> None:
    """Check every field of a settings dataclass that carries a :class:`Setting`, in field order.

    Raises:
        ConfigError: the first value not allowed, naming its field, flag and variable.
    """
    for f in dataclasses.fields(settings):
        setting = f.metadata.get("setting")
        if setting is not None:
            setting.validate(getattr(settings, f.name))


class DaemonSettings:
    """The base of a daemon's settings dataclass (declared with ``repr=False``, with ``topic`` and
    ``table_uri`` fields): its repr masks what Kafka client settings and storage options hold
    (credentials), and :meth:`__post_init__` runs the checks every daemon's settings get."""

    topic: str
    table_uri: str

    def __repr__(self) -> str:
        return redacted_repr(self)

    def __post_init__(self) -> None:
        """Raises :class:`ConfigError`: no topic or table, or a value its declaration refuses."""
        if not self.topic or not self.table_uri:
            raise ConfigError("topic/table_uri", (self.topic, self.table_uri), "a topic and a table URI")
        validate(self)


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


_UNSET: Any = _Unset()  # a flag's default: not given on the command line


class SettingsParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose arguments come from :class:`Setting` declarations. After
    parsing, each setting's value is the flag's, else its variable's, else its default; then it is
    checked. A bad value exits 2 (argparse's usage error) naming the flag, the variable and the
    value."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.settings: dict[str, Setting] = {}

    def add_settings(self, settings: Iterable[Setting], *, title: str | None = None) -> None:
        """Add a flag (or positional argument) for each setting, in a titled group when given."""
        target: argparse.ArgumentParser | argparse._ArgumentGroup = self.add_argument_group(title) if title else self
        for s in settings:
            if s.name in self.settings:
                raise ValueError(f"setting {s.name!r} added twice")
            self.settings[s.name] = s
            kwargs: dict[str, Any] = {"help": s.help_text(), "default": _UNSET}
            if s.kind == "positional":
                target.add_argument(s.name, nargs="?", **kwargs)
                continue
            kwargs["dest"] = s.name
            if s.kind == "switch":
                kwargs["action"] = "store_true"
            elif s.kind == "pairs":
                kwargs.update(action="append", default=None, metavar=s.metavar or "KEY=VALUE")
            else:
                kwargs["type"] = _argument_type(s)
                if s.choices:
                    kwargs["choices"] = s.choices
                else:  # named after the flag, not the field: --allowed-latency ALLOWED_LATENCY
                    kwargs["metavar"] = s.metavar or s.flag.lstrip("-").replace("-", "_").upper()
            target.add_argument(*s.flags, **kwargs)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        ns, rest = super().parse_known_args(args, namespace)
        for s in self.settings.values():
            setattr(ns, s.name, self._resolve(s, getattr(ns, s.name, _UNSET)))
        return ns, rest

    def _resolve(self, s: Setting, given: Any) -> Any:
        source, text = s.label, None
        for var in s.env_vars:
            if os.environ.get(var):  # an empty variable (compose's ${VAR:-}) is not set
                source, text = f"{var} (for {s.flag})", os.environ[var]
                break
        if s.kind == "pairs":
            source = s.label  # the variable's pairs, then the flags'
        try:
            if s.kind == "pairs":
                from_env = [p for p in text.split(",") if p] if text else []
                value = parse_pairs([*from_env, *(given or [])])
            elif given is not _UNSET:
                value = given
            elif text is not None:
                value = s.read(text)
            else:
                value = s.default
        except (ValueError, argparse.ArgumentTypeError) as exc:
            self.error(f"{source}: {exc}")
        try:
            s.validate(value)
        except ConfigError as exc:  # a check's own error may not name the flag: then say where it came from
            message = str(exc)
            self.error(message if s.label in message else f"{source}: {message}")
        return value


def _argument_type(s: Setting) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            return s.read(text)
        except (ValueError, argparse.ArgumentTypeError) as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = s.name
    return parse


# -- how texts are read and values checked -------------------------------------------------------


def at_least(low: float, allowed: str) -> Callable[[Any], str | None]:
    return lambda value: None if value >= low else allowed


def above(low: float, allowed: str) -> Callable[[Any], str | None]:
    return lambda value: None if value > low else allowed


def _offsets_check(value: Mapping[int, int]) -> str | None:
    bad = any(p < 0 or off < 0 for p, off in value.items())
    return "{partition: offset}, both >= 0" if bad else None


def _partition_specs(value: Sequence[str]) -> None:
    parse_partition_by(value, key="partition_by")  # raises ConfigError naming the spec
    return None


def _partition_by_text(text: str) -> tuple[str, ...]:
    return columns(text)


DEFAULT_TARGET_FILE_SIZE = 128 * 2**20
"""``--target-file-size``'s default: a data file of up to 128 MiB."""


# -- the settings both daemons share ---------------------------------------------------------------

TOPIC = Setting("topic", env=("TOPIC",), kind="positional", help="Kafka topic")
TABLE_URI = Setting("table_uri", env=("TABLE_URI",), kind="positional", help="Delta table URI")
BOOTSTRAP_SERVERS = Setting(
    "bootstrap_servers", ("-k", "--kafka"), ("KAFKA",), "bootstrap servers", default="localhost:9092"
)
CONSUMER_GROUP = Setting(
    "consumer_group", ("-g", "--consumer-group"), ("CONSUMER_GROUP",), "consumer group (default: the app id)"
)
APP_ID = Setting(
    "app_id",
    ("-a", "--app-id"),
    ("APP_ID",),
    "application id: the Delta txn actions' <app id>-<partition> (default: parka-<topic>)",
)
ALLOWED_LATENCY = Setting(
    "allowed_latency_s",
    ("-l", "--allowed-latency"),
    ("ALLOWED_LATENCY",),
    "seconds a segment may wait before it is committed",
    default=30.0,
    parse=number,
    check=above(0, "a number of seconds > 0"),
)
MAX_SEGMENTS_PER_COMMIT = Setting(
    "max_segments_per_commit",
    ("--max-segments-per-commit",),
    ("MAX_SEGMENTS_PER_COMMIT",),
    "commit once this many segments are buffered",
    default=1000,
    parse=integer,
    check=at_least(1, "an integer >= 1"),
)
TARGET_FILE_SIZE = Setting(
    "target_file_size",
    ("--target-file-size",),
    ("TARGET_FILE_SIZE",),
    "stitch the segments of a commit into data files of up to this size (e.g. 128MiB); a commit is due "
    "once this much is buffered, or after --allowed-latency",
    default=DEFAULT_TARGET_FILE_SIZE,
    parse=size_bytes,
    check=at_least(1, "a number of bytes >= 1"),
)
AUTO_OFFSET_RESET = Setting(
    "auto_offset_reset",
    ("--auto-offset-reset",),
    ("AUTO_OFFSET_RESET",),
    "where a partition the table has never seen starts",
    default="earliest",
    choices=("earliest", "latest"),
)
SEEK_OFFSETS = Setting(
    "seek_offsets",
    ("--seek-offsets",),
    ("SEEK_OFFSETS",),
    'JSON {"partition": offset} for partitions the table has never seen',
    default={},
    parse=seek_offsets_json,
    check=_offsets_check,
)
KAFKA_CONF = Setting(
    "kafka_conf",
    ("-K", "--kafka-setting"),
    ("KAFKA_SETTINGS",),
    "Kafka client setting, repeatable (TLS, SASL, ...); secrets are never logged",
    default={},
    kind="pairs",
)
END_AT_LATEST = Setting(
    "end_at_latest",
    ("--end-at-latest",),
    ("END_AT_LATEST",),
    "ingest what is in the topic at start, commit and exit 0",
    default=False,
    kind="switch",
)
PARTITION_BY = Setting(
    "partition_by",
    ("--partition-by",),
    ("PARTITION_BY",),
    "comma-separated partition columns of a new table: column names, or derived ones: name=date(col) (UTC "
    "date), name=hour(col) (yyyy-MM-dd-HH), name=month(col) (yyyy-MM), name=year(col), name=truncate(col, N), "
    "name=bucket(col, N) (Iceberg tables only); an existing table's own win, and a different list is refused",
    default=(),
    parse=_partition_by_text,
    check=_partition_specs,
)


def check_delta_partitioning(partition_by: Sequence[str], catalog: str | None) -> None:
    """Refuse a partition spec a Delta table cannot have (``bucket``, Iceberg-only) when no
    ``catalog`` makes the table an Iceberg one: at start, before a segment is read.

    Raises:
        ConfigError: naming ``--partition-by`` and the spec, saying why.
    """
    if catalog is not None:
        return
    for spec in parse_partition_by(partition_by, key="partition_by"):
        problem = spec.delta_problem()
        if problem is not None:
            raise PARTITION_BY.error(str(spec), DELTA_ALLOWED, reason=problem)


SCHEMA_EVOLUTION = Setting(
    "schema_evolution",
    ("--schema-evolution",),
    ("SCHEMA_EVOLUTION",),
    "merge: the table takes new fields at any depth, widenings where it has type widening, relaxed "
    "nullability (README: Schema evolution)",
    default="none",
    choices=("none", "merge"),
)
DLQ_TABLE = Setting(
    "dlq_table_uri",
    ("--dlq-table",),
    ("DLQ_TABLE",),
    "Delta table URI for messages the table cannot take; without it such a message stops ingestion with "
    "an error, after what came before it is committed",
)
STORAGE_OPTIONS = Setting(
    "storage_options",
    ("--storage-option",),
    ("STORAGE_OPTIONS",),
    "object store option, repeatable",
    default={},
    kind="pairs",
)
CATALOG = Setting(
    "catalog",
    ("--catalog",),
    ("CATALOG",),
    "land in an Apache Iceberg table of this pyiceberg catalog (.pyiceberg.yaml, PYICEBERG_CATALOG__<NAME>__*, "
    "or --catalog-option); TABLE and --dlq-table are then identifiers, namespace.name",
)
CATALOG_OPTIONS = Setting(
    "catalog_options",
    ("--catalog-option",),
    ("CATALOG_OPTIONS",),
    "Iceberg catalog property KEY=VALUE over its configuration, repeatable (uri=..., warehouse=DIR: the embedded "
    "SQLite catalog when no uri is given)",
    default={},
    kind="pairs",
)
CHECKPOINT_INTERVAL = Setting(
    "checkpoint_interval",
    ("--checkpoint-interval",),
    ("CHECKPOINT_INTERVAL",),
    "every N commits, write a Delta checkpoint and remove orphan files; 0 never",
    default=10,
    parse=integer,
    check=at_least(0, "an integer >= 0 (0: never)"),
)
METRICS_PORT = Setting(
    "metrics_port",
    ("--metrics-port",),
    ("METRICS_PORT",),
    "serve Prometheus metrics (parka_*) on this port, 0 for a free one (the bound address is logged); "
    "needs parka[metrics]",
    parse=port_number,
)
BROKER_TIMEOUT = Setting(
    "broker_timeout_s",
    ("--broker-timeout",),
    ("BROKER_TIMEOUT",),
    "with --end-at-latest: seconds to wait for a Kafka broker to answer before exiting 3; a daemon waits "
    "as long as it takes",
    default=20.0,
    parse=number,
    check=above(0, "a number of seconds > 0"),
)
RETRY_LOG_INTERVAL = Setting(
    "retry_log_interval_s",
    ("--retry-log-interval",),
    ("RETRY_LOG_INTERVAL",),
    "while a daemon waits on a cause (no broker, no topic, a table location it cannot use), seconds "
    "between two lines saying it still does",
    default=300.0,
    parse=number,
    check=above(0, "a number of seconds > 0"),
)
PROGRESS_INTERVAL = Setting(
    "progress_interval_s",
    ("--progress-interval",),
    ("PROGRESS_INTERVAL",),
    "seconds between two progress: summary lines when stderr is not a terminal (a terminal gets a progress bar)",
    default=60.0,
    parse=number,
    check=above(0, "a number of seconds > 0"),
)
VERBOSE = Setting(
    "verbose",
    ("-v", "--verbose"),
    ("VERBOSE",),
    "debug log: a line per commit, and the stack trace of an error that stops the run",
    default=False,
    kind="switch",
)
QUIET = Setting("quiet", ("-q", "--quiet"), ("QUIET",), "warnings and errors only", default=False, kind="switch")
LOG_FORMAT = Setting("log_format", ("--log-format",), ("LOG_FORMAT",), default="text", choices=("text", "json"))

SHARED: tuple[Setting, ...] = (
    BOOTSTRAP_SERVERS,
    CONSUMER_GROUP,
    APP_ID,
    ALLOWED_LATENCY,
    MAX_SEGMENTS_PER_COMMIT,
    TARGET_FILE_SIZE,
    AUTO_OFFSET_RESET,
    SEEK_OFFSETS,
    KAFKA_CONF,
    END_AT_LATEST,
    PARTITION_BY,
    SCHEMA_EVOLUTION,
    DLQ_TABLE,
    STORAGE_OPTIONS,
    CATALOG,
    CATALOG_OPTIONS,
    CHECKPOINT_INTERVAL,
    METRICS_PORT,
    BROKER_TIMEOUT,
    RETRY_LOG_INTERVAL,
    PROGRESS_INTERVAL,
    VERBOSE,
    QUIET,
    LOG_FORMAT,
)
"""The flags both daemons take, in ``--help`` order (after ``TOPIC`` and ``TABLE_URI``)."""
