"""A report leaves the outbox only on a verdict about that report (issue 11 item 1).

The device client talks HTTP (its real ``HTTPTransport``) to :class:`support.faulty.FaultyAggregator`, a
loopback server that forwards to the real ``deniable serve`` unless the test scripts an answer. For every
answer that is not a well-formed batch reply (a redirect, 401/403, 404 of any kind, 413, 429, 5xx, a body
that is not JSON, JSON without results, a 200 with empty or foreign results, other 4xx), the report stays
queued, the flush surfaces a typed error, ``pending()`` says why, and once the aggregator answers properly
the report is delivered and counted once. Also: a 413 splits the batch, a 429's Retry-After is honoured
(in place when short; no POST before it when long), an aggregator restarted on an empty data dir drops
nothing, and a report expires only after the outbox's maximum age, recorded in the ledger.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from itertools import count
from pathlib import Path
from typing import Any

import pytest
from support.faulty import Answer, FaultyAggregator, Request
from support.server import RunningServer, start_server

from deniable.client import Client, RetryPolicy
from deniable.client.state import DB_FILE
from deniable.shared.errors import (
    AccessDenied,
    AggregatorUnavailable,
    BatchRefused,
    BatchTooLarge,
    CampaignNotFound,
    DeliveryError,
    MalformedReply,
    RateLimited,
    RedirectRefused,
    TransportError,
    UnknownCampaign,
)

_ids = count()
NO_SLEEP = RetryPolicy(attempts=3, base=0.0, sleep=lambda s: None)


@pytest.fixture
def proxy(aggregator: RunningServer) -> Iterator[FaultyAggregator]:
    with FaultyAggregator(upstream=aggregator.url) as faulty:
        yield faulty


@pytest.fixture
def campaign(aggregator: RunningServer) -> str:
    cid = f"delivery-{next(_ids)}"
    aggregator.create_campaign(id=cid, question="Q?", categories=["a", "b"], epsilon=1.0)
    return cid


@pytest.fixture
def make_client(tmp_path: Path) -> Iterator[Callable[..., Client]]:
    made: list[Client] = []

    def make(url: str, **kwargs: Any) -> Client:
        kwargs.setdefault("retry", NO_SLEEP)
        client = Client(url, kwargs.pop("state_dir", tmp_path / "device"), **kwargs)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


def _html(status: int) -> Answer:
    return Answer(status, f"<html><body>{status}</body></html>", content_type="text/html")


def _error(status: int, code: str, **headers: str) -> Answer:
    return Answer(status, {"error": {"code": code, "message": f"{code} (scripted)"}}, headers=headers)


def _empty_results(request: Request) -> Answer:
    return Answer(200, {"results": [], "accepted": 0, "duplicate": 0, "rejected": 0})


def _foreign_results(request: Request) -> Answer:
    results = [{"report_id": "f" * 32, "status": "accepted", "reason": None} for _ in request.report_ids]
    return Answer(200, {"results": results, "accepted": len(results), "duplicate": 0, "rejected": 0})


def _results_without_counts(request: Request) -> Answer:
    return Answer(200, {"results": [{"report_id": r, "status": "accepted", "reason": None}
                                    for r in request.report_ids]})


def _rejected_without_reason(request: Request) -> Answer:
    results = [{"report_id": r, "status": "rejected", "reason": None} for r in request.report_ids]
    return Answer(200, {"results": results, "accepted": 0, "duplicate": 0, "rejected": len(results)})


#: Answers that are not a verdict on the reports sent, and the typed error each must surface.
NOT_A_VERDICT: list[tuple[str, Answer | Callable[[Request], Answer], type[DeliveryError]]] = [
    ("301 redirect", Answer(301, "", headers={"Location": "/elsewhere"}, content_type="text/html"),
     RedirectRefused),
    ("302 redirect", Answer(302, "", headers={"Location": "/elsewhere"}, content_type="text/html"),
     RedirectRefused),
    ("307 redirect", Answer(307, "", headers={"Location": "/elsewhere"}), RedirectRefused),
    ("308 redirect", Answer(308, "", headers={"Location": "/elsewhere"}), RedirectRefused),
    ("401", _error(401, "unauthorized", **{"WWW-Authenticate": "Bearer"}), AccessDenied),
    ("403 html", _html(403), AccessDenied),
    ("404 html", _html(404), CampaignNotFound),
    ("404 unknown_campaign", _error(404, "unknown_campaign"), CampaignNotFound),
    ("413 for one report", _error(413, "request_entity_too_large"), BatchTooLarge),
    ("429 retry much later", _error(429, "rate_limited", **{"Retry-After": "3600"}), RateLimited),
    ("500", _error(500, "internal_error"), AggregatorUnavailable),
    ("502 html", _html(502), AggregatorUnavailable),
    ("503 campaign_key_unavailable", _error(503, "campaign_key_unavailable"), AggregatorUnavailable),
    ("200 html", _html(200), MalformedReply),
    ("200 json without results", Answer(200, {"ok": True}), MalformedReply),
    ("200 empty results", _empty_results, MalformedReply),
    ("200 results for other ids", _foreign_results, MalformedReply),
    ("200 results without counts", _results_without_counts, MalformedReply),
    ("200 rejected without a reason", _rejected_without_reason, MalformedReply),
    ("201", Answer(201, {"results": []}), MalformedReply),
    ("400 batch", _error(400, "bad_request"), BatchRefused),
    ("409 campaign_closed", _error(409, "campaign_closed"), BatchRefused),
    ("415", _error(415, "unsupported_media_type"), BatchRefused),
]


@pytest.mark.parametrize(("answer", "error"), [a[1:] for a in NOT_A_VERDICT], ids=[a[0] for a in NOT_A_VERDICT])
def test_an_answer_that_is_not_a_verdict_keeps_the_report_queued(
    aggregator: RunningServer,
    proxy: FaultyAggregator,
    campaign: str,
    make_client: Callable[..., Client],
    answer: Answer | Callable[[Request], Answer],
    error: type[DeliveryError],
) -> None:
    client = make_client(proxy.url)
    receipt = client.submit(campaign, "a")
    proxy.script(answer, times=None)
    result = client.deliver()
    assert (result.delivered, result.rejected, result.pending) == (0, 0, 1)
    assert isinstance(result.failure, error), result.failure
    assert result.error == str(result.failure) and "stay in the outbox" in result.error
    with pytest.raises(error):
        result.raise_for_error()
    assert client.rejections() == []
    [waiting] = client.pending()
    assert (waiting.report_id, waiting.attempts, waiting.last_error_code) == (receipt.report_id, 1, error.code)
    assert waiting.why == result.error
    assert not any(r.path == "/elsewhere" for r in proxy.requests)  # a redirect is never followed
    assert aggregator.estimate(campaign)["n"] == 0

    proxy.script()  # the aggregator answers properly again
    if error is RateLimited:  # honoured: no POST before the Retry-After has passed, even in a new flush
        posts = len(proxy.posts())
        again = client.deliver()
        assert isinstance(again.failure, RateLimited) and len(proxy.posts()) == posts
        assert 3500 < again.failure.retry_after <= 3600
        _clear_retry_after(client)
    result = client.deliver()
    assert (result.delivered, result.accepted, result.pending, result.failure) == (1, 1, 0, None)
    assert aggregator.estimate(campaign)["n"] == 1


def _clear_retry_after(client: Client) -> None:
    assert client.state_dir is not None
    with sqlite3.connect(Path(client.state_dir) / DB_FILE) as db:
        db.execute("DELETE FROM meta WHERE key = 'not_before'")


def test_a_verdict_settles_each_report_on_its_own(
    aggregator: RunningServer, proxy: FaultyAggregator, make_client: Callable[..., Client]
) -> None:
    """accepted and duplicate leave as delivered, rejected-with-a-reason as a rejection, in one reply."""
    client = make_client(proxy.url, lifetime_budget=10.0)
    cids = []
    for _ in range(3):
        cid = f"verdict-{next(_ids)}"
        aggregator.create_campaign(id=cid, question="Q?", categories=["a", "b"], epsilon=1.0)
        client.submit(cid, "b")
        cids.append(cid)

    def verdicts(request: Request) -> Answer:
        if cids[2] in request.path:
            [rid] = request.report_ids
            return Answer(200, {"results": [{"report_id": rid, "status": "rejected", "reason": "scripted"}],
                                "accepted": 0, "duplicate": 0, "rejected": 1})
        return None  # type: ignore[return-value]  # forward: the real aggregator's verdict

    proxy.script(verdicts, times=None)
    result = client.deliver()
    assert (result.delivered, result.accepted, result.rejected, result.pending) == (2, 2, 1, 0)
    assert [r.reason for r in client.rejections()] == ["scripted"]


def test_a_413_splits_the_batch_until_it_fits(
    aggregator: RunningServer, proxy: FaultyAggregator, campaign: str, tmp_path: Path
) -> None:
    """A real device state with 5 reports of one campaign (recurring rounds), sent in one batch of 5."""
    cid = f"split-{next(_ids)}"
    aggregator.create_campaign(id=cid, question="Q?", categories=["a", "b"], epsilon=1.0, recurring=True)
    client = Client(proxy.url, tmp_path / "split", retry=NO_SLEEP)
    for r in range(5):
        client.submit(cid, "a", recurring=True, round=f"r{r}")

    def too_large(request: Request) -> Answer | None:
        return _error(413, "request_entity_too_large") if len(request.report_ids) > 2 else None

    proxy.script(too_large, times=None)
    result = client.deliver()
    assert (result.delivered, result.pending, result.failure) == (5, 0, None)
    assert [len(r.report_ids) for r in proxy.posts()] == [5, 2, 3, 1, 2]
    client.close()


def test_a_short_retry_after_is_waited_out_in_place(
    proxy: FaultyAggregator, campaign: str, make_client: Callable[..., Client]
) -> None:
    slept: list[float] = []
    client = make_client(proxy.url, retry=RetryPolicy(attempts=3, base=0.01, sleep=slept.append))
    client.submit(campaign, "b")
    proxy.script(_error(429, "rate_limited", **{"Retry-After": "7"}), times=1)
    result = client.deliver()
    assert (result.delivered, result.failure) == (1, None)
    assert slept == [7.0]  # the Retry-After, not the backoff


def test_unreachable_keeps_the_reports_and_says_so(tmp_path: Path, campaign: str, proxy: FaultyAggregator) -> None:
    client = Client(proxy.url, tmp_path / "gone", retry=NO_SLEEP)
    client.submit(campaign, "a")
    proxy.stop()
    result = client.deliver()
    assert type(result.failure) is TransportError and result.pending == 1
    assert "could not reach the aggregator" in str(result.failure) and "stay in the outbox" in str(result.failure)
    client.close()


def test_an_aggregator_restarted_on_an_empty_data_dir_drops_nothing(tmp_path: Path) -> None:
    """The operator's mistake of issue 11: the same URL answers 404 unknown_campaign for a while."""
    right = start_server(tmp_path / "right")
    wrong: RunningServer | None = None
    try:
        right.create_campaign(id="survey", question="Q?", categories=["a", "b"], epsilon=1.0)
        client = Client(right.url, tmp_path / "device", retry=NO_SLEEP)
        receipt = client.submit("survey", "b")
        assert receipt.queued and receipt.epsilon_spent == 1.0
        right.stop()
        wrong = start_server(tmp_path / "empty", port=right.port)  # same URL, empty data dir
        result = client.deliver()
        assert isinstance(result.failure, CampaignNotFound) and "unknown_campaign" in str(result.failure)
        assert (result.delivered, result.rejected, result.pending) == (0, 0, 1)
        with pytest.raises(UnknownCampaign):  # what the wrong aggregator says; the queued answer stays
            client.submit("survey", "b")
        assert [p.report_id for p in client.pending()] == [receipt.report_id]
        wrong.stop()
        right.restart()
        result = client.deliver()
        assert (result.delivered, result.accepted, result.pending) == (1, 1, 0)
        assert right.estimate("survey")["n"] == 1
        assert client.ledger().spent == 1.0 and client.rejections() == []
        client.close()
    finally:
        right.stop()
        if wrong is not None:
            wrong.stop()


def _age(client: Client, seconds: float) -> None:
    """Make every queued report look ``seconds`` older (as if queued that long ago)."""
    assert client.state_dir is not None
    with sqlite3.connect(Path(client.state_dir) / DB_FILE) as db:
        db.execute("UPDATE outbox SET queued_at = queued_at - ?", (seconds,))


def test_reports_expire_only_after_the_maximum_age_and_the_ledger_says_so(
    aggregator: RunningServer, proxy: FaultyAggregator, campaign: str, make_client: Callable[..., Client]
) -> None:
    client = make_client(proxy.url)
    receipt = client.submit(campaign, "a")
    proxy.script(_html(404), times=None)
    client.deliver()
    [waiting] = client.pending()
    assert 29.9 * 86400 < waiting.expires_at - time.time() <= 30 * 86400  # the documented default
    _age(client, 29 * 86400)  # 29 days: still waiting, still tried
    posts = len(proxy.posts())
    assert client.deliver().expired == 0 and len(proxy.posts()) == posts + 1
    _age(client, 2 * 86400)  # 31 days: expires, is not sent
    result = client.deliver()
    assert (result.expired, result.pending, result.delivered) == (1, 0, 0)
    assert len(proxy.posts()) == posts + 1
    [gone] = client.expired()
    assert (gone.report_id, gone.campaign_id, gone.attempts) == (receipt.report_id, campaign, 2)
    assert gone.last_error is not None and "404" in gone.last_error
    [spend] = client.ledger().campaigns
    assert (spend.expired, spend.epsilon) == (1, 1.0)  # recorded, and its ε stays spent
    assert client.pending() == [] and aggregator.estimate(campaign)["n"] == 0


def test_the_maximum_age_is_configurable(
    proxy: FaultyAggregator, campaign: str, make_client: Callable[..., Client]
) -> None:
    client = make_client(proxy.url, outbox_max_age=3600)
    client.submit(campaign, "a")
    _age(client, 3601)
    assert client.deliver().expired == 1 and proxy.posts() == []
    with pytest.raises(Exception, match="outbox_max_age"):
        make_client(proxy.url, state_dir=None, outbox_max_age=0)


@pytest.mark.parametrize("retry_after", ["9" * 5000, "\u00b2"], ids=["5000 digits", "superscript two"])
def test_a_retry_after_that_is_not_a_number_keeps_the_report_queued_with_a_typed_error(
    proxy: FaultyAggregator, campaign: str, make_client: Callable[..., Client], retry_after: str
) -> None:
    # a proxy's (or an attacker's) Retry-After: int() of it raised a raw ValueError out of deliver()
    client = make_client(proxy.url)
    client.submit(campaign, "b")
    proxy.script(_error(429, "rate_limited", **{"Retry-After": retry_after}), times=3)
    result = client.deliver()
    assert isinstance(result.failure, RateLimited)
    assert result.pending == 1
