"""A running ``parka ingest --metrics-port 0 --metrics-bind-address 127.0.0.1``, scraped over HTTP:
the counters move with the data, the lag per partition rises with new messages and falls to 0 once
they are committed, the staleness per partition grows while nothing arrives and restarts with a
commit, and the health endpoints answer 200 while it runs."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

from .._ingest_util import produce_events, start_ingest, table_ids, wait_for
from ._scrape import Samples, bound_host, bound_port, health, lag, scrape, value

SECRET = "metrics-test-s3cr3t"


def test_a_running_ingest_serves_counters_and_lag_that_follow_the_data(
    bootstrap: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(partitions=2)
    table = tmp_path / "events"
    log = tmp_path / "ingest.log"
    worker = start_ingest(
        topic,
        table,
        bootstrap,
        "--metrics-port",
        "0",
        "--metrics-bind-address",
        "127.0.0.1",
        "--allowed-latency",
        "4",
        "--checkpoint-interval",
        "1",  # a checkpoint after each commit: the checkpoint histogram counts them
        "-K",
        f"sasl.password={SECRET}",  # ignored on a PLAINTEXT listener; must never reach a label
        log=log,
    )
    try:
        wait_for(lambda: bound_port(log) is not None or worker.poll() is not None, "the metrics address", 60)
        port = bound_port(log)
        assert port is not None, log.read_text()
        assert bound_host(log) == "127.0.0.1"
        _, first = scrape(port)
        assert value(first, "parka_records_total", topic=topic) == 0
        assert value(first, "parka_commit_latency_seconds_count", topic=topic) == 0

        segments = produce_events(bootstrap, topic, 0, 600, batch=50)
        last: dict[str, Samples] = {}

        def caught_up(records: int) -> bool:
            _, last["s"] = scrape(port)
            by_partition = lag(last["s"], topic)
            return (
                value(last["s"], "parka_records_total", topic=topic) == records
                and set(by_partition) == {0, 1}
                and all(n == 0 for n in by_partition.values())
                # the last commit's checkpoint and the commit itself, counted before them, timed too
                and value(last["s"], "parka_checkpoint_seconds_count", topic=topic)
                == value(last["s"], "parka_commit_latency_seconds_count", topic=topic)
                == value(last["s"], "parka_commits_total", topic=topic)
            )

        wait_for(lambda: caught_up(600), "600 records counted, lag 0 on both partitions, checkpoints timed", 60)
        s = last["s"]
        assert value(s, "parka_segments_total", topic=topic) == segments
        commits = value(s, "parka_commits_total", topic=topic)
        assert commits is not None and commits > 0
        files = value(s, "parka_files_total", topic=topic)
        assert files is not None and 0 < files <= segments
        assert value(s, "parka_commit_latency_seconds_count", topic=topic) == commits
        assert value(s, "parka_checkpoint_seconds_count", topic=topic) == commits
        latency_sum = value(s, "parka_commit_latency_seconds_sum", topic=topic)
        assert latency_sum is not None and latency_sum > 0
        bytes_total = value(s, "parka_bytes_total", topic=topic)
        assert bytes_total is not None and bytes_total > 0
        for zero in ("parka_dead_letters_total", "parka_split_segments_total", "parka_commit_conflicts_total"):
            assert value(s, zero, topic=topic) == 0, zero

        for path in ("/healthz", "/readyz"):
            code, answer = health(port, path)
            assert (code, answer["status"]) == (200, "ok"), (path, answer)
        assert set(health(port, "/readyz")[1]["staleness_seconds"]) == {"0", "1"}
        # nothing new: the staleness grows
        stale = lag(scrape(port)[1], topic, name="parka_table_staleness_seconds")
        wait_for(
            lambda: all(
                lag(scrape(port)[1], topic, name="parka_table_staleness_seconds")[p] > stale[p] for p in (0, 1)
            ),
            "the staleness of both partitions growing",
            10,
        )
        before, before_at = lag(scrape(port)[1], topic, name="parka_table_staleness_seconds"), time.monotonic()

        # more data: the lag rises (the commit waits --allowed-latency 4 s), then falls to 0
        more = produce_events(bootstrap, topic, 600, 300, batch=50)
        rose = {"seen": False}

        def behind_then_caught_up() -> bool:
            done = caught_up(900)
            rose["seen"] = rose["seen"] or sum(lag(last["s"], topic).values()) > 0
            return done

        wait_for(behind_then_caught_up, "900 records counted and lag 0 again", 60)
        assert rose["seen"], "the lag never rose above 0 while new messages waited for their commit"
        body, s = scrape(port)
        # the commits restarted each partition's staleness: had they not, it would be at least
        # what it was plus the time since
        after, elapsed = lag(s, topic, name="parka_table_staleness_seconds"), time.monotonic() - before_at
        assert all(after[p] < before[p] + elapsed for p in (0, 1)), (before, after, elapsed)
        assert value(s, "parka_segments_total", topic=topic) == segments + more
        later = value(s, "parka_commits_total", topic=topic)
        assert later is not None and later > commits
        assert value(s, "parka_commit_latency_seconds_count", topic=topic) == later
        assert sorted(table_ids(table)) == list(range(900))
        # labels are the topic and the partition: no setting, no secret, no table path
        assert SECRET not in body and str(tmp_path) not in body
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 0, log.read_text()[-4000:]
    text = log.read_text()
    assert SECRET not in text
    # not a terminal: the progress goes to the log as lines, never a bar's control characters
    assert "progress:" in text and "\r" not in text and "\x1b" not in text


def test_a_daemon_waiting_on_its_broker_is_alive_but_not_ready(tmp_path: Path) -> None:
    """Nothing listens on port 9: the daemon retries, /healthz answers 200 and /readyz 503 with
    the cause the log names."""
    log = tmp_path / "ingest.log"
    worker = start_ingest("events", tmp_path / "events", "127.0.0.1:9", "--metrics-port", "0", log=log)
    try:
        wait_for(lambda: bound_port(log) is not None or worker.poll() is not None, "the metrics address", 60)
        port = bound_port(log)
        assert port is not None, log.read_text()
        assert bound_host(log) == "0.0.0.0"
        wait_for(lambda: health(port, "/readyz")[1]["status"] == "blocked", "/readyz to name the cause", 60)
        code, body = health(port, "/readyz")
        assert code == 503
        (blocker,) = body["blockers"]
        assert blocker["cause"] == "broker" and "127.0.0.1:9" in blocker["message"]
        assert blocker["message"] in log.read_text()  # the line the log has
        assert health(port, "/healthz")[0] == 200
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 0, log.read_text()[-4000:]
