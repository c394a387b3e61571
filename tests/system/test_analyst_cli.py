"""``deniable campaigns|estimate|timeline`` against the real server, as a shell user runs them."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support.reports import simulate_envelopes, upload
from support.server import RunningServer

from deniable.analyst import Analyst
from deniable.analyst.cli import render_table
from deniable.shared.fields import plural

CLI = [sys.executable, "-m", "deniable.aggregator.cli"]


def run(*args: str, token: str | None = None, token_file: Path | None = None, url: str | None = None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DENIABLE_")}
    if token is not None:
        env["DENIABLE_TOKEN"] = token
    if token_file is not None:
        env["DENIABLE_TOKEN_FILE"] = str(token_file)
    if url is not None:
        env["DENIABLE_URL"] = url
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, env=env)


@pytest.fixture(scope="module")
def server(aggregator: RunningServer) -> RunningServer:
    return aggregator


def test_create_a_survey_from_a_file(server: RunningServer, tmp_path: Path) -> None:
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps({"title": "Habits", "epsilon": 2, "split": "per_question", "questions": [
        {"id": "smoke", "text": "Do you smoke?", "kind": "choice", "categories": ["no", "yes"]},
        {"id": "apps", "text": "Which apps?", "kind": "multi", "options": ["a", "b", "c"], "max_selected": 2},
    ]}))  # fmt: skip
    created = run("campaigns", "create", "cli-survey", "--from-file", str(spec), url=server.url,
                  token=server.admin_token)  # fmt: skip
    assert created.returncode == 0, created.stderr
    assert created.stdout.startswith("created survey cli-survey (local, split per_question, ε = 2, 2 questions); "
                                      f"devices fetch it at {server.url}/api/v1/campaigns/cli-survey"), created.stdout
    spec.write_text(json.dumps({"title": "Habits", "epsilon": 2}))
    refused = run("campaigns", "create", "cli-survey-2", "--from-file", str(spec), url=server.url,
                  token=server.admin_token)  # fmt: skip
    assert refused.returncode != 0 and "a survey needs questions in --from-file" in refused.stderr


def test_create_list_show_close_over_http(server: RunningServer, tmp_path: Path) -> None:
    admin_file = tmp_path / "admin.token"
    admin_file.write_text(server.admin_token + "\n")
    created = run("campaigns", "create", "cli-smoke", "--question", "Do you smoke?", "--categories", "no,yes",
                  "--epsilon", "1", "--url", server.url, token_file=admin_file)  # fmt: skip
    assert created.returncode == 0, created.stderr
    assert "created campaign cli-smoke (local, binary-rr, ε = 1, 2 categories)" in created.stdout
    spec = tmp_path / "c.json"
    spec.write_text(json.dumps({"question": "Which?", "categories": ["a", "b", "c"], "epsilon": 0.5,
                                "trust_model": "central", "budget": 2}))  # fmt: skip
    central = run("campaigns", "create", "cli-central", "--from-file", str(spec), "--format", "json",
                  url=server.url, token=server.admin_token)  # fmt: skip
    assert central.returncode == 0, central.stderr
    assert json.loads(central.stdout)["trust_model"] == "central"

    listing = run("campaigns", "list", url=server.url, token=server.analyst_token)
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.splitlines()
    assert lines[0].split() == ["ID", "STATUS", "TRUST", "MECHANISM", "ε", "REPORTS", "ε", "SPENT", "ε", "LEFT",
                                "CREATED", "(UTC)"]  # fmt: skip
    assert set(lines[1]) <= {"-", " "}
    central_line = next(line for line in lines if line.startswith("cli-central"))
    assert "private" in central_line.split() and central_line.split()[6:8] == ["0", "2"]
    ids = [line.split()[0] for line in lines[2:-1]]
    assert lines[-1].endswith("campaigns") and lines[-1].startswith(f"{len(ids)} ")
    page = run("campaigns", "list", "--limit", "1", url=server.url, token=server.analyst_token)
    assert page.stdout.splitlines()[-1].startswith("1 campaign of ") and "next page: --offset 1" in page.stdout

    assert run("campaigns", "close", "cli-smoke", url=server.url, token=server.admin_token).stdout.strip() == (
        "campaign cli-smoke is closed: later reports are refused"
    )
    closed = run(
        "campaigns", "list", "--status", "closed", "--format", "csv", url=server.url, token=server.analyst_token
    )
    rows = list(csv.DictReader(io.StringIO(closed.stdout)))
    assert "cli-smoke" in [r["id"] for r in rows] and {r["status"] for r in rows} == {"closed"}
    none_open = run(
        "campaigns", "list", "--status", "open", "--offset", "100000", url=server.url, token=server.analyst_token
    )
    assert none_open.stdout.strip() == "no open campaigns from offset 100000"

    shown = run("campaigns", "show", "cli-central", url=server.url, token=server.analyst_token)
    assert shown.returncode == 0, shown.stderr
    fields = {line[:11].strip(): line[13:] for line in shown.stdout.splitlines()}
    assert fields["ε budget"] == "2: 0 spent, 2 left" and fields["reports"].startswith("private")
    assert fields["question"] == "Which?" and fields["categories"] == "a, b, c"


def test_estimate_formats_equal_the_api(server: RunningServer) -> None:
    config = server.create_campaign(id="cli-est", question="Which OS?", categories=["a", "b", "c"], epsilon=2.0,
                                    group_fields=["os"], group_values={"os": ["ios", "web"]})  # fmt: skip
    rng = np.random.default_rng(11)
    values = rng.integers(0, 3, 150).tolist()
    groups = [{"os": "ios" if i % 3 else "web"} for i in range(150)]
    assert upload(server, "cli-est", simulate_envelopes(config, values, rng=rng, groups=groups))["accepted"] == 150
    api = server.estimate("cli-est", group_by="os")

    as_csv = run(
        "estimate", "cli-est", "--group-by", "os", "--format", "csv", url=server.url, token=server.analyst_token
    )
    assert as_csv.returncode == 0, as_csv.stderr
    rows = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert len(rows) == 2 * 3 * 2
    for row in rows:
        cat = next(c for c in api["groups"][row["group"]]["categories"] if c["category"] == row["category"])
        if row["statistic"] == "count":
            assert (float(row["estimate"]), float(row["ci_low"])) == (cat["count"], cat["ci"][0])
        else:
            assert float(row["stderr"]) == cat["proportion_stderr"]
    as_json = run(
        "estimate", "cli-est", "--group-by", "os", "--format", "json", url=server.url, token=server.analyst_token
    )
    client = Analyst(server.url, token=server.analyst_token)
    assert json.loads(as_json.stdout) == client.estimates("cli-est", group_by="os").to_records()

    table = run("estimate", "cli-est", "--group-by", "os", url=server.url, token=server.analyst_token)
    lines = table.stdout.splitlines()
    assert lines[0] == "cli-est: Which OS?" and lines[1].startswith("local, grr, ε = 2")
    assert lines[2].split()[:4] == ["GROUP", "CATEGORY", "COUNT", "±"]
    ios_a = next(line for line in lines if line.split()[:2] == ["ios", "a"])
    assert f"{api['groups']['ios']['categories'][0]['count']:,.1f}" in ios_a and ios_a.split()[-1] == "100"

    timeline = run("timeline", "cli-est", "--bucket", "hour", url=server.url, token=server.analyst_token)
    assert timeline.returncode == 0, timeline.stderr
    assert timeline.stdout.splitlines()[0].split() == ["HOUR", "(UTC)", "REPORTS"]
    assert timeline.stdout.splitlines()[-1].startswith("150 reports in ")


def test_errors_are_one_line_and_the_token_never_on_the_command_line(server: RunningServer, tmp_path: Path) -> None:
    no_token = run("campaigns", "list", url=server.url)
    assert no_token.returncode == 1 and "no token: set DENIABLE_TOKEN" in no_token.stderr
    assert len(no_token.stderr.strip().splitlines()) == 1
    wrong = run("campaigns", "list", url=server.url, token="wrong")
    assert wrong.returncode == 1 and "not valid for this aggregator" in wrong.stderr
    denied = run("campaigns", "close", "cli-est", url=server.url, token=server.analyst_token)
    assert denied.returncode == 1 and "needs the admin token" in denied.stderr
    unknown = run("estimate", "cli-nope", url=server.url, token=server.analyst_token)
    assert unknown.returncode == 1 and "no campaign has the id 'cli-nope'" in unknown.stderr
    down = run("campaigns", "list", "--url", "http://127.0.0.1:9", token="x")
    assert down.returncode == 1 and "could not reach the aggregator" in down.stderr
    assert run("campaigns", "list", "--token", "x").returncode == 2  # no such flag: tokens stay off argv
    bad = run("campaigns", "list", "--limit", "0")
    assert bad.returncode == 2 and "must be in [1, 1000]" in bad.stderr


def test_help_shows_defaults_and_the_local_commands_keep_working(server: RunningServer) -> None:
    helped = run("estimate", "--help")
    assert helped.returncode == 0 and "(default: table)" in helped.stdout and "(default: 0.95)" in helped.stdout
    assert "(default: None)" not in helped.stdout
    assert "over HTTP" in run("--help").stdout
    old = run("campaigns", "--data-dir", str(server.data_dir))
    assert old.returncode == 0 and "cli-est" in old.stdout and "deniable admin campaigns" in old.stderr
    new = run("admin", "campaigns", "--data-dir", str(server.data_dir))
    assert new.returncode == 0 and new.stdout == old.stdout
    assert run("admin", "verify", "--data-dir", str(server.data_dir)).returncode == 0
    assert run("campaigns").returncode == 2


def test_plurals_and_tables() -> None:
    assert [plural(n, "campaign") for n in (0, 1, 2)] == ["0 campaigns", "1 campaign", "2 campaigns"]
    assert plural(1, "category", "categories") == "1 category" and plural(3, "category", "categories") == "3 categories"
    assert render_table(["A", "BB"], [["x", 1], ["yyy", 22]], right=(1,)).splitlines() == [
        "A    BB", "---  --", "x     1", "yyy  22",
    ]  # fmt: skip


def test_estimate_table_says_why_a_tiny_n_leaves_the_unit_range(server: RunningServer) -> None:
    """n = 2, both 'yes': the unbiased shares are −58% and 158%; the table keeps them and says why."""
    from support.reports import seal_reports

    from deniable.shared.descriptor import CampaignConfig

    created = server.create_campaign(id="cli-tiny", question="q?", categories=["no", "yes"], epsilon=1.0)
    upload(server, "cli-tiny", seal_reports(CampaignConfig.from_json(created), [1, 1], rng=np.random.default_rng(2)))
    done = run("estimate", "cli-tiny", url=server.url, token=server.analyst_token)
    assert done.returncode == 0, done.stderr
    assert "158.2%" in done.stdout and "-58.2%" in done.stdout
    assert "note: 2 counts outside [0, n]: count and proportion are unbiased" in done.stdout
    assert "consistent_count is the biased variant" in done.stdout


def test_a_central_release_outside_the_range_gets_the_same_note() -> None:
    """Central noise is unbiased too: a noisy count below 0 (n private under add-remove) gets the note."""
    from deniable.aggregator.analyst.cli import _estimate_table
    from deniable.aggregator.analyst.records import estimate_rows

    body = {
        "campaign_id": "c", "trust_model": "central", "noise": "discrete-laplace", "epsilon": 1.0, "n": None,
        "level": 0.95, "categories": [
            {"category": "no", "count": -2.0, "stderr": 1.4, "ci": [-5.0, 1.0], "proportion": None,
             "proportion_stderr": None, "proportion_ci": [None, None]},
            {"category": "yes", "count": 3.0, "stderr": 1.4, "ci": [0.0, 6.0], "proportion": None,
             "proportion_stderr": None, "proportion_ci": [None, None]},
        ],
    }  # fmt: skip
    table = _estimate_table(estimate_rows(body, question="q?"))
    assert "note: 1 count outside [0, n]: count and proportion are unbiased" in table
