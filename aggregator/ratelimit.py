"""Token buckets per client address, in memory: the aggregator's rate limits.

A bucket of size ``burst`` refills at ``rate`` tokens per second; a request that needs ``cost`` tokens
passes when the bucket holds them (and takes them), else it is refused with the time after which it would
pass: ``wait = (cost − tokens) / rate``, answered as ``429`` with ``Retry-After: ⌈wait⌉``. Over any window of
``t`` seconds an address gets at most ``burst + rate·t`` tokens.

Privacy of the table: a client address is never logged or stored. In memory a bucket is keyed by an
HMAC-SHA256 of the address under a random key drawn when the process starts (so not even a memory dump
lists addresses without also holding the key), and IPv6 addresses are keyed by their /64 prefix, which
one subscriber usually holds whole (otherwise one client would get 2⁶⁴ buckets). The table holds at most
``max_entries`` buckets; past it the least recently used one is forgotten (it has refilled the longest, so
forgetting it gives its client at most a full bucket back).

Limits are per process: with ``w`` worker processes an address gets at most ``w`` times the configured
figures (the kernel spreads connections over the processes). They bound the speed of one client, not the
number of devices a determined attacker forges from many addresses (that is what admission tokens bound).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import math
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from deniable.shared.limits import RATE_LIMIT_TABLE_MAX, RETRY_AFTER_MAX

__all__ = ["SIMULATION_ENV", "BucketTable", "Decision", "address_key"]

#: Environment for a ``deniable serve`` whose clients are a simulation on one machine (the demo, the
#: benchmarks, the test suite): every simulated device shares the loopback address, so the per-address
#: limits are lifted far above what the simulation sends. Never for a server real devices reach.
SIMULATION_ENV = {
    "DENIABLE_INGEST_RATE": "1000000",
    "DENIABLE_INGEST_BURST": "10000000",
    "DENIABLE_AUTH_FAILURE_RATE": "1000000",
    "DENIABLE_AUTH_FAILURE_BURST": "10000000",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """The verdict on one request: allowed, or refused with the seconds to wait (``Retry-After``)."""

    allowed: bool
    retry_after: int = 0


def address_key(address: str) -> str:
    """The part of a client address one bucket covers: the address itself (IPv4), or its /64 (IPv6)."""
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return address  # a Unix socket or another transport: one bucket for the peer name
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        return str(ipaddress.IPv6Network((parsed, 64), strict=False))
    return str(parsed)


class BucketTable:
    """Token buckets of ``burst`` tokens refilled at ``rate`` per second, one per client address."""

    def __init__(
        self,
        *,
        rate: float,
        burst: int,
        max_entries: int = RATE_LIMIT_TABLE_MAX,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not (rate > 0 and burst >= 1 and max_entries >= 1):
            raise ValueError(f"a bucket needs rate > 0, burst ≥ 1, max_entries ≥ 1; got {rate}, {burst}, {max_entries}")
        self.rate = float(rate)
        self.burst = int(burst)
        self.max_entries = max_entries
        self._clock = clock
        self._key = secrets.token_bytes(32)
        self._buckets: OrderedDict[bytes, tuple[float, float]] = OrderedDict()  # key → (tokens, stamp)
        self._lock = threading.Lock()

    def _slot(self, address: str) -> bytes:
        return hmac.new(self._key, address_key(address).encode("utf-8", "replace"), hashlib.sha256).digest()

    def _tokens(self, slot: bytes, now: float) -> float:
        tokens, stamp = self._buckets.get(slot, (float(self.burst), now))
        return min(float(self.burst), tokens + (now - stamp) * self.rate)

    def _store(self, slot: bytes, tokens: float, now: float) -> None:
        self._buckets[slot] = (tokens, now)
        self._buckets.move_to_end(slot)
        while len(self._buckets) > self.max_entries:
            self._buckets.popitem(last=False)

    def _wait(self, missing: float) -> int:
        return min(RETRY_AFTER_MAX, max(1, math.ceil(missing / self.rate)))

    def take(self, address: str, cost: float = 1.0) -> Decision:
        """Take ``cost`` tokens from the address's bucket if it holds them; else refuse (nothing taken)."""
        with self._lock:
            now = self._clock()
            slot = self._slot(address)
            tokens = self._tokens(slot, now)
            if cost > self.burst:  # can never pass: say how long a full bucket takes, capped
                self._store(slot, tokens, now)
                return Decision(allowed=False, retry_after=self._wait(cost - tokens))
            if tokens >= cost:
                self._store(slot, tokens - cost, now)
                return Decision(allowed=True)
            self._store(slot, tokens, now)
            return Decision(allowed=False, retry_after=self._wait(cost - tokens))

    def check(self, address: str, cost: float = 1.0) -> Decision:
        """Whether ``cost`` tokens are there, without taking them."""
        with self._lock:
            now = self._clock()
            tokens = self._tokens(self._slot(address), now)
            return Decision(
                allowed=True
            ) if tokens >= cost else Decision(allowed=False, retry_after=self._wait(cost - tokens))

    def charge(self, address: str, cost: float = 1.0) -> None:
        """Take ``cost`` tokens whatever the bucket holds (down to empty): a failure that already happened."""
        with self._lock:
            now = self._clock()
            slot = self._slot(address)
            self._store(slot, max(0.0, self._tokens(slot, now) - cost), now)

    def __len__(self) -> int:
        return len(self._buckets)
