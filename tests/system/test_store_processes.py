"""Worker processes share one database, SQLite or PostgreSQL (spawned children ingest at once): nothing lost,
nothing counted twice. The single-process store tests are tests/unit/test_store.py."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from support.store import K, make_store, row

from deniable.aggregator.store import OVERALL, Store
from deniable.shared.mechanisms import Tally


def _ingest_in_child(path: str, start: int) -> None:
    store = Store(path)
    for i in range(start, start + 50):
        store.ingest("c1", [row(i), row(i + 10_000, pseudonym=f"{i:064x}")], k=K, group_fields=("country",))


def test_processes_share_the_database_without_losing_or_doubling_reports(database_target: str | Path) -> None:
    store = make_store(database_target)
    ctx = multiprocessing.get_context("spawn")
    target = str(store.path) if not store.postgres else str(database_target)
    children = [ctx.Process(target=_ingest_in_child, args=(target, s)) for s in (0, 25, 50)]
    for child in children:
        child.start()
    for child in children:
        child.join(60)
        assert child.exitcode == 0
    # ids 0..99 arrive, some twice and under two report ids each: each device is counted exactly once
    assert store.count_reports("c1") == 100
    assert store.all_tallies("c1")[OVERALL] == Tally(100, (100, 0, 0, 0))
