"""The producer side of parka: :class:`ParquetProducer`, and :class:`AIOParquetProducer` for asyncio."""

from typing import Any

from ._producer import ParquetProducer

__all__ = ["AIOParquetProducer", "ParquetProducer"]


def __getattr__(name: str) -> Any:
    # imported on first use: it needs confluent_kafka.aio (confluent-kafka >= 2.12) and asyncio
    if name == "AIOParquetProducer":
        try:
            from ._aio import AIOParquetProducer
        except ImportError as exc:
            raise ImportError(
                f"AIOParquetProducer needs confluent-kafka's asyncio producer (confluent_kafka.aio): {exc}"
            ) from exc
        return AIOParquetProducer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
