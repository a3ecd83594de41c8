"""parka.collector.gc_paused: the one pause of Python's cyclic garbage collector."""

from __future__ import annotations

import gc

import pytest

from parka.collector import gc_paused


def test_the_collector_is_held_off_until_the_last_pause_ends_and_a_disabled_one_stays_off() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():  # a second writer thread's pause
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()  # the program's own choice
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_collector_runs_again_after_a_block_that_raised() -> None:
    seen: list[bool] = []

    def fail_inside() -> None:
        with gc_paused():
            seen.append(gc.isenabled())
            raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        fail_inside()
    assert seen == [False] and gc.isenabled()
