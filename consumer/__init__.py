"""The consumer side of parka: the messaging shim :class:`ParquetConsumer`."""

from ._shim import ParquetConsumer, RawSegment

__all__ = ["ParquetConsumer", "RawSegment"]
