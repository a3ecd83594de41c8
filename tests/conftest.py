"""What every test gets: parka's loggers as they were before it; the static checks started beside
the tests when ``make test`` asks (:mod:`tests._checks`); and the run's servers, stopped once at
the very end (:mod:`tests.integration._servers`)."""

from __future__ import annotations

import importlib.util
import logging
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests import _checks
from tests.integration import _servers

_OWNER = pytest.StashKey[bool]()
SPARK_PREFIX = "tests/integration/spark/"
# Spark tests that start drivers of their own (``parka spark-ingest`` subprocesses, a standalone
# cluster) and never the session's JVM: they go to any worker, beside the session's tests
OWN_DRIVERS = ("tests/integration/spark/test_spark_faults.py", "tests/integration/spark/test_spark_cluster.py")


# The Spark session's tests all go to one worker, in one session (one JVM), among five workers
# (the Makefile's PYTEST_WORKERS), the others behind it (tests/integration/spark/conftest.py):
# with two sessions on two of three workers, each session's start and its compiler's
# warm-up came twice on a machine whose two cores the suite keeps busy (the two JVMs used 204
# CPU-s in a run, one running the same tests alone 143), and one session on four workers was
# 45-68 s faster in two paired runs (benchmarks/results/2026-11-30-suite-one-session/).


def scope_of(nodeid: str) -> str:
    """The unit of work a test belongs to: the tests of the Spark session (one JVM, on the
    worker that runs them), or the test alone."""
    if nodeid.startswith(SPARK_PREFIX) and not nodeid.startswith(OWN_DRIVERS):
        return "spark"
    return nodeid


if importlib.util.find_spec("xdist") is not None:

    def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
        """pytest-xdist's load scheduling by :func:`scope_of`: the tests of a Spark session go to
        one worker together (its JVM starts once there); every other test, the Spark tests with
        drivers of their own included, to whichever worker is free. (xdist's own
        ``--dist loadgroup`` marks no longer reach its scheduler under pytest 9.2.) Scopes are
        handed out largest first (the Spark session's), then in collection order, which puts the
        ``long`` tests first (``tests/integration/conftest.py``). The Spark tests wait at their
        start for the Spark jars' fetch, which ``make test`` starts in the background (a
        download of some 25 s on a fresh machine: ``tests/integration/spark/_jars.py``), while
        the workers start and the other workers' tests run."""
        from xdist.scheduler import LoadScopeScheduling

        class SparkTogether(LoadScopeScheduling):  # type: ignore[misc]
            def _split_scope(self, nodeid: str) -> str:
                return scope_of(nodeid)

            def _reschedule(self, node: Any) -> None:
                """xdist's, but a worker gets the next unit when only its running test is left
                (xdist's waits for 2: one test more queued behind a long one while another
                worker goes idle at the end). A worker holds back its last test until it gets
                the next one (it needs it for the teardown), so 1, not 0."""
                if node.shutting_down:
                    return
                if not self.workqueue:
                    node.shutdown()
                    return
                if self._pending_of(self.assigned_work[node]) > 1:
                    return
                self._assign_work_unit(node)

        return SparkTogether(config, log)


TIMELINE = os.environ.get("PARKA_TEST_TIMELINE")
if TIMELINE:

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
        """``PARKA_TEST_TIMELINE=FILE``: one JSON line per test (worker, start, end, the time its
        setup took), for ``scripts/test_timeline.py``: where a run's workers wait."""
        phases: dict[str, float] = {}
        item.stash[_PHASES] = phases
        start = time.time()
        yield
        _servers.timeline_event({"test": item.nodeid, "start": start, "end": time.time(), **phases})

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
        start = time.time()
        yield
        item.stash.get(_PHASES, {})["setup"] = time.time() - start


_PHASES = pytest.StashKey[dict[str, float]]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test of :data:`OWN_DRIVERS` may not use the session's JVM (it would start a second one on
    whichever worker runs it)."""
    for item in items:
        if item.nodeid.startswith(OWN_DRIVERS) and "spark" in getattr(item, "fixturenames", ()):
            raise pytest.UsageError(f"{item.nodeid} uses the Spark session: move it out of OWN_DRIVERS' files")


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist's workers inherit the folder from the process that spawned them
    owner = config.stash[_OWNER] = _servers.make_run_dir()
    if owner and _checks.started_beside() and not config.option.collectonly:
        _checks.start_beside()


def pytest_unconfigure(config: pytest.Config) -> None:
    _servers.reap_starts()
    if config.stash.get(_OWNER, False):
        _checks.stop_beside()
        _servers.stop_all()


@pytest.fixture(autouse=True)
def _parka_logging_restored() -> Iterator[None]:
    """A test that runs a daemon's ``main()`` in-process installs its stderr handler on the
    ``parka`` logger, holding the stream pytest captured for that test; later tests' log lines
    went to it after pytest had closed it. Each test's handlers and level go with it."""
    logger = logging.getLogger("parka")
    handlers, level = list(logger.handlers), logger.level
    yield
    logger.handlers[:] = handlers
    logger.setLevel(level)
