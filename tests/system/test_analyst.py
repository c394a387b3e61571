"""The analyst client (``deniable.analyst``) against the real server, the tidy records, and the timeline.

Every number the client hands out (rows, CSV, JSON, DataFrame) must be the API's own number, bit for bit;
every failure must be a typed ``DeniableError``; the timeline must count each accepted report once, in the
hour it arrived, and be refused to analysts for central campaigns.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support.reports import simulate_envelopes, upload
from support.server import RunningServer

from deniable.aggregator import store as store_module
from deniable.aggregator.migrations import MIGRATIONS
from deniable.aggregator.service import Service
from deniable.aggregator.store import Store
from deniable.aggregator.verify import verify_store
from deniable.analyst import ESTIMATE_COLUMNS, Analyst, Records, estimate_rows
from deniable.analyst.http import resolve_token
from deniable.shared.errors import (
    AuthenticationFailed,
    BudgetExceeded,
    CampaignExists,
    DeniableError,
    InvalidConfig,
    InvalidParameter,
    PermissionDenied,
    ReleaseRefused,
    TransportError,
    UnknownCampaign,
)

CATEGORIES = ["no", "yes", "unsure"]


def _analyst(server: RunningServer, role: str = "analyst") -> Analyst:
    return Analyst(server.url, token=server.admin_token if role == "admin" else server.analyst_token)


def _fill(server: RunningServer, config: dict, n: int, seed: int, groups: list[dict] | None = None) -> None:
    rng = np.random.default_rng(seed)
    values = rng.integers(0, len(config["categories"]), n).tolist()
    assert upload(server, config["id"], simulate_envelopes(config, values, rng=rng, groups=groups))["accepted"] == n


# -- the client against the real server --------------------------------------------------------------


def test_campaigns_create_list_paginate_show_close(aggregator: RunningServer) -> None:
    admin, analyst = _analyst(aggregator, "admin"), _analyst(aggregator)
    ids = [f"an-page-{i}" for i in range(5)]
    for campaign_id in ids:
        config = admin.create_campaign(campaign_id, "Do you smoke?", CATEGORIES, 1.0, mechanism="grr")
        assert config["id"] == campaign_id and config["status"] == "open"
    admin.close_campaign(ids[1])
    admin.close_campaign(ids[1])  # idempotent

    first = analyst.campaigns(limit=2)
    assert len(first) == 2 and first.total >= 5 and first.next_offset == 2
    listed = [c["id"] for c in analyst.iter_campaigns(page_size=2)]
    assert [i for i in listed if i in ids] == ids  # oldest first, every page, none twice
    assert len(listed) == len(set(listed)) == first.total
    closed = [c["id"] for c in analyst.iter_campaigns(status="closed")]
    assert ids[1] in closed and not set(closed) & (set(ids) - {ids[1]})
    assert all(c["status"] == "open" for c in analyst.campaigns(status="open", limit=1000))

    shown = analyst.campaign(ids[1])
    assert shown["status"] == "closed" and shown["closed_at"] and shown["n_reports"] == 0
    assert shown["question"] == "Do you smoke?" and shown["epsilon_spent"] == 0


def test_errors_are_typed(aggregator: RunningServer) -> None:
    admin, analyst = _analyst(aggregator, "admin"), _analyst(aggregator)
    admin.create_campaign("an-errors", "Q?", CATEGORIES, 1.0)
    with pytest.raises(CampaignExists, match="already exists") as exists:
        admin.create_campaign("an-errors", "Q?", CATEGORIES, 1.0)
    assert exists.value.status == 409 and exists.value.code == "campaign_exists"  # type: ignore[attr-defined]
    with pytest.raises(PermissionDenied, match="admin token") as denied:
        analyst.create_campaign("an-errors-2", "Q?", CATEGORIES, 1.0)
    assert denied.value.status == 403  # type: ignore[attr-defined]
    with pytest.raises(AuthenticationFailed, match="not valid"):
        Analyst(aggregator.url, token="not-the-token").campaigns()
    with pytest.raises(UnknownCampaign, match="no campaign has the id"):
        analyst.campaign("an-nope")
    with pytest.raises(InvalidConfig):
        admin.create_campaign("an-bad", "Q?", ["only"], 1.0)
    with pytest.raises(InvalidParameter, match="group fields"):
        analyst.estimates("an-errors", group_by="country")
    with pytest.raises(InvalidParameter, match="'status'"):
        analyst.campaigns(status="gone")
    with pytest.raises(TransportError, match="could not reach"):
        Analyst("http://127.0.0.1:9", token="x").campaigns()
    for error in (CampaignExists, PermissionDenied, AuthenticationFailed, UnknownCampaign, TransportError):
        assert issubclass(error, DeniableError)


def test_estimates_are_the_api_numbers_in_rows_csv_json_and_pandas(aggregator: RunningServer, tmp_path: Path) -> None:
    admin, analyst = _analyst(aggregator, "admin"), _analyst(aggregator)
    config = admin.create_campaign(
        "an-estimates", "Which platform?", CATEGORIES, 2.0, group_fields=["os"], group_values={"os": ["ios", "web"]}
    )
    groups = [{"os": "ios"}] * 120 + [{"os": "web"}] * 80
    _fill(aggregator, config, 200, seed=3, groups=groups)

    api = aggregator.estimate("an-estimates", group_by="os")
    rows = analyst.estimates("an-estimates", group_by="os")
    assert rows.columns == ESTIMATE_COLUMNS
    assert len(rows) == 2 * len(CATEGORIES) * 2  # groups × categories × (count, proportion)
    for row in rows:
        group = api["groups"][row["group"]]
        cat = next(c for c in group["categories"] if c["category"] == row["category"])
        key = {"count": ("count", "stderr", "ci"), "proportion": ("proportion", "proportion_stderr", "proportion_ci")}
        est, se, ci = key[row["statistic"]]
        assert (row["estimate"], row["stderr"], row["ci_low"], row["ci_high"]) == (cat[est], cat[se], *cat[ci])
        assert row["n"] == group["n"] and row["question"] == "Which platform?" and row["group_by"] == "os"
        assert row["trust_model"] == "local" and row["mechanism"] == api["mechanism"] and row["level"] == 0.95
    assert {r["n"] for r in rows.where(group="ios")} == {120}

    csv_text = rows.to_csv(tmp_path / "e.csv")
    assert (tmp_path / "e.csv").read_bytes().decode() == csv_text
    back = Records.from_csv(csv_text)
    assert back.columns == ESTIMATE_COLUMNS and len(back) == len(rows)
    for a, b in zip(rows, back, strict=True):  # floats round-trip exactly (repr)
        assert float(b["estimate"]) == a["estimate"] and float(b["ci_high"]) == a["ci_high"]
        assert b["round"] is None and a["round"] is None
    assert json.loads(rows.to_json()) == rows.to_records()

    frame = rows.to_pandas()
    assert list(frame.columns) == list(ESTIMATE_COLUMNS) and len(frame) == len(rows)
    counts = frame[(frame.statistic == "count") & (frame.group == "web")]
    assert counts.estimate.tolist() == [c["count"] for c in api["groups"]["web"]["categories"]]

    overall = analyst.estimates("an-estimates", level=0.9)
    assert {r["group"] for r in overall} == {None} and {r["level"] for r in overall} == {0.9}
    assert (
        overall.where(statistic="count")[0]["estimate"] == aggregator.estimate("an-estimates")["categories"][0]["count"]
    )


def test_to_pandas_without_pandas_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = estimate_rows({"campaign_id": "c", "n": 0, "categories": []})
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(DeniableError, match=r"pip install 'deniable\[pandas\]'"):
        rows.to_pandas()


def test_central_campaign_accountant_releases_and_timeline_privacy(aggregator: RunningServer) -> None:
    admin, analyst = _analyst(aggregator, "admin"), _analyst(aggregator)
    no_wait = {"min_reports": 0, "min_refresh_interval_seconds": 0}
    config = admin.create_campaign(
        "an-central", "Q?", CATEGORIES, 0.5, trust_model="central", budget=1.0, release_policy=no_wait
    )
    _fill(aggregator, config, 50, seed=4)
    books = analyst.accountant("an-central")
    assert {k: books[k] for k in ("budget", "epsilon_spent", "epsilon_remaining")} == {
        "budget": 1.0, "epsilon_spent": 0.0, "epsilon_remaining": 1.0,
    }  # fmt: skip
    assert books["totals"] is None or books["totals"]["releases"] == 0
    rows = analyst.estimates("an-central")  # the first release spends 0.5
    assert {r["trust_model"] for r in rows} == {"central"} and {r["n"] for r in rows} == {rows[0]["n"]}
    assert analyst.accountant("an-central")["epsilon_remaining"] == 0.5
    totals = analyst.accountant("an-central")["totals"]
    assert totals is None or (totals["releases"] == 1 and totals["spent"] == 0.5)
    assert analyst.estimates("an-central") == rows  # served again, free
    analyst.estimate("an-central", refresh=True)
    with pytest.raises(BudgetExceeded) as spent:
        analyst.estimate("an-central", refresh=True)
    assert (spent.value.spent, spent.value.remaining, spent.value.requested) == (1.0, 0.0, 0.5)

    with pytest.raises(PermissionDenied, match="not released to analysts"):
        analyst.timeline("an-central")
    admin.create_campaign("an-central-wait", "Q?", CATEGORIES, 0.5, trust_model="central", budget=1.0)
    with pytest.raises(ReleaseRefused) as refused:  # the default policy: 20 reports before any release
        analyst.estimate("an-central-wait")
    assert refused.value.rule == "min_reports" and refused.value.status == 409  # type: ignore[attr-defined]
    assert sum(r["reports"] for r in admin.timeline("an-central")) == 50
    with pytest.raises(InvalidParameter, match="is local"):
        analyst.accountant(_local(admin))
    releases = analyst.releases("an-central")
    assert [r["epsilon"] for r in releases] == [0.5, 0.5] and {r["campaign_id"] for r in releases} == {"an-central"}
    assert [r["seq"] for r in releases] == sorted(r["seq"] for r in releases)
    assert "{" in releases.to_csv().splitlines()[1]  # parameters and cost as JSON in their cells


def _local(admin: Analyst) -> str:
    admin.create_campaign("an-local-acct", "Q?", CATEGORIES, 1.0)
    return "an-local-acct"


def test_timeline_over_http_counts_every_report_once(aggregator: RunningServer) -> None:
    admin, analyst = _analyst(aggregator, "admin"), _analyst(aggregator)
    config = admin.create_campaign("an-timeline", "Q?", CATEGORIES, 1.0)
    assert len(analyst.timeline("an-timeline")) == 0
    _fill(aggregator, config, 30, seed=5)
    _fill(aggregator, config, 12, seed=6)
    for bucket in ("hour", "day"):
        rows = analyst.timeline("an-timeline", bucket=bucket)
        assert sum(r["reports"] for r in rows) == 42 and {r["bucket"] for r in rows} == {bucket}
        assert rows[-1]["start"] <= dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    raw = aggregator.get("/api/v1/campaigns/an-timeline/timeline", role="analyst", params={"bucket": "week"})
    assert raw.status_code == 422 and "'bucket' must be one of hour, day" in raw.json()["error"]["message"]
    assert aggregator.get("/api/v1/campaigns/an-timeline/timeline").status_code == 401
    assert (
        aggregator.get("/api/v1/campaigns/an-timeline/timeline", role="analyst", params={"round": "w1"}).status_code
        == 422
    )


# -- the timeline in the store -------------------------------------------------------------------------


def _service(tmp_path: Path) -> Service:
    return Service(tmp_path, database=tmp_path / "db.sqlite3")


def test_timeline_buckets_hours_and_days_zero_filled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    service = _service(tmp_path)
    config = service.create_campaign({"id": "t", "question": "Q?", "categories": CATEGORIES, "epsilon": 1.0})
    moments = iter([dt.datetime(2026, 11, 30, 22, 15, tzinfo=dt.UTC), dt.datetime(2026, 12, 1, 1, 59, tzinfo=dt.UTC)])
    rng = np.random.default_rng(1)
    bodies = []
    for n in (3, 2):
        moment = next(moments)
        monkeypatch.setattr(store_module, "_utc_now", lambda moment=moment: moment)
        bodies.append({"reports": simulate_envelopes(config, [0] * n, rng=rng)})
        assert service.submit_reports("t", bodies[-1])["accepted"] == n
    hours = service.timeline("t", bucket="hour", exact_counts=False)
    assert [(b["start"], b["reports"]) for b in hours["buckets"]] == [
        ("2026-11-30T22:00:00Z", 3), ("2026-11-30T23:00:00Z", 0), ("2026-12-01T00:00:00Z", 0),
        ("2026-12-01T01:00:00Z", 2),
    ]  # fmt: skip
    days = service.timeline("t", bucket="day", exact_counts=False)
    assert [(b["start"], b["reports"]) for b in days["buckets"]] == [
        ("2026-11-30T00:00:00Z", 3),
        ("2026-12-01T00:00:00Z", 2),
    ]
    assert days["total"] == hours["total"] == 5 and days["round"] is None
    assert verify_store(service.store)[0].ok
    # a duplicate (same report again) arrives but is not counted
    monkeypatch.setattr(store_module, "_utc_now", lambda: dt.datetime(2026, 12, 1, 3, tzinfo=dt.UTC))
    assert service.submit_reports("t", bodies[0])["duplicate"] == 3
    assert service.timeline("t", bucket="hour", exact_counts=False)["total"] == 5


def test_timeline_too_many_hours_asks_for_days(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    service = _service(tmp_path)
    config = service.create_campaign({"id": "t", "question": "Q?", "categories": CATEGORIES, "epsilon": 1.0})
    rng = np.random.default_rng(2)
    for moment in (dt.datetime(2020, 1, 1, tzinfo=dt.UTC), dt.datetime(2026, 1, 1, tzinfo=dt.UTC)):
        monkeypatch.setattr(store_module, "_utc_now", lambda moment=moment: moment)
        service.submit_reports("t", {"reports": simulate_envelopes(config, [0], rng=rng)})
    with pytest.raises(InvalidParameter, match="ask for bucket=day"):
        service.timeline("t", bucket="hour", exact_counts=False)
    assert len(service.timeline("t", bucket="day", exact_counts=False)["buckets"]) == 2193


def test_recurring_timeline_per_round(tmp_path: Path) -> None:
    service = _service(tmp_path)
    service.create_campaign({"id": "r", "question": "Q?", "categories": CATEGORIES, "epsilon": 1.0, "recurring": True})
    with pytest.raises(InvalidParameter, match="round"):
        service.timeline("r", round="bad round!", exact_counts=False)
    assert service.timeline("r", round="w1", exact_counts=False)["buckets"] == []


def test_version_2_database_gets_its_arrivals_from_the_days(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None)
    from deniable.aggregator.migrations import migrate

    assert migrate(conn, MIGRATIONS[:2]) == 2
    conn.execute("INSERT INTO campaigns (id, config_json, created_at, n_reports) VALUES ('c', '{}', 'then', 3)")
    for i, day in ((1, "2026-11-01"), (2, "2026-11-01"), (3, "2026-11-03")):
        conn.execute(
            "INSERT INTO reports VALUES ('c', ?, '', ?, '{}', '0', ?)", (bytes([i]) * 16, bytes([i]) * 32, day)
        )
    conn.close()
    store = Store(path)
    assert store.arrivals("c") == [("2026-11-01T00:00:00Z", 2), ("2026-11-03T00:00:00Z", 1)]


def test_verify_catches_a_timeline_that_disagrees(tmp_path: Path) -> None:
    service = _service(tmp_path)
    config = service.create_campaign({"id": "v", "question": "Q?", "categories": CATEGORIES, "epsilon": 1.0})
    service.submit_reports("v", {"reports": simulate_envelopes(config, [0, 1], rng=np.random.default_rng(3))})
    assert verify_store(service.store)[0].ok
    service.store.connection().execute("UPDATE report_arrivals SET n = n + 1")
    (check,) = verify_store(service.store)
    assert check.mismatches == ["timeline: 3 arrivals counted, 2 reports stored"]


# -- tokens and weight ---------------------------------------------------------------------------------


def test_token_from_argument_environment_or_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DENIABLE_TOKEN", raising=False)
    monkeypatch.delenv("DENIABLE_TOKEN_FILE", raising=False)
    with pytest.raises(AuthenticationFailed, match="set DENIABLE_TOKEN"):
        resolve_token()
    (tmp_path / "t").write_text("file-token\n")
    assert resolve_token(token_file=tmp_path / "t") == "file-token"
    monkeypatch.setenv("DENIABLE_TOKEN_FILE", str(tmp_path / "t"))
    assert resolve_token() == "file-token"
    monkeypatch.setenv("DENIABLE_TOKEN", "env-token")
    assert resolve_token() == "env-token"
    assert resolve_token("arg-token") == "arg-token"
    with pytest.raises(AuthenticationFailed, match="cannot read the token file"):
        resolve_token(token_file=tmp_path / "missing")
    (tmp_path / "empty").write_text("")
    with pytest.raises(AuthenticationFailed, match="does not hold a token"):
        resolve_token(token_file=tmp_path / "empty")
    assert "env-token" not in repr(Analyst("http://127.0.0.1:1"))


def test_the_analyst_package_is_light() -> None:
    """Nothing of the aggregator extra or of the device client (cryptography is deniable's base dependency)."""
    code = (
        "import sys, deniable.analyst, deniable.analyst.cli; "
        "heavy = sorted(m for m in ('flask', 'numpy', 'pandas', 'werkzeug', 'deniable.client')"
        " if m in sys.modules); print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
