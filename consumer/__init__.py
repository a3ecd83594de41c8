"""The consumer side of parka: the messaging shim :class:`ParquetConsumer` (and its asyncio
counterpart :class:`AIOParquetConsumer`) and the ingestion
consumer :class:`IngestionConsumer` (raw segments into Delta Lake, exactly once)."""

from typing import TYPE_CHECKING, Any

from ._compat import KafkaClientException
from ._shim import ParquetConsumer, RawSegment, SegmentTable

# The ingestion consumer and its settings land tables (parka.lake: the `lake` extra, whose defaults
# the settings take); imported on first use, so parka without an extra (the producer and the shim)
# works without deltalake, obstore, fastparquet.
_INGEST = ("IngestionConsumer", "IngestStats")

if TYPE_CHECKING:
    from ._aio import AIOParquetConsumer
    from ._ingest import IngestionConsumer, IngestStats
    from ._settings import IngestSettings


def __getattr__(name: str) -> Any:
    if name in _INGEST:
        from . import _ingest

        return getattr(_ingest, name)
    if name == "IngestSettings":
        from ._settings import IngestSettings

        return IngestSettings
    if name == "AIOParquetConsumer":  # asyncio and confluent_kafka.aio, on first use (not every daemon's start)
        from ._aio import AIOParquetConsumer

        return AIOParquetConsumer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AIOParquetConsumer",
    "IngestSettings",
    "IngestStats",
    "IngestionConsumer",
    "KafkaClientException",
    "ParquetConsumer",
    "RawSegment",
    "SegmentTable",
]
