"""When a central campaign may spend ε: the admin's release policy, checked before every new draw.

A central campaign's budget is spent by releases (``aggregator/central.py``). Without a policy an analyst
could spend all of it in seconds, and on nothing: four ``?refresh=true`` on an empty campaign with budget 2
at ε = 0.5 spent the whole budget (issue 12 item 6). The policy has two rules, checked in the release's own
write transaction (so that two concurrent requests cannot both pass):

``min_reports``
    No release that spends ε (a first draw or a refresh) before the campaign holds this many reports.
    Serving a release already stored is free and always allowed.
``min_refresh_interval``
    A refresh (a new draw replacing a stored release) only once this many seconds have passed since the
    campaign's last ε-spending release. A first draw of a slot never made (another ``group_by`` or noise)
    is not a refresh: the slots are few (``(group fields + 1) × noises``), each asks a different question.

A refusal (:class:`~deniable.shared.errors.ReleaseRefused`, HTTP 409) names the rule and when the next
release is possible. The defaults (:mod:`deniable.shared.limits`) apply until the admin sets a policy.

What the ``min_reports`` rule discloses: the gate is a deterministic function of the exact count n. Under
``replace`` adjacency n is public and the gate reveals nothing more. Under ``add-remove`` it reveals, to an
analyst, whether n ≥ min_reports at the time of asking (one bit, not protected by noise; in effect the
moment the count crossed the threshold). ``docs/central.md`` states this limit.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from typing import Any

from deniable.shared.errors import InvalidConfig, ReleaseRefused
from deniable.shared.limits import (
    DEFAULT_MIN_REFRESH_INTERVAL_SECONDS,
    DEFAULT_MIN_REPORTS_BEFORE_RELEASE,
    MAX_MIN_REPORTS_BEFORE_RELEASE,
    MAX_REFRESH_INTERVAL_SECONDS,
)

__all__ = ["DEFAULT_POLICY", "ReleasePolicy", "check_release", "next_refresh_at", "parse_policy"]

#: The keys of a policy body (``PUT .../release-policy`` or ``release_policy`` at creation); both required.
POLICY_FIELDS = ("min_reports", "min_refresh_interval_seconds")


@dataclass(frozen=True, slots=True)
class ReleasePolicy:
    """The two rules of a central campaign's release policy (see the module docstring)."""

    min_reports: int
    min_refresh_interval_seconds: int

    def to_json(self) -> dict[str, int]:
        """The policy as its request body."""
        return {
            "min_reports": self.min_reports,
            "min_refresh_interval_seconds": self.min_refresh_interval_seconds,
        }


DEFAULT_POLICY = ReleasePolicy(DEFAULT_MIN_REPORTS_BEFORE_RELEASE, DEFAULT_MIN_REFRESH_INTERVAL_SECONDS)


def _bounded_int(body: dict[str, Any], name: str, high: int) -> int:
    value = body[name]
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
        shown = repr(value) if isinstance(value, int | float | str) and len(repr(value)) <= 40 else type(value).__name__
        raise InvalidConfig(f"'release_policy.{name}' must be a whole number from 0 to {high}, got {shown}")
    return value


def parse_policy(body: object) -> ReleasePolicy:
    """The policy in a request body ``{"min_reports": n, "min_refresh_interval_seconds": s}``.

    Raises :class:`InvalidConfig` (422) naming the key that is missing, unknown or out of range.
    """
    if not isinstance(body, dict):
        raise InvalidConfig(
            "the release policy must be a JSON object with the keys 'min_reports' and 'min_refresh_interval_seconds'"
        )
    unknown = sorted(str(key)[:40] for key in set(body) - set(POLICY_FIELDS))
    missing = [key for key in POLICY_FIELDS if key not in body]
    if unknown or missing:
        parts = [f"missing {missing}"] if missing else []
        parts += [f"unknown {unknown[:5]}"] if unknown else []
        raise InvalidConfig(f"release policy fields are wrong: {'; '.join(parts)}; allowed: {list(POLICY_FIELDS)}")
    return ReleasePolicy(
        _bounded_int(body, "min_reports", MAX_MIN_REPORTS_BEFORE_RELEASE),
        _bounded_int(body, "min_refresh_interval_seconds", MAX_REFRESH_INTERVAL_SECONDS),
    )


def next_refresh_at(policy: ReleasePolicy, last_release_at: str | None) -> dt.datetime | None:
    """The earliest time a refresh passes the interval rule (``None``: at once)."""
    if last_release_at is None or policy.min_refresh_interval_seconds == 0:
        return None
    return dt.datetime.fromisoformat(last_release_at) + dt.timedelta(seconds=policy.min_refresh_interval_seconds)


def check_release(
    policy: ReleasePolicy,
    *,
    campaign_id: str,
    n_reports: int,
    refresh: bool,
    last_release_at: str | None,
    now: dt.datetime,
) -> None:
    """Raise :class:`ReleaseRefused` unless the policy allows a release that spends ε now.

    ``refresh`` is true when the release would replace a stored one (a refresh proper); ``last_release_at``
    is the campaign's last ε-spending release (UTC, ISO 8601) or ``None``.
    """
    if n_reports < policy.min_reports:
        raise ReleaseRefused(
            f"campaign {campaign_id!r} holds fewer reports than its release policy's minimum of "
            f"{policy.min_reports}, so no release may spend privacy budget yet (rule min_reports); a release "
            "becomes possible once that many reports have arrived. The admin sets the policy with "
            f"PUT /api/v1/campaigns/{campaign_id}/release-policy",
            rule="min_reports",
            next_release_at=None,
            retry_after=None,
        )
    if not refresh:
        return
    earliest = next_refresh_at(policy, last_release_at)
    if earliest is not None and now < earliest:
        wait = max(1, math.ceil((earliest - now).total_seconds()))
        raise ReleaseRefused(
            f"campaign {campaign_id!r} spent privacy budget on a release at {last_release_at}; its release "
            f"policy allows a refresh only {policy.min_refresh_interval_seconds} s after that (rule "
            f"min_refresh_interval), so the next refresh is possible at {earliest.isoformat()} (in {wait} s). "
            "The stored release is served again for free without refresh",
            rule="min_refresh_interval",
            next_release_at=earliest.isoformat(),
            retry_after=wait,
        )
