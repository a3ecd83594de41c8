"""What an operator sees (docs/operating.md): a run-once (``--end-at-latest``) that cannot work
ends soon, with its exit code and one line naming the cause; a daemon waits, says why once, then
at a slow rhythm, and says when it recovered. ``parka ingest`` runs as a process against the real
broker, a broker of its own and s3proxy; nothing is mocked."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_INVALID, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from reliability import forkserver

from ._ingest_util import create_topic, log_has, produce_events, start_ingest, table_ids, wait_for, wait_for_rows
from ._objectstores import ObjectStoreServer
from .conftest import REPO

pytestmark = pytest.mark.integration

EXIT_CONFIG, EXIT_UNREACHABLE = 2, 3
RECOVERY_PORT = os.environ.get("PARKA_TEST_RECOVERY_PORT", "19392")


def _run_once(topic: str, table: str, bootstrap: str, *extra: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """``parka ingest --end-at-latest`` as a cron job runs it (stderr not a terminal); its wall time."""
    cmd = [sys.executable, "-m", "parka.cli", "ingest", topic, table, "-k", bootstrap, "--end-at-latest", *extra]
    started = time.monotonic()
    proc = forkserver.run(cmd, capture_output=True, text=True, timeout=120)
    return proc, time.monotonic() - started


def _error_lines(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [ln for ln in proc.stderr.splitlines() if " ERROR " in ln]


def _stopped_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The one line that ends the run: a single ERROR line, plain text, nothing after it."""
    errors = _error_lines(proc)
    assert len(errors) == 1, proc.stderr[-3000:]
    assert "\x1b" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.stdout == "", proc.stdout  # no {"status": "ok"} after a failure
    return errors[0]


def _no_table(uri: str, storage_options: dict[str, str] | None = None) -> bool:
    try:
        DeltaTable(uri, storage_options=storage_options)
    except TableNotFoundError:
        return True
    return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_run_once_without_a_broker_exits_3_within_the_broker_timeout(tmp_path: Path) -> None:
    address = f"localhost:{_free_port()}"
    table = str(tmp_path / "t")
    proc, wall = _run_once("events", table, address, "--broker-timeout", "4")
    assert proc.returncode == EXIT_UNREACHABLE, proc.stderr[-3000:]
    line = _stopped_line(proc)
    assert f"stopped: no Kafka broker reachable at {address}" in line and "Connection refused" in line, line
    assert "gave up after 4 s" in line, line
    assert wall < 4 + 20, f"{wall:.0f} s"  # the timeout plus the interpreter's start on a loaded machine
    # librdkafka's own log came through parka's logger, once: not a %3|...|FAIL| line every 50 ms
    assert "%3|" not in proc.stderr
    assert proc.stderr.count("Connection refused") <= 3, proc.stderr[-3000:]
    assert _no_table(table)


def test_run_once_on_an_unknown_topic_exits_2_naming_it(bootstrap: str, tmp_path: Path) -> None:
    topic = f"no-such-topic-{time.time_ns()}"
    table = str(tmp_path / "t")
    proc, wall = _run_once(topic, table, bootstrap)
    assert proc.returncode == EXIT_CONFIG, proc.stderr[-3000:]
    line = _stopped_line(proc)
    assert f"stopped: topic '{topic}' does not exist on the Kafka cluster at {bootstrap}" in line, line
    assert wall < 30, f"{wall:.0f} s"
    assert _no_table(table)
    # asked about, not created (the broker creates topics on produce: auto.create.topics.enable)
    assert topic not in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics


def test_run_once_on_an_empty_topic_without_a_table_ends_ok_and_warns_of_nothing(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """Background compaction and VACUUM have no table to look at: no warning, no failure counted."""
    topic = new_topic(partitions=2)
    table = str(tmp_path / "t")
    proc, _ = _run_once(topic, table, bootstrap)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [ln for ln in proc.stderr.splitlines() if " WARNING " in ln or " ERROR " in ln] == [], proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (result["status"], result["commits"], result["compaction_failures"]) == ("ok", 0, 0)
    assert _no_table(table)


def test_run_once_into_a_table_path_through_a_file_exits_2_naming_it(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic()
    produce_events(bootstrap, topic, 0, 100, batch=50)
    (tmp_path / "afile").write_text("not a directory")
    table = tmp_path / "afile" / "lake" / "t"
    proc, wall = _run_once(topic, str(table), bootstrap)
    assert proc.returncode == EXIT_CONFIG, proc.stderr[-3000:]
    line = _stopped_line(proc)
    assert f"stopped: table location {table} cannot be created or written: Not a directory" in line, line
    assert wall < 30, f"{wall:.0f} s"
    assert (tmp_path / "afile").read_text() == "not a directory"


def test_run_once_into_a_missing_bucket_exits_2_naming_it(
    bootstrap: str, new_topic: Callable[..., str], s3proxy: ObjectStoreServer
) -> None:
    topic = new_topic()
    produce_events(bootstrap, topic, 0, 100, batch=50)
    bucket = f"no-bucket-{time.time_ns()}"
    uri = f"s3://{bucket}/t"
    flags = [a for k, v in s3proxy.storage_options.items() for a in ("--storage-option", f"{k}={v}")]
    proc, wall = _run_once(topic, uri, bootstrap, *flags)
    assert proc.returncode == EXIT_CONFIG, proc.stderr[-3000:]
    line = _stopped_line(proc)
    assert f"stopped: bucket '{bucket}' of {uri} does not exist" in line, line
    assert wall < 30, f"{wall:.0f} s"


def test_run_once_with_wrong_s3_credentials_exits_2_in_one_plain_line(
    bootstrap: str, new_topic: Callable[..., str], s3proxy: ObjectStoreServer
) -> None:
    topic = new_topic()
    produce_events(bootstrap, topic, 0, 100, batch=50)
    uri = s3proxy.table_uri("wrong-credentials")
    options = {**s3proxy.storage_options, "aws_secret_access_key": "not-the-secret"}
    flags = [a for k, v in options.items() for a in ("--storage-option", f"{k}={v}")]
    proc, wall = _run_once(topic, uri, bootstrap, *flags)
    assert proc.returncode == EXIT_CONFIG, proc.stderr[-3000:]
    line = _stopped_line(proc)
    assert f"stopped: the object store refused the credentials for {uri} (SignatureDoesNotMatch)" in line, line
    assert "not-the-secret" not in proc.stderr
    assert wall < 30, f"{wall:.0f} s"
    assert _no_table(uri, s3proxy.storage_options)


def test_run_once_with_nothing_new_can_exit_with_its_own_code(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic()
    produce_events(bootstrap, topic, 0, 100, batch=50)
    table = str(tmp_path / "t")
    first, _ = _run_once(topic, table, bootstrap, "--exit-code-when-empty", "99", "-q")
    assert first.returncode == 0, first.stderr[-3000:]
    again, _ = _run_once(topic, table, bootstrap, "--exit-code-when-empty", "99", "-q")
    assert again.returncode == 99, again.stderr[-3000:]
    assert sorted(table_ids(table)) == list(range(100))


def test_run_once_with_a_mistyped_partition_column_exits_2_with_nothing_written(
    bootstrap: str, new_topic: Callable[..., str], group_id: str, tmp_path: Path
) -> None:
    topic = new_topic()
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, value=b'{"id": -1}')  # a bad message first: read, and not dead-lettered either
    assert producer.flush(30) == 0
    produce_events(bootstrap, topic, 0, 200, batch=50)
    table, dlq = tmp_path / "t", tmp_path / "dlq"
    flags = ("-g", group_id, "--dlq-table", str(dlq))
    proc, wall = _run_once(topic, str(table), bootstrap, "--partition-by", "dya", *flags)
    assert proc.returncode == EXIT_CONFIG, proc.stderr[-3000:]
    refused, line = _error_lines(proc)  # the bad message as it was read, then the one line that ends the run
    assert "SegmentError: not a parka segment" in refused, refused
    assert proc.stdout == "" and "Traceback" not in proc.stderr, proc.stdout + proc.stderr[-3000:]
    assert (
        "stopped: ConfigError: invalid value 'dya' for 'partition_by'; set by --partition-by or PARKA_PARTITION_BY; "
        "dya: the topic's first segment has no column 'dya'; allowed: columns of the topic's first segment, or "
        "derived specs of them: "
    ) in line, line
    assert "at: timestamp[us, tz=UTC], day: string, device: string, id: int64, value: double" in line, line
    assert wall < 60, f"{wall:.0f} s"
    # nothing written: no file in the table's location (which the probe made) or the dead-letter
    # table's, no Kafka offset committed for the group
    assert [f for d in (table, dlq) if d.exists() for f in d.rglob("*")] == []
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group_id})
    try:
        [committed] = consumer.committed([TopicPartition(topic, 0)], timeout=10)
    finally:
        consumer.close()
    assert committed.offset == OFFSET_INVALID, committed
    # the command fixed: every record lands, the bad message is dead-lettered; some dead letters
    # among landed segments are still a success
    fixed, _ = _run_once(topic, str(table), bootstrap, "--partition-by", "day", *flags)
    assert fixed.returncode == 0, fixed.stderr[-3000:]
    status = json.loads(fixed.stdout.splitlines()[-1])
    assert (status["status"], status["dead_letters"], status["segments"]) == ("ok", 1, 4), status
    assert sorted(table_ids(str(table))) == list(range(200))
    assert DeltaTable(str(dlq)).to_pyarrow_table(columns=["offset"])["offset"].to_pylist() == [0]


def test_a_run_that_dead_lettered_everything_it_read_is_no_success(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic()
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(3):
        producer.produce(topic, value=f'{{"id": {i}}}'.encode())  # JSON, not parka segments
    assert producer.flush(30) == 0
    table, dlq = tmp_path / "t", tmp_path / "dlq"
    proc, _ = _run_once(topic, str(table), bootstrap, "--dlq-table", str(dlq))
    assert proc.returncode == 1, proc.stderr[-3000:]
    status = json.loads(proc.stdout.splitlines()[-1])
    assert (status["status"], status["dead_letters"], status["segments"]) == ("dead-lettered", 3, 0)
    assert _error_lines(proc)[-1].endswith(
        f"every message this run read was refused: 3 dead-lettered into {dlq}, none in the table (the reasons "
        "are in the dead-letter table's error column)"
    ), proc.stderr[-3000:]
    assert DeltaTable(str(dlq)).to_pyarrow_table().num_rows == 3
    # a daemon says the same in its last lines when it is stopped, and exits 0 (it was asked to stop)
    log = tmp_path / "daemon.log"
    daemon = start_ingest(
        topic, str(tmp_path / "t2"), bootstrap, "--dlq-table", str(tmp_path / "dlq2"), "-l", "1", log=log
    )
    try:
        wait_for(lambda: log.read_text().count("dead-lettered ") == 3, "the daemon to dead-letter the three", 60)
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(60) == 0, log.read_text()[-3000:]
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait(timeout=60)
    text = log.read_text()
    assert '{"status": "dead-lettered", ' in text and "every message this run read was refused: 3" in text, text[-3000:]


def test_json_logs_stay_one_object_per_line_when_a_run_stops(bootstrap: str, tmp_path: Path) -> None:
    topic = f"no-such-topic-{time.time_ns()}"
    proc, _ = _run_once(topic, str(tmp_path / "t"), bootstrap, "--log-format", "json", "-v")
    assert proc.returncode == EXIT_CONFIG, proc.stderr[-3000:]
    lines = [json.loads(line) for line in proc.stderr.splitlines()]  # the trace too: -v, inside one object
    errors = [line for line in lines if line["level"] == "error"]
    assert [e["msg"] for e in errors] == [
        f"stopped: topic '{topic}' does not exist on the Kafka cluster at {bootstrap}"
    ]
    assert any("Traceback" in line.get("trace", "") for line in lines)  # -v: the trace, in its line's object


def test_spark_ingest_run_once_ends_in_one_line_before_any_spark_session(bootstrap: str, tmp_path: Path) -> None:
    # the probe runs before the session: no JVM is started, so this is no Spark test
    spark = [sys.executable, "-m", "parka.cli", "spark-ingest"]
    address = f"127.0.0.1:{_free_port()}"
    cmd = [*spark, "events", str(tmp_path / "a"), "-k", address, "--end-at-latest", "--broker-timeout", "3"]
    started = time.monotonic()
    proc = forkserver.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == EXIT_UNREACHABLE, proc.stderr[-3000:]
    assert f"stopped: no Kafka broker reachable at {address}" in _stopped_line(proc)
    assert time.monotonic() - started < 3 + 20
    topic = f"no-such-topic-{time.time_ns()}"
    cmd = [*spark, topic, str(tmp_path / "b"), "-k", bootstrap, "--end-at-latest"]
    proc = forkserver.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == EXIT_CONFIG, proc.stderr[-3000:]
    assert f"stopped: topic '{topic}' does not exist" in _stopped_line(proc)


def test_optimize_ends_in_one_line(tmp_path: Path, s3proxy: ObjectStoreServer) -> None:
    optimize = [sys.executable, "-m", "parka.cli", "optimize"]
    proc = forkserver.run([*optimize, str(tmp_path / "none")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == EXIT_CONFIG, proc.stderr[-3000:]
    assert f"stopped: NoTableError: no Delta table at {tmp_path / 'none'}" in _stopped_line(proc)
    options = {**s3proxy.storage_options, "aws_secret_access_key": "not-the-secret"}
    flags = [a for k, v in options.items() for a in ("--storage-option", f"{k}={v}")]
    proc = forkserver.run([*optimize, s3proxy.table_uri("t"), *flags], capture_output=True, text=True, timeout=120)
    assert proc.returncode == EXIT_CONFIG, proc.stderr[-3000:]
    assert "SignatureDoesNotMatch" in _stopped_line(proc) and "not-the-secret" not in proc.stderr


def _broker(action: str) -> None:
    env = dict(os.environ, PARKA_KAFKA_PORT=RECOVERY_PORT)
    subprocess.run([str(REPO / "scripts" / "kafka-local.sh"), action], check=True, env=env, timeout=180)


@pytest.mark.long(105)
def test_daemon_without_a_broker_says_so_once_then_slowly_then_recovers(tmp_path: Path) -> None:
    # a broker of its own, started only once the daemon has been waiting for it
    address = f"127.0.0.1:{RECOVERY_PORT}"
    log = tmp_path / "log"
    table = tmp_path / "t"
    topic = f"recovery-{time.time_ns()}"
    waiting = f"no Kafka broker reachable at {address}"
    flags = ("--retry-log-interval", "2", "--allowed-latency", "1", "--progress-interval", "1")
    proc = start_ingest(topic, str(table), address, *flags, log=log)
    try:
        wait_for(lambda: log_has(log, "still retrying after"), "the daemon to repeat the cause", 60)
        text = log.read_text()
        assert text.count(f"{waiting} (") >= 2 and text.count(f"{waiting} (") == text.count("retrying"), text
        assert text.count("; retrying\n") == 1, text  # said once when it started; the rest say how long
        assert "%3|" not in text and proc.poll() is None, text[-3000:]

        _broker("up")
        wait_for(lambda: log_has(log, "recovered after"), "the daemon to see the broker", 90)
        assert "recovered after" in log.read_text() and waiting in log.read_text()
        create_topic(AdminClient({"bootstrap.servers": address}), topic, 2)
        produce_events(address, topic, 0, 300, batch=50)
        assert wait_for_rows(table, 300, timeout_s=90) == 300
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()[-3000:]
        assert sorted(table_ids(table)) == list(range(300))
        text = log.read_text()
        assert "progress:" in text and "\x1b" not in text
        assert "committed " not in text  # each commit's line is at debug level (-v)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=60)
        _broker("reset")


def _demo_broker_port(port: int, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PARKA_KAFKA_PORT": str(port), "PARKA_KAFKA_HOME": str(home)}
    return subprocess.run(
        [str(REPO / "scripts" / "kafka-local.sh"), "free-port"], capture_output=True, text=True, env=env, timeout=60
    )


def test_the_demos_broker_takes_a_free_port_when_another_process_holds_its_own(tmp_path: Path) -> None:
    """``make demo`` on a machine whose Kafka already listens on 9092 (a process this script did
    not start): its broker goes to the first free pair of ports from 100 above, or to a broker of
    its own already running there, and says so."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        taken = _demo_broker_port(port, tmp_path)
        assert taken.returncode == 0, taken.stderr
        chosen = int(taken.stdout.strip())
        assert port + 100 <= chosen < port + 300
        assert f"port {port} is in use by another process" in taken.stderr
        assert f"takes port {chosen}" in taken.stderr and "to use the running Kafka instead" in taken.stderr
        # an earlier demo's broker of this script on a port above: that one, not another new one
        mine = port + 102
        (tmp_path / f"broker-{mine}.pid").write_text(str(os.getpid()))  # a live pid, as a running broker's
        again = _demo_broker_port(port, tmp_path)
        assert (again.returncode, again.stdout.strip()) == (0, str(mine)), again.stderr
        assert f"using this script's broker on port {mine}" in again.stderr
    # nothing listens any more: the port itself, and nothing said
    free = _demo_broker_port(port, tmp_path)
    assert (free.returncode, free.stdout.strip(), free.stderr) == (0, str(port), "")
