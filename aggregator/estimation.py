"""Estimates served to analysts, computed from the stored tallies in O(k · groups), whatever n is.

Local campaigns: ``mechanism.estimate_tally(Tally(n, support))`` gives the unbiased counts
ĉ_v = (S_v − n·q*)/(p* − q*) with the plug-in variance of Wang et al. (2017, Thm. 2), and
``Estimate.to_dict`` adds stderr, normal-approximation CIs, proportions and the consistent (projected,
biased) counts. Reading them costs no privacy: the reports are already ε-LDP, and any analysis of them is
post-processing. A per-group estimate uses only that group's reports (group fields are public attributes);
a grouped estimate lists every declared group value (``group_values``), an empty group with n = 0.
A shuffled campaign is estimated as a local one (its reports are ε₀-LDP too) and its body adds
``privacy``: ε₀, and the central (ε, δ) the aggregator's view satisfies, from the amplification bound
(:func:`deniable.shared.amplification.amplify`) at the size of every batch actually received. Batches are
disjoint sets of devices, so each device is protected by the bound of its own batch: the campaign's ε is
the largest over its batches, that of the smallest one.
A recurring campaign is estimated one round at a time (``round`` is required): each round's estimate uses
that round's reports only, in which every device counts at most once.

Central campaigns delegate to :func:`deniable.aggregator.central.release`, which adds calibrated noise and
charges the campaign's ε budget inside one write transaction. A grouped release passes the declared group
values, so every declared group is released (with noise) whether or not anyone is in it: which groups
appear then reveals nothing. A central campaign whose descriptor predates ``group_values`` has no declared
domain, and its grouped releases are refused rather than listing the groups present in the data.
"""

from __future__ import annotations

import datetime as dt
import functools
from typing import Any

from deniable.aggregator import central, survey_estimates, survey_tally
from deniable.aggregator.accountant import subsample_rate
from deniable.aggregator.database import Connection
from deniable.aggregator.release_policy import DEFAULT_POLICY, ReleasePolicy, check_release
from deniable.aggregator.store import OVERALL, Store
from deniable.aggregator.top import release_top
from deniable.shared.amplification import Amplification, amplify
from deniable.shared.descriptor import CampaignConfig
from deniable.shared.errors import InvalidParameter
from deniable.shared.fields import check_round
from deniable.shared.mechanisms import Tally
from deniable.shared.noise import NOISES, check_noise

__all__ = ["central_top", "estimate", "release_policy", "round_of", "stored_estimate"]


def _check_group_by(config: CampaignConfig, group_by: str | None) -> None:
    if group_by is not None and group_by not in config.group_fields:
        fields = ", ".join(repr(f) for f in config.group_fields) or "none"
        raise InvalidParameter(
            f"'group_by' must be one of the group fields of campaign {config.id!r} ({fields}), "
            f"got {group_by!r}"
        )


def _local_one(config: CampaignConfig, stored: Tally, level: float) -> dict[str, Any]:
    mechanism = config.build_mechanism()
    estimate_ = mechanism.estimate_tally(stored)
    body: dict[str, Any] = estimate_.to_dict(level=level, categories=list(config.categories))
    return body


@functools.lru_cache(maxsize=256)
def _amplify(n: int, epsilon0: float, delta: float) -> Amplification:
    return amplify(n, epsilon0, delta)


def shuffled_privacy(store: Store, config: CampaignConfig) -> dict[str, Any]:
    """ε₀ and the central (ε, δ) of a shuffled campaign's batches as received (``epsilon`` null before any)."""
    assert config.shuffler is not None and config.delta is not None
    sizes = [accepted for _, accepted in store.shuffled_batches(config.id) if accepted > 0]
    body: dict[str, Any] = {
        "epsilon0": config.epsilon,
        "delta": config.delta,
        "min_batch": config.shuffler.min_batch,
        "batches": len(sizes),
        "smallest_batch": min(sizes) if sizes else None,
        "epsilon": None,
        "method": None,
        "bounds": None,
    }
    if sizes and min(sizes) < 2:  # one report of a batch decoded: nothing to hide it among
        body.update(epsilon=config.epsilon, method="local (no amplification)")
    elif sizes:
        worst = _amplify(min(sizes), float(config.epsilon), float(config.delta))
        body.update(epsilon=worst.epsilon, method=worst.method,
                    bounds={"closed_form": worst.closed_form, "numerical": worst.numerical})  # fmt: skip
    return body


def round_of(config: CampaignConfig, round: str | None) -> str:
    """The round to estimate: a valid label for a recurring campaign, ``''`` (its only round) otherwise."""
    if config.recurring and round is None:
        raise InvalidParameter(
            f"campaign {config.id!r} is recurring: pass 'round' to say which round to estimate; its rounds "
            f"with reports are listed by GET /api/v1/campaigns/{config.id}/rounds"
        )
    if round is None:
        return ""
    if not config.recurring:
        raise InvalidParameter(
            f"'round' applies to recurring campaigns only; campaign {config.id!r} is not recurring, "
            "leave 'round' out"
        )
    return check_round(round, InvalidParameter)


def local_estimate(
    store: Store,
    config: CampaignConfig,
    *,
    group_by: str | None,
    level: float,
    round: str | None = None,
    group_after: str | None = None,
) -> dict[str, Any]:
    """The estimate of a local campaign, overall or per value of ``group_by``, of one round if recurring.

    A grouped estimate lists one page of its groups (:func:`~deniable.aggregator.survey_tally.group_page`);
    when more follow, ``next_group_after`` names the last one listed, and ``group_after`` asks for the groups
    after it.
    """
    _check_group_by(config, group_by)
    round_ = round_of(config, round)
    head: dict[str, Any] = {"campaign_id": config.id, "trust_model": config.trust_model}
    if config.trust_model == "shuffled":
        head["privacy"] = shuffled_privacy(store, config)
    if config.recurring:
        head["round"] = round_
    empty = Tally.zero(config.k)
    overall = store.tallies(config.id, round=round_).get(OVERALL[1], empty)
    if group_by is None:
        return {**head, **_local_one(config, overall, level)}
    # grouped: the overall n and the mechanism head the groups; the overall estimate itself is not computed
    mechanism = config.build_mechanism()
    groups = store.tallies(config.id, group_by, round=round_)
    values, more = survey_tally.group_page(config, group_by, groups, group_after)
    body = {
        **head,
        "mechanism": mechanism.name,
        "epsilon": mechanism.epsilon,
        "n": overall.n,
        "level": level,
        "group_by": group_by,
        "groups": {value: _local_one(config, groups.get(value, empty), level) for value in values},
    }
    if more:
        body["next_group_after"] = values[-1]
    return body


def release_policy(store: Store, conn: Connection, campaign_id: str) -> ReleasePolicy:
    """The campaign's release policy: the admin's, else the defaults."""
    row = store.release_policy(conn, campaign_id)
    return DEFAULT_POLICY if row is None else ReleasePolicy(row.min_reports, row.min_refresh_interval_s)


def _check_policy(store: Store, conn: Connection, campaign_id: str, slot: str, *, refresh: bool) -> None:
    """Refuse (:class:`ReleaseRefused`) a draw that would spend budget against the campaign's release policy;
    a release served from its slot spends nothing and passes."""
    stored = store.has_release(conn, campaign_id, slot)
    if refresh or not stored:
        check_release(
            release_policy(store, conn, campaign_id),
            campaign_id=campaign_id,
            n_reports=store.get_campaign(campaign_id, conn=conn).n_reports,
            refresh=refresh and stored,
            last_release_at=store.last_release_at(conn, campaign_id),
            now=dt.datetime.now(dt.UTC),
        )


def central_estimate(
    store: Store,
    config: CampaignConfig,
    *,
    group_by: str | None,
    level: float,
    noise: str | None,
    refresh: bool = False,
    role: str = "analyst",
    sample: str | None = None,
) -> dict[str, Any]:
    """A noisy release of a central campaign: the stored one (free), or a new draw when ``refresh``
    (charged to the budget); ``sample`` is a Poisson-subsampling rate in (0, 1] applied first.

    A draw that spends budget must pass the campaign's release policy (:mod:`deniable.aggregator.release_policy`)
    and is appended to the release log, with the ``role`` that asked and its cost in natural form, in the
    same transaction that spends (:func:`deniable.aggregator.central.release` writes the row).
    """
    _check_group_by(config, group_by)
    if group_by is not None and group_by in config.undeclared_group_fields:
        raise InvalidParameter(
            f"campaign {config.id!r} declares no group_values for {group_by!r} (it predates them): a grouped "
            "release would list only the groups present in the data and so reveal, without noise, that "
            "someone in them took part; ask for the ungrouped release, or create a new campaign that "
            "declares group_values"
        )
    options: dict[str, Any] = {} if noise is None else {"noise": noise}
    rate = None
    if sample is not None:
        try:
            options["sample"] = float(sample)
        except ValueError:
            raise InvalidParameter(f"'sample' must be a rate in (0, 1], got {sample[:32]!r}") from None
        rate = subsample_rate(options["sample"], config.adjacency or "add-remove")
    noise_name = NOISES[0] if noise is None else noise
    check_noise(noise_name)
    slot = central.release_key(group_by, noise_name, sample=None if rate is None else str(rate))
    parameters: dict[str, Any] = {"group_by": group_by, "noise": noise_name, "refresh": refresh, "level": level}
    if sample is not None:
        parameters["sample"] = options["sample"]

    def draw(conn: Connection) -> dict[str, Any]:  # run again from scratch if a concurrent spend conflicts
        _check_policy(store, conn, config.id, slot, refresh=refresh)
        return central.release(
            conn,
            config.id,
            epsilon=config.epsilon,
            k=config.k,
            categories=list(config.categories),
            group_by=group_by,
            group_values=None if group_by is None else list(config.group_values[group_by]),
            level=level,
            refresh=refresh,
            delta=config.delta,
            budget=config.privacy_budget,
            group_size=config.group_size or 1,
            role=role,
            parameters=parameters,
            **options,
        )

    body: dict[str, Any] = store.retrying(draw)
    return {"campaign_id": config.id, **body}


def central_top(
    store: Store, config: CampaignConfig, *, j: int, refresh: bool = False, role: str = "analyst"
) -> dict[str, Any]:
    """The j most common answers of a central campaign (exponential mechanism, :mod:`deniable.aggregator.top`),
    under the same release policy and log as a histogram release."""
    if config.trust_model != "central":
        raise InvalidParameter(
            "'top' applies to central campaigns only: a local campaign's most common answer is read off its "
            "estimate, which spends nothing"
        )
    slot = central.release_key(None, "exponential", top=j)
    def draw(conn: Connection) -> dict[str, Any]:
        _check_policy(store, conn, config.id, slot, refresh=refresh)
        return release_top(
            conn, config.id, epsilon=config.epsilon, categories=list(config.categories), j=j,
            budget=config.privacy_budget, adjacency=config.adjacency or "add-remove",
            group_size=config.group_size or 1, refresh=refresh, role=role,
            parameters={"top": j, "refresh": refresh},
        )  # fmt: skip

    body = store.retrying(draw)
    return {"campaign_id": config.id, **body}


def estimate(
    store: Store,
    config: CampaignConfig,
    *,
    group_by: str | None,
    level: float,
    noise: str | None,
    refresh: bool = False,
    round: str | None = None,
    role: str = "analyst",
    sample: str | None = None,
    group_after: str | None = None,
    question: str | None = None,
) -> dict[str, Any]:
    """The estimate route's body for either trust model (``round``: recurring campaigns only); ``role`` is
    the caller's, recorded with each central release; ``group_after`` pages a local grouped estimate;
    ``question`` keeps one question of a survey (format 3; for formats 1 and 2 only their one question,
    ``answer``, which changes nothing)."""
    if config.is_survey:
        return _survey_estimate(
            store, config, question=question, group_by=group_by, level=level, noise=noise, refresh=refresh,
            round=round, role=role, sample=sample, group_after=group_after,
        )  # fmt: skip
    if question is not None:
        config.question_by_id(question)
    if config.trust_model == "central":
        round_of(config, round)
    _refuse_options(config, group_by=group_by, group_after=group_after, noise=noise, refresh=refresh, sample=sample)
    if config.trust_model == "central":
        return central_estimate(
            store, config, group_by=group_by, level=level, noise=noise, refresh=refresh, role=role, sample=sample
        )
    return local_estimate(store, config, group_by=group_by, level=level, round=round, group_after=group_after)


def _refuse_options(
    config: CampaignConfig, *, group_by: str | None, group_after: str | None, noise: str | None, refresh: bool,
    sample: str | None,
) -> None:  # fmt: skip
    """Refuse (``InvalidParameter``) the estimate options that do not apply to the campaign's trust model,
    one-question campaign or survey alike: ``group_after`` for a central release (it lists every declared
    group); ``sample``, ``noise`` and ``refresh`` for a local estimate, and ``group_after`` without
    ``group_by``."""
    if config.trust_model == "central":
        if group_after is not None:
            raise InvalidParameter(
                "'group_after' pages local grouped estimates; a central release lists every declared group"
            )
        return
    if sample is not None:
        raise InvalidParameter("'sample' applies to central campaigns only")
    if noise is not None:
        raise InvalidParameter("'noise' applies to central campaigns only; local reports carry their own noise")
    if refresh:
        raise InvalidParameter(
            "'refresh' applies to central campaigns only; a local estimate always covers every stored report"
        )
    if group_after is not None and group_by is None:
        raise InvalidParameter("'group_after' pages a grouped estimate; pass it with 'group_by'")


def _survey_estimate(
    store: Store, config: CampaignConfig, *, question: str | None, group_by: str | None, level: float,
    noise: str | None, refresh: bool, round: str | None, role: str, sample: str | None, group_after: str | None,
) -> dict[str, Any]:  # fmt: skip
    """A survey's estimate body (:mod:`deniable.aggregator.survey_estimates`), with the same refusals of
    options that do not apply as a one-question campaign's (:func:`_refuse_options`)."""
    _check_group_by(config, group_by)
    round_ = round_of(config, round)
    _refuse_options(config, group_by=group_by, group_after=group_after, noise=noise, refresh=refresh, sample=sample)
    if config.trust_model == "central":
        return survey_estimates.survey_central_estimate(
            store, config, question=question, group_by=group_by, level=level, noise=noise, refresh=refresh,
            role=role, sample=sample,
        )  # fmt: skip
    return survey_estimates.survey_local_estimate(
        store, config, question=question, group_by=group_by, level=level, round_=round_, group_after=group_after
    )


def stored_estimate(
    store: Store, config: CampaignConfig, *, group_by: str | None, level: float, round: str | None = None,
    question: str | None = None,
) -> dict[str, Any] | None:
    """The estimate route's body when reading it spends nothing, else None.

    A local estimate always qualifies (post-processing). A central one only when its release of this
    grouping is already kept (served again for free); the dashboard shows that one and offers the first
    draw as an explicit, CSRF-protected action that says what it spends.
    """
    if config.trust_model != "central":
        return estimate(store, config, group_by=group_by, level=level, noise=None, round=round, question=question)
    _check_group_by(config, group_by)
    if config.is_survey:
        slots = survey_estimates.question_slots(config, question)
        keys = [central.release_key(group_by, NOISES[0], question=slot.question.id) for slot in slots]
        if not all(store.release_exists(config.id, key) for key in keys):
            return None
    elif not store.release_exists(config.id, central.release_key(group_by, NOISES[0])):
        return None
    return estimate(store, config, group_by=group_by, level=level, noise=None, round=round, question=question)
