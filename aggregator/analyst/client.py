"""The analyst's Python client: campaigns, estimates, releases and timelines of an aggregator over HTTP.

::

    from deniable.analyst import Analyst

    analyst = Analyst("http://127.0.0.1:8000")          # token from DENIABLE_TOKEN or DENIABLE_TOKEN_FILE
    for campaign in analyst.iter_campaigns(status="open"):
        print(campaign["id"], campaign["n_reports"])
    table = analyst.estimates("smoking", group_by="country")
    table.to_csv("smoking.csv"); frame = table.to_pandas()   # pandas: optional

Reading estimates of a **local** campaign costs no privacy (post-processing of ε-LDP reports). Reading a
**central** campaign's estimate serves its stored release for free, but the first release of a grouping,
and every ``refresh=True``, spends ε from the campaign's budget (the server's accountant decides and
refuses past the budget with :class:`~deniable.shared.errors.BudgetExceeded`).

Errors are the SDK's typed errors (see :mod:`deniable.analyst.http`). Standard library and
``deniable.shared`` only, like the device client.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deniable.analyst.http import AggregatorConnection, resolve_token, resolve_url
from deniable.analyst.records import RELEASE_COLUMNS, Records, estimate_rows, timeline_rows
from deniable.shared.contract import CAMPAIGNS_PATH, campaign_path
from deniable.shared.errors import InvalidParameter
from deniable.shared.limits import CAMPAIGN_PAGE_DEFAULT, CAMPAIGN_PAGE_MAX, CAMPAIGN_STATUSES, TIMELINE_BUCKETS

__all__ = ["Analyst", "CampaignPage"]


@dataclass(frozen=True)
class CampaignPage:
    """One page of the campaign list: ``campaigns`` (dicts), how many match in ``total``, and where the
    next page starts (``next_offset``, None on the last page)."""

    campaigns: list[dict[str, Any]]
    total: int
    offset: int
    next_offset: int | None

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.campaigns)

    def __len__(self) -> int:
        return len(self.campaigns)


def _path(campaign_id: str, *rest: str) -> str:
    if not isinstance(campaign_id, str) or not campaign_id:
        raise InvalidParameter(f"the campaign id must be a non-empty string, got {campaign_id!r}")
    return campaign_path(campaign_id, *rest)


class Analyst:
    """An analyst's (or admin's) session with one aggregator.

    ``url`` defaults to ``DENIABLE_URL`` (else ``http://127.0.0.1:8000``); the token is ``token``, else the
    first line of ``token_file``, else ``DENIABLE_TOKEN``, else the first line of ``DENIABLE_TOKEN_FILE``. Creating and
    closing campaigns needs the admin token; everything else the analyst token.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        token: str | None = None,
        token_file: str | Path | None = None,
        timeout: float = 60.0,
    ) -> None:
        self.url = resolve_url(url)
        self._http = AggregatorConnection(self.url, resolve_token(token, token_file=token_file), timeout=timeout)

    def __repr__(self) -> str:
        return f"Analyst({self.url!r})"

    # -- campaigns -------------------------------------------------------------------------------

    def create_campaign(
        self, id: str, question: str, categories: Sequence[str], epsilon: float, **options: Any
    ) -> dict[str, Any]:
        """Create a campaign (admin token); return its public config. ``options`` are the other fields of
        ``POST /api/v1/campaigns``: ``mechanism``, ``group_fields``, ``group_values``, ``trust_model``,
        ``budget``, ``adjacency``, ``recurring``."""
        body = {"id": id, "question": question, "categories": list(categories), "epsilon": epsilon, **options}
        config: dict[str, Any] = self._http.request("POST", CAMPAIGNS_PATH, body=body)
        return config

    def create_survey(
        self, id: str, title: str, questions: Sequence[Mapping[str, Any]], epsilon: float, **options: Any
    ) -> dict[str, Any]:
        """Create a survey (admin token): ``questions`` as ``POST /api/v1/campaigns`` takes them
        (``{"id": "age", "text": "How old are you?", "kind": "number", "range": [18, 99]}``, kinds choice,
        multi and number); ``options``: ``split`` (per_question, sampling, auto) and the fields of
        :meth:`create_campaign`. Returns its public config (format 3)."""
        body = {"id": id, "title": title, "questions": [dict(q) for q in questions], "epsilon": epsilon, **options}
        config: dict[str, Any] = self._http.request("POST", CAMPAIGNS_PATH, body=body)
        return config

    def campaigns(
        self, *, status: str | None = None, limit: int = CAMPAIGN_PAGE_DEFAULT, offset: int = 0
    ) -> CampaignPage:
        """One page of campaigns, oldest first, with their counters (``status``: ``open`` or ``closed``)."""
        if status is not None and status not in CAMPAIGN_STATUSES:
            raise InvalidParameter(f"'status' must be one of {', '.join(CAMPAIGN_STATUSES)}, got {status!r}")
        if not (isinstance(limit, int) and 1 <= limit <= CAMPAIGN_PAGE_MAX):
            raise InvalidParameter(f"'limit' must be a whole number in [1, {CAMPAIGN_PAGE_MAX}], got {limit!r}")
        if not (isinstance(offset, int) and offset >= 0):
            raise InvalidParameter(f"'offset' must be a whole number >= 0, got {offset!r}")
        body = self._http.request(
            "GET", CAMPAIGNS_PATH, params={"status": status, "limit": limit, "offset": offset}
        )
        campaigns = list(body["campaigns"])
        total = int(body.get("total", len(campaigns)))
        return CampaignPage(campaigns, total, int(body.get("offset", offset)), body.get("next_offset"))

    def iter_campaigns(
        self, *, status: str | None = None, page_size: int = CAMPAIGN_PAGE_DEFAULT
    ) -> Iterator[dict[str, Any]]:
        """Every campaign (of ``status``), page by page."""
        offset: int | None = 0
        while offset is not None:
            page = self.campaigns(status=status, limit=page_size, offset=offset)
            yield from page.campaigns
            offset = page.next_offset

    def campaign(self, campaign_id: str) -> dict[str, Any]:
        """One campaign with its counters: config, ``n_reports``, ``epsilon_spent``, dates."""
        summary: dict[str, Any] = self._http.request("GET", _path(campaign_id, "summary"))
        return summary

    def close_campaign(self, campaign_id: str) -> dict[str, Any]:
        """Close a campaign (admin token; idempotent); return its config, now ``closed``."""
        config: dict[str, Any] = self._http.request("POST", _path(campaign_id, "close"))
        return config

    def rounds(self, campaign_id: str) -> list[dict[str, Any]]:
        """The rounds of a recurring campaign that hold reports: ``[{"round", "n"}]`` (empty otherwise)."""
        body = self._http.request("GET", _path(campaign_id, "rounds"))
        return list(body["rounds"])

    # -- estimates -------------------------------------------------------------------------------

    def estimate(
        self,
        campaign_id: str,
        *,
        group_by: str | None = None,
        round: str | None = None,
        level: float = 0.95,
        noise: str | None = None,
        refresh: bool = False,
        question: str | None = None,
    ) -> dict[str, Any]:
        """The estimate body as the API serves it (see :meth:`estimates` for tidy rows); of a survey, every
        question's estimate or only ``question``'s.

        Central campaigns: the stored release of this grouping and noise is free; the first one, and
        ``refresh=True``, spend ε from the budget (a survey's: each question's share of it)."""
        params = {"group_by": group_by, "round": round, "level": level, "noise": noise, "refresh": refresh or None,
                  "question": question}  # fmt: skip
        body: dict[str, Any] = self._http.request("GET", _path(campaign_id, "estimate"), params=params)
        return body

    def estimates(
        self,
        campaign_id: str,
        *,
        group_by: str | None = None,
        round: str | None = None,
        level: float = 0.95,
        noise: str | None = None,
        refresh: bool = False,
        question: str | None = None,
    ) -> Records:
        """Tidy rows of the estimate: per question, group and category (option) a ``count`` and a
        ``proportion`` row, per number question a ``mean`` row, each with estimate, stderr, ci_low, ci_high
        at ``level``, and n (columns in :data:`ESTIMATE_COLUMNS`); ``question`` keeps one of a survey's."""
        config = self._http.request("GET", _path(campaign_id))
        body = self.estimate(campaign_id, group_by=group_by, round=round, level=level, noise=noise, refresh=refresh,
                             question=question)  # fmt: skip
        return estimate_rows(body, question=config.get("question"))

    # -- central campaigns -----------------------------------------------------------------------

    def accountant(self, campaign_id: str) -> dict[str, Any]:
        """The privacy accountant's totals of a central campaign (no ε is spent to read them):
        ``budget``, ``epsilon_spent`` and ``epsilon_remaining``, plus the accountant's own ``totals`` (every
        form: Σε, ρ, ε at δ by rule) when the aggregator serves them with its release log."""
        summary = self.campaign(campaign_id)
        if summary.get("trust_model") != "central":
            raise InvalidParameter(
                f"campaign {campaign_id!r} is local: it has no central budget (each device spends its ε once)"
            )
        log = self._http.request("GET", _path(campaign_id, "releases"), params={"limit": 1})
        return {
            "campaign_id": campaign_id,
            "budget": float(log.get("budget", summary["budget"])),
            "epsilon_spent": float(log.get("epsilon_spent", summary["epsilon_spent"])),
            "epsilon_remaining": float(log["epsilon_remaining"]),
            "totals": log.get("accountant"),
        }

    def releases(self, campaign_id: str) -> Records:
        """The release log of a central campaign (``GET .../releases``, every page): one row per release
        that spent ε, oldest first, with when, which role, its ε and cost, and what was asked
        (columns :data:`RELEASE_COLUMNS`)."""
        rows: list[dict[str, Any]] = []
        after: int | None = 0
        while after is not None:
            body = self._http.request("GET", _path(campaign_id, "releases"), params={"after": after or None})
            rows += [{"campaign_id": campaign_id, **row} for row in body.get("releases", [])]
            after = body.get("next_after")
        return Records(RELEASE_COLUMNS, rows)

    # -- over time -------------------------------------------------------------------------------

    def timeline(self, campaign_id: str, *, bucket: str = "day", round: str | None = None) -> Records:
        """Accepted reports per UTC ``hour`` or ``day``: one row per bucket, zero-filled (columns
        :data:`TIMELINE_COLUMNS`). Central campaigns: admin token only (the counts are of participants)."""
        if bucket not in TIMELINE_BUCKETS:
            raise InvalidParameter(f"'bucket' must be one of {', '.join(TIMELINE_BUCKETS)}, got {bucket!r}")
        body = self._http.request("GET", _path(campaign_id, "timeline"), params={"bucket": bucket, "round": round})
        return timeline_rows(body)
