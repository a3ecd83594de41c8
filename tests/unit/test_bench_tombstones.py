"""``python -m benchmarks.tombstones`` (what tombstones cost a Delta table's checkpoints and
readers) on small counts: a checkpoint keeps the tombstones the table's retention has not
expired, and leaves the expired ones out."""

from __future__ import annotations

import re

import pytest

from benchmarks.tombstones import main


def test_a_checkpoint_keeps_every_tombstone_younger_than_the_retention(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--counts", "0,40"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert re.match(r"\s+0 tombstones: checkpoint [\d.]+ s, [\d.]+ CPU-s, [\d.]+ MB, 0 tombstones in it;", lines[0])
    assert re.match(r"\s+40 tombstones: .*, 40 tombstones in it; a reader opens the table in [\d.]+ ms", lines[1])


def test_expired_tombstones_are_left_out_of_the_checkpoint(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--counts", "40", "--age-hours", "2", "--retention", "interval 1 hours"]) == 0
    assert ", 0 tombstones in it;" in capsys.readouterr().out
    assert main(["--counts", "40", "--age-hours", "2", "--retention", "interval 3 hours"]) == 0
    assert ", 40 tombstones in it;" in capsys.readouterr().out
