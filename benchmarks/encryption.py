"""What column encryption costs: encode+encrypt against encode, decode+decrypt against decode.

Same data, same segments (10,000 rows, zstd, parka's tuned encodings), three variants side by
side in every round: ``plain``, ``some`` (every other user column encrypted, as a table with a
few sensitive columns) and ``all`` (every user column), each with a plaintext footer (parka's
default). Encoding includes what a producer pays per segment with encryption: fresh data keys,
wrapped by a cached key-encryption key (double wrapping, the local KMS). Decoding uses the
decryption properties a reader keeps (``parka.encryption.decryption_properties``, keys cached).

A round encodes every segment of a data set in each variant, then decodes each; the variants'
order rotates from round to round. The figure is the median of the paired per-round ratios
(:func:`benchmarks.measure.paired_ratio`), CPU time of this process. Every decoded table is
checked against the data (row count and content fingerprint).
"""

from __future__ import annotations

import base64
import logging
import time
from typing import Any

import pyarrow as pa

from parka.encoding import choose_encodings
from parka.encryption import EncryptionSettings, parse_encryption_config, parse_kms_config
from parka.schema import schema_fingerprint
from parka.segment import decode_segment, encode_segment

from .checks import Checks, fingerprint
from .datasets import Dataset
from .measure import paired_ratio, settle, summarize

__all__ = ["VARIANTS", "run_encryption"]

log = logging.getLogger("parka.bench")

VARIANTS = ("plain", "some", "all")
SEGMENT_ROWS = 10_000
# Fixed benchmark keys: the local KMS is for tests and demos, and these protect nothing.
_KEYS = ",".join(f"{kid}:{base64.b64encode(bytes([n]) * 16).decode()}" for n, kid in enumerate(("kf", "kc")))


def _settings(columns: list[str]) -> EncryptionSettings:
    settings = parse_encryption_config(
        {
            "columnar.encryption.columns": "kc:" + ",".join(columns),
            "columnar.encryption.footer.key": "kf",
            "columnar.encryption.kms.keys": _KEYS,
        }
    )
    assert settings is not None
    return settings


def _cpu(fn: Any) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def run_dataset(ds: Dataset, rounds: int, checks: Checks) -> dict[str, Any]:
    table = ds.table
    names = table.column_names
    variants: dict[str, EncryptionSettings | None] = {
        "plain": None,
        "some": _settings(names[::2]),
        "all": _settings(names),
    }
    kms = parse_kms_config({"columnar.encryption.kms.keys": _KEYS})
    fp = schema_fingerprint(table.schema)
    slices = [table.slice(i, SEGMENT_ROWS) for i in range(0, table.num_rows, SEGMENT_ROWS)]
    layouts = [choose_encodings(s) for s in slices]  # judged once, as the producer's cache does
    expected = fingerprint(table, table.schema)

    def encode(variant: str) -> list[bytes]:
        return [
            encode_segment(s, codec="zstd", fingerprint=fp, layout=lay, encryption=variants[variant]).value
            for s, lay in zip(slices, layouts, strict=True)
        ]

    def decode(values: list[bytes]) -> pa.Table:
        return pa.concat_tables([decode_segment(v, kms=kms) for v in values])

    encode_s: dict[str, list[float]] = {v: [] for v in VARIANTS}
    decode_s: dict[str, list[float]] = {v: [] for v in VARIANTS}
    sizes: dict[str, int] = {}
    for r in range(rounds + 1):  # round 0 warms up (imports, key caches) and is not kept
        order = VARIANTS[r % 3 :] + VARIANTS[: r % 3]
        encoded: dict[str, list[bytes]] = {}
        for v in order:
            out: list[list[bytes]] = []
            cpu = _cpu(lambda v=v, out=out: out.append(encode(v)))
            encoded[v] = out[0]
            if r:
                encode_s[v].append(cpu)
        for v in order:
            got: list[pa.Table] = []
            cpu = _cpu(lambda values=encoded[v], got=got: got.append(decode(values)))
            if r:
                decode_s[v].append(cpu)
            if r in (0, rounds):
                checks.expect(
                    f"encryption {ds.name} {v} round {r}",
                    rows=got[0].num_rows,
                    expected_rows=table.num_rows,
                    got=fingerprint(got[0], table.schema),
                    expected=expected,
                )
        sizes = {v: sum(len(b) for b in encoded[v]) for v in VARIANTS}
    rows = table.num_rows
    return {
        "dataset": ds.name,
        "rows": rows,
        "segments": len(slices),
        "columns": len(names),
        "encrypted_columns": {"plain": 0, "some": len(names[::2]), "all": len(names)},
        "bytes_per_row": {v: sizes[v] / rows for v in VARIANTS},
        "encode_cpu_us_per_row": {
            v: summarize([s * 1e6 / rows for s in encode_s[v]], "encode_cpu_us_per_row") for v in VARIANTS
        },
        "decode_cpu_us_per_row": {
            v: summarize([s * 1e6 / rows for s in decode_s[v]], "decode_cpu_us_per_row") for v in VARIANTS
        },
        "encode_ratio": {v: paired_ratio(encode_s[v], encode_s["plain"]) for v in ("some", "all")},
        "decode_ratio": {v: paired_ratio(decode_s[v], decode_s["plain"]) for v in ("some", "all")},
    }


def run_encryption(sets: list[Dataset], rounds: int, checks: Checks) -> dict[str, Any]:
    """The encryption overhead on each data set (see the module docstring)."""
    settle()
    out = []
    for ds in sets:
        log.info("encryption: %s, %d rows, %d rounds", ds.name, ds.rows, rounds)
        out.append(run_dataset(ds, rounds, checks))
    return {"segment_rows": SEGMENT_ROWS, "codec": "zstd", "rounds": rounds, "variants": VARIANTS, "cells": out}
