"""The consumer side of parka: the messaging shim :class:`ParquetConsumer` (and its asyncio
counterpart :class:`AIOParquetConsumer`) and the ingestion
consumer :class:`IngestionConsumer` (raw segments into Delta Lake, exactly once)."""

from ._aio import AIOParquetConsumer
from ._compat import KafkaClientException
from ._ingest import IngestionConsumer, IngestSettings, IngestStats
from ._shim import ParquetConsumer, RawSegment, SegmentTable

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
