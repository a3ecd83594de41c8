"""Pure pieces of the producer: the per-partition buffer and the decision when to cut it.

No Kafka and no I/O here, and time comes from an injected clock, so the cutting rules are
tested without a broker.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CutPolicy", "PartitionBuffer", "SizeModel", "approx_size"]

DeliveryCallback = Callable[[Any, Any], None]


def approx_size(value: Any) -> int:
    """A cheap, deterministic guess of a record's unencoded size in bytes.

    Strings and bytes count their length, containers their members, scalars 8 bytes. It only
    steers when to cut; the encoded size is always checked exactly afterwards.
    """
    if isinstance(value, (str, bytes, bytearray)):
        return len(value) + 4
    if isinstance(value, dict):
        return sum(approx_size(v) for v in value.values()) + 4
    if isinstance(value, (list, tuple)):
        return sum(approx_size(v) for v in value) + 4
    return 8


@dataclass
class SizeModel:
    """Learns encoded bytes per estimated raw byte for one topic (an exponential average).

    Starts at 1.0: Parquet with any codec is rarely larger than the raw estimate, so the first
    segment is cut early rather than late; later segments use what was observed.
    """

    ratio: float = 1.0
    alpha: float = 0.3
    observed: bool = False

    def predict(self, raw_bytes: int) -> float:
        return raw_bytes * self.ratio

    def observe(self, raw_bytes: int, encoded_bytes: int) -> None:
        if raw_bytes <= 0:
            return
        seen = encoded_bytes / raw_bytes
        self.ratio = (1 - self.alpha) * self.ratio + self.alpha * seen if self.observed else seen
        self.observed = True


@dataclass(frozen=True)
class CutPolicy:
    """When a buffer becomes a segment: ``max_records``, ``max_bytes`` or ``linger_s``, first wins.

    ``fill`` is the share of ``max_bytes`` at which the predicted size triggers a cut; it leaves
    room for the prediction being low (an oversized segment is split and re-encoded).
    """

    max_records: int
    max_bytes: int
    linger_s: float
    fill: float = 0.9

    def full(self, records: int, predicted_bytes: float) -> bool:
        return records >= self.max_records or predicted_bytes >= self.max_bytes * self.fill

    def due(self, first_at: float, now: float) -> bool:
        return now - first_at >= self.linger_s


@dataclass
class PartitionBuffer:
    """Records waiting for one (topic, partition[, table partition values]) segment."""

    topic: str
    partition: int
    created_at: float
    records: list[dict[str, Any]] = field(default_factory=list)
    keys: list[bytes | None] = field(default_factory=list)
    timestamps: list[int | None] = field(default_factory=list)
    headers: list[list[tuple[str, bytes | None]] | None] = field(default_factory=list)
    callbacks: list[DeliveryCallback | None] = field(default_factory=list)
    raw_bytes: int = 0

    def append(
        self,
        record: dict[str, Any],
        key: bytes | None,
        timestamp: int | None,
        headers: list[tuple[str, bytes | None]] | None,
        callback: DeliveryCallback | None,
        size: int,
    ) -> None:
        self.records.append(record)
        self.keys.append(key)
        self.timestamps.append(timestamp)
        self.headers.append(headers)
        self.callbacks.append(callback)
        self.raw_bytes += size

    def __len__(self) -> int:
        return len(self.records)
