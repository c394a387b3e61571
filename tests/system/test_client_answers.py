"""A changed answer is not silently dropped (issue 11 item 7), in the SDK and in ``deniable submit``.

A second ``submit`` to a one-shot campaign with another value or other groups is an ``AnswerChanged``
error naming the earlier answer's time and why (a new answer would spend ε again; the aggregator counts
one answer per device); nothing is spent or queued by it. ``reanswer=True`` (CLI ``--reanswer``) replaces
an answer that has not been delivered yet, spending ε again; a delivered answer cannot be replaced.
"""

from __future__ import annotations

import json
import sqlite3
import time
from itertools import count
from pathlib import Path

import pytest
from support.cli import deniable
from support.faulty import Answer, FaultyAggregator
from support.server import RunningServer

from deniable.client import Client, RetryPolicy
from deniable.client.state import DB_FILE
from deniable.shared.errors import AnswerChanged

_ids = count()
NO_SLEEP = RetryPolicy(attempts=2, base=0.0, sleep=lambda s: None)


def _campaign(aggregator: RunningServer, **extra: object) -> str:
    cid = f"answers-{next(_ids)}"
    aggregator.create_campaign(id=cid, question="Q?", categories=["a", "b", "c"], epsilon=1.0, **extra)
    return cid


def test_a_changed_value_is_an_error_naming_the_earlier_answer(aggregator: RunningServer, tmp_path: Path) -> None:
    cid = _campaign(aggregator)
    with Client(aggregator.url, tmp_path / "device", retry=NO_SLEEP) as client:
        before = time.time()
        first = client.submit(cid, "a")
        with pytest.raises(AnswerChanged) as info:
            client.submit(cid, "b")
        message = str(info.value)
        assert before - 1 <= info.value.answered_at <= time.time()
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(info.value.answered_at))
        assert f"was already answered at {when} with another value" in message
        assert "would spend ε=1 again" in message and "counts one answer per device" in message
        assert "reanswer=True" in message
        assert client.ledger().spent == 1.0  # the refused answer spent nothing
        assert [p.report_id for p in client.pending()] == [first.report_id]  # and queued nothing
        again = client.submit(cid, "a")  # the same answer is still the memoized one
        assert (again.report_id, again.memoized, again.epsilon_spent) == (first.report_id, True, 0.0)


def test_changed_groups_are_an_error_too(aggregator: RunningServer, tmp_path: Path) -> None:
    cid = _campaign(aggregator, group_fields=["country"])
    with Client(aggregator.url, tmp_path / "device", retry=NO_SLEEP) as client:
        client.submit(cid, "a", {"country": "NL"})
        with pytest.raises(AnswerChanged, match="other groups"):
            client.submit(cid, "a", {"country": "DE"})
        assert client.submit(cid, "a", {"country": "NL"}).memoized


def test_reanswer_replaces_an_undelivered_answer_and_spends_again(
    aggregator: RunningServer, tmp_path: Path
) -> None:
    cid = _campaign(aggregator)
    with Client(aggregator.url, tmp_path / "device", retry=NO_SLEEP) as client:
        first = client.submit(cid, "a")
        second = client.submit(cid, "b", reanswer=True)
        assert second.report_id != first.report_id
        assert (second.memoized, second.epsilon_spent, second.queued) == (False, 1.0, True)
        assert [p.report_id for p in client.pending()] == [second.report_id]  # the old one withdrawn
        [spend] = client.ledger().campaigns
        assert (spend.epsilon, spend.reports) == (2.0, 2)  # both answers count: the first may have been seen
        assert client.submit(cid, "b").memoized  # the re-answer is now the answer that stands
        with pytest.raises(AnswerChanged):
            client.submit(cid, "a")
        result = client.deliver()
        assert (result.accepted, result.pending) == (1, 0)
        assert aggregator.estimate(cid)["n"] == 1
        with pytest.raises(AnswerChanged, match=r"It was delivered.*cannot be re-answered"):
            client.submit(cid, "c", reanswer=True)  # a delivered answer stands
        assert client.ledger().spent == 2.0


def test_reanswer_replaces_a_rejected_answer(aggregator: RunningServer, tmp_path: Path) -> None:
    cid = _campaign(aggregator)
    with FaultyAggregator(upstream=aggregator.url) as proxy:
        client = Client(proxy.url, tmp_path / "device", retry=NO_SLEEP)
        first = client.submit(cid, "a")
        proxy.script(lambda r: Answer(200, {"results": [{"report_id": r.report_ids[0], "status": "rejected",
                                                          "reason": "scripted"}],
                                            "accepted": 0, "duplicate": 0, "rejected": 1}))
        assert client.deliver().rejected == 1
        assert client.submit(cid, "a").queued is False  # the same answer: rejected before, not re-queued
        with pytest.raises(AnswerChanged, match="The earlier answer is rejected"):
            client.submit(cid, "b")
        second = client.submit(cid, "b", reanswer=True)
        assert second.report_id != first.report_id and client.flush() == 1
        client.close()
    assert aggregator.estimate(cid)["n"] == 1


def test_a_round_takes_one_answer_unless_reanswered(aggregator: RunningServer, tmp_path: Path) -> None:
    cid = _campaign(aggregator, recurring=True)
    with Client(aggregator.url, tmp_path / "device", retry=NO_SLEEP) as client:
        client.submit(cid, "a", recurring=True, round="w1")
        with pytest.raises(AnswerChanged, match="in round 'w1' was already answered at"):
            client.submit(cid, "b", recurring=True, round="w1")
        replaced = client.submit(cid, "b", recurring=True, round="w1", reanswer=True)
        assert [p.report_id for p in client.pending()] == [replaced.report_id]
        assert client.flush() == 1
        with pytest.raises(AnswerChanged, match="answer the next round instead"):
            client.submit(cid, "c", recurring=True, round="w1", reanswer=True)


def test_an_answer_stored_before_answers_were_tagged_stays_memoized(
    aggregator: RunningServer, tmp_path: Path
) -> None:
    """A state dir of an earlier release has no answer tags: its answer is re-sent as before."""
    cid = _campaign(aggregator)
    with Client(aggregator.url, tmp_path / "device", retry=NO_SLEEP) as client:
        first = client.submit(cid, "a")
    with sqlite3.connect(tmp_path / "device" / DB_FILE) as db:
        db.execute("UPDATE reports SET answer_tag = NULL")
    with Client(aggregator.url, tmp_path / "device", retry=NO_SLEEP) as client:
        assert client.submit(cid, "b").report_id == first.report_id


def test_the_cli_says_the_same(aggregator: RunningServer, tmp_path: Path) -> None:
    cid = _campaign(aggregator)
    base = ["submit", "--aggregator", aggregator.url, "--campaign", cid, "--state-dir", str(tmp_path / "cli")]
    assert deniable(*base, "--value", "a", "--no-flush").returncode == 0
    changed = deniable(*base, "--value", "b")
    assert changed.returncode == 1, changed
    assert "was already answered at" in changed.stderr and "would spend ε=1 again" in changed.stderr
    assert "--reanswer" in changed.stderr and "reanswer=True" not in changed.stderr
    replaced = deniable(*base, "--value", "b", "--reanswer", "--json")
    assert replaced.returncode == 0, replaced
    assert json.loads(replaced.stdout)["delivery"]["accepted"] == 1
    ledger = json.loads(deniable("ledger", "--state-dir", str(tmp_path / "cli"), "--json").stdout)
    assert ledger["spent"] == 2.0
    late = deniable(*base, "--value", "c", "--reanswer")
    assert late.returncode == 1 and "It was delivered" in late.stderr
    assert aggregator.estimate(cid)["n"] == 1


def test_reanswering_back_to_an_earlier_value_resends_its_paid_report(
    aggregator: RunningServer, tmp_path: Path
) -> None:
    """One-shot answers are derived from the device secret: going back to a value answered before gives its
    report again (nothing new is revealed, nothing spent), and it becomes the answer that stands."""
    cid = _campaign(aggregator)
    with Client(aggregator.url, tmp_path / "device", retry=NO_SLEEP) as client:
        first = client.submit(cid, "a")
        client.submit(cid, "b", reanswer=True)
        back = client.submit(cid, "a", reanswer=True)
        assert (back.report_id, back.epsilon_spent) == (first.report_id, 0.0)
        assert [p.report_id for p in client.pending()] == [first.report_id]
        assert client.ledger().spent == 2.0
        assert client.submit(cid, "a").memoized
        assert client.flush() == 1
    assert aggregator.estimate(cid)["n"] == 1
