"""Background compaction's policy (which small files are picked, how often a row can be
rewritten), and the policy through the Delta and Iceberg compactions on real tables in
temporary folders: only the picked files rewritten, generations, cancellation, and the orphan
cleanup of a crashed compaction's files."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, QueryBuilder
from parka.lake import CompactedName, CompactionPolicy, FileName, IcebergEngine, compact_iceberg, compact_table
from parka.lake._committer import Committer
from parka.lake._compaction import generation_of, input_key, small_row_groups
from parka.lake._rowgroups import Chunks, write_row_groups
from parka.lake.delta import RsEngine
from parka.lake.delta._rs import commit_row_deletions

from ._tables import committer, landed

MiB = 1024 * 1024


@dataclass(frozen=True)
class F:
    """A file as the planner sees it: path, size, table partition; ``rows``: the ids it holds."""

    path: str
    size: int
    partition: str = "d1"
    rows: tuple[int, ...] = ()


def ingested(partition: int, offset: int, size: int = 1000, day: str = "d1", topic: str = "t") -> F:
    return F(str(FileName.new(topic, partition, offset)), size, day, (partition * 1_000_000 + offset,))


def plan(policy: CompactionPolicy, files: list[F], target_size: int = MiB) -> list[tuple[list[str], int]]:
    bins = policy.plan(files, target_size=target_size, path=lambda f: f.path, size=lambda f: f.size,
                       partition=lambda f: f.partition)  # fmt: skip
    return [([f.path for f in b.files], b.generation) for b in bins]


def test_files_are_compacted_once_a_partition_holds_min_files_small_ones_of_a_generation() -> None:
    policy = CompactionPolicy(min_files=4)
    files = [ingested(0, o) for o in range(3)]
    assert plan(policy, files) == []  # three: below the budget
    files.append(ingested(1, 0))
    assert plan(policy, files) == [([f.path for f in files], 1)]
    # per table partition: three in d1 and three in d2 are no four anywhere
    split = [ingested(0, o, day=f"d{o % 2}") for o in range(6)]
    assert plan(policy, split) == []


def test_small_files_that_add_up_to_the_target_size_are_compacted_before_min_files() -> None:
    policy = CompactionPolicy(min_files=16)
    files = [ingested(0, o, size=400_000) for o in range(3)]  # 1.2 MB > 1 MiB
    [(first, generation)] = plan(policy, files)
    assert first == [files[0].path, files[1].path] and generation == 1  # a bin of at most the target
    # the rest waits: one file is no bin


def test_large_foreign_and_fully_rewritten_files_are_never_picked() -> None:
    policy = CompactionPolicy(min_files=2, max_rewrites=1)
    large = ingested(0, 0, size=MiB)  # at the target size
    foreign = F("part-00000-1b2c-c000.snappy.parquet", 10)  # another writer's, or parka optimize's
    compacted = F(str(CompactedName.new(1, "x.parquet")), 10)  # generation 1 = max_rewrites
    other_topic = F(str(FileName.new("other", 0, 5)), 10)
    small = ingested(0, 1)
    scoped = policy.scoped("t", {0})  # a worker of topic t: the other topic's files are its workers'
    assert plan(scoped, [large, foreign, compacted, compacted, other_topic, small]) == []
    assert generation_of(foreign.path) is None and generation_of(compacted.path) == 1 and generation_of(small.path) == 0
    assert plan(policy, [other_topic, small]) == [([other_topic.path, small.path], 1)]  # unscoped: any topic's


def test_a_worker_compacts_its_own_partitions_files_and_partition_0s_holder_the_compacted_ones() -> None:
    policy = CompactionPolicy(min_files=2, max_rewrites=2)
    mine = [ingested(1, o) for o in range(2)]
    theirs = [ingested(2, o) for o in range(2)]
    compacted = [F(str(CompactedName.new(1, f"x{i}.parquet")), 10) for i in range(2)]
    files = mine + theirs + compacted
    assert plan(policy.scoped("t", {1}), files) == [([f.path for f in mine], 1)]
    assert plan(policy.scoped("t", {0, 1}), files) == [([f.path for f in mine], 1), ([f.path for f in compacted], 2)]
    assert plan(policy.scoped("t", set()), files) == []


@pytest.mark.parametrize("max_rewrites", [1, 2, 3])
def test_no_row_is_rewritten_more_than_max_rewrites_times(max_rewrites: int) -> None:
    """A simulated ingestion: a small file per commit, the policy applied after each, each bin
    rewritten into one file holding its inputs' rows. Every row ends rewritten at most
    ``max_rewrites`` times, and the small files of each generation stay within the budget."""
    policy = CompactionPolicy(min_files=4, max_rewrites=max_rewrites)
    live: list[F] = []
    rewrites: dict[int, int] = {}
    for offset in range(600):
        live.append(ingested(0, offset, size=1000))
        while bins := policy.plan(live, target_size=MiB, path=lambda f: f.path, size=lambda f: f.size,
                                  partition=lambda f: f.partition):  # fmt: skip
            for b in bins:  # the compactor looks again after a compaction that did something
                rows = tuple(r for f in b.files for r in f.rows)
                for r in rows:
                    rewrites[r] = rewrites.get(r, 0) + 1
                new = F(b.new_name(lambda f: f.path), sum(f.size for f in b.files), "d1", rows)
                live = [f for f in live if f not in b.files] + [new]
        per_generation: dict[int | None, int] = {}
        for f in live:
            g = generation_of(f.path)
            per_generation[g] = per_generation.get(g, 0) + 1
        assert all(n < 4 for g, n in per_generation.items() if g is not None and g < max_rewrites)
    assert max(rewrites.values()) == max_rewrites  # reached, never passed
    assert sorted(r for f in live for r in f.rows) == list(range(600))  # every row once
    written = 600 * 1000 + sum(rewrites.values()) * 1000
    assert written <= (1 + max_rewrites) * 600 * 1000


def simulate(policy: CompactionPolicy, commits: int, size: int, target: int) -> tuple[int, int, list[int]]:
    """``commits`` files of ``size`` bytes into one table partition, ``policy`` applied until
    nothing is due (as the compaction thread does after each commit: here after every
    ``min_files`` commits, the same plans, since that many small files add up to far less than
    the target); returns the bytes ingested, the bytes written in all and the live file count
    after each of those rounds."""
    live: list[F] = []
    written = 0
    counts = []
    for offset in range(commits):
        live.append(ingested(offset % 4, offset, size=size))
        written += size
        if (offset + 1) % policy.min_files:
            continue
        while bins := policy.plan(live, target_size=target, path=lambda f: f.path, size=lambda f: f.size,
                                  partition=lambda f: f.partition):  # fmt: skip
            for b in bins:
                new = F(b.new_name(lambda f: f.path), sum(f.size for f in b.files))
                written += new.size
                gone = set(b.files)
                live = [f for f in live if f not in gone] + [new]
        counts.append(len(live))
    return commits * size, written, counts


def test_tiers_keep_the_live_files_bounded_by_the_bytes_over_the_target_within_4x_the_writes() -> None:
    """Nine hours of one commit a second (32,768 files of 40 KiB, 1.25 GiB) under the default
    tiers: the live files stay about the bytes over the 128 MiB target plus under 16 per lower
    generation, and every byte is written at most 4 times. With one rewrite they grow with the
    table, one per 16 commits."""
    target, size, commits = 128 * MiB, 40 * 1024, 32_768
    ingested_bytes, written, counts = simulate(CompactionPolicy(), commits, size, target)
    for rounds, count in enumerate(counts, 1):
        in_table = rounds * 16 * size
        assert count <= in_table // (target // 2) + 3 * 16, (rounds, count)  # files of over half the target
    assert counts[-1] <= 10 + 3 * 16 and written <= 4 * ingested_bytes
    # the first 4,096 commits (1 h 8 min) with one rewrite: compacted files of 16 commits each (640
    # KiB) gather until 204 of them fill the target, then become one; every byte written 3 times at most
    once_bytes, once_written, once = simulate(CompactionPolicy(max_rewrites=1), 4096, size, target)
    per_target = target // (16 * size)
    assert max(once) <= per_target + 16 and once[-1] < per_target and once_written <= 3 * once_bytes
    assert counts[len(once) - 1] < 4 * 16


def test_files_too_small_for_the_tiers_are_merged_once_more_into_files_of_the_target_size() -> None:
    """Segments so small (1,000 bytes; a fan-in of 4, a 1 MiB target) that three tiers end at
    64,000 bytes: the last tier's files are merged once more, only into files of about the
    target, so the live files stay about the bytes over the target plus a bounded tail (under 4
    per lower generation, and under a target's worth of the last tier), every row written five
    times at most. Before, the last tier's files stayed, one per 64 segments, and grew with the
    table."""
    policy = CompactionPolicy(min_files=4)
    target, size, commits = MiB, 1000, 20_000
    ingested_bytes, written, counts = simulate(policy, commits, size, target)
    last_tier = target // (4**3 * size)  # 16 files of 64,000 bytes make a full bin
    for rounds, count in enumerate(counts, 1):
        full = rounds * 4 * size // target
        assert count <= full + 3 * 3 + last_tier, (rounds, count)
    assert counts[-1] <= ingested_bytes // target + 3 * 3 + last_tier
    assert written <= 5 * ingested_bytes


def test_a_policy_refuses_a_budget_that_would_compact_single_files() -> None:
    with pytest.raises(ValueError, match="min_files"):
        CompactionPolicy(min_files=1)
    with pytest.raises(ValueError, match="max_rewrites"):
        CompactionPolicy(max_rewrites=0)


def test_compacted_names_parse_and_carry_their_first_inputs_key() -> None:
    name = CompactedName.new(2, "day=d1/t-p0-o00000000000000000001-0123456789ab.parquet")
    assert CompactedName.parse(f"day=d1/{name}") == name
    assert CompactedName.parse(f".{name}.{'a' * 32}.tmp", temporary=True) == name
    assert CompactedName.parse(f".{name}.{'a' * 32}.tmp") is None
    assert name.input == input_key("t-p0-o00000000000000000001-0123456789ab.parquet")
    assert FileName.parse(str(name)) is None  # never taken for an ingestion file
    assert CompactedName.parse("compacted-20261126T101010-0123456789ab.parquet") is None  # parka optimize's


# -- on tables ---------------------------------------------------------------------------------


def files(path: Path) -> list[str]:
    return sorted(uri.rsplit("/", 1)[-1] for uri in DeltaTable(str(path)).file_uris())


def ids(path: Path) -> list[int]:
    return sorted(DeltaTable(str(path)).to_pyarrow_table(columns=["id"])["id"].to_pylist())


def test_delta_compaction_by_policy_rewrites_the_small_files_once(tmp_path: Path) -> None:
    path = tmp_path / "t"
    c = committer(path, checkpoint_interval=0)
    for offset in range(5):
        c.commit([landed(c, offset % 2, offset, [offset * 10 + i for i in range(10)])])
    policy = CompactionPolicy(min_files=4, max_rewrites=1).scoped("t", {0, 1})
    result = compact_table(str(path), policy, target_size=MiB)
    assert (result.files_removed, result.files_added) == (5, 1)
    [live] = files(path)
    assert generation_of(live) == 1
    assert ids(path) == list(range(50))
    for offset in range(5, 9):  # four more small files: with the compacted one, no file is rewritten twice
        c.commit([landed(c, 0, offset, [offset * 10 + i for i in range(10)])])
    again = compact_table(str(path), policy, target_size=MiB)
    assert (again.files_removed, again.files_added) == (4, 1)
    assert live in files(path)
    assert ids(path) == list(range(90))
    assert DeltaTable(str(path)).transaction_version("app-0") == 8


def test_compacted_files_are_compacted_again_into_a_second_tier_on_delta_and_iceberg(tmp_path: Path) -> None:
    policy = CompactionPolicy(min_files=2).scoped("t", {0})
    delta = committer(tmp_path / "d", checkpoint_interval=0)
    iceberg_engine = IcebergEngine("test", {"warehouse": str(tmp_path / "warehouse")})
    from parka.lake import Committer

    iceberg = Committer(iceberg_engine, table_uri="db.t", topic="t", app_id="app")
    for c, compact in (
        (delta, lambda: compact_table(str(tmp_path / "d"), policy, target_size=MiB)),
        (iceberg, lambda: compact_iceberg(iceberg_engine, "db.t", policy, target_size=MiB)),
    ):
        for first in (0, 2):  # two small files, compacted into one of generation 1: twice
            for offset in (first, first + 1):
                c.commit([landed(c, 0, offset, [offset])])
            assert compact().files_added == 1
        second = compact()  # the two of generation 1 into one of generation 2
        assert (second.files_removed, second.files_added) == (2, 1)
        assert c.table is not None
        c.refresh()
        assert [generation_of(p) for p in c.table.referenced_files()] == [2]
    assert ids(tmp_path / "d") == [0, 1, 2, 3]
    assert sorted(iceberg_engine.catalog.load_table("db.t").scan().to_arrow()["id"].to_pylist()) == [0, 1, 2, 3]


def test_a_cancelled_compaction_commits_nothing_and_leaves_no_file(tmp_path: Path) -> None:
    path = tmp_path / "t"
    c = committer(path, checkpoint_interval=0)
    for offset in range(4):
        c.commit([landed(c, 0, offset, [offset])])
    before = set(files(path))
    cancel = threading.Event()
    cancel.set()
    result = compact_table(str(path), CompactionPolicy(min_files=2), cancel=cancel)
    assert result.files_removed == 0 and DeltaTable(str(path)).version() == result.version_before
    assert {p.name for p in path.glob("*.parquet")} == before


def test_the_orphan_cleanup_deletes_a_crashed_compactions_file_once_its_input_is_gone(tmp_path: Path) -> None:
    path = tmp_path / "t"
    c = committer(path, checkpoint_interval=0)
    for offset in range(4):
        c.commit([landed(c, 0, offset, [offset])])
    first = sorted(files(path))[0]
    crashed = CompactedName.new(1, first)  # a compaction of ``first`` killed before its commit
    (path / str(crashed)).write_bytes(b"PAR1 half a file")
    (path / f".{CompactedName.new(1, first)}.{'b' * 32}.tmp").write_bytes(b"PAR1")
    assert c.remove_orphans() == 0  # its input is live: a compaction may still commit such a file
    assert (path / str(crashed)).exists()
    compact_table(str(path), CompactionPolicy(min_files=2))  # another compaction lands
    assert c.remove_orphans() == 2  # now nobody can commit them
    assert not (path / str(crashed)).exists() and not list(path.glob(".*.tmp"))
    assert ids(path) == [0, 1, 2, 3]
    # the committed compaction's own file, and its removed inputs (the log names them), stay
    assert len(list(path.glob("t-p0-*.parquet"))) == 4 and len(list(path.glob("compacted-g1-*.parquet"))) == 1


def test_iceberg_compaction_by_policy_names_generations_and_leaves_compacted_files(tmp_path: Path) -> None:
    from parka.lake import Committer

    e = IcebergEngine("test", {"warehouse": str(tmp_path / "warehouse")})
    c = Committer(e, table_uri="db.t", topic="t", app_id="app")
    for offset in range(3):
        c.commit([landed(c, 0, offset, [offset])])
    policy = CompactionPolicy(min_files=3).scoped("t", {0})
    result = compact_iceberg(e, "db.t", policy, target_size=MiB)
    assert (result.files_removed, result.files_added) == (3, 1)
    c.commit([landed(c, 0, 3, [3])])
    c.commit([landed(c, 0, 4, [4])])  # two small files and the compacted one: nothing due
    assert compact_iceberg(e, "db.t", policy, target_size=MiB).files_removed == 0
    table = e.open("db.t")
    assert table is not None
    assert sorted(generation_of(p) for p in table.referenced_files()) == [0, 0, 1]
    assert sorted(e.catalog.load_table("db.t").scan().to_arrow()["id"].to_pylist()) == [0, 1, 2, 3, 4]


@dataclass
class Counts:
    """What a compactor counts into (the daemon's stats)."""

    commits: int = 0
    optimizations: int = 0
    compactions: int = 0
    files_compacted: int = 0
    compaction_failures: int = 0


def test_background_compaction_stops_for_the_run_once_it_meets_encrypted_files(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The compactor holds no keys: a table whose files are encrypted is said once, and not read
    again at every commit (a stand-in for the table: what the thread does with the answer)."""
    from parka.consumer._compactor import Compactor
    from parka.lake import OptimizeResult

    calls: list[int] = []

    def compact(policy: object, cancel: object) -> OptimizeResult:
        calls.append(1)
        return OptimizeResult("t", 3, 3, 0, 0, 0, None, 1, encrypted_files=4)

    compactor = Compactor(compact, CompactionPolicy(min_files=2), topic="t", counts=Counts())
    compactor.assign({0})
    with caplog.at_level("WARNING", logger="parka.ingest"):
        compactor.poke()
        compactor._thread.join(30)
        assert not compactor.alive
        for _ in range(3):
            compactor.poke()
        compactor.close()
    assert len(calls) == 1
    stops = [r.getMessage() for r in caplog.records if "background compaction stops" in r.getMessage()]
    assert stops == [stops[0]] and "4 file(s) of the table are encrypted" in stops[0]


def test_a_file_whose_deleted_rows_pass_the_fraction_is_rewritten_alone_without_them() -> None:
    policy = CompactionPolicy(min_files=16, max_rewrites=1, purge_fraction=0.25)
    files = [ingested(0, 0), ingested(0, 1), F(str(CompactedName.new(1, "x.parquet")), 10), F("part-0.parquet", 10)]
    fractions = {files[0].path: 0.3, files[1].path: 0.2, files[2].path: 0.5, files[3].path: 0.9}
    bins = policy.plan(files, target_size=MiB, path=lambda f: f.path, size=lambda f: f.size,
                       partition=lambda f: f.partition, deleted=lambda f: fractions[f.path])  # fmt: skip
    # the ingested file past the fraction, and the compacted one (past max_rewrites: deletes, not
    # tiers, cause this rewrite); not the one below it, nor a file parka did not name
    assert [([f.path for f in b.files], b.generation) for b in bins] == [([files[0].path], 1), ([files[2].path], 2)]
    scoped = policy.scoped("t", {1})  # partition 0's files are another worker's, compacted ones partition 0's holder's
    assert scoped.plan(files, target_size=MiB, path=lambda f: f.path, size=lambda f: f.size,
                       partition=lambda f: f.partition, deleted=lambda f: 1.0) == []  # fmt: skip
    with pytest.raises(ValueError, match="purge_fraction"):
        CompactionPolicy(purge_fraction=0)


def test_delta_compaction_purges_a_file_with_many_deleted_rows(tmp_path: Path) -> None:
    path = tmp_path / "t"
    c = Committer(
        RsEngine(created_properties={"delta.enableDeletionVectors": "true"}),
        table_uri=str(path), topic="t", app_id="app", checkpoint_interval=0,
    )  # fmt: skip
    for offset in range(2):
        c.commit([landed(c, 0, offset, [offset * 10 + i for i in range(10)])])
    first, second = sorted(files(path))  # offsets 0 and 1: ids 0-9 and 10-19
    commit_row_deletions(DeltaTable(str(path)), {first: [0, 1, 2], second: [0]})  # 30% and 10% deleted
    result = compact_table(str(path), CompactionPolicy(min_files=16).scoped("t", {0}), target_size=MiB)
    assert (result.files_removed, result.files_added) == (1, 1)
    assert second in files(path) and first not in files(path)
    reader = QueryBuilder().register("t", DeltaTable(str(path))).execute("select id from t")
    assert sorted(pa.table(reader.read_all()).column("id").to_pylist()) == [*range(3, 10), *range(11, 20)]


def test_an_ingestion_file_of_half_the_target_or_more_with_small_row_groups_is_rewritten_alone() -> None:
    """The row-group budget: such a file would share a bin with no file of its size, so the
    tiers leave it with its producers' row groups; it is rewritten alone, once (generation 1). A
    smaller one waits for the tiers, and a compacted or foreign file is never judged."""
    policy = CompactionPolicy(min_files=16)
    # a table partition each: no bin of the tiers
    big, half, small = ingested(0, 0, size=600), ingested(0, 1, size=500, day="d2"), ingested(0, 2, size=499, day="d3")
    compacted, foreign = F(str(CompactedName.new(1, "x.parquet")), 700), F("part-0.parquet", 700)
    files = [big, half, small, compacted, foreign]
    fragmented = {big.path, half.path, small.path, compacted.path, foreign.path}
    judged: list[str] = []

    def small_row_groups(f: F) -> bool:
        judged.append(f.path)
        return f.path in fragmented

    bins = policy.plan(files, target_size=1000, path=lambda f: f.path, size=lambda f: f.size,
                       partition=lambda f: f.partition, small_row_groups=small_row_groups)  # fmt: skip
    assert [([f.path for f in b.files], b.generation) for b in bins] == [([big.path], 1), ([half.path], 1)]
    assert sorted(judged) == sorted([big.path, half.path])  # nothing else read
    fragmented = set()
    assert policy.plan(files, target_size=1000, path=lambda f: f.path, size=lambda f: f.size,
                       partition=lambda f: f.partition, small_row_groups=small_row_groups) == []  # fmt: skip
    # another worker's partition: not this worker's to judge
    other = policy.scoped("t", {1})
    assert other.plan(files, target_size=1000, path=lambda f: f.path, size=lambda f: f.size,
                      partition=lambda f: f.partition, small_row_groups=lambda f: True) == []  # fmt: skip
    assert small_row_groups_of(rows=10, groups=2) and not small_row_groups_of(rows=10, groups=1)
    assert not small_row_groups_of(rows=2 * 131_072, groups=2)  # an eighth of a million rows each


def small_row_groups_of(*, rows: int, groups: int) -> bool:
    from parka.lake._compaction import DEFAULT_ROW_GROUP_ROWS, small_row_groups

    return small_row_groups(rows, groups, DEFAULT_ROW_GROUP_ROWS)


@pytest.mark.parametrize("table_format", ["delta", "iceberg"])
def test_background_compaction_rewrites_a_stitched_file_alone_into_large_row_groups(
    tmp_path: Path, table_format: str
) -> None:
    import pyarrow.parquet as pq

    from ._tables import stitched

    if table_format == "delta":
        c = committer(tmp_path / "t", checkpoint_interval=0)
    else:
        c = Committer(IcebergEngine("test", {"warehouse": str(tmp_path / "w")}), table_uri="db.t", topic="t",
                      app_id="app")  # fmt: skip
    segments = stitched(c, [(0, offset, [offset * 10 + i for i in range(10)]) for offset in range(12)])
    c.commit(segments)
    assert len({s.files[0].path for s in segments}) == 1
    f = segments[0].files[0]  # one file of twelve row groups
    root = Path(c.root.removeprefix("file://"))
    assert pq.read_metadata(root / f.path).num_row_groups == 12
    policy = CompactionPolicy(min_files=16).scoped("t", {0})

    def compact(target_size: int) -> int:
        if table_format == "delta":
            return compact_table(c.root, policy, target_size=target_size).files_removed
        assert isinstance(c.engine, IcebergEngine)
        return compact_iceberg(c.engine, "db.t", policy, target_size=target_size).files_removed

    assert compact(3 * f.size) == 0  # a third of the target: the tiers will take it
    assert compact(2 * f.size) == 1
    table = c.engine.open(c.table_uri)
    assert table is not None
    [new] = table.referenced_files()
    assert generation_of(new) == 1 and pq.read_metadata(root / new).num_row_groups == 1
    assert compact(2 * f.size) == 0  # once
    ids = pa.table(pq.read_table(root / new)).column("id").to_pylist()
    assert sorted(ids) == list(range(120))


def test_a_compactions_output_has_row_groups_of_exactly_the_size_across_inputs() -> None:
    """:func:`write_row_groups`: inputs of any sizes, a row group spanning several of them, one
    cast to the output's schema; the rows in the inputs' order, each input's count returned, and
    every row group but the last of exactly the size, so the file is never judged to have small
    row groups."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("s", pa.string())])
    sizes = [3, 10, 0, 7, 25, 1]
    tables, first = [], 0
    for n in sizes:
        tables.append(pa.table({"id": pa.array(range(first, first + n), pa.int64()), "s": [str(i) for i in range(n)]}))
        first += n
    tables[1] = tables[1].cast(pa.schema([pa.field("id", pa.int32()), pa.field("s", pa.large_string())]))
    sink = Chunks()
    written = write_row_groups(iter(tables), schema, 8, sink, compression="zstd")
    assert written.counts == sizes
    data = b"".join(sink.parts)
    assert len(data) == sink.tell() and written.metadata.num_rows == sum(sizes)
    f = pq.ParquetFile(pa.BufferReader(data))
    assert f.metadata.num_row_groups == written.metadata.num_row_groups
    assert f.schema_arrow == schema
    assert [f.metadata.row_group(i).num_rows for i in range(f.num_row_groups)] == [8, 8, 8, 8, 8, 6]
    assert f.read().column("id").to_pylist() == list(range(sum(sizes)))
    assert not small_row_groups(f.metadata.num_rows, f.num_row_groups, 8)


def test_the_compactors_of_one_process_take_turns_and_a_waiting_one_stops_when_closed() -> None:
    """A daemon of many topics has a compactor per topic: at most half the cores' worth of
    compactions run at once (each holds its bin in memory), and a compactor waiting for its
    turn ends at once when its lane closes. Stand-ins for the tables: the compaction itself is
    a function that records which compactor's thread ran it and how many ran beside it."""
    from parka.consumer import _compactor
    from parka.consumer._compactor import Compactor
    from parka.lake import OptimizeResult

    running, most, entered = 0, 0, threading.Semaphore(0)
    ran: set[threading.Thread] = set()
    lock, release = threading.Lock(), threading.Event()

    def compact(policy: object, cancel: object) -> OptimizeResult:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
            ran.add(threading.current_thread())
        entered.release()
        release.wait(30)
        with lock:
            running -= 1
        return OptimizeResult("t", 0, 0, 0, 0, 0, None, 1)

    turns = _compactor._turns()
    compactors = [
        Compactor(compact, CompactionPolicy(min_files=2), topic=f"t{i}", counts=Counts()) for i in range(turns + 2)
    ]
    for c in compactors:
        c.assign({0})
        c.poke()
    for _ in range(turns):
        assert entered.acquire(timeout=30)  # as many as there are turns are in, holding them
    with lock:
        assert running == turns, running
        waiting = [c for c in compactors if c._thread not in ran]
    assert len(waiting) == 2
    waiting[0].close()  # while it waits for a turn: it ends without compacting
    assert not waiting[0].alive
    release.set()
    for c in compactors:
        c.close(drain=True)
    assert most == turns
    assert waiting[0]._thread not in ran and waiting[1]._thread in ran  # the other got its turn
