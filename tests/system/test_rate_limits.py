"""Rate limits per client address (issue 12 item 2, the rate-limit half): token buckets on ingestion and on
failed authentication, in memory, answered 429 with ``Retry-After``; limits from the configuration.

Before, one client posted 1,000 forged devices in 0.2 s and guessed a weak admin token at 1,562 tries/s.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from support.server import RunningServer

from deniable.aggregator.ratelimit import BucketTable, address_key


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_allows_burst_then_rate_and_says_how_long_to_wait() -> None:
    clock = Clock()
    table = BucketTable(rate=2.0, burst=5, clock=clock)
    assert all(table.take("198.51.100.7").allowed for _ in range(5))
    refused = table.take("198.51.100.7")
    assert not refused.allowed and refused.retry_after == 1  # ⌈1 token / 2 per s⌉
    assert table.take("198.51.100.8").allowed  # another address has its own bucket
    clock.now += 0.5
    assert table.take("198.51.100.7").allowed and not table.take("198.51.100.7").allowed
    clock.now += 1000
    assert table.check("198.51.100.7", 5).allowed and not table.check("198.51.100.7", 6).allowed  # capped
    big = table.take("198.51.100.7", 50)  # more than a full bucket: never, and says a bounded wait
    assert not big.allowed and 1 <= big.retry_after <= 3600
    table.charge("198.51.100.9", 99)
    assert not table.take("198.51.100.9").allowed


def test_addresses_are_keyed_without_being_kept() -> None:
    assert address_key("2001:db8:1:2:3:4:5:6") == address_key("2001:db8:1:2:ffff::1") == "2001:db8:1:2::/64"
    assert address_key("::ffff:192.0.2.1") == "192.0.2.1"
    table = BucketTable(rate=1.0, burst=1, max_entries=3, clock=Clock())
    for i in range(10):
        table.take(f"192.0.2.{i}")
    assert len(table) == 3  # bounded memory: the least recently seen are forgotten
    assert all(b"192.0.2" not in key and len(key) == 32 for key in table._buckets)  # HMAC digests only


@pytest.fixture
def limited(server_factory: Callable[..., RunningServer]) -> RunningServer:
    limits = {"DENIABLE_INGEST_RATE": "2", "DENIABLE_INGEST_BURST": "1000",
              "DENIABLE_AUTH_FAILURE_RATE": "1", "DENIABLE_AUTH_FAILURE_BURST": "3"}  # fmt: skip
    return server_factory(workers=1, extra_env=limits)


def test_ingestion_past_the_bucket_is_429_with_retry_after_and_stores_nothing(limited: RunningServer) -> None:
    limited.create_campaign(id="rl", question="q", categories=["a", "b"], epsilon=1.0)
    path = "/api/v1/campaigns/rl/reports"
    first = limited.post(path, json={"reports": [{}] * 1000})  # 1,000 envelopes spend 1,000 tokens (all rejected)
    assert first.status_code == 200 and first.json()["rejected"] == 1000
    refused = limited.post(path, json={"reports": [{}]})
    assert refused.status_code == 429, refused.text
    assert refused.json()["error"]["code"] == "rate_limited"
    wait = int(refused.headers["Retry-After"])
    assert 1 <= wait <= 2
    assert limited.get("/healthz").status_code == 200  # other routes are not limited by ingestion
    time.sleep(wait + 0.2)
    too_big = limited.post(path, json={"reports": [{}] * 10})  # ~2-3 tokens back: a batch of 10 waits, stores nothing
    assert too_big.status_code == 429 and "nothing of this batch" in too_big.json()["error"]["message"]
    assert too_big.json()["error"]["code"] == "rate_limited"
    assert int(too_big.headers["Retry-After"]) >= 2
    assert limited.post(path, json={"reports": [{}]}).status_code == 200
    assert limited.estimate("rl")["n"] == 0
    assert "127.0.0.1 " not in limited.logs().split("deniable aggregator on", 1)[1].split("\n", 1)[1]


def test_failed_authentications_are_limited_per_address(limited: RunningServer) -> None:
    wrong = {"Authorization": "Bearer " + "w" * 43}
    for _ in range(3):
        assert limited.get("/api/v1/campaigns", headers=wrong).status_code == 401
    refused = limited.get("/api/v1/campaigns", headers=wrong)
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "too_many_failed_authentications"
    assert int(refused.headers["Retry-After"]) == 1
    # while the bucket is empty, even the right token waits (the limiter cannot tell guesses apart) ...
    assert limited.get("/api/v1/campaigns", role="analyst").status_code == 429
    # ... but requests without a token are not affected
    assert limited.get("/healthz").status_code == 200
    time.sleep(1.2)
    assert limited.get("/api/v1/campaigns", role="analyst").status_code == 200


def test_x_forwarded_for_counts_only_from_a_trusted_proxy(server_factory: Callable[..., RunningServer]) -> None:
    limits = {"DENIABLE_AUTH_FAILURE_RATE": "0.01", "DENIABLE_AUTH_FAILURE_BURST": "2"}
    wrong = "Bearer " + "w" * 43

    def failures(server: RunningServer, client: str) -> list[int]:
        headers = {"Authorization": wrong, "X-Forwarded-For": client}
        return [server.get("/api/v1/campaigns", headers=headers).status_code for _ in range(3)]

    direct = server_factory(workers=1, extra_env=limits)  # no trusted proxy: the header is the client's word
    assert failures(direct, "203.0.113.1") == [401, 401, 429]
    assert failures(direct, "203.0.113.2") == [429, 429, 429]  # a forged header does not buy a new bucket
    proxied = server_factory(workers=1, extra_env=limits, extra_args=("--trusted-proxies", "127.0.0.1"))
    assert failures(proxied, "203.0.113.1") == [401, 401, 429]
    assert failures(proxied, "203.0.113.2") == [401, 401, 429]  # behind the proxy: one bucket per real client
