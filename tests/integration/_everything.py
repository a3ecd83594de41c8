"""A schema with every type parka supports, and deterministic records for it."""

from __future__ import annotations

import datetime as dt
import random
import uuid
from decimal import Decimal
from typing import Any

EVERYTHING_AVRO: dict[str, Any] = {
    "type": "record",
    "name": "Everything",
    "namespace": "parka.test",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "flag", "type": "boolean"},
        {"name": "small", "type": "int"},
        {"name": "ratio", "type": "float"},
        {"name": "score", "type": ["null", "double"]},
        {"name": "name", "type": "string"},
        {"name": "note", "type": ["null", "string"]},
        {"name": "blob", "type": ["null", "bytes"]},
        {"name": "digest", "type": {"type": "fixed", "name": "MD5", "size": 16}},
        {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
        {
            "name": "big",
            "type": [
                "null",
                {
                    "type": "fixed",
                    "name": "Big",
                    "size": 16,
                    "logicalType": "decimal",
                    "precision": 30,
                    "scale": 5,
                },
            ],
        },
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at_ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "at_us", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "tod_ms", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "tod_us", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": ["null", "long"]}},
        {
            "name": "place",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "Place",
                    "fields": [
                        {"name": "lat", "type": "double"},
                        {"name": "lon", "type": "double"},
                        {"name": "label", "type": ["null", "string"]},
                        {
                            "name": "visits",
                            "type": {
                                "type": "array",
                                "items": {
                                    "type": "record",
                                    "name": "Visit",
                                    "fields": [
                                        {
                                            "name": "at",
                                            "type": {"type": "long", "logicalType": "timestamp-micros"},
                                        },
                                        {"name": "color", "type": "Color"},
                                    ],
                                },
                            },
                        },
                    ],
                },
            ],
        },
    ],
}

UTC = dt.timezone.utc


def everything_record(i: int, rng: random.Random) -> dict[str, Any]:
    """Record ``i``; every nullable field is null in some records."""
    base = dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(seconds=rng.randrange(10**7))
    nulls = i % 5 == 0
    return {
        "id": i,
        "flag": rng.random() < 0.5,
        "small": rng.randrange(-(2**31), 2**31),
        "ratio": float(rng.randrange(1000)) / 4,  # exactly representable in float32
        "score": None if nulls else rng.random() * 100,
        "name": f"name-{i}-é",
        "note": None if nulls else "x" * rng.randrange(0, 20),
        "blob": None if nulls else rng.randbytes(rng.randrange(0, 32)),
        "digest": rng.randbytes(16),
        "color": rng.choice(["RED", "GREEN", "BLUE"]),
        "price": Decimal(rng.randrange(-(10**11), 10**11)).scaleb(-2),
        "big": None if nulls else Decimal(rng.randrange(-(10**29), 10**29)).scaleb(-5),
        "day": dt.date(2020, 1, 1) + dt.timedelta(days=rng.randrange(2000)),
        "at_ms": base.replace(microsecond=rng.randrange(1000) * 1000),
        "at_us": None if nulls else base + dt.timedelta(microseconds=rng.randrange(10**6)),
        "local": base.replace(tzinfo=None) + dt.timedelta(microseconds=7),
        # times of day are the Avro ints (ms / us since midnight), as they are read back
        "tod_ms": rng.randrange(86_400_000),
        "tod_us": rng.randrange(86_400_000_000),
        "uid": str(uuid.UUID(int=rng.getrandbits(128))),
        "tags": [f"t{j}" for j in range(rng.randrange(0, 4))],
        "attrs": {f"k{j}": (None if j == 1 else rng.randrange(10**12)) for j in range(rng.randrange(0, 4))},
        "place": None
        if nulls
        else {
            "lat": rng.uniform(-90, 90),
            "lon": rng.uniform(-180, 180),
            "label": None if i % 3 == 0 else f"p{i}",
            "visits": [
                {"at": base + dt.timedelta(minutes=j), "color": rng.choice(["RED", "BLUE"])}
                for j in range(rng.randrange(0, 3))
            ],
        },
    }


def everything_records(n: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [everything_record(i, rng) for i in range(n)]
