"""The central accountant stores and compares the spent ε exactly (issue 10, item 6).

Before schema version 3 the spent ε was a float read back with ``Decimal(repr(·))``: its last digits were
lost, so ε = 3.145282958874041 under a budget of 47.179244383110614 allowed 15 releases where
15·ε = 47.179244383110615 exceeds the budget (exactly 14 fit).
"""

from __future__ import annotations

import json
import sqlite3
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.strategies import central_epsilons as floats

from deniable.aggregator import central
from deniable.aggregator.migrations import MIGRATIONS, migrate
from deniable.aggregator.store import ReportRow, Store
from deniable.shared.errors import BudgetExceeded

EPSILON = 3.145282958874041
BUDGET = 47.179244383110614


def _exact_releases(epsilon: float, budget: float) -> int:
    """How many releases of ``epsilon`` fit in ``budget``: max m with m·ε ≤ budget, in exact decimals."""
    return int(Decimal(repr(budget)) // Decimal(repr(epsilon)))


def _count_releases(epsilon: float, budget: float, limit: int) -> int:
    spent: Decimal | float = 0.0
    for count in range(limit + 2):
        try:
            spent = central.charge(spent, budget, epsilon)
        except BudgetExceeded:
            return count
    raise AssertionError("the budget never ran out")


def test_the_issues_numbers_allow_exactly_fourteen_releases() -> None:
    assert _exact_releases(EPSILON, BUDGET) == 14
    assert _count_releases(EPSILON, BUDGET, 14) == 14


def _store(tmp_path: Path) -> Store:
    store = Store(tmp_path / "deniable.sqlite3")
    with store.transaction() as conn:
        store.insert_campaign(conn, "c", {"id": "c"}, trust_model="central", budget=BUDGET, adjacency="add-remove")
    rows = [ReportRow(f"{i:032x}", f"{i:064x}", {}, json.dumps(i % 2), (i % 2,)) for i in range(20)]
    store.ingest("c", rows, k=2, group_fields=[])
    return store


def test_the_issues_numbers_through_the_store_allow_fourteen_releases(tmp_path: Path) -> None:
    store = _store(tmp_path)
    for release in range(14):
        with store.transaction() as conn:
            central.release(conn, "c", epsilon=EPSILON, k=2, categories=["a", "b"], refresh=release > 0)
    spent = store.get_campaign("c").epsilon_spent
    assert spent == 14 * Decimal(repr(EPSILON))  # stored exactly, as a decimal string
    with pytest.raises(BudgetExceeded), store.transaction() as conn:
        central.release(conn, "c", epsilon=EPSILON, k=2, categories=["a", "b"], refresh=True)
    assert store.get_campaign("c").epsilon_spent == spent
    raw = sqlite3.connect(tmp_path / "deniable.sqlite3").execute("SELECT epsilon_spent FROM campaigns").fetchone()
    assert raw == ("44.033961424236574",)


@settings(max_examples=300, deadline=None)
@given(epsilon=floats, ratio=st.floats(min_value=1.0, max_value=40.0))
def test_the_number_of_releases_is_the_exact_one(epsilon: float, ratio: float) -> None:
    budget = epsilon * ratio
    expected = _exact_releases(epsilon, budget)
    assert _count_releases(epsilon, budget, expected) == expected


@settings(max_examples=200, deadline=None)
@given(epsilon=floats, ratio=st.integers(min_value=1, max_value=40))
def test_budgets_that_are_exact_multiples_allow_every_release(epsilon: float, ratio: int) -> None:
    budget = float(Decimal(repr(epsilon)) * ratio)
    expected = _exact_releases(epsilon, budget)  # ratio, or ratio − 1 when the product rounded down
    assert expected in (ratio, ratio - 1)
    assert _count_releases(epsilon, budget, expected) == expected


def test_migration_three_keeps_the_floats_value_as_its_shortest_decimal(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "old.sqlite3", isolation_level=None)
    migrate(conn, MIGRATIONS[:2])
    conn.execute(
        "INSERT INTO campaigns (id, config_json, trust_model, budget, adjacency, epsilon_spent, created_at)"
        " VALUES ('c', '{}', 'central', 1.0, 'add-remove', 0.30000000000000004, 'x'),"
        " ('d', '{}', 'central', 1.0, 'add-remove', 1e-07, 'x'), ('e', '{}', 'local', NULL, NULL, 0, 'x')"
    )
    migrate(conn)
    rows = conn.execute("SELECT id, epsilon_spent, typeof(epsilon_spent) FROM campaigns ORDER BY id").fetchall()
    assert rows == [
        ("c", "0.30000000000000004", "text"),
        ("d", "0.0000001", "text"),
        ("e", "0", "text"),
    ]
