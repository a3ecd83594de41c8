"""What the numbers were measured on: the machine, the libraries and the broker."""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata
from typing import Any

from .broker import Broker

__all__ = ["machine_info"]


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine_info(broker: Broker | None) -> dict[str, Any]:
    """Cores, memory, OS, Python and library versions, the broker's version and message limit
    (none for a benchmark without a broker)."""
    import confluent_kafka
    import psutil  # the bench extra

    return {
        "cpu_model": _cpu_model(),
        "logical_cores": os.cpu_count(),
        "physical_cores": psutil.cpu_count(logical=False),
        "memory_bytes": psutil.virtual_memory().total,
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "versions": {
            "parka": _version("parka"),
            "pyarrow": _version("pyarrow"),
            "confluent-kafka": _version("confluent-kafka"),
            "librdkafka": confluent_kafka.libversion()[0],
            "deltalake": _version("deltalake"),
            "fastavro": _version("fastavro"),
            "numpy": _version("numpy"),
            "pyspark": _version("pyspark"),
            "delta-spark": _version("delta-spark"),
            "duckdb": _version("duckdb"),
        },
        "kafka": None
        if broker is None
        else {
            "bootstrap": broker.bootstrap,
            "version": broker.kafka_version(),
            "max_message_bytes": broker.max_message_bytes_cached(),
            "log_dir": broker.data_dir,
        },
    }
