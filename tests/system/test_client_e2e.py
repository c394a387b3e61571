"""The device client against the real aggregator (``deniable serve`` as a subprocess on a loopback port).

The device path randomizes with the OS CSPRNG (no seed can be set, by design), so statistical checks use a
5-standard-error band from the stderr the aggregator ships: a false failure has probability ≈ 5.7e-7 per
count, ≈ 3.4e-5 for the 60 counts checked here (a 4-SE band would flake once in ~260 runs).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.faulty import FaultyTransport, Request
from support.server import RunningServer

from deniable.client import (
    BudgetExceeded,
    Client,
    HTTPTransport,
    InvalidConfig,
    InvalidParameter,
    Response,
    RetryPolicy,
    TransportError,
)
from deniable.client.fleet import simulate_fleet
from deniable.shared.mechanisms import mechanism_from_name
from deniable.shared.mechanisms.estimate import count_interval

NO_WAIT = RetryPolicy(attempts=2, base=0.01, cap=0.02)


def _true_counts(values: list[str], categories: list[str]) -> list[int]:
    return [values.count(c) for c in categories]


def _assert_within(estimate: dict[str, Any], truth: dict[str, int]) -> None:
    """Every count within 5 of its shipped standard errors, and its CI the served count interval of its support
    count (recovered from the count: S = ĉ·(p* − q*) + n·q*)."""
    assert estimate["interval"]["method"] == "score-cc"
    mechanism = mechanism_from_name(estimate["mechanism"], epsilon=estimate["epsilon"], k=len(estimate["categories"]))
    n = estimate["n"]
    for row in estimate["categories"]:
        count, stderr = row["count"], row["stderr"]
        assert stderr > 0
        assert abs(count - truth[row["category"]]) <= 5 * stderr, (row, truth)
        support = round(count * mechanism.gap + n * mechanism.q_star)
        low, high = (float(b[0]) for b in count_interval([support], n, mechanism.p_star, mechanism.q_star))
        assert row["ci"] == pytest.approx([low, high], rel=1e-9, abs=1e-9)
        assert row["ci"][0] <= min(max(count, 0.0), n) <= row["ci"][1]  # the interval lies in [0, n]


@pytest.mark.parametrize(("mechanism", "k", "epsilon"), [("grr", 4, 2.0), ("oue", 8, 1.0), ("olh", 8, 1.0)])
def test_fleet_estimates_are_within_their_intervals(
    aggregator: RunningServer, mechanism: str, k: int, epsilon: float
) -> None:
    categories = [f"c{i}" for i in range(k)]
    cid = f"fleet-{mechanism}"
    aggregator.create_campaign(
        id=cid, question="q?", categories=categories, epsilon=epsilon, mechanism=mechanism,
        group_fields=["region"],
    )
    n = 1500
    values = [categories[min(i % 10, k - 1) if i % 3 else 0] for i in range(n)]
    groups = [{"region": "north" if i % 2 else "south"} for i in range(n)]
    seen: list[tuple[int, int]] = []
    result = simulate_fleet(
        aggregator.url, cid, values, groups, batch_size=400, progress=lambda d, t: seen.append((d, t))
    )
    assert (result.devices, result.accepted, result.duplicate, result.rejected) == (n, n, 0, 0)
    assert result.batches == 4 and seen[-1] == (n, n) and len(seen) == 4
    overall = aggregator.estimate(cid)
    assert overall["n"] == n
    _assert_within(overall, dict(zip(categories, _true_counts(values, categories), strict=True)))
    by_region = aggregator.estimate(cid, group_by="region")
    for region, parity in (("north", 1), ("south", 0)):
        mine = [v for i, v in enumerate(values) if i % 2 == parity]
        assert by_region["groups"][region]["n"] == len(mine)
        _assert_within(by_region["groups"][region], dict(zip(categories, _true_counts(mine, categories),
                                                                strict=True)))


def test_fleet_checks_every_label_before_sending(aggregator: RunningServer) -> None:
    aggregator.create_campaign(
        id="fleet-labels", question="q?", categories=["a", "b"], epsilon=1.0, group_fields=["site"]
    )
    ok = {"site": "x"}
    with pytest.raises(InvalidParameter, match="value 'zzz' is not a category"):
        simulate_fleet(aggregator.url, "fleet-labels", ["a", "b", "zzz"], [ok, ok, ok])
    values = ["a"] * 1200
    with pytest.raises(InvalidParameter, match="group 'site' must be a string"):
        simulate_fleet(aggregator.url, "fleet-labels", values, [ok] * 1100 + [{"site": ""}] * 100)
    with pytest.raises(InvalidParameter, match="one dict per value"):
        simulate_fleet(aggregator.url, "fleet-labels", values, [ok])
    assert aggregator.estimate("fleet-labels")["n"] == 0


def test_submit_memoizes_and_the_aggregator_counts_once(aggregator: RunningServer, tmp_path: Path) -> None:
    aggregator.create_campaign(id="e2e-memo", question="q?", categories=["yes", "no"], epsilon=1.0)
    with Client(aggregator.url, tmp_path / "device") as client:
        first = client.submit("e2e-memo", "yes")
        assert client.flush() == 1
        second = client.submit("e2e-memo", "yes")
        assert (second.report_id, second.epsilon_spent, second.memoized) == (first.report_id, 0.0, True)
        result = client.deliver()
        assert (result.accepted, result.duplicate) == (0, 1)
        assert client.ledger().spent == 1.0
    assert aggregator.estimate("e2e-memo")["n"] == 1


def test_lifetime_budget_against_the_server(aggregator: RunningServer) -> None:
    for i in range(3):
        aggregator.create_campaign(id=f"e2e-life-{i}", question="q?", categories=["a", "b"], epsilon=1.5)
    client = Client(aggregator.url, lifetime_budget=3.0)
    client.submit("e2e-life-0", "a")
    client.submit("e2e-life-1", "b")
    with pytest.raises(BudgetExceeded) as info:
        client.submit("e2e-life-2", "a")
    assert (info.value.spent, info.value.remaining, info.value.requested) == (3.0, 0.0, 1.5)
    assert client.flush() == 2
    assert [aggregator.estimate(f"e2e-life-{i}")["n"] for i in range(3)] == [1, 1, 0]


def test_outbox_survives_a_stopped_server(fresh_aggregator: RunningServer, tmp_path: Path) -> None:
    server = fresh_aggregator
    for cid in ("down-a", "down-b", "down-c"):
        recurring = cid == "down-b"
        server.create_campaign(id=cid, question="q?", categories=["a", "b"], epsilon=1.0, recurring=recurring)
    state = tmp_path / "device"
    client = Client(server.url, state, retry=NO_WAIT, timeout=2)
    client.submit("down-a", "a")
    client.submit("down-b", "b", recurring=True, round="r1")
    server.stop()
    result = client.deliver()
    assert (result.delivered, result.pending) == (0, 2) and "could not reach" in (result.error or "")
    client.submit("down-b", "a", recurring=True, round="r2")  # offline: the config validated earlier is used
    with pytest.raises(TransportError, match="could not reach the aggregator"):
        client.submit("down-c", "a")  # never validated: nothing to answer under
    client.close()
    server.restart()
    with Client(server.url, state, retry=NO_WAIT) as again:  # a new process, after a reboot say
        result = again.deliver()
        assert (result.delivered, result.accepted, result.duplicate, result.pending) == (3, 3, 0, 0)
        assert again.flush() == 0
    assert server.estimate("down-a")["n"] == 1
    assert [server.estimate("down-b", round=r)["n"] for r in ("r1", "r2")] == [1, 1]


class Crash(BaseException):
    """The device process dies after the aggregator stored a batch, before the answer was handled."""


def test_crash_mid_flush_delivers_everything_exactly_once(aggregator: RunningServer, tmp_path: Path) -> None:
    ids = [f"e2e-crash-{i}" for i in range(4)]
    for cid in ids:
        aggregator.create_campaign(id=cid, question="q?", categories=["a", "b", "c"], epsilon=0.5)

    def die_after_the_second_batch(request: Request, response: Response) -> None:
        if link.posts == 2:
            raise Crash

    link = FaultyTransport(HTTPTransport(aggregator.url), after_post=die_after_the_second_batch)
    state = tmp_path / "device"
    client = Client(aggregator.url, state, transport=link)
    for i, cid in enumerate(ids):
        client.submit(cid, "abc"[i % 3])
    with pytest.raises(Crash):
        client.flush()
    client.close()
    with Client(aggregator.url, state) as survivor:
        assert len(survivor.pending()) == 3
        result = survivor.deliver()
        assert (result.delivered, result.accepted, result.duplicate, result.pending) == (3, 2, 1, 0)
    assert [aggregator.estimate(cid)["n"] for cid in ids] == [1, 1, 1, 1]


def test_a_server_swapping_the_campaign_is_refused(
    server_factory: Callable[..., RunningServer], tmp_path: Path
) -> None:
    honest = server_factory(name="honest")
    impostor = server_factory(name="impostor")
    for server, epsilon in ((honest, 1.0), (impostor, 1.0)):
        server.create_campaign(id="swap", question="q?", categories=["yes", "no"], epsilon=epsilon)
    state = tmp_path / "device"
    with Client(honest.url, state) as client:
        client.submit("swap", "yes")
    with Client(impostor.url, state) as client, pytest.raises(InvalidConfig, match="public_key") as info:
        client.submit("swap", "yes")  # same id, same ε, another key: a man in the middle
    assert "changed since this device pinned it" in str(info.value)
    impostor.create_campaign(id="swap-eps", question="q?", categories=["yes", "no"], epsilon=1.0)
    honest.create_campaign(id="swap-eps", question="q?", categories=["yes", "no"], epsilon=3.0)
    with Client(impostor.url, state) as client:
        client.submit("swap-eps", "no")
    with Client(honest.url, state) as client, pytest.raises(InvalidConfig, match=r"epsilon 1\.0 -> 3\.0"):
        client.submit("swap-eps", "no")


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "deniable.aggregator.cli", *args],
        capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})},
    )


def test_cli_submit_and_ledger(aggregator: RunningServer, tmp_path: Path) -> None:
    label = "mauve-otter-4417"
    aggregator.create_campaign(
        id="e2e-cli", question="q?", categories=[label, "teal-heron-9921"], epsilon=0.75,
        group_fields=["country"],
    )
    state = tmp_path / "cli-state"
    args = ("submit", "--aggregator", aggregator.url, "--campaign", "e2e-cli", "--value", label,
            "--group", "country=NL", "--json")
    first = _cli(*args, env={"DENIABLE_STATE_DIR": str(state)})
    assert first.returncode == 0, first.stderr
    out = json.loads(first.stdout)
    assert out["receipt"]["epsilon_spent"] == 0.75 and out["delivery"]["accepted"] == 1
    second = _cli(*args, "--state-dir", str(state))
    assert second.returncode == 0, second.stderr
    again = json.loads(second.stdout)
    assert again["receipt"]["report_id"] == out["receipt"]["report_id"] and again["receipt"]["memoized"]
    assert again["delivery"]["duplicate"] == 1
    ledger = _cli("ledger", "--state-dir", str(state), "--json")
    assert ledger.returncode == 0, ledger.stderr
    assert json.loads(ledger.stdout)["spent"] == 0.75 and json.loads(ledger.stdout)["remaining"] == 9.25
    table = _cli("ledger", "--state-dir", str(state))
    assert "e2e-cli" in table.stdout and "9.25 left" in table.stdout
    bad = _cli("submit", "--aggregator", aggregator.url, "--campaign", "e2e-cli", "--value", "purple",
               "--group", "country=NL", "--state-dir", str(state))
    assert bad.returncode == 1 and "value 'purple' is not a category" in bad.stderr
    assert aggregator.estimate("e2e-cli")["n"] == 1
    on_disk = b"".join(p.read_bytes() for p in state.rglob("*") if p.is_file())
    assert label.encode() not in on_disk and b"mauve" not in on_disk


def test_cli_reports_an_unreachable_aggregator(aggregator: RunningServer, tmp_path: Path) -> None:
    aggregator.create_campaign(id="e2e-cli-down", question="q?", categories=["a", "b"], epsilon=1.0)
    state = tmp_path / "cli-down"
    queued = _cli("submit", "--aggregator", aggregator.url, "--campaign", "e2e-cli-down", "--value", "a",
                  "--state-dir", str(state), "--no-flush", "--json")
    assert queued.returncode == 0 and "delivery" not in json.loads(queued.stdout)
    down = _cli("submit", "--aggregator", "http://127.0.0.1:9", "--campaign", "e2e-cli-down", "--value",
                "a", "--state-dir", str(state))
    assert down.returncode == 1 and "could not reach the aggregator" in down.stderr
