"""The shim's fetch of plain messages in batches (``parka.consumer._fetch.Fetcher``), with a
stand-in client: what is held from a batch, and what a revocation inside the client's call or a
seek drops. The same on a real broker: ``tests/integration/test_shim_batches.py``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from parka.consumer._fetch import Fetcher
from parka.consumer._segments import Cursor


class Msg:
    """A plain Kafka message: no headers, no error."""

    def __init__(self, partition: int, offset: int) -> None:
        self._partition, self._offset = partition, offset

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return "t"

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def leader_epoch(self) -> None:
        return None

    def headers(self) -> None:
        return None


class Client:
    """Returns the queued batches in turn; ``during`` runs inside the next call, as a rebalance
    callback runs inside librdkafka's consume()."""

    def __init__(self, *batches: list[Msg]) -> None:
        self.batches = list(batches)
        self.asked: list[tuple[int, float]] = []
        self.during: Callable[[], None] | None = None

    def consume(self, num_messages: int, timeout: float) -> list[Msg]:
        self.asked.append((num_messages, timeout))
        if self.during is not None:
            during, self.during = self.during, None
            during()
        return self.batches.pop(0)[:num_messages] if self.batches else []


def fetcher(client: Client, cursors: dict[Any, Cursor]) -> Fetcher:
    return Fetcher(client, kms=None, registry=None, cursors=cursors, resume_checked=set(), readers={})


def test_after_a_plain_message_the_batch_is_what_the_client_has_already_and_the_rest_is_held() -> None:
    client = Client([Msg(0, 0)], [Msg(0, 1), Msg(0, 2), Msg(1, 7)])
    cursors: dict[Any, Cursor] = {}
    f = fetcher(client, cursors)
    assert f.fetch(5.0, batch=True, want=4).offset() == 0
    assert f.fetch(5.0, batch=True, want=3).offset() == 1
    assert client.asked == [(1, 5.0), (3, 0)]  # the batch without waiting
    assert [m.offset() for m in f.take_plain(10)] == [2, 7]
    assert (cursors[("t", 0)].offset, cursors[("t", 1)].offset) == (2, 7)


def test_a_revocation_inside_the_clients_call_keeps_none_of_its_partitions_messages_held() -> None:
    client = Client([Msg(0, 0)], [Msg(0, 1), Msg(0, 2), Msg(1, 7), Msg(0, 3)])
    f = fetcher(client, {})
    f.fetch(5.0, batch=True, want=5)
    client.during = lambda: f.forget({("t", 0)})
    assert f.fetch(5.0, batch=True, want=4).offset() == 1  # the first, as the client gave it
    assert [m.offset() for m in f.take_plain(10)] == [7]


def test_a_seek_drops_the_held_messages_of_its_partition_only() -> None:
    client = Client([Msg(0, 0)], [Msg(0, 1), Msg(0, 2), Msg(1, 7)])
    f = fetcher(client, {})
    f.fetch(5.0, batch=True, want=4)
    f.fetch(5.0, batch=True, want=3)
    f.forget({("t", 0)})
    assert [m.offset() for m in f.take_plain(10)] == [7]
