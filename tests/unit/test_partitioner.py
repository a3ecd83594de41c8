from __future__ import annotations

import random
import zlib

import pyarrow as pa
import pytest

from parka.partitioner import PARTITIONERS, STICKY, fnv1a, murmur2, partition_for_key, partitions_for_keys

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


# librdkafka's own unit test of rd_fnv1a (values from Go's hash/fnv, absolute value taken).
FNV1A_VECTORS = {
    b"kafka": 0xD33C4E1,
    b"giberish123456789": 0x77A58295,
    b"1234": 0x23BDD03,
    b"234": 0x2DEA3CD2,
    b"34": 0x740FA83E,
    b"4": 0x310CA263,
    b"PreAmbleWillBeRemoved,ThePrePartThatIs": 0x65CBD69C,
    b"reAmbleWillBeRemoved,ThePrePartThatIs": 0x6E49C79A,
    b"eAmbleWillBeRemoved,ThePrePartThatIs": 0x69EED356,
    b"AmbleWillBeRemoved,ThePrePartThatIs": 0x6ABCC023,
    b"": 0x7EE3623B,
}


@pytest.mark.parametrize(("key", "expected"), FNV1A_VECTORS.items())
def test_fnv1a_matches_librdkafka(key: bytes, expected: int) -> None:
    assert fnv1a(key) == expected


@pytest.mark.parametrize("partitioner", PARTITIONERS)
def test_vectorised_equals_scalar(partitioner: str) -> None:
    rng = random.Random(1)
    keys: list[bytes | None] = [rng.randbytes(rng.randrange(0, 50)) for _ in range(3000)]
    keys[::7] = [None] * len(keys[::7])
    keys[3::11] = [b""] * len(keys[3::11])
    vec = partitions_for_keys(partitioner, pa.array(keys, pa.binary()), 11)
    assert list(vec) == [partition_for_key(partitioner, k, 11) for k in keys]


def test_consistent_is_crc32() -> None:
    assert partition_for_key("consistent", b"hello", 7) == zlib.crc32(b"hello") % 7


@pytest.mark.parametrize("partitioner", PARTITIONERS)
def test_a_null_key_is_sticky_under_every_partitioner(partitioner: str) -> None:
    assert partition_for_key(partitioner, None, 5) == STICKY


def test_the_empty_key_is_sticky_only_under_consistent_random() -> None:
    assert partition_for_key("consistent_random", b"", 5) == STICKY
    assert partition_for_key("consistent", b"", 5) == 0  # crc32 of nothing is 0
    assert partition_for_key("murmur2_random", b"", 5) == (murmur2(b"") & 0x7FFFFFFF) % 5
    assert partition_for_key("fnv1a_random", b"", 5) == 0x7EE3623B % 5


def test_random_never_hashes() -> None:
    assert list(partitions_for_keys("random", pa.array([b"a", b"b"]), 3)) == [STICKY, STICKY]


def test_unknown_partitioner_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown partitioner"):
        partition_for_key("murmur3", b"a", 3)
