"""parka ingest's per-partition bookkeeping (parka.consumer._positions), without a broker."""

from parka.consumer._positions import Positions


def test_lag_progress_and_the_end_follow_what_was_consumed_and_committed() -> None:
    pos = Positions()
    pos.assign(0, start=10, high=20, in_table=9)
    pos.assign(1, start=0, high=5, in_table=None)
    highs = {0: 25, 1: 5}
    assert pos.lag(highs.get) == {0: 15, 1: 5}
    assert pos.progress() == (0, 15)
    assert not pos.caught_up(lambda p: -1)
    pos.consumed.update({0: 19, 1: 2})
    assert pos.lag(highs.get) == {0: 5, 1: 2}
    assert pos.lag(highs.get, committed=True) == {0: 15, 1: 5}
    pos.in_table({0: 19})
    assert pos.lag(highs.get, committed=True) == {0: 5, 1: 5}
    assert pos.progress() == (13, 15)
    assert not pos.caught_up(lambda p: -1)
    assert pos.caught_up(lambda p: 5 if p == 1 else -1)  # the client's position says partition 1 is done
    assert pos.lag(lambda p: None) == {}  # no watermark in the client's cache: no number


def test_a_skip_and_a_revocation() -> None:
    pos = Positions()
    pos.assign(3, start=0, high=100, in_table=None)
    pos.skip_to(3, 40)  # another worker committed up to 39
    assert (pos.consumed[3], pos.committed[3], pos.start[3]) == (39, 39, 40)
    assert pos.progress() == (0, 60)
    pos.revoke(3)
    assert (pos.assigned, pos.consumed, pos.committed) == (set(), {}, {})
    assert not pos.caught_up(lambda p: 0)  # nothing assigned: not the end
