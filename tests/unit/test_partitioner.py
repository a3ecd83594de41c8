from __future__ import annotations

import random
import zlib

import pyarrow as pa
import pytest

from parka.partitioner import murmur2, partition_for_key, partitions_for_keys

# Kafka's own vectors (clients/src/test/.../UtilsTest.testMurmur2), as signed Java ints.
JAVA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("key", "expected"), JAVA_VECTORS.items())
def test_murmur2_matches_the_java_client(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected & 0xFFFFFFFF


@pytest.mark.parametrize("partitioner", ["murmur2_random", "consistent_random"])
def test_vectorised_equals_scalar(partitioner: str) -> None:
    rng = random.Random(1)
    keys = [rng.randbytes(rng.randrange(0, 50)) for _ in range(3000)]
    vec = partitions_for_keys(partitioner, pa.array(keys, pa.binary()), 11)
    assert list(vec) == [partition_for_key(partitioner, k, 11) for k in keys]


def test_consistent_is_crc32() -> None:
    assert partition_for_key("consistent", b"hello", 7) == zlib.crc32(b"hello") % 7


def test_null_keys_are_refused_by_the_vectorised_form() -> None:
    with pytest.raises(ValueError, match="nulls"):
        partitions_for_keys("murmur2", pa.array([b"a", None]), 3)
