"""A store (SQLite path or PostgreSQL URL) with one campaign, and report rows for it: shared by the store's unit tests
(tests/unit/test_store.py) and its multi-process test (tests/system/test_store_processes.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from deniable.aggregator.store import ReportRow, Store
from deniable.shared.descriptor import CampaignConfig

__all__ = ["K", "make_store", "row"]

#: Categories of the campaign the helpers' rows answer.
K = 4


def make_store(
    target: str | Path,
    campaign_id: str = "c1",
    group_fields: tuple[str, ...] = ("country",),
    *,
    store: Store | None = None,
    config: CampaignConfig | None = None,
    **books: Any,
) -> Store:
    """A store at ``target`` (a SQLite directory is given as a directory: the file goes inside) with one campaign:
    a bare one (``campaign_id``, ``group_fields``), or the descriptor ``config`` (its id and JSON); ``books``
    (``trust_model``, ``budget``, ``adjacency``) go to ``insert_campaign``."""
    if isinstance(target, Path) and target.suffix != ".sqlite3":
        target = target / "db.sqlite3"
    store = store or Store(target)
    if config is not None:
        campaign_id, descriptor = config.id, config.to_json()
    else:
        descriptor = {"id": campaign_id, "group_fields": list(group_fields)}
    with store.transaction() as conn:
        store.insert_campaign(conn, campaign_id, descriptor, **books)
    return store


def row(
    i: int, *, value: int = 0, country: str = "NL", pseudonym: str | None = None, round: str = ""
) -> ReportRow:
    return ReportRow(
        report_id=f"{i:032x}",
        pseudonym=pseudonym or f"{i:064x}",
        groups={"country": country},
        report_json=json.dumps(value),
        support=(value,),
        round=round,
    )
