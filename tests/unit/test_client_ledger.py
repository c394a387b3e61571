"""Properties of the device ε ledger: whatever the sequence of answers, no budget is ever exceeded."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.faulty import FaultyTransport
from support.strategies import ledger_answers, ledger_epsilons

from deniable.client import BudgetExceeded, Client, InvalidParameter, Response
from deniable.client.ledger import check_budget
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.keys import encode_key, generate_keypair

_PUBLIC = encode_key(generate_keypair()[1])


def campaigns(epsilons: list[float]) -> FaultyTransport:
    """An in-memory stand-in for ``GET /api/v1/campaigns/<id>``: campaign ``c<i>`` has ε = epsilons[i] and is
    recurring (collects in rounds) when i is odd."""
    configs = {
        f"c{i}": CampaignConfig.create(
            id=f"c{i}", question="q?", categories=["a", "b", "c"], epsilon=eps, mechanism="grr",
            public_key=_PUBLIC, recurring=i % 2 == 1,
        ).to_json()
        for i, eps in enumerate(epsilons)
    }

    def serve(method: str, path: str, body: Any = None) -> Response:
        assert method == "GET", "this stand-in serves configs only"
        return Response(200, configs[path.rsplit("/", 1)[-1]])

    return FaultyTransport(serve)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    epsilons=ledger_epsilons,
    answers=ledger_answers,
    lifetime=st.sampled_from([1.0, 2.5, 4.0, 10.0]),
    cap=st.sampled_from([1.0, 3.0, 4.0]),
)
def test_no_sequence_of_answers_exceeds_a_budget(
    epsilons: list[float], answers: list[tuple[int, str, bool]], lifetime: float, cap: float
) -> None:
    client = Client(
        "http://127.0.0.1:9", None, transport=campaigns(epsilons), lifetime_budget=lifetime,
        max_epsilon_per_campaign=cap,
    )
    spent: dict[str, Fraction] = {}
    answered: dict[tuple[str, int], str] = {}  # (recurring campaign, round) -> value
    first: dict[str, str] = {}  # one-shot campaign -> the value answered
    for which, value, round_ in answers:
        i = which % len(epsilons)
        cid, recurring = f"c{i}", i % 2 == 1
        eps = Fraction(epsilons[i])
        total = sum(spent.values(), Fraction(0))
        rounds = {"recurring": True, "round": f"r{round_}"} if recurring else {}
        try:
            receipt = client.submit(cid, value, **rounds)  # type: ignore[arg-type]
        except BudgetExceeded as exc:
            # Refused exactly when one of the two caps would be passed, with what was spent and is left.
            mine = spent.get(cid, Fraction(0))
            assert mine + eps > Fraction(cap) or total + eps > Fraction(lifetime)
            assert exc.requested == float(eps)
            assert exc.remaining >= 0
            continue
        except InvalidParameter as exc:  # a round, and a one-shot campaign, take one answer
            if recurring:
                assert answered[(cid, round_)] != value, exc
            else:
                assert first[cid] != value, exc
            continue
        first.setdefault(cid, value)
        spent[cid] = spent.get(cid, Fraction(0)) + Fraction(receipt.epsilon_spent)
        assert receipt.epsilon_spent in (0.0, float(eps))
        if recurring:
            assert receipt.memoized == ((cid, round_) in answered)
            answered[(cid, round_)] = value
        else:
            assert receipt.memoized == (receipt.epsilon_spent == 0.0)
    ledger = client.ledger()
    assert ledger.spent == float(sum(spent.values(), Fraction(0))) <= lifetime
    assert ledger.remaining == float(Fraction(lifetime) - sum(spent.values(), Fraction(0)))
    for campaign in ledger.campaigns:
        assert campaign.epsilon <= cap
        if not campaign.recurring:
            assert campaign.reports == 1  # a one-shot campaign spends once, however often it is asked
        else:  # once per distinct value over all rounds
            values = {v for (c, _), v in answered.items() if c == campaign.campaign_id}
            assert campaign.reports == len(values)
    one_shot = sum(c.reports for c in ledger.campaigns if not c.recurring)
    assert len(client.pending()) == one_shot + len(answered)  # each report queued once
    client.close()


@given(
    spent=st.fractions(min_value=0, max_value=20),
    requested=st.fractions(min_value=Fraction(1, 100), max_value=10),
    budget=st.fractions(min_value=Fraction(1, 100), max_value=20),
)
def test_check_budget_is_exact_at_the_boundary(spent: Fraction, requested: Fraction, budget: Fraction) -> None:
    big = Fraction(10**6)
    if spent + requested <= budget:
        check_budget("c", requested, campaign_spent=Fraction(0), total_spent=spent, per_campaign=big,
                     lifetime_budget=budget)
    else:
        with pytest.raises(BudgetExceeded) as info:
            check_budget("c", requested, campaign_spent=Fraction(0), total_spent=spent, per_campaign=big,
                         lifetime_budget=budget)
        assert info.value.remaining == float(max(budget - spent, Fraction(0)))
        assert info.value.spent == float(spent)


def test_spending_exactly_the_whole_budget_is_allowed() -> None:
    client = Client("http://127.0.0.1:9", None, transport=campaigns([2.5, 2.5, 0.5]), lifetime_budget=5.0)
    client.submit("c0", "a")
    client.submit("c1", "b", recurring=True, round="r1")  # odd campaigns are recurring
    with pytest.raises(BudgetExceeded, match=r"ε=0 left"):
        client.submit("c2", "c")
    assert client.ledger().remaining == 0.0


