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


# The workers that run Spark tests (pytest-xdist's gw0 and gw1): two JVMs at most, one SparkSession each
SPARK_LANES = 2


if importlib.util.find_spec("xdist") is not None:

    def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
        """pytest-xdist's load scheduling by scope, where a scope is one Spark test file (its tests
        run together, on one worker) or one other test, and only :data:`SPARK_LANES` workers take
        Spark files: two JVMs, each with its session started once, share the Spark tests. Every
        worker takes the next scope in collection order that it may take, so the order
        ``tests/integration/conftest.py`` sorts (Spark first, long tests first) is the order of
        the run. (xdist's own ``--dist loadgroup`` marks no longer reach its scheduler under
        pytest 9.2.)"""
        from xdist.scheduler import LoadScopeScheduling

        class SparkLanes(LoadScopeScheduling):  # type: ignore[misc]
            def _split_scope(self, nodeid: str) -> str:
                return nodeid.split("::", 1)[0] if nodeid.startswith(SPARK_PREFIX) else nodeid

            def _assign_work_unit(self, node: Any) -> None:
                """Give ``node`` the first scope it may take; none when only Spark files are
                left and it is not a Spark lane (it idles until the run ends)."""
                lanes = sorted(self.nodes, key=lambda n: int(n.gateway.id.removeprefix("gw")))[:SPARK_LANES]
                rank = {nodeid: i for i, nodeid in enumerate(self.collection)}
                takes = [s for s in self.workqueue if node in lanes or not s.startswith(SPARK_PREFIX)]
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
