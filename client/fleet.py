"""Many simulated devices against a real aggregator, cheaply: the demo's, benchmarks' and tests' fleet.

:func:`simulate_fleet` fetches and validates the campaign config once, then stands up one in-memory device
per value: a fresh 32-byte secret from :mod:`secrets`, its pseudonym, the mechanism's exact randomizer and
an HPKE seal, exactly as :class:`~deniable.client.Client` does for one device, without a ledger or a
database per device (each simulated device answers once, so its ledger would hold one spend). The
envelopes are delivered in batches with the outbox's retry and backoff, one batch in flight while the next
is being sealed.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from deniable.shared.contract import CLIENT_BATCH
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.errors import CampaignClosed, InvalidParameter, TransportError
from deniable.shared.fields import check_round
from deniable.shared.sampling import RandBelow

from .config import fetch_config
from .outbox import Delivery, RetryPolicy, post_batch
from .report import central_refusal, normalize_answers, randomize_index, randomize_survey, seal_answer
from .transport import HTTPTransport, Transport

__all__ = ["FleetResult", "simulate_fleet"]


@dataclass(frozen=True)
class FleetResult:
    """What a fleet delivered: per-status counts, the batches sent and the wall time in seconds.

    ``unsent`` counts reports still unsettled when the retries of a batch ran out (the aggregator was
    unreachable); ``rejections`` lists ``(report_id, code, reason)`` the aggregator refused.
    """

    campaign_id: str
    devices: int
    accepted: int
    duplicate: int
    rejected: int
    unsent: int
    batches: int
    seconds: float
    rejections: tuple[tuple[str, str, str], ...] = field(default=(), repr=False)

    @property
    def delivered(self) -> int:
        """Reports the aggregator holds (accepted or duplicate)."""
        return self.accepted + self.duplicate

    @property
    def reports_per_second(self) -> float:
        """Throughput of the whole run (randomize + encrypt + deliver)."""
        return self.devices / self.seconds if self.seconds > 0 else float("inf")


def _check_groups(
    config: CampaignConfig, groups: Sequence[Mapping[str, str]] | None, round: str | None
) -> None:
    """Validate the round and every distinct groups dict against the campaign before any device is simulated."""
    if config.recurring and round is None:
        raise InvalidParameter(
            f"campaign {config.id!r} is recurring and collects in rounds: pass round='<label>' (e.g. '2026-11-29')"
        )
    if round is not None:
        if not config.recurring:
            raise InvalidParameter(
                f"campaign {config.id!r} is not recurring: it counts one answer per device, leave round=None"
            )
        check_round(round, InvalidParameter)
    probe = (randomize_survey(config, {q.id: q.dummy for q in config.questions}) if config.is_survey
             else randomize_index(config, 0))
    seen: set[str] = set()
    for entry in groups or ():
        key = repr(sorted(entry.items())) if isinstance(entry, Mapping) else repr(entry)
        if key not in seen:
            seen.add(key)
            config.make_payload(probe, entry, round)  # raises InvalidParameter naming the problem


def simulate_fleet(
    url: str,
    campaign_id: str,
    values: Sequence[Any],
    groups: Sequence[Mapping[str, str]] | None = None,
    batch_size: int = CLIENT_BATCH,
    *,
    progress: Callable[[int, int], None] | None = None,
    transport: Transport | None = None,
    allow_central: bool = False,
    retry: RetryPolicy | None = None,
    timeout: float = 30.0,
    round: str | None = None,
    randbelow: RandBelow | None = None,
) -> FleetResult:
    """One simulated device per entry of ``values`` answers ``campaign_id`` once: category labels, or for a
    survey (format 3) one answers dict per device (``{"smoke": "yes", "age": 37, "apps": ["mail"]}``,
    checked as :meth:`~deniable.client.Client.submit` checks it; a sampling survey's device draws its
    question from fresh randomness).

    ``groups`` is None or one dict per device. ``progress(done, total)`` is called after each batch.
    ``round`` is the round label every device answers in (required for a recurring campaign, refused
    otherwise); each simulated device is new, so its randomized report is a fresh draw of the same law as
    a real device's permanent response.
    ``randbelow`` replaces ``secrets.randbelow`` in every randomizer (a sampling survey's draw included) for
    reproducible tests and simulations only (e.g. :func:`~deniable.shared.sampling.seeded_randbelow`);
    real devices never take it.
    Raises ``InvalidParameter`` for an unknown label or bad groups before anything is sent,
    ``UnknownCampaign``/``InvalidConfig``/``CampaignClosed`` for the campaign, and ``TransportError`` if
    the config cannot be fetched.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 0 < batch_size <= CLIENT_BATCH:
        raise InvalidParameter(f"'batch_size' must be an integer in [1, {CLIENT_BATCH}], got {batch_size!r}")
    if groups is not None and len(groups) != len(values):
        raise InvalidParameter(
            f"'groups' must hold one dict per value: got {len(groups)} for {len(values)} values"
        )
    policy = retry or RetryPolicy()
    link = transport or HTTPTransport(url, timeout=timeout)
    config = fetch_config(link, campaign_id)
    if config.status == "closed":
        raise CampaignClosed(f"campaign {campaign_id!r} is closed; it accepts no more reports")
    if config.trust_model == "central" and not allow_central:
        raise central_refusal(config)
    # every answer checked before any work: labels of a one-question campaign, answer dicts of a survey
    indices: list[Any] = (
        [normalize_answers(config, answers) for answers in values] if config.is_survey
        else [config.category_index(label) for label in values]
    )  # fmt: skip
    _check_groups(config, groups, round)
    public_key = config.public_key_bytes
    # a shuffled campaign's devices post to its shuffler, never to the aggregator (docs/wire-format.md §12)
    post_link = link if config.shuffler is None or transport is not None else HTTPTransport(
        config.shuffler.url, timeout=timeout
    )

    def devices(start: int, stop: int) -> list[tuple[str, str]]:
        envelopes = []
        for i in range(start, stop):
            draw = secrets.randbelow if randbelow is None else randbelow
            report = (randomize_survey(config, indices[i], draw) if config.is_survey
                      else randomize_index(config, indices[i], draw))
            device_groups = None if groups is None else groups[i]
            sealed = seal_answer(config, secrets.token_bytes(32), report, device_groups, public_key=public_key,
                                 round=round)  # fmt: skip
            envelopes.append((sealed.report_id, sealed.to_text()))
        return envelopes

    started = time.perf_counter()
    accepted = duplicate = unsent = batches = 0
    rejections: list[tuple[str, str, str]] = []
    total = len(indices)
    bounds = [(start, min(start + batch_size, total)) for start in range(0, total, batch_size)]
    # One batch in flight while the next is randomized and sealed: the aggregator decrypts batch i while
    # this process encrypts batch i+1.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="deniable-fleet") as sender:
        in_flight: Future[Delivery] | None = None
        for n, (start, stop) in enumerate([*bounds, (total, total)]):
            envelopes = devices(start, stop) if n < len(bounds) else []
            if in_flight is not None:
                delivery = in_flight.result()
                done = bounds[n - 1][1]
                batches += 1
                accepted += delivery.accepted
                duplicate += len(delivery.delivered) - delivery.accepted
                rejections.extend(delivery.rejected)
                unsent += len(delivery.unsettled)
                if delivery.error is not None and not delivery.delivered:
                    raise TransportError(
                        f"fleet stopped after {bounds[n - 1][0]} of {total} devices: {delivery.error}"
                    )
                if progress is not None:
                    progress(done, total)
            in_flight = sender.submit(post_batch, post_link, campaign_id, envelopes, policy) if envelopes else None
    return FleetResult(
        campaign_id=campaign_id,
        devices=total,
        accepted=accepted,
        duplicate=duplicate,
        rejected=len(rejections),
        unsent=unsent,
        batches=batches,
        seconds=time.perf_counter() - started,
        rejections=tuple(rejections),
    )
