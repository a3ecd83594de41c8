"""Bad inputs, each on a topic of its own, and how their answers are judged.

Per kind of :data:`~.catalogue.RAW_INPUTS` a one-partition topic holds a good segment, the bad
message, and another good segment. ``parka ingest --end-at-latest`` without a dead-letter table
must commit the first segment and stop with exit 1 and an error naming the topic, partition and
offset of the bad message; with one, it must land both segments and write one dead-letter row.
:data:`~.catalogue.DATA_INPUTS` must land whole; :data:`~.catalogue.PRODUCER_INPUTS` never enter
the topic and must be reported to the producer's delivery callback.

:func:`judge_dead_letters` checks a dead-letter table against the bad messages a scenario sent
(each exactly once, with the right error); the other scenarios use it too.
"""

from __future__ import annotations

import logging
import random
import subprocess
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from parka.producer import ParquetProducer

from parka.errors import RecordTooLargeError

from . import forkserver, tables
from .catalogue import DATA_INPUTS, EVENTS, PRODUCER_INPUTS, RAW_INPUTS, BadInput, data_input, events, random_text
from .feed import BadSent, IdSource, Ledger, create_topic, producer_conf, raw_producer_conf
from .procs import ingest_command

__all__ = ["KindVerdict", "judge_data_inputs", "judge_dead_letters", "run_bad_inputs"]

log = logging.getLogger("reliability")

ALL_KINDS = {b.kind: b for b in (*RAW_INPUTS, *DATA_INPUTS, *PRODUCER_INPUTS)}


@dataclass
class KindVerdict:
    """How the bad messages of one kind were answered in one place (a scenario's dead-letter
    table, or a run without one)."""

    sent: int = 0
    answered: int = 0
    problems: list[str] = field(default_factory=list)
    example: str = ""

    @property
    def ok(self) -> bool:
        return self.sent == self.answered and not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {"sent": self.sent, "answered": self.answered, "problems": self.problems, "example": self.example}


def _error_ok(bad: BadInput, text: str) -> bool:
    return text.startswith(f"{bad.error}: ") and bad.fragment in text


def judge_dead_letters(sent: Iterable[BadSent], rows: list[dict[str, Any]], topic: str) -> dict[str, Any]:
    """Each bad message in the dead-letter table exactly once, with its kind's error; and no
    dead-letter row for a message that was not bad. Returns ``{"kinds": {kind: verdict},
    "unexpected": [...]}``."""
    by_coords: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for row in rows:
        by_coords.setdefault((row["partition"], row["offset"]), []).append(row)
    verdicts: dict[str, KindVerdict] = {}
    seen = set()
    for msg in sent:
        bad = ALL_KINDS[msg.kind]
        verdict = verdicts.setdefault(msg.kind, KindVerdict())
        verdict.sent += 1
        coords = (msg.partition, msg.offset)
        seen.add(coords)
        found = by_coords.get(coords, [])
        where = f"{topic}[{msg.partition}]@{msg.offset}"
        if not found:
            verdict.problems.append(f"{where}: no dead-letter row")
        elif len(found) > 1:
            verdict.problems.append(f"{where}: {len(found)} dead-letter rows")
        elif found[0]["topic"] != topic:
            verdict.problems.append(f"{where}: dead-letter row names topic {found[0]['topic']!r}")
        elif not _error_ok(bad, found[0]["error"]):
            verdict.problems.append(f"{where}: unexpected error {found[0]['error'][:200]!r}")
        else:
            verdict.answered += 1
            verdict.example = verdict.example or found[0]["error"][:300]
    unexpected = [f"{topic}[{p}]@{o}: {r[0]['error'][:200]}" for (p, o), r in by_coords.items() if (p, o) not in seen]
    return {"kinds": verdicts, "unexpected": unexpected}


def judge_data_inputs(ledger: Ledger, ids: Iterable[int]) -> dict[str, KindVerdict]:
    """Each valid but unusual segment (:data:`~.catalogue.DATA_INPUTS`) a scenario sent: all its
    records acknowledged and in the table exactly once."""
    counts = Counter(ids)
    verdicts = {}
    for kind, sent in ledger.data_inputs.items():
        verdict = KindVerdict(sent=1)
        missing = sum(1 for i in sent if counts[i] == 0)
        extra = sum(counts[i] - 1 for i in sent if counts[i] > 1)
        if not set(sent) <= ledger.acknowledged:
            verdict.problems.append("the producer did not get it acknowledged")
        elif missing or extra:
            verdict.problems.append(f"{missing} of its {len(sent):,} records missing, {extra} duplicated")
        else:
            verdict.answered = 1
            verdict.example = f"landed: {len(sent):,} records in one message, each once"
        verdicts[kind] = verdict
    return verdicts


def _send_topic(bootstrap: str, topic: str, ids: IdSource, middle: Any) -> tuple[range, range]:
    """A good segment, ``middle(producer, raw)`` (the input under test), another good segment."""
    first, last = ids.take(10), ids.take(10)
    raw = Producer(raw_producer_conf(bootstrap))
    with ParquetProducer(producer_conf(bootstrap)) as producer:
        producer.set_schema(topic, EVENTS)
        producer.produce_batch(topic, events(first), partition=0)
        assert producer.flush(60) == 0
        middle(producer, raw)
        assert raw.flush(60) == 0 and producer.flush(60) == 0
        producer.produce_batch(topic, events(last), partition=0)
        assert producer.flush(60) == 0
    return first, last


def _ingest(topic: str, table: Path, bootstrap: str, *flags: str) -> subprocess.CompletedProcess[str]:
    command = ingest_command(topic, table, bootstrap, "--end-at-latest", "-q", *flags)
    return forkserver.run(command, capture_output=True, text=True, timeout=300)


def _raw_kind(bad: BadInput, bootstrap: str, topic: str, out: Path, ids: IdSource, seed: int) -> dict[str, Any]:
    assert bad.build is not None
    rng = random.Random(f"{seed}-{bad.kind}")
    value, headers = bad.build(rng, 0)

    def middle(producer: ParquetProducer, raw: Producer) -> None:
        raw.produce(topic, value=value, headers=headers, partition=0)

    first, last = _send_topic(bootstrap, topic, ids, middle)
    table, dlq = out / "table", out / "dlq"
    stopped = _ingest(topic, table, bootstrap)
    where = f"at {topic}[0]@1"
    error_line = next((ln for ln in stopped.stderr.splitlines() if "stopped:" in ln), "")
    without = KindVerdict(sent=1)
    if stopped.returncode != 1:
        without.problems.append(f"exit {stopped.returncode}, not 1")
    elif where not in error_line or f"{bad.error}: " not in error_line or bad.fragment not in error_line:
        without.problems.append(f"error does not name {where} and '{bad.fragment}': {error_line[-300:]!r}")
    elif sorted(tables.DeltaTarget(table).ids()) != list(first):
        without.problems.append("the records before the bad message are not (only) what was committed")
    else:
        without.answered = 1
        without.example = error_line.split("stopped: ", 1)[-1][:300]
    landed = _ingest(topic, table, bootstrap, "--dlq-table", str(dlq))
    judged = judge_dead_letters([BadSent(bad.kind, 0, 1)], tables.DeltaTarget(dlq).dead_letters(), topic)
    with_dlq: KindVerdict = judged["kinds"][bad.kind]
    with_dlq.problems += judged["unexpected"]
    if landed.returncode != 0:
        stop = next((ln for ln in landed.stderr.splitlines() if "stopped:" in ln), landed.stderr[-300:])
        with_dlq.problems.append(f"parka ingest --dlq-table exited {landed.returncode}: {stop[-300:]}")
    if sorted(tables.DeltaTarget(table).ids()) != [*first, *last]:
        with_dlq.problems.append("the good segments around it did not land exactly once")
    return {"without_dlq": without.as_dict(), "with_dlq": with_dlq.as_dict(), "ok": without.ok and with_dlq.ok}


def _data_kind(bad: BadInput, bootstrap: str, topic: str, out: Path, ids: IdSource, seed: int) -> dict[str, Any]:
    rng = random.Random(f"{seed}-{bad.kind}")
    data: list[range] = []

    def middle(producer: ParquetProducer, raw: Producer) -> None:
        size = 200_000 if bad.kind == "large-segment" else 3
        chunk = ids.take(size)
        table = data_input(bad.kind, rng, chunk.start)
        data.append(chunk)
        with ParquetProducer(producer_conf(bootstrap, **{"columnar.batch.records": size})) as big:
            big.set_schema(topic, EVENTS)
            big.produce_batch(topic, table, partition=0)
            assert big.flush(120) == 0

    first, last = _send_topic(bootstrap, topic, ids, middle)
    table = out / "table"
    done = _ingest(topic, table, bootstrap)
    verdict = KindVerdict(sent=1)
    got = sorted(tables.DeltaTarget(table).ids())
    if done.returncode != 0:
        verdict.problems.append(f"exit {done.returncode}: {done.stderr[-300:]!r}")
    elif got != sorted([*first, *data[0], *last]):
        verdict.problems.append(f"{len(got)} records in the table, {len(first) + len(data[0]) + len(last)} expected")
    else:
        verdict.answered = 1
        verdict.example = f"landed: {len(data[0]):,} records in one message, each once"
    return {"without_dlq": verdict.as_dict(), "ok": verdict.ok}


def _producer_kind(bad: BadInput, bootstrap: str, topic: str, out: Path, ids: IdSource, seed: int) -> dict[str, Any]:
    rng = random.Random(f"{seed}-{bad.kind}")
    errors: list[Any] = []
    refused: list[range] = []

    def middle(producer: ParquetProducer, raw: Producer) -> None:
        if bad.kind == "oversized":  # the client allows it; the topic's max.message.bytes does not
            chunk = ids.take(80)
            refused.append(chunk)
            table = events(chunk, note=[random_text(rng, 100_000) for _ in chunk])
            conf = producer_conf(bootstrap, **{"message.max.bytes": 16 * 1024 * 1024, "columnar.batch.records": 80})
            with ParquetProducer(conf) as big:
                big.set_schema(topic, EVENTS)
                big.produce_batch(topic, table, partition=0, on_delivery=lambda err, msg, n: errors.append(err))
                big.flush(120)
        else:  # one record above the segment limit, reported to its own callback
            chunk = ids.take(1)
            refused.append(chunk)
            value = events(chunk, note=[random_text(rng, 6_000_000)]).to_pylist()[0]
            producer.produce(topic, value=value, partition=0, on_delivery=lambda err, msg: errors.append(err))
            producer.flush(60)

    first, last = _send_topic(bootstrap, topic, ids, middle)
    table = out / "table"
    done = _ingest(topic, table, bootstrap)
    verdict = KindVerdict(sent=1)
    got = sorted(tables.DeltaTarget(table).ids())
    err = errors[0] if errors else None
    if err is None:
        verdict.problems.append(f"the producer reported no error ({len(errors)} reports)")
    elif bad.kind == "record-too-large" and not (isinstance(err, RecordTooLargeError) and err.topic == topic):
        verdict.problems.append(f"not a RecordTooLargeError naming the topic: {err!r}")
    elif bad.kind == "oversized" and "MSG_SIZE_TOO_LARGE" not in str(err.name()):
        verdict.problems.append(f"not MSG_SIZE_TOO_LARGE: {err!r}")
    elif done.returncode != 0 or got != [*first, *last]:
        verdict.problems.append(f"exit {done.returncode}; {len(got)} records in the table, 20 expected")
    else:
        verdict.answered = 1
        name = err.name() if callable(getattr(err, "name", None)) else type(err).__name__
        verdict.example = f"producer delivery callback: {name}: {str(err)[:200]}"
    return {"producer": verdict.as_dict(), "ok": verdict.ok}


def run_bad_inputs(bootstrap: str, run_id: str, out: Path, ids: IdSource, seed: int) -> dict[str, dict[str, Any]]:
    """Every bad input on a topic of its own; returns kind -> its answers (two at a time)."""
    jobs = [(b, _raw_kind) for b in RAW_INPUTS] + [(b, _data_kind) for b in DATA_INPUTS]
    jobs += [(b, _producer_kind) for b in PRODUCER_INPUTS]

    def one(job: Any) -> tuple[str, dict[str, Any]]:
        bad, check = job
        topic = f"rel-bad-{bad.kind}-{run_id}"
        create_topic(bootstrap, topic, 1)
        result = check(bad, bootstrap, topic, out / bad.kind, ids, seed)
        log.info("bad input %s: %s", bad.kind, "answered" if result["ok"] else f"NOT answered: {result}")
        return bad.kind, {"input": bad.description, **result}

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(one, jobs))
