"""The SDK from the shell (issue 11 item 8): ``deniable flush`` and ``deniable pending``, true messages, and
errors that name the command line's flags. Real commands (subprocesses) against the real server, faults
through :class:`support.faulty.FaultyAggregator`.
"""

from __future__ import annotations

import json
from itertools import count
from pathlib import Path

from support.cli import deniable
from support.faulty import Answer, FaultyAggregator
from support.server import RunningServer, free_port

_ids = count()


def _campaign(aggregator: RunningServer, **extra: object) -> str:
    cid = f"cli-{next(_ids)}"
    aggregator.create_campaign(id=cid, question="Q?", categories=["a", "b"], epsilon=1.0, **extra)
    return cid


def test_no_flush_then_pending_then_flush(aggregator: RunningServer, tmp_path: Path) -> None:
    cid = _campaign(aggregator)
    state = ["--state-dir", str(tmp_path / "device")]
    queued = deniable("submit", "--aggregator", aggregator.url, "--campaign", cid, "--value", "a", "--no-flush", *state)
    assert queued.returncode == 0, queued
    assert "'deniable flush' delivers it" in queued.stdout
    listed = deniable("pending", *state, "--json")
    assert listed.returncode == 0, listed
    [row] = json.loads(listed.stdout)["pending"]
    assert (row["campaign_id"], row["attempts"], row["why"]) == (cid, 0, "not sent yet")
    table = deniable("pending", *state)
    assert cid in table.stdout and "not sent yet" in table.stdout and "1 report waiting" in table.stdout
    flushed = deniable("flush", *state)  # the aggregator this state dir used is remembered
    assert flushed.returncode == 0, flushed
    assert f"delivered 1 report to {aggregator.url} (1 accepted, 0 duplicate)" in flushed.stdout
    assert "0 reports still queued" in flushed.stdout
    assert "nothing waiting" in deniable("pending", *state).stdout
    assert aggregator.estimate(cid)["n"] == 1


def test_flush_and_pending_of_a_device_that_never_answered_create_nothing(tmp_path: Path) -> None:
    state = ["--state-dir", str(tmp_path / "never")]
    assert "nothing to deliver" in deniable("flush", *state).stdout
    assert "nothing waiting" in deniable("pending", *state).stdout
    assert not (tmp_path / "never").exists()


def test_an_unreachable_aggregator_before_anything_was_queued_says_so(tmp_path: Path) -> None:
    """Nothing was queued: the message must not say the report stays in the outbox."""
    url = f"http://127.0.0.1:{free_port()}"
    done = deniable("submit", "--aggregator", url, "--campaign", "nowhere", "--value", "a",
                "--state-dir", str(tmp_path / "device"))
    assert done.returncode == 1, done
    assert "could not reach the aggregator" in done.stderr and "nothing was spent or queued" in done.stderr
    assert "outbox" not in done.stderr and "stays" not in done.stderr
    assert "nothing waiting" in deniable("pending", "--state-dir", str(tmp_path / "device")).stdout


def test_a_report_that_could_not_be_delivered_is_queued_and_said_to_be(
    aggregator: RunningServer, tmp_path: Path
) -> None:
    cid = _campaign(aggregator)
    state = ["--state-dir", str(tmp_path / "device")]
    with FaultyAggregator(upstream=aggregator.url) as proxy:
        proxy.script(Answer(503, {"error": {"code": "campaign_key_unavailable", "message": "key file damaged"}}),
                     times=None)
        done = deniable("submit", "--aggregator", proxy.url, "--campaign", cid, "--value", "b", *state)
        assert done.returncode == 3, done
        assert "the report is queued, not delivered yet" in done.stderr and "503" in done.stderr
        assert "(this one among them)" in done.stdout
        table = deniable("pending", *state)
        assert "campaign_key_unavailable" in table.stdout and "1 report waiting" in table.stdout
        again = deniable("flush", *state)
        assert again.returncode == 3 and "1 report still queued" in again.stderr
        proxy.script()
        delivered = deniable("flush", *state, "--json")
        assert delivered.returncode == 0, delivered
        body = json.loads(delivered.stdout)
        assert (body["accepted"], body["pending"], body["error_code"]) == (1, 0, None)
    assert aggregator.estimate(cid)["n"] == 1


def test_errors_name_the_command_line_flags(aggregator: RunningServer, tmp_path: Path) -> None:
    grouped = _campaign(aggregator, group_fields=["country"])
    rounds = _campaign(aggregator, recurring=True)
    base = ["submit", "--aggregator", aggregator.url, "--value", "a", "--state-dir", str(tmp_path / "device")]

    missing = deniable(*base, "--campaign", grouped)
    assert missing.returncode == 1 and "--group country=V" in missing.stderr, missing.stderr
    assert "'groups'" not in missing.stderr

    extra = deniable(*base, "--campaign", _campaign(aggregator), "--group", "country=NL")
    assert extra.returncode == 1 and "--group must give exactly the group fields" in extra.stderr, extra.stderr

    no_round = deniable(*base, "--campaign", rounds)
    assert no_round.returncode == 1 and "--recurring and --round LABEL" in no_round.stderr, no_round.stderr
    assert "recurring=True" not in no_round.stderr and "round='" not in no_round.stderr

    not_rounds = deniable(*base, "--campaign", _campaign(aggregator), "--recurring", "--round", "r1")
    assert "leave out --recurring and --round" in not_rounds.stderr, not_rounds.stderr

    budget = deniable(*base, "--campaign", _campaign(aggregator), "--max-epsilon", "0.5")
    assert budget.returncode == 1 and "--max-epsilon" in budget.stderr, budget.stderr
    assert "max_epsilon_per_campaign" not in budget.stderr


def test_submit_answers_a_survey_with_one_answer_flag_per_question(aggregator: RunningServer, tmp_path: Path) -> None:
    cid = f"cli-survey-{next(_ids)}"
    aggregator.create_campaign(id=cid, title="Health", epsilon=1.0, split="per_question", questions=[
        {"id": "smoke", "text": "Smoke?", "kind": "choice", "categories": ["no", "yes"]},
        {"id": "apps", "text": "Apps?", "kind": "multi", "options": ["mail", "maps", "news"], "optional": True},
        {"id": "age", "text": "Age?", "kind": "number", "range": [18, 99]},
    ])  # fmt: skip
    state = ["--state-dir", str(tmp_path / "device")]
    base = ["submit", "--aggregator", aggregator.url, "--campaign", cid, *state]
    refused = deniable(*base, "--answer", "smoke=yes", "--answer", "age=120")
    assert refused.returncode == 1 and "question 'age': the answer must lie in [18, 99], got 120" in refused.stderr
    both = deniable(*base, "--value", "yes", "--answer", "age=30")
    assert both.returncode == 1 and "give --value V" in both.stderr
    done = deniable(*base, "--answer", "smoke=yes", "--answer", 'apps=["mail", "maps"]', "--answer", "age=37", "--json")
    assert done.returncode == 0, done
    out = json.loads(done.stdout)
    assert out["receipt"]["epsilon_spent"] == 1.0 and out["delivery"]["accepted"] == 1
    body = aggregator.estimate(cid)
    assert [q["answered"] for q in body["questions"]] == [1, 1, 1]
