"""Each daemon's flags, environment variables, defaults and checks come from one declaration
(ops/settings.py and each daemon's _settings.py): the parser, the settings dataclass and the
errors all read it."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable
from typing import Any

import pytest
from parka.consumer import IngestSettings
from parka.consumer._cli import build_parser as ingest_parser
from parka.consumer._cli import settings_from_args as ingest_settings
from parka.consumer._settings import FLAGS as INGEST_FLAGS
from parka.ops import settings as core
from parka.ops.cli_util import size_bytes
from parka.ops.optimize_cli import FLAGS as OPTIMIZE_FLAGS
from parka.ops.optimize_cli import build_parser as optimize_parser
from parka.ops.settings import Setting, SettingsParser
from parka.spark_ext import SparkIngestSettings
from parka.spark_ext._cli import build_parser as spark_parser
from parka.spark_ext._cli import settings_from_args as spark_settings
from parka.spark_ext._settings import SHARED_FLAGS, SPARK_FLAGS

from parka import cli
from parka.errors import ConfigError

SPARK_ALL = (core.TOPIC, core.TABLE_URI, *SHARED_FLAGS, *SPARK_FLAGS)

# a text each variable may hold, and the value it gives; every setting with a variable is listed,
# so a new setting cannot go untested
SAMPLES: dict[str, tuple[str, Any]] = {
    "topic": ("gps", "gps"),
    "table_uri": ("/lake/gps", "/lake/gps"),
    "bootstrap_servers": ("b:9093", "b:9093"),
    "consumer_group": ("grp", "grp"),
    "app_id": ("app", "app"),
    "allowed_latency_s": ("2.5", 2.5),
    "max_segments_per_commit": ("7", 7),
    "max_offsets_per_trigger": ("7", 7),
    "target_file_size": ("64MiB", 64 * 2**20),
    "auto_offset_reset": ("latest", "latest"),
    "seek_offsets": ('{"1": 5}', {1: 5}),
    "kafka_conf": ("security.protocol=SSL,client.id=c", {"security.protocol": "SSL", "client.id": "c"}),
    "end_at_latest": ("1", True),
    "partition_by": ("day=date(ts),country", ("day=date(ts)", "country")),
    "schema_evolution": ("merge", "merge"),
    "dlq_table_uri": ("/lake/dlq", "/lake/dlq"),
    "storage_options": ("aws_region=eu-west-1", {"aws_region": "eu-west-1"}),
    "catalog": ("lake", "lake"),
    "catalog_options": ("uri=http://127.0.0.1:8181", {"uri": "http://127.0.0.1:8181"}),
    "checkpoint_interval": ("3", 3),
    "metrics_port": ("9100", 9100),
    "metrics_bind_address": ("127.0.0.1", "127.0.0.1"),
    "broker_timeout_s": ("4", 4.0),
    "stop_timeout_s": ("12", 12.0),
    "retry_log_interval_s": ("9", 9.0),
    "progress_interval_s": ("11", 11.0),
    "verbose": ("true", True),
    "quiet": ("1", True),
    "log_format": ("json", "json"),
    "min_bytes_per_commit": ("1MB", 10**6),
    "max_buffered_bytes": ("1GiB", 2**30),
    "write_threads": ("8", 8),
    "optimize_every": ("5", 5),
    "compact_min_files": ("0", 0),
    "compact_max_rewrites": ("2", 2),
    "vacuum_every_s": ("30", 30.0),
    "table_retention_s": ("7200", 7200),
    "set_table_retention": ("1", True),
    "upsert": ("1", True),
    "upsert_mode": ("copy-on-write", "copy-on-write"),
    "key_columns": ("id, region", ("id", "region")),
    "sequence_by": ("lsn", "lsn"),
    "cdc": ("debezium", "debezium"),
    "cdc_fields": ("source.db, ts_ms", ("source.db", "ts_ms")),
    "value_format": ("json", "json"),
    "value_schema_path": ("/etc/event.avsc", "/etc/event.avsc"),
    "schema_registry_url": ("http://registry:8081", "http://registry:8081"),
    "schema_registry_options": ("basic.auth.user.info=u:p", {"basic.auth.user.info": "u:p"}),
    "exit_code_when_empty": ("99", 99),
    "topics_regex": (r"orders\..*", re.compile(r"orders\..*")),
    "topics_config": ("/etc/parka/topics.toml", "/etc/parka/topics.toml"),
    "topics_refresh_s": ("5", 5.0),
    "mode": ("decode", "decode"),
    "commit_engine": ("delta-rs", "delta-rs"),
    "trigger": ("processing-time=5s", "processing-time=5s"),
    "checkpoint_location": ("/ckpt", "/ckpt"),
    "starting_offsets": ("latest", "latest"),
    "source_options": ("failOnDataLoss=false", {"failOnDataLoss": "false"}),
    "schema": ('{"type": "record", "name": "r", "fields": []}', '{"type": "record", "name": "r", "fields": []}'),
    "reserved": ("drop", "drop"),
    "metadata": ("offset,partition", ("offset", "partition")),
    "master": ("local[1]", "local[1]"),
    "spark_conf": ("spark.ui.enabled=false", {"spark.ui.enabled": "false"}),
    "packages": ("g:a:1,g:b:2", ("g:a:1", "g:b:2")),
    "z_order": ("x,y", ("x", "y")),
    "vacuum_retention_hours": ("168", 168),
    "allow_short_retention": ("1", True),
    "no_checkpoint": ("true", True),
}

# a value each checked setting refuses
BAD: dict[str, str] = {
    "allowed_latency_s": "0",
    "max_segments_per_commit": "0",
    "max_offsets_per_trigger": "0",
    "target_file_size": "0",
    "seek_offsets": '{"0": -1}',
    "checkpoint_interval": "-1",
    "metrics_port": "70000",
    "metrics_bind_address": " ",
    "broker_timeout_s": "-2",
    "retry_log_interval_s": "0",
    "stop_timeout_s": "0",
    "progress_interval_s": "0",
    "min_bytes_per_commit": "0",
    "max_buffered_bytes": "0",
    "write_threads": "0",
    "optimize_every": "-1",
    "compact_min_files": "1",
    "compact_max_rewrites": "0",
    "vacuum_every_s": "-1",
    "table_retention_s": "0",
    "exit_code_when_empty": "300",
    "topics_regex": "orders(",
    "topics_refresh_s": "0",
    "partition_by": "day=week(ts)",
    "metadata": "offset,colour",
    "trigger": "every-5s",
}

PARSERS: dict[str, tuple[Callable[[], SettingsParser], tuple[Setting, ...]]] = {
    "ingest": (ingest_parser, INGEST_FLAGS),
    "spark-ingest": (spark_parser, SPARK_ALL),
    "optimize": (optimize_parser, OPTIMIZE_FLAGS),
}


@pytest.fixture(autouse=True)
def _no_parka_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("PARKA_"):
            monkeypatch.delenv(name)


def _options(parser: SettingsParser) -> set[str]:
    return {o for a in parser._actions for o in a.option_strings if o not in ("-h", "--help")}


@pytest.mark.parametrize("command", PARSERS)
def test_the_flags_are_the_declared_ones(command: str) -> None:
    make, declared = PARSERS[command]
    parser = make()
    assert _options(parser) == {f for s in declared for f in s.flags}
    positional = [a.dest for a in parser._actions if not a.option_strings and a.dest != "help"]
    assert positional == [s.name for s in declared if s.kind == "positional"]
    help_text = parser.format_help()
    for s in declared:
        for var in s.env_vars:
            assert var in help_text, f"{var} missing from {command} --help"


def _help_entries(parser: SettingsParser, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """``--help`` as printed, one entry per argument: its invocation (``-k KAFKA, --kafka KAFKA``,
    ``TOPIC``) -> its help text, whitespace made single spaces. A terminal wide enough that
    argparse wraps no line (a wrap may break ``--target-file-size`` at a hyphen)."""
    monkeypatch.setenv("COLUMNS", "2000")
    entries: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in parser.format_help().splitlines():
        if re.match(r"^  \S", line):  # an argument's first line: its invocation, then its help after 2+ spaces
            invocation, *help_text = re.split(r"\s{2,}", line.strip(), maxsplit=1)
            current = entries.setdefault(invocation, [])
            current.extend(help_text)
        elif re.match(r"^ {3,}\S", line) and current is not None:  # its help, on the next line
            current.append(line.strip())
        else:  # a heading, the usage, a description or a blank line
            current = None
    return {k: " ".join(" ".join(v).split()) for k, v in entries.items()}


def _flags_of(invocation: str) -> set[str]:
    return {w.rstrip(",") for w in invocation.split() if w.startswith("-")}


def test_every_command_is_checked_here() -> None:
    assert set(PARSERS) == set(cli.COMMANDS), "a parka command whose --help this module does not check"


@pytest.mark.parametrize("command", PARSERS)
def test_the_help_shows_each_declared_settings_flag_default_and_variable(
    command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The help text against the declarations, both ways: every flag printed is a declared
    setting's (no flag added by hand), and every declared setting is printed with its flags, its
    help, its default and its variables, made from the declaration (no default written by hand
    that a change of the declaration would leave behind)."""
    parser = PARSERS[command][0]()
    entries = _help_entries(parser, monkeypatch)
    entries.pop("-h, --help")
    declared = parser.settings.values()
    printed_flags = {f for invocation in entries for f in _flags_of(invocation)}
    assert printed_flags == {f for s in declared for f in s.flags}, "a flag in --help without a declaration"
    positional = [i for i in entries if not i.startswith("-")]
    assert positional == [s.flag for s in declared if s.kind == "positional"]
    for s in declared:
        (text,) = [h for i, h in entries.items() if (_flags_of(i) == set(s.flags) if s.flags else i == s.flag)]
        assert s.help, f"{s.flag} has no help"
        assert not re.search(r"\bdefault", s.help, re.IGNORECASE), f"{s.flag}: a default written into its help"
        assert text.startswith(" ".join(s.help.split())), f"{s.flag}: {text!r}"
        ending = "; ".join(x for x in (s.default_shown(), s.env_shown()) if x)
        assert text.endswith(f"({ending})"), f"{s.flag}: {text!r}"
        assert re.match(r"required|no default|default: \S", ending), f"{s.flag}: {ending!r}"
        for var in s.env_vars:
            assert var in text
        if s.kind == "positional":
            assert "required" in text, f"{s.flag}: {text!r}"
        elif s.default_text is None and s.kind != "pairs":  # the default the parser gives is the one shown
            assert getattr(parser.parse_args([]), s.name) == s.default, s.flag
        if s.name.endswith("_s"):  # a value in seconds shows its unit
            assert s.unit == "s", s.flag
        if s.parse is size_bytes and s.default is not None:  # a size: shown as it is typed, 128MiB
            assert size_bytes(s.default_shown().removeprefix("default: ")) == s.default, s.flag


def test_the_help_says_what_a_newcomer_looks_for(monkeypatch: pytest.MonkeyPatch) -> None:
    ingest = _help_entries(ingest_parser(), monkeypatch)
    assert ingest["-l ALLOWED_LATENCY, --allowed-latency ALLOWED_LATENCY"].endswith(
        "(default: 30 s; env: PARKA_ALLOWED_LATENCY)"
    )
    assert ingest["-k KAFKA, --kafka KAFKA"].endswith("(default: localhost:9092; env: PARKA_KAFKA)")
    assert ingest["--auto-offset-reset {earliest,latest}"].endswith("(default: earliest; env: PARKA_AUTO_OFFSET_RESET)")
    assert ingest["--target-file-size TARGET_FILE_SIZE"].endswith("(default: 128MiB; env: PARKA_TARGET_FILE_SIZE)")
    assert ingest["--end-at-latest"].endswith("(default: off; env: PARKA_END_AT_LATEST=1)")
    assert ingest["TOPIC"].endswith("(required; env: PARKA_TOPIC)")
    assert ingest["--log-format {text,json}"].startswith("the log on stderr")
    assert "docs/schema-evolution.md" in ingest["--schema-evolution {none,merge}"]
    assert "Iceberg" in ingest["TABLE_URI"] and "--catalog" in ingest["TABLE_URI"]
    optimize = optimize_parser().format_help()
    assert "--dlq-table" not in optimize
    for text in (ingest_parser().format_help(), spark_parser().format_help(), optimize):
        assert "in brackets" not in text and "README" not in text


@pytest.mark.parametrize("command", PARSERS)
def test_each_variable_sets_its_setting(command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    make, declared = PARSERS[command]
    with_env = [s for s in declared if s.env]
    assert {s.name for s in with_env} <= set(SAMPLES), "a setting without a sample in this test"
    for s in with_env:
        for var in s.env_vars:
            text, value = SAMPLES[s.name]
            monkeypatch.setenv(var, text)
            assert getattr(make().parse_args([]), s.name) == value, var
            monkeypatch.delenv(var)


@pytest.mark.parametrize("command", PARSERS)
def test_each_flag_sets_its_setting_and_beats_the_variable(command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    make, declared = PARSERS[command]
    for s in declared:
        if s.kind == "positional":
            continue
        if s.kind == "switch":
            assert getattr(make().parse_args([s.flag]), s.name) is True
            continue
        text, value = SAMPLES[s.name]
        pairs = s.kind == "pairs"
        argv = [a for pair in text.split(",") for a in (s.flag, pair)] if pairs else [s.flag, text]
        for var in s.env_vars:  # a variable's value the flag's must win over (pairs: come after)
            monkeypatch.setenv(var, "other=1" if pairs else "not-this")
        got = getattr(make().parse_args(argv), s.name)
        # pairs: the variable's, then the flags'; anything else: the flag's
        assert got == ({"other": "1", **value} if s.kind == "pairs" and s.env_vars else value), s.name
        for var in s.env_vars:
            monkeypatch.delenv(var)


@pytest.mark.parametrize("command", PARSERS)
def test_a_bad_value_exits_2_naming_the_flag_and_the_variable(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    make, declared = PARSERS[command]
    checked = [s for s in declared if s.name in BAD]
    assert checked or command == "optimize"
    for s in checked:
        with pytest.raises(SystemExit) as exc:
            make().parse_args([s.flag, BAD[s.name]])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and s.flag in err, err
        monkeypatch.setenv(s.env_vars[0], BAD[s.name])
        with pytest.raises(SystemExit) as exc:
            make().parse_args([])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and s.env_vars[0] in err, err
        monkeypatch.delenv(s.env_vars[0])


def test_a_malformed_variable_names_itself(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PARKA_CHECKPOINT_INTERVAL", "ten")
    with pytest.raises(SystemExit) as exc:
        ingest_parser().parse_args(["t", "/t"])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert "PARKA_CHECKPOINT_INTERVAL (for --checkpoint-interval): 'ten' is not a whole number" in err
    monkeypatch.setenv("PARKA_CHECKPOINT_INTERVAL", "")  # compose's ${VAR:-}: not set
    assert ingest_parser().parse_args([]).checkpoint_interval == core.CHECKPOINT_INTERVAL.default
    monkeypatch.setenv("PARKA_END_AT_LATEST", "maybe")
    with pytest.raises(SystemExit):
        ingest_parser().parse_args([])
    assert "PARKA_END_AT_LATEST" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("cls", "cli", "required"),
    [
        (IngestSettings, ingest_settings, {"kafka_conf": {}}),
        (SparkIngestSettings, spark_settings, {"bootstrap_servers": "b:9092"}),
    ],
)
def test_the_settings_fields_are_the_declarations(
    cls: type, cli: Callable[[Any], Any], required: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every field carries its declaration; a field's default is the declaration's."""
    make = ingest_parser if cls is IngestSettings else spark_parser
    declared = {s.name: s for s in make().settings.values()}
    for f in dataclasses.fields(cls):
        setting = f.metadata["setting"]
        assert setting.name == f.name
        assert f.name in declared, f"{f.name} has no flag"
        parsed = declared[f.name]
        assert (parsed.flags, parsed.env, parsed.check, parsed.parse) == (
            setting.flags,
            setting.env,
            setting.check,
            setting.parse,
        )
        if f.default is not dataclasses.MISSING:
            assert f.default == setting.default
    # the command line with nothing set gives the dataclass's defaults, except what it composes
    from_cli = cli(make().parse_args(["t", "/t"]))
    direct = cls(topic="t", table_uri="/t", **required)
    composed = {"kafka_conf", "bootstrap_servers", "trigger", "starting_offsets"}
    for f in dataclasses.fields(cls):
        if f.name not in composed:
            assert getattr(from_cli, f.name) == getattr(direct, f.name), f.name


def test_spark_shares_parka_ingests_declarations() -> None:
    """A flag both daemons take is one declaration: same flags, variable, reading and check."""
    core_by_flag = {s.flag: s for s in core.SHARED}
    for s in SHARED_FLAGS:
        shared = core_by_flag[s.flag]
        assert (s.parse, s.check is shared.check or s.name == "kafka_conf", s.kind, s.choices) == (
            shared.parse,
            True,
            shared.kind,
            shared.choices,
        )
        assert set(shared.env) <= set(s.env)
    assert [s.flag for s in SHARED_FLAGS] == [s.flag for s in core.SHARED]


def test_a_library_caller_gets_the_same_check_naming_the_flag_and_variable() -> None:
    for make in (
        lambda: IngestSettings(topic="t", table_uri="/t", kafka_conf={}, app_id="a", checkpoint_interval=-1),
        lambda: SparkIngestSettings(topic="t", table_uri="/t", bootstrap_servers="b", checkpoint_interval=-1),
    ):
        with pytest.raises(ConfigError) as exc:
            make()
        assert exc.value.key == "checkpoint_interval" and exc.value.value == -1
        assert "--checkpoint-interval or PARKA_CHECKPOINT_INTERVAL" in str(exc.value)


def test_ingest_holds_at_least_one_commits_bytes_in_memory() -> None:
    def make(**kw: Any) -> IngestSettings:
        return IngestSettings(topic="t", table_uri="/t", kafka_conf={}, app_id="a", **kw)

    assert make(target_file_size=2**20).buffer_limit == 2 * 2**20  # default: two commits' worth
    assert make(target_file_size=2**20, min_bytes_per_commit=10**6).buffer_limit == 2 * 10**6
    assert make(target_file_size=2**20, max_buffered_bytes=2**20).buffer_limit == 2**20
    with pytest.raises(ConfigError) as exc:
        make(target_file_size=2**20, max_buffered_bytes=2**20 - 1)
    assert exc.value.key == "max_buffered_bytes" and "at least the bytes per commit (1,048,576" in str(exc.value)
    assert "--max-buffered-bytes or PARKA_MAX_BUFFERED_BYTES" in str(exc.value)


def test_a_refused_secret_is_masked_in_the_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        spark_parser().parse_args(["-K", "key.deserializer=hunter2"])
    err = capsys.readouterr().err
    assert "key.deserializer" in err and "hunter2" not in err
    secret = Setting("sasl_password", ("--sasl-password",), ("SASL_PASSWORD",), check=lambda v: "longer")
    with pytest.raises(ConfigError) as exc:
        secret.validate("hunter2")
    assert "hunter2" not in str(exc.value) and "--sasl-password or PARKA_SASL_PASSWORD" in str(exc.value)


def test_a_setting_is_added_once() -> None:
    parser = SettingsParser(prog="x")
    parser.add_settings([core.QUIET])
    with pytest.raises(ValueError, match="'quiet' added twice"):
        parser.add_settings([core.QUIET])
