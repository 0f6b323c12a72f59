"""The reliability cases' labs, one per area, on databases of this test process (xdist worker) only."""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bench.reliability_cases.lab import Cluster, LabPool
from bench.reliability_cases.runner import AREA_OPTIONS
from testkit.postgres import RunCluster


@dataclass
class WorkerCluster(Cluster):
    """The run's server, each database named for this worker (two workers opening the same area's lab
    must not drop each other's database) and cloned from the run's migrated template: the migrations
    the labs and cases run on it then find nothing to do (~0.2 s each saved, for some 20 databases)."""

    run_cluster: RunCluster = field(kw_only=True)
    prefix: str = field(kw_only=True)

    async def create_database(self, name: str) -> str:
        return await self.run_cluster.clone(f"{self.prefix}{name}")


@pytest.fixture(scope="session")
async def lab_pool(database_url: str, run_cluster: RunCluster, worker_name: str) -> AsyncIterator[LabPool]:
    # World-traversable: a case's own PostgreSQL may run as another user and read files here.
    with tempfile.TemporaryDirectory(prefix="personae-reliability-") as root:
        os.chmod(root, 0o755)
        cluster = WorkerCluster(database_url, run_cluster=run_cluster, prefix=f"{worker_name}_")
        pool = LabPool(cluster, Path(root), AREA_OPTIONS)
        yield pool
        await pool.aclose()


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups off the items
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The cases of an area share its lab: under `--dist loadgroup` they run on one worker, which
    opens that lab once."""
    for item in items:
        case = getattr(getattr(item, "callspec", None), "params", {}).get("case")
        if case is not None and item.path.parent == Path(__file__).parent:
            item.add_marker(pytest.mark.xdist_group(case.area))
