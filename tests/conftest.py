"""What every test gets: parka's loggers as they were before it; and the run's servers, stopped
once at the very end (:mod:`tests.integration._servers`)."""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration import _servers

_OWNER = pytest.StashKey[bool]()
SPARK_PREFIX = "tests/integration/spark/"


# The workers that run the Spark tests on a session (pytest-xdist's gw0 and gw1): two JVMs at
# most, one SparkSession each
SPARK_LANES = 2
# Spark test files whose tests start Spark drivers of their own (spark-submit, parka spark-ingest)
# and never use the session: a JVM each, whichever worker runs them, so any worker may
SPARK_OWN_DRIVERS = (SPARK_PREFIX + "test_spark_faults.py", SPARK_PREFIX + "test_spark_cluster.py")


def _lanes_only(scope: str) -> bool:
    """Whether ``scope`` is a Spark test file that only the Spark lanes may take."""
    return scope.startswith(SPARK_PREFIX) and "::" not in scope


if importlib.util.find_spec("xdist") is not None:

    def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
        """pytest-xdist's load scheduling by scope, where a scope is one Spark test file (its tests
        run together, on one worker, on that worker's session) or one other test, and only
        :data:`SPARK_LANES` workers take Spark files: two JVMs, each started once, share the
        session's tests; they take those first. The tests of :data:`SPARK_OWN_DRIVERS` are scopes
        of their own, for any worker. Otherwise a worker takes the next scope in collection order,
        so the order ``tests/integration/conftest.py`` sorts (Spark first, long tests first) is
        the order of the run. (xdist's own ``--dist loadgroup`` marks no longer reach its scheduler
        under pytest 9.2.)"""
        from xdist.scheduler import LoadScopeScheduling

        class SparkLanes(LoadScopeScheduling):  # type: ignore[misc]
            def _split_scope(self, nodeid: str) -> str:
                if nodeid.startswith(SPARK_PREFIX) and not nodeid.startswith(SPARK_OWN_DRIVERS):
                    return nodeid.split("::", 1)[0]
                return nodeid

            def _assign_work_unit(self, node: Any) -> None:
                """Give ``node`` the first scope it may take: a Spark lane takes the Spark files
                while there are any (no other worker can), the others anything else. None when
                only Spark files are left and it is not a lane (it idles until the run ends)."""
                lanes = sorted(self.nodes, key=lambda n: int(n.gateway.id.removeprefix("gw")))[:SPARK_LANES]
                rank = {nodeid: i for i, nodeid in enumerate(self.collection)}
                files = [s for s in self.workqueue if _lanes_only(s)]
                others = [s for s in self.workqueue if not _lanes_only(s)]
                takes = (files or others) if node in lanes else others
                if not takes:
                    return
                scope = min(takes, key=lambda s: rank[next(iter(self.workqueue[s]))])
                work_unit = self.workqueue.pop(scope)
                self.assigned_work.setdefault(node, {})[scope] = work_unit
                collection = self.registered_collections[node]
                node.send_runtest_some([collection.index(n) for n, done in work_unit.items() if not done])

        return SparkLanes(config, log)


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist's workers inherit the folder from the process that spawned them
    config.stash[_OWNER] = _servers.make_run_dir()


def pytest_unconfigure(config: pytest.Config) -> None:
    if config.stash.get(_OWNER, False):
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
