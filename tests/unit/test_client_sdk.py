"""The device client against the real aggregator app in process (Flask test client as the transport).

End-to-end tests against the real ``deniable serve`` process are in ``test_client_e2e.py``; these cover
every rule of the client quickly and deterministically.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.faulty import AppTransport, FaultyTransport, Request

import deniable.client
import deniable.client.config
from deniable.aggregator.api.app import create_app
from deniable.client import (
    BudgetExceeded,
    CampaignClosed,
    Client,
    InvalidConfig,
    InvalidParameter,
    Response,
    RetryPolicy,
    TransportError,
    UnknownCampaign,
)
from deniable.client.outbox import batch_body
from deniable.client.state import DB_FILE, SECRET_FILE
from deniable.client.transport import EncodedTransport, HTTPTransport
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.errors import AnswerChanged, BatchRefused, DeviceSecretDamaged

ADMIN = {"Authorization": "Bearer admin-token-for-tests"}
ANALYST = {"Authorization": "Bearer analyst-token-for-tests"}


class Server:
    """The aggregator app with helpers to create campaigns and read estimates."""

    def __init__(self, data_dir: Path) -> None:
        self.app = create_app(
            {"DATA_DIR": str(data_dir), "ADMIN_TOKEN": ADMIN["Authorization"][7:],
             "ANALYST_TOKEN": ANALYST["Authorization"][7:]}
        )
        self.transport = AppTransport(self.app)

    def campaign(self, cid: str, categories: list[str], epsilon: float = 1.0, **extra: Any) -> dict[str, Any]:
        body = {"id": cid, "question": f"question of {cid}?", "categories": categories, "epsilon": epsilon}
        resp = self.transport.http.post("/api/v1/campaigns", json={**body, **extra}, headers=ADMIN)
        assert resp.status_code == 201, resp.get_json()
        config: dict[str, Any] = resp.get_json()
        return config

    def close(self, cid: str) -> None:
        assert self.transport.http.post(f"/api/v1/campaigns/{cid}/close", headers=ADMIN).status_code == 200

    def n_reports(self, cid: str) -> int:
        resp = self.transport.http.get(f"/api/v1/campaigns/{cid}/estimate", headers=ANALYST)
        assert resp.status_code == 200, resp.get_json()
        return int(resp.get_json()["n"])


@pytest.fixture
def server(tmp_path: Path) -> Server:
    return Server(tmp_path / "aggregator")


@pytest.fixture
def make_client(server: Server, tmp_path: Path) -> Iterator[Callable[..., Client]]:
    made: list[Client] = []

    def make(**kwargs: Any) -> Client:
        kwargs.setdefault("transport", server.transport)
        kwargs.setdefault("retry", RetryPolicy(attempts=3, base=0.0, sleep=lambda s: None))
        state_dir = kwargs.pop("state_dir", tmp_path / "device")
        client = Client("http://127.0.0.1:9", state_dir, **kwargs)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


# ---------------------------------------------------------------------------------------------- surface


def test_public_names_are_pinned() -> None:
    assert sorted(deniable.client.__all__) == sorted(
        [
            "AdmissionTokenRequired", "BudgetExceeded", "CampaignClosed", "CampaignSpend", "Client", "DeliveryError",
            "DeniableError", "DeviceStateError", "ExpiredReport", "ForgetWarning", "Forgotten",
            "PendingReport", "TokenBatch", "InvalidAnswer",
            "FlushResult", "HTTPTransport", "InvalidConfig", "InvalidParameter", "Ledger", "Receipt",
            "Rejection", "Response", "RetryPolicy", "Transport", "TransportError", "UnknownCampaign",
            "default_state_dir",
        ]
    )
    for name in deniable.client.__all__:
        assert hasattr(deniable.client, name)
    # simulation is a testing tool, not part of the device SDK's surface: it has its own module
    assert not hasattr(deniable.client, "simulate_fleet")
    from deniable.client import fleet

    assert fleet.__all__ == ["FleetResult", "simulate_fleet"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"lifetime_budget": 0}, "'lifetime_budget' must be a finite number in (0, 1000], got 0"),
        ({"max_epsilon_per_campaign": float("nan")}, "'max_epsilon_per_campaign' must be a finite number"),
        ({"timeout": -1}, "'timeout' must be a number of seconds in (0, 600], got -1"),
        ({"batch_size": 501}, "'batch_size' must be an integer in [1, 500], got 501"),
        ({"durability": "none"}, "'durability' must be 'normal' or 'full', got 'none'"),
    ],
)
def test_constructor_rejects_bad_parameters(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidParameter) as info:
        Client("http://127.0.0.1:9", None, **kwargs)
    assert message in str(info.value)


def test_aggregator_url_must_be_http() -> None:
    with pytest.raises(InvalidParameter, match="http:// or https://"):
        Client("ftp://example.org")


# ---------------------------------------------------------------------------------------------- answering


def test_submit_then_flush_delivers_one_report(server: Server, make_client: Callable[..., Client]) -> None:
    server.campaign("smoking", ["yes", "no"])
    client = make_client()
    receipt = client.submit("smoking", "yes")
    assert (receipt.epsilon_spent, receipt.memoized, receipt.queued) == (1.0, False, True)
    assert len(client.pending()) == 1
    result = client.deliver()
    assert (result.delivered, result.accepted, result.duplicate, result.pending) == (1, 1, 0, 0)
    assert server.n_reports("smoking") == 1


def test_second_submit_resends_the_identical_report_and_spends_nothing(
    server: Server, make_client: Callable[..., Client], tmp_path: Path
) -> None:
    server.campaign("memo", ["a", "b", "c"])
    client = make_client()
    first = client.submit("memo", "a")
    assert client.flush() == 1
    envelope_sent = client._state.reports("memo")[0].envelope
    with pytest.raises(AnswerChanged, match=r"was already answered at .* It was delivered"):
        client.submit("memo", "b")  # another value: the first answer stands, and says so
    again = client.submit("memo", "a")
    assert again.report_id == first.report_id
    assert (again.epsilon_spent, again.memoized) == (0.0, True)
    assert client._state.next_batch("memo", 10)[0].envelope == envelope_sent  # byte-identical envelope
    result = client.deliver()
    assert (result.delivered, result.accepted, result.duplicate) == (1, 0, 1)
    assert server.n_reports("memo") == 1
    assert client.ledger().spent == 1.0
    # A new Client on the same state dir remembers the answer.
    client.close()
    reopened = make_client()
    assert reopened.submit("memo", "a").report_id == first.report_id
    assert reopened.ledger().spent_on("memo") == 1.0


def test_ledger_lists_spends_and_what_is_left(server: Server, make_client: Callable[..., Client]) -> None:
    server.campaign("l-one", ["x", "y"], epsilon=0.5)
    server.campaign("l-two", ["x", "y", "z"], epsilon=2.0)
    client = make_client()
    assert client.ledger().spent == 0.0
    client.submit("l-one", "x")
    client.submit("l-two", "z")
    ledger = client.ledger()
    assert (ledger.spent, ledger.remaining, ledger.lifetime_budget) == (2.5, 7.5, 10.0)
    assert {c.campaign_id: c.epsilon for c in ledger.campaigns} == {"l-one": 0.5, "l-two": 2.0}
    assert json.loads(json.dumps(ledger.to_dict()))["remaining"] == 7.5


def test_lifetime_budget_is_never_exceeded(server: Server, make_client: Callable[..., Client]) -> None:
    for i in range(3):
        server.campaign(f"life-{i}", ["x", "y"], epsilon=1.0)
    client = make_client(lifetime_budget=2.5)
    client.submit("life-0", "x")
    client.submit("life-1", "y")
    with pytest.raises(BudgetExceeded) as info:
        client.submit("life-2", "x")
    err = info.value
    assert (err.spent, err.remaining, err.requested) == (2.0, 0.5, 1.0)
    assert "spent ε=2 of its lifetime budget ε=2.5 (ε=0.5 left)" in str(err)
    assert "asks for ε=1" in str(err)
    assert len(client.pending()) == 2 and client.ledger().spent == 2.0


def test_ledger_sums_exact_epsilons(server: Server, make_client: Callable[..., Client]) -> None:
    """Ten spends of the float 0.1 exceed 1.0 by 5.5e-17: the exact ledger refuses the tenth."""
    for i in range(10):
        server.campaign(f"tenth-{i}", ["x", "y"], epsilon=0.1)
    client = make_client(lifetime_budget=1.0)
    for i in range(9):
        client.submit(f"tenth-{i}", "x")
    with pytest.raises(BudgetExceeded, match=r"asks for ε=0\.10000000000000001"):
        client.submit("tenth-9", "x")


def test_campaign_above_the_device_cap_is_refused(server: Server, make_client: Callable[..., Client]) -> None:
    server.campaign("greedy", ["x", "y"], epsilon=5.0)
    with pytest.raises(BudgetExceeded, match="at most ε=4 per campaign") as info:
        make_client().submit("greedy", "x")
    assert (info.value.spent, info.value.remaining, info.value.requested) == (0.0, 4.0, 5.0)
    generous = make_client(state_dir=None, max_epsilon_per_campaign=5.0)
    assert generous.submit("greedy", "x").epsilon_spent == 5.0


def test_unknown_value_is_refused_before_anything_is_spent(
    server: Server, make_client: Callable[..., Client]
) -> None:
    server.campaign("labels", ["red", "green"])
    client = make_client()
    with pytest.raises(InvalidParameter, match="value 'blue' is not a category of campaign 'labels'"):
        client.submit("labels", "blue")
    assert len(client.pending()) == 0 and client.ledger().spent == 0.0


def test_groups_are_checked_before_anything_is_spent(server: Server, make_client: Callable[..., Client]) -> None:
    server.campaign("grouped", ["x", "y"], group_fields=["country"])
    client = make_client()
    with pytest.raises(InvalidParameter, match="missing 'country'"):
        client.submit("grouped", "x")
    assert len(client.pending()) == 0 and client.ledger().spent == 0.0
    client.submit("grouped", "x", {"country": "NL"})
    assert client.flush() == 1


def test_bad_campaign_ids(server: Server, make_client: Callable[..., Client]) -> None:
    client = make_client()
    with pytest.raises(InvalidParameter, match="'campaign_id' must be a slug"):
        client.submit("Not A Slug", "x")
    with pytest.raises(UnknownCampaign, match="no campaign 'nope'"):
        client.submit("nope", "x")


# ---------------------------------------------------------------------------------------------- pinning


@pytest.mark.parametrize(
    ("edit", "what"),
    [
        (lambda c: c.update(epsilon=3.0), "epsilon 1.0 -> 3.0"),
        (lambda c: c.update(categories=["no", "yes"]), "categories changed"),
        (lambda c: c.update(mechanism="grr"), "mechanism 'binary-rr' -> 'grr'"),
        (lambda c: c.update(public_key="mnhMK2NhfzQ8JmiaUGmcXzDEDtgsNT4HhjtXPdF6wEM"), "public_key"),
    ],
)
def test_a_changed_config_is_refused_after_pinning(
    server: Server, make_client: Callable[..., Client], edit: Callable[[dict[str, Any]], None], what: str
) -> None:
    server.campaign("pinned", ["yes", "no"])
    make_client().submit("pinned", "yes")
    tampered = make_client(transport=FaultyTransport(server.transport, edit_config=edit))
    with pytest.raises(InvalidConfig, match="changed since this device pinned it") as info:
        tampered.submit("pinned", "yes")
    assert what in str(info.value)
    assert tampered.ledger().spent == 1.0 and len(tampered.pending()) == 1


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every descriptor the client's parser validates (the in-process aggregator parses on its own side)."""
    seen: list[object] = []

    class Counting:
        @staticmethod
        def from_json(obj: object) -> CampaignConfig:
            seen.append(obj)
            return CampaignConfig.from_json(obj)

    monkeypatch.setattr(deniable.client.config, "CampaignConfig", Counting)
    return seen


@pytest.mark.parametrize(
    ("value", "options", "refusal"),
    [("maybe", {}, InvalidParameter), ("yes", {"max_epsilon_per_campaign": 0.5}, BudgetExceeded)],
)
def test_a_refused_first_answer_still_pins_the_config(
    server: Server, make_client: Callable[..., Client], value: str, options: dict[str, Any], refusal: type[Exception]
) -> None:
    """An answer refused before its transaction (an unknown value) or inside it (over the budget, rolled
    back) leaves the first-use pin standing: a changed descriptor is refused afterwards."""
    server.campaign("refused", ["yes", "no"])
    client = make_client(**options)
    with pytest.raises(refusal):
        client.submit("refused", value)
    assert client.pending() == []
    tampered = make_client(transport=FaultyTransport(server.transport, edit_config=lambda c: c.update(epsilon=3.0)))
    with pytest.raises(InvalidConfig, match="changed since this device pinned it"):
        tampered.submit("refused", "yes")


def test_a_descriptor_is_validated_once_per_text_and_a_change_is_still_refused(
    server: Server, make_client: Callable[..., Client], parsed: list[object]
) -> None:
    """The same client fetches before every answer: the same JSON text reuses the config validated from it;
    a changed descriptor under the same id is validated again and refused by the pin, the cache
    notwithstanding; the cached config stays the pinned one (the outbox routes by it)."""
    server.campaign("cached", ["yes", "no"], recurring=True)
    link = FaultyTransport(server.transport)
    client = make_client(transport=link)
    client.submit("cached", "yes", recurring=True, round="r1")
    client.submit("cached", "yes", recurring=True, round="r2")
    assert len(parsed) == 1
    link.edit_config = lambda c: c.update(epsilon=2.0)
    with pytest.raises(InvalidConfig, match="changed since this device pinned it"):
        client.submit("cached", "yes", recurring=True, round="r3")
    assert len(parsed) == 2 and client._configs.get("cached").epsilon == 1.0  # type: ignore[union-attr]
    link.edit_config = lambda c: c.update(recurring=1)  # the same values to ==, another JSON text: refused
    with pytest.raises(InvalidConfig, match="recurring"):
        client.submit("cached", "yes", recurring=True, round="r3")
    link.edit_config = None
    client.submit("cached", "no", recurring=True, round="r3")
    assert len(parsed) == 3 and client.ledger().spent == 2.0


def test_a_descriptor_is_reused_for_the_same_bytes_and_validated_again_for_other_bytes(
    server: Server, make_client: Callable[..., Client], parsed: list[object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transport that hands over the bytes it received (HTTPTransport does, as ``Response.raw``): the same
    bytes reuse the validated config without encoding the body again; other bytes with the same JSON value
    (here only the whitespace differs) are validated again, and a changed descriptor is refused by the pin."""
    server.campaign("bytes", ["yes", "no"], recurring=True)
    spacing = {"separators": (",", ":")}

    def with_raw(method: str, path: str, body: Any = None) -> Response:
        answer = server.transport.request(method, path, body)
        if method != "GET" or not isinstance(answer.body, dict):
            return answer
        return Response(answer.status, answer.body, raw=json.dumps(answer.body, **spacing).encode())

    client = make_client(transport=FaultyTransport(with_raw))  # no fault on: each Response, raw too, as is
    client.submit("bytes", "yes", recurring=True, round="r1")
    client.submit("bytes", "yes", recurring=True, round="r2")
    assert len(parsed) == 1
    spacing = {"separators": (", ", ": ")}
    client.submit("bytes", "yes", recurring=True, round="r3")
    assert len(parsed) == 2
    assert isinstance(client._configs._entries["bytes"][0], bytes)  # kept by the bytes, the body never re-encoded
    monkeypatch.setattr(
        server, "transport", FaultyTransport(server.transport, edit_config=lambda c: c.update(epsilon=2.0))
    )
    with pytest.raises(InvalidConfig, match="changed since this device pinned it"):
        client.submit("bytes", "yes", recurring=True, round="r4")


def test_the_outbox_sends_the_stored_envelope_texts_as_they_are(
    server: Server, make_client: Callable[..., Client]
) -> None:
    """The envelope is serialized once: the device stores its JSON text, and a transport that takes an
    encoded body (HTTPTransport does) gets the stored texts joined, byte for byte; a plain transport gets
    the same batch as a JSON value."""
    server.campaign("wire", ["a", "b"])
    sent: list[bytes] = []

    class Encoded:
        def request(self, method: str, path: str, body: Any = None) -> Response:
            return server.transport.request(method, path, body)

        def request_encoded(self, method: str, path: str, data: bytes) -> Response:
            sent.append(data)
            return server.transport.request(method, path, json.loads(data))

    assert isinstance(Encoded(), EncodedTransport) and isinstance(HTTPTransport("http://127.0.0.1:9"), EncodedTransport)
    client = make_client(transport=Encoded())
    client.submit("wire", "a")
    stored = [entry.envelope for entry in client._state.next_batch("wire", 10, 0)]
    assert client.flush() == 1 and sent == [batch_body(stored)]
    link = FaultyTransport(server.transport)
    plain = make_client(transport=link, state_dir=None)
    plain.submit("wire", "b")
    stored = [entry.envelope for entry in plain._state.next_batch("wire", 10, 0)]
    assert plain.flush() == 1 and link.posted()[0].body == json.loads(batch_body(stored))


def test_closing_a_campaign_is_not_a_change(server: Server, make_client: Callable[..., Client]) -> None:
    server.campaign("closing", ["yes", "no"])
    client = make_client()
    client.submit("closing", "yes")
    server.close("closing")
    with pytest.raises(CampaignClosed, match="'closing' is closed"):
        client.submit("closing", "yes")


def test_a_config_for_another_campaign_is_refused(server: Server, make_client: Callable[..., Client]) -> None:
    server.campaign("asked", ["yes", "no"])
    swapped = make_client(transport=FaultyTransport(server.transport, edit_config=lambda c: c.update(id="other")))
    with pytest.raises(InvalidConfig, match=r"asked for the config of campaign 'asked'.*one for 'other'"):
        swapped.submit("asked", "yes")
    assert swapped.ledger().spent == 0.0


def test_an_invalid_config_is_refused(server: Server, make_client: Callable[..., Client]) -> None:
    server.campaign("invalid", ["yes", "no"])
    bad = make_client(transport=FaultyTransport(server.transport, edit_config=lambda c: c.update(epsilon=0)))
    with pytest.raises(InvalidConfig, match=r"'epsilon' must be a number in \[0.001, 10\], got 0"):
        bad.submit("invalid", "yes")


def test_central_campaigns_need_an_explicit_opt_in(server: Server, make_client: Callable[..., Client]) -> None:
    server.campaign("curated", ["yes", "no"], epsilon=0.5, trust_model="central", budget=2.0)
    with pytest.raises(InvalidConfig, match=r"central trust model.*allow_central=True"):
        make_client().submit("curated", "yes")
    trusting = make_client(state_dir=None, allow_central=True)
    receipt = trusting.submit("curated", "yes")
    assert (receipt.trust_model, receipt.epsilon_spent) == ("central", 2.0)  # charged the total budget
    assert trusting.flush() == 1
    with pytest.raises(InvalidParameter, match="recurring=True applies to local campaigns only"):
        trusting.submit("curated", "yes", recurring=True)


# ---------------------------------------------------------------------------------------------- recurring


def test_recurring_spends_once_per_distinct_value(server: Server, make_client: Callable[..., Client]) -> None:
    server.campaign("mood", ["calm", "busy", "tired"], epsilon=1.5, recurring=True)
    client = make_client()
    calm = client.submit("mood", "calm", recurring=True, round="r1")
    assert calm.epsilon_spent == 1.5 and calm.recurring
    assert client.submit("mood", "calm", recurring=True, round="r1").report_id == calm.report_id
    busy = client.submit("mood", "busy", recurring=True, round="r2")
    assert busy.report_id != calm.report_id and busy.epsilon_spent == 1.5
    back = client.submit("mood", "calm", recurring=True, round="r3")
    assert (back.epsilon_spent, back.memoized) == (0.0, False)  # a new round, the value's permanent response
    assert client.ledger().spent_on("mood") == 3.0
    with pytest.raises(BudgetExceeded, match="has spent ε=3 on it"):  # a third value would pass the cap 4
        client.submit("mood", "tired", recurring=True, round="r4")
    with pytest.raises(InvalidParameter, match="is recurring and collects in rounds"):
        client.submit("mood", "calm")
    result = client.deliver()
    assert (result.accepted, result.duplicate) == (3, 0)  # one report per round, each counted in its round


def test_recurring_needs_a_recurring_campaign(server: Server, make_client: Callable[..., Client]) -> None:
    """recurring=True on a one-shot campaign would spend ε on reports the aggregator never counts."""
    server.campaign("once", ["a", "b"])
    client = make_client()
    for kwargs in ({"recurring": True}, {"round": "r1"}, {"recurring": True, "round": "r1"}):
        with pytest.raises(InvalidParameter, match="is not recurring: it counts one answer per device"):
            client.submit("once", "a", **kwargs)  # type: ignore[arg-type]
    assert client.ledger().spent == 0


def test_recurring_report_is_the_same_after_a_restart(server: Server, make_client: Callable[..., Client]) -> None:
    server.campaign("stable", ["a", "b"], recurring=True)
    client = make_client()
    first = client.submit("stable", "a", recurring=True, round="r1")
    sent = client._state.round_answer("stable", "r1")
    client.close()
    reopened = make_client()
    again = reopened.submit("stable", "a", recurring=True, round="r1")
    assert again.report_id == first.report_id and again.memoized
    assert reopened._state.round_answer("stable", "r1") == sent


# ---------------------------------------------------------------------------------------------- outbox


def test_outage_keeps_reports_queued_until_the_aggregator_is_back(
    server: Server, make_client: Callable[..., Client]
) -> None:
    server.campaign("outage", ["x", "y"])
    delays: list[float] = []
    down = FaultyTransport(server.transport)
    down.fail_posts(10**6)
    client = make_client(transport=down, retry=RetryPolicy(attempts=4, base=0.5, cap=1.5, sleep=delays.append))
    client.submit("outage", "x")
    result = client.deliver()
    assert (result.delivered, result.pending) == (0, 1)
    assert result.error is not None and "connection refused" in result.error
    assert down.posts == 4 and len(delays) == 3
    for attempt, delay in enumerate(delays):  # min(cap, base·2^i) scaled by a jitter in [1/2, 1]
        bound = min(1.5, 0.5 * 2**attempt)
        assert bound / 2 <= delay <= bound
    down.fail_posts(0)
    assert client.flush() == 1 and len(client.pending()) == 0
    assert server.n_reports("outage") == 1


def test_offline_submit_uses_the_config_validated_earlier(
    server: Server, make_client: Callable[..., Client]
) -> None:
    server.campaign("offline", ["a", "b"], recurring=True)
    link = FaultyTransport(server.transport)
    client = make_client(transport=link)
    client.submit("offline", "a", recurring=True, round="r1")
    link.down = True
    client.submit("offline", "b", recurring=True, round="r2")  # answered offline under the validated config
    assert len(client.pending()) == 2
    with pytest.raises(TransportError):
        make_client(state_dir=None, transport=link).submit("offline", "a")  # never validated: refused
    link.down = False
    assert client.flush() == 2


def test_5xx_is_retried_with_backoff(server: Server, make_client: Callable[..., Client]) -> None:
    server.campaign("busy", ["x", "y"])
    flaky = FaultyTransport(server.transport)
    flaky.fail_posts(2, status=503)
    client = make_client(transport=flaky)
    client.submit("busy", "y")
    result = client.deliver()
    assert (result.delivered, flaky.posts, result.error) == (1, 3, None)


def test_a_batch_level_4xx_is_surfaced_keeps_the_report_and_is_not_retried_in_place(
    server: Server, make_client: Callable[..., Client]
) -> None:
    """A 409 campaign_closed answers for the campaign, not with a verdict on the report: it stays queued."""
    server.campaign("shut", ["x", "y"])
    counting = FaultyTransport(server.transport)
    client = make_client(transport=counting)
    receipt = client.submit("shut", "x")
    server.close("shut")
    result = client.deliver()
    assert (result.delivered, result.rejected, result.pending) == (0, 0, 1)
    assert isinstance(result.failure, BatchRefused) and result.failure.error_code == "campaign_closed"
    assert client.rejections() == [] and counting.posts == 1  # not retried within the flush
    [waiting] = client.pending()
    assert (waiting.report_id, waiting.last_error_code) == (receipt.report_id, "batch_refused")
    assert "closed" in waiting.why


def test_a_rejected_report_is_recorded_with_its_reason(
    server: Server, make_client: Callable[..., Client]
) -> None:
    server.campaign("garbled", ["x", "y"])

    def garble_ciphertexts(body: Any) -> Any:
        return {"reports": [{**e, "ct": e["ct"][:-4] + "AAAA"} for e in body["reports"]]}

    garble = FaultyTransport(server.transport, edit_post=garble_ciphertexts)
    client = make_client(transport=garble)
    client.submit("garbled", "x")
    result = client.deliver()
    assert (result.delivered, result.rejected) == (0, 1)
    assert "proof of possession fails" in client.rejections()[0].reason  # the signature covers the ciphertext
    assert client.submit("garbled", "x").queued is False  # a memoized rejected report is not re-queued


class Crash(BaseException):
    """The process dies (e.g. killed) after the aggregator stored the batch, before the answer arrived."""


def test_crash_mid_flush_loses_nothing_and_counts_once(
    server: Server, make_client: Callable[..., Client], tmp_path: Path
) -> None:
    server.campaign("crash", ["a", "b", "c"])

    def die_after_the_second_batch(request: Request, response: Response) -> None:
        if link.posts == 2:
            raise Crash

    link = FaultyTransport(server.transport, after_post=die_after_the_second_batch)
    crashing = make_client(state_dir=tmp_path / "multi", transport=link, batch_size=2)
    for cid in ("crash-b", "crash-c"):
        server.campaign(cid, ["a", "b"])
    crashing.submit("crash", "a")
    crashing.submit("crash-b", "a")
    crashing.submit("crash-c", "b")
    with pytest.raises(Crash):
        crashing.flush()  # batch 1 (crash) delivered and answered; batch 2 (crash-b) stored, then crash
    crashing.close()
    survivor = make_client(state_dir=tmp_path / "multi")
    assert len(survivor.pending()) == 2
    result = survivor.deliver()
    assert (result.delivered, result.accepted, result.duplicate, result.pending) == (2, 1, 1, 0)
    assert [server.n_reports(c) for c in ("crash", "crash-b", "crash-c")] == [1, 1, 1]


def test_nothing_raw_reaches_the_disk(server: Server, make_client: Callable[..., Client], tmp_path: Path) -> None:
    labels = [f"zanzibar-{i:02d}-quokka" for i in range(12)]
    state_dir = tmp_path / "scan"
    client = make_client(state_dir=state_dir, lifetime_budget=100.0)
    for i in range(12):
        cid = f"scan-{i}"
        recurring = i % 3 == 0
        server.campaign(
            cid, labels[:6] if i % 2 else labels[6:], epsilon=0.5, mechanism="grr", recurring=recurring
        )
        choices = labels[:6] if i % 2 else labels[6:]
        rounds = {"recurring": True, "round": "r1"} if recurring else {}
        client.submit(cid, choices[i % 6], **rounds)  # type: ignore[arg-type]
        if recurring:
            client.submit(cid, choices[(i + 1) % 6], recurring=True, round="r2")
        client.submit(cid, choices[i % 6], **rounds)  # type: ignore[arg-type]
    client.flush()
    client.submit("scan-1", labels[1])  # memoized re-queue after a flush
    blobs = b"".join(p.read_bytes() for p in state_dir.rglob("*") if p.is_file())
    client.close()
    blobs += b"".join(p.read_bytes() for p in state_dir.rglob("*") if p.is_file())
    assert len(blobs) > 10_000
    for label in labels:
        for encoding in ("utf-8", "utf-16-le", "utf-16-be"):
            assert label.encode(encoding) not in blobs
    assert b"zanzibar" not in blobs and b"quokka" not in blobs


def test_state_dir_and_secret_are_private(make_client: Callable[..., Client], tmp_path: Path) -> None:
    state_dir = tmp_path / "private" / "state"
    client = make_client(state_dir=state_dir)
    assert stat.S_IMODE(os.stat(state_dir).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(state_dir / SECRET_FILE).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(state_dir / DB_FILE).st_mode) == 0o600
    secret = (state_dir / SECRET_FILE).read_bytes()
    assert len(secret) == 32
    client.close()
    assert make_client(state_dir=state_dir)._state.secret == secret  # created once, then reused


def test_full_durability_mode_delivers_too(server: Server, make_client: Callable[..., Client]) -> None:
    server.campaign("durable", ["x", "y"])
    client = make_client(durability="full")
    client.submit("durable", "x")
    assert client.flush() == 1


def test_a_damaged_secret_is_reported(tmp_path: Path) -> None:
    state_dir = tmp_path / "damaged"
    state_dir.mkdir()
    (state_dir / SECRET_FILE).write_bytes(b"short")
    with pytest.raises(DeviceSecretDamaged, match="holds 5 bytes, expected 32: it is damaged; restore it"):
        Client("http://127.0.0.1:9", state_dir)


# ---------------------------------------------------------------------------------------------- threads


def test_concurrent_submits_never_overspend(server: Server, make_client: Callable[..., Client]) -> None:
    for i in range(12):
        server.campaign(f"race-{i}", ["x", "y"], epsilon=1.0)
    client = make_client(lifetime_budget=5.0)
    outcomes: list[str] = []

    def answer(i: int) -> None:
        try:
            client.submit(f"race-{i % 12}", "x")
            outcomes.append("ok")
        except BudgetExceeded:
            outcomes.append("refused")

    threads = [threading.Thread(target=answer, args=(i,)) for i in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert client.ledger().spent == 5.0
    assert len(client.ledger().campaigns) == 5
    assert outcomes.count("refused") == 24 - outcomes.count("ok")
    assert client.flush() == 5


def test_flushing_while_submitting_delivers_each_report_once(
    server: Server, make_client: Callable[..., Client]
) -> None:
    for i in range(16):
        server.campaign(f"busy-{i}", ["x", "y"], epsilon=0.5)
    client = make_client(batch_size=3)
    stop = threading.Event()
    delivered: list[int] = []

    def flusher() -> None:
        while not stop.is_set():
            delivered.append(client.flush())

    background = threading.Thread(target=flusher)
    background.start()
    submitters = [
        threading.Thread(target=lambda j=j: [client.submit(f"busy-{i}", "y") for i in range(j, 16, 4)])
        for j in range(4)
    ]
    for t in submitters:
        t.start()
    for t in submitters:
        t.join()
    stop.set()
    background.join()
    delivered.append(client.flush())
    assert len(client.pending()) == 0 and sum(delivered) == 16
    assert [server.n_reports(f"busy-{i}") for i in range(16)] == [1] * 16


def test_two_processes_sharing_a_state_dir_never_overspend(server: Server, tmp_path: Path) -> None:
    """Two Client objects on one state dir (as an app and the CLI would be): one SQLite transaction each."""
    for i in range(6):
        server.campaign(f"two-{i}", ["x", "y"], epsilon=1.0)
    state_dir = tmp_path / "shared"
    a = Client("http://127.0.0.1:9", state_dir, lifetime_budget=3.0, transport=server.transport)
    b = Client("http://127.0.0.1:9", state_dir, lifetime_budget=3.0, transport=server.transport)
    refused = 0
    for i in range(6):
        try:
            (a if i % 2 else b).submit(f"two-{i}", "y")
        except BudgetExceeded:
            refused += 1
    assert refused == 3 and a.ledger().spent == 3.0 == b.ledger().spent
    a.close()
    b.close()


# ---------------------------------------------------------------------------------------------- CLI


def test_cli_exit_codes(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """0 delivered, 3 queued but undelivered (aggregator down for reports), 2 for a malformed --group."""
    from deniable.aggregator.cli import main

    server.campaign("cli-codes", ["x", "y"])
    server.campaign("cli-codes-2", ["x", "y"])
    link = FaultyTransport(server.transport)
    monkeypatch.setattr("deniable.client.device.HTTPTransport", lambda url, *, timeout: link)
    monkeypatch.setattr("deniable.client.outbox.RetryPolicy.delay", lambda self, attempt: 0.0)
    base = ["submit", "--aggregator", "http://127.0.0.1:9", "--state-dir", str(tmp_path / "cli"), "--value", "x"]
    assert main([*base, "--campaign", "cli-codes"]) == 0
    link.posts_down = True
    assert main([*base, "--campaign", "cli-codes-2"]) == 3
    assert "queued, not delivered yet: connection reset" in capsys.readouterr().err
    link.posts_down = False
    assert main([*base, "--campaign", "cli-codes-2"]) == 0  # the memoized report goes out now
    assert server.n_reports("cli-codes-2") == 1
    with pytest.raises(SystemExit) as info:
        main([*base, "--campaign", "cli-codes", "--group", "country"])
    assert info.value.code == 2
    assert "--group must be field=value" in capsys.readouterr().err
