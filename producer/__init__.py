"""The producer side of parka: :class:`ParquetProducer`."""

from ._producer import ParquetProducer

__all__ = ["ParquetProducer"]
