"""Bounded group domains and bounded responses (issue 12 item 3).

Before, a local campaign's undeclared group field took any value a device sent: 40,000 distinct values
made one ``?group_by=country`` take 12.5 s and return 183 MB. Now a field without declared values holds at
most ``--max-group-values`` distinct values (a report bringing a new one past it is rejected with the
reason), a recurring campaign at most ``MAX_ROUNDS`` rounds, and a grouped estimate lists at most
``MAX_GROUP_CELLS`` cells per page.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from support.reports import simulate_envelopes
from support.server import RunningServer

from deniable.aggregator import estimation, survey_tally
from deniable.aggregator.store import ReportRow, Store
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.keys import encode_key, generate_keypair

CAP = 5


def test_a_new_group_value_past_the_cap_is_rejected_with_the_reason(
    server_factory: Callable[..., RunningServer],
) -> None:
    server = server_factory(workers=1, extra_args=("--max-group-values", str(CAP)))
    config = server.create_campaign(id="dom", question="q", categories=["a", "b"], epsilon=1.0,
                                    group_fields=["country"])  # fmt: skip
    rng = np.random.default_rng(12)
    countries = [f"c{i}" for i in range(CAP)] + ["c-new", "c0", "c-newer", "c4"]
    envelopes = simulate_envelopes(config, rng.integers(0, 2, len(countries)), rng=rng,
                                   groups=[{"country": c} for c in countries])  # fmt: skip
    first = server.post("/api/v1/campaigns/dom/reports", json={"reports": envelopes[:CAP]}).json()
    assert first["accepted"] == CAP
    second = server.post("/api/v1/campaigns/dom/reports", json={"reports": envelopes[CAP:]}).json()
    statuses = [(r["status"], r["reason"]) for r in second["results"]]
    assert [s for s, _ in statuses] == ["rejected", "accepted", "rejected", "accepted"]
    assert f"maximum of {CAP} distinct values" in statuses[0][1] and "'country'" in statuses[0][1]
    grouped = server.estimate("dom", group_by="country")
    assert sorted(grouped["groups"]) == [f"c{i}" for i in range(CAP)]
    assert grouped["n"] == CAP + 2 and "next_group_after" not in grouped
    retry = server.post("/api/v1/campaigns/dom/reports", json={"reports": envelopes[CAP:]}).json()
    assert [r["status"] for r in retry["results"]] == ["rejected", "duplicate", "rejected", "duplicate"]


def test_declared_values_are_the_domain_and_are_not_capped(server_factory: Callable[..., RunningServer]) -> None:
    server = server_factory(workers=1, extra_args=("--max-group-values", "2"))
    declared = [f"v{i}" for i in range(4)]
    config = server.create_campaign(id="decl", question="q", categories=["a", "b"], epsilon=1.0,
                                    group_fields=["site"], group_values={"site": declared})  # fmt: skip
    rng = np.random.default_rng(13)
    envelopes = simulate_envelopes(config, rng.integers(0, 2, 4), rng=rng, groups=[{"site": v} for v in declared])
    result = server.post("/api/v1/campaigns/decl/reports", json={"reports": envelopes}).json()
    assert [r["status"] for r in result["results"]] == ["accepted"] * 4  # undeclared ones: refused at decode


def _store_with_groups(tmp_path: Path, values: list[str], *, k: int = 2) -> tuple[Store, CampaignConfig]:
    config = CampaignConfig.create(id="paged", question="q", categories=[f"x{i}" for i in range(k)], epsilon=1.0,
                                   public_key=encode_key(generate_keypair()[1]), group_fields=["g"])  # fmt: skip
    store = Store(tmp_path / "db.sqlite3")
    with store.transaction() as conn:
        store.insert_campaign(conn, config.id, config.to_json(), trust_model="local", budget=None, adjacency=None)
    rows = [ReportRow(report_id=f"{i:032x}", pseudonym=f"{i:064x}", groups={"g": v}, report_json="0", support=(0,))
            for i, v in enumerate(values)]  # fmt: skip
    assert all(s == "accepted" for s, _ in store.ingest(config.id, rows, k=k, group_fields=["g"]))
    return store, config


def test_a_grouped_estimate_is_paged_to_a_bounded_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    values = [f"g{i:02d}" for i in range(10)]
    store, config = _store_with_groups(tmp_path, values)
    monkeypatch.setattr(survey_tally, "MAX_GROUP_CELLS", 8)  # k = 2: 4 groups a page
    seen: list[str] = []
    after = None
    pages = 0
    while True:
        body = estimation.estimate(store, config, group_by="g", level=0.95, noise=None, group_after=after)
        assert len(body["groups"]) <= 4 and len(json.dumps(body)) < 20_000
        seen += list(body["groups"])
        pages += 1
        after = body.get("next_group_after")
        if after is None:
            break
        assert after == list(body["groups"])[-1]
    assert seen == values and pages == 3


def test_the_rounds_of_a_campaign_are_capped(tmp_path: Path) -> None:
    store, config = _store_with_groups(tmp_path, [])
    rows = [ReportRow(report_id=f"{i:032x}", pseudonym="ab" * 32, groups={"g": "a"}, report_json="0", support=(0,),
                      round=f"r{i}") for i in range(4)]  # fmt: skip
    outcomes = store.ingest(config.id, rows, k=2, group_fields=["g"], max_rounds=3)
    assert [s for s, _ in outcomes] == ["accepted"] * 3 + ["rejected"]
    assert "rounds already holds its maximum of 3" in str(outcomes[3][1])
