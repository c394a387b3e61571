"""Batch analysis: ``deniable export`` to Parquet and ``deniable batch`` on Dask, against the real server.

Each campaign is filled through the real ingestion path (sealed envelopes posted to ``deniable serve``);
the export runs beside the live server; the batch recount must equal the service's tallies exactly, its
estimates the service's estimates, and its cross-tabulations a brute-force count of the simulated reports.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from support.cli import deniable
from support.reports import device_reports, seal_reports, upload

from deniable.aggregator.batch.export import export_campaign
from deniable.aggregator.batch.kernel import Condition, Plan, tally_table
from deniable.aggregator.batch.run import local_cluster, parse_condition, run_batch
from deniable.aggregator.store import Store
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.errors import InvalidParameter
from deniable.shared.mechanisms import Tally

COUNTRIES = ("de", "fr", "nl")
DEVICES = ("ios", "android")


def fill(
    aggregator: Any, campaign_id: str, mechanism: str, k: int, n: int, seed: int
) -> tuple[CampaignConfig, list[dict[str, Any]], list[Any]]:
    created = aggregator.create_campaign(
        id=campaign_id, question="q", categories=[f"c{i}" for i in range(k)], epsilon=2.0, mechanism=mechanism,
        group_fields=["country", "device"],
    )
    config = CampaignConfig.from_json(created)
    rng = np.random.default_rng(seed)
    values = rng.integers(0, k, size=n)
    mech = config.build_mechanism()
    reports = device_reports(mech, mech.simulate(values, rng=rng))
    groups = [{"country": COUNTRIES[int(rng.integers(3))], "device": DEVICES[int(rng.integers(2))]} for _ in range(n)]
    totals = upload(aggregator, campaign_id, seal_reports(config, reports, rng=rng, groups=groups))
    assert totals["accepted"] == n
    return config, groups, reports


def support_of(config: CampaignConfig, reports: list[Any]) -> list[list[int]]:
    mech = config.build_mechanism()
    return [mech.support(r) for r in reports]


@pytest.fixture(scope="module")
def dask_client() -> Iterator[Any]:
    with local_cluster(2) as client:
        yield client


@pytest.mark.parametrize(("mechanism", "k"), [("binary-rr", 2), ("grr", 5), ("oue", 11), ("olh", 9)])
def test_batch_recount_equals_the_service_for_every_mechanism(
    aggregator: Any, tmp_path: Path, dask_client: Any, mechanism: str, k: int
) -> None:
    campaign_id = f"batch-{mechanism}"
    fill(aggregator, campaign_id, mechanism, k, n=1500, seed=k)
    out = tmp_path / "export"
    done = deniable("export", campaign_id, "--to", str(out), "--data-dir", str(aggregator.data_dir),
               "--rows-per-file", "400")
    assert done.returncode == 0, done.stderr
    assert "exported 1500 reports" in done.stdout and "in 4 Parquet files" in done.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["n_reports"] == 1500 and len(manifest["files"]) == 4
    columns = pq.read_schema(out / manifest["files"][0]).names
    assert not {"report_id", "pseudonym"} & set(columns)  # nothing that identifies a device leaves the store

    result = run_batch(out, client=dask_client)
    assert result.ok, result.check_mismatches
    assert result.checked == 1 + 3 + 2  # overall, three countries, two device kinds
    served = aggregator.estimate(campaign_id)
    (overall,) = result.cells
    assert overall["n"] == served["n"] == 1500
    for ours, theirs in zip(overall["categories"], served["categories"], strict=True):
        assert ours["count"] == pytest.approx(theirs["count"], rel=1e-12, abs=1e-9)
        assert ours["stderr"] == pytest.approx(theirs["stderr"], rel=1e-12, abs=1e-9)


def test_cross_tab_and_filters_equal_a_brute_force_count(aggregator: Any, tmp_path: Path, dask_client: Any) -> None:
    config, groups, reports = fill(aggregator, "batch-xtab", "oue", 6, n=1200, seed=99)
    out = tmp_path / "export"
    export_campaign(Store(aggregator.data_dir / "deniable.sqlite3"), "batch-xtab", out, rows_per_file=500)
    supports = support_of(config, reports)

    def expected(keep: Any) -> tuple[int, list[int]]:
        rows = [s for g, s in zip(groups, supports, strict=True) if keep(g)]
        counts = Counter(v for s in rows for v in s)
        return len(rows), [counts[v] for v in range(config.k)]

    result = run_batch(out, by=["country", "device"], client=dask_client)
    assert result.ok
    cells = {(c["cell"]["country"], c["cell"]["device"]): c for c in result.cells}
    assert set(cells) == {(c, d) for c in COUNTRIES for d in DEVICES}
    mech = config.build_mechanism()
    for (country, device), cell in cells.items():
        n, support = expected(lambda g, c=country, d=device: g["country"] == c and g.get("device") == d)
        want = mech.estimate_tally(Tally(n, tuple(support)))
        assert cell["n"] == n
        assert [row["count"] for row in cell["categories"]] == pytest.approx(list(want.counts), abs=1e-9)

    filtered = run_batch(out, where=[parse_condition("country=fr"), parse_condition("device!=ios")], client=dask_client)
    n, _ = expected(lambda g: g["country"] == "fr" and g.get("device") not in (None, "ios"))
    assert filtered.cells[0]["n"] == n and filtered.checked == 0  # filtered runs skip the service check


def test_the_kernel_runs_without_dask_on_one_arrow_table(aggregator: Any, tmp_path: Path) -> None:
    """The per-partition kernel is engine-agnostic: an Arrow table in, additive partial tallies out."""
    config, groups, _ = fill(aggregator, "batch-kernel", "grr", 4, n=300, seed=5)
    out = tmp_path / "export"
    summary = export_campaign(Store(aggregator.data_dir / "deniable.sqlite3"), "batch-kernel", out, rows_per_file=100)
    plan = Plan(descriptor=config.to_json(), by=("country",), check=False)
    parts = [tally_table(pq.read_table(out / f), plan)["cells"] for f in summary.files]
    total = Counter()
    for part in parts:
        for (country,), tally in part.items():
            total[country] += tally.n
    assert total == Counter(g["country"] for g in groups)


def test_a_tampered_export_fails_the_check(aggregator: Any, tmp_path: Path, dask_client: Any) -> None:
    fill(aggregator, "batch-tamper", "grr", 3, n=200, seed=3)
    out = tmp_path / "export"
    export_campaign(Store(aggregator.data_dir / "deniable.sqlite3"), "batch-tamper", out)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["tallies"][0]["support"][0] += 1
    (out / "manifest.json").write_text(json.dumps(manifest))
    result = run_batch(out, client=dask_client)
    assert not result.ok and "recount" in result.check_mismatches[0]


def test_batch_cli_on_a_local_cluster_prints_the_privacy_note_and_checks_live(aggregator: Any, tmp_path: Path) -> None:
    fill(aggregator, "batch-cli", "binary-rr", 2, n=400, seed=8)
    out = tmp_path / "export"
    assert deniable("export", "batch-cli", "--to", str(out), "--data-dir", str(aggregator.data_dir)).returncode == 0
    env = {**os.environ, "DENIABLE_TOKEN": aggregator.analyst_token}
    done = deniable("batch", str(out), "--workers", "1", "--url", aggregator.url, env=env)
    assert done.returncode == 0, done.stderr
    assert "spend no privacy budget" in done.stdout
    assert "6 service tallies recounted, equal" in done.stdout
    assert "live service: equal" in done.stdout
    as_csv = deniable("batch", str(out), "--workers", "1", "--by", "country", "--format", "csv")
    assert as_csv.returncode == 0, as_csv.stderr
    lines = as_csv.stdout.splitlines()
    assert lines[0] == "country,category,n,count,stderr,ci_low,ci_high,proportion"
    assert len(lines) == 1 + 3 * 2


def test_central_campaigns_are_not_exported(aggregator: Any, tmp_path: Path) -> None:
    aggregator.create_campaign(
        id="batch-central", question="q", categories=["a", "b"], epsilon=1.0, trust_model="central", budget=5.0,
    )
    done = deniable("export", "batch-central", "--to", str(tmp_path / "x"), "--data-dir", str(aggregator.data_dir))
    assert done.returncode == 2 and "central" in done.stderr and "custody" in done.stderr
    assert not (tmp_path / "x").exists()


def test_bad_arguments_are_clear_errors(aggregator: Any, tmp_path: Path) -> None:
    fill(aggregator, "batch-args", "grr", 3, n=50, seed=4)
    out = tmp_path / "export"
    export_campaign(Store(aggregator.data_dir / "deniable.sqlite3"), "batch-args", out)
    with pytest.raises(InvalidParameter, match="not empty"):
        export_campaign(Store(aggregator.data_dir / "deniable.sqlite3"), "batch-args", out)
    with pytest.raises(InvalidParameter, match="not a public field"):
        run_batch(out, by=["age"])
    with pytest.raises(InvalidParameter, match="FIELD=VALUE"):
        parse_condition("country")
    with pytest.raises(InvalidParameter, match="not a deniable export"):
        run_batch(tmp_path)
    assert Condition("day", ">=", "2026-01-01") == parse_condition("day>=2026-01-01")


def test_batch_table_says_why_a_tiny_cell_leaves_the_unit_range(aggregator: Any, tmp_path: Path) -> None:
    """Two reports, both 'c1': the unbiased proportions leave [0, 1]; the table keeps them and says why."""
    created = aggregator.create_campaign(id="batch-tiny", question="q", categories=["c0", "c1"], epsilon=1.0,
                                         mechanism="binary-rr", group_fields=["country"])  # fmt: skip
    config = CampaignConfig.from_json(created)
    envelopes = seal_reports(config, [1, 1], rng=np.random.default_rng(3), groups=[{"country": "NL"}] * 2)
    assert upload(aggregator, "batch-tiny", envelopes)["accepted"] == 2
    out = tmp_path / "export"
    assert deniable("export", "batch-tiny", "--to", str(out), "--data-dir", str(aggregator.data_dir)).returncode == 0
    done = deniable("batch", str(out), "--workers", "1")
    assert done.returncode == 0, done.stderr
    assert "# note (1 cell outside [0, n]): count and proportion are unbiased" in done.stdout
    assert "consistent_count is the biased variant" in done.stdout
