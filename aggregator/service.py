"""The aggregator's operations, one method per API action, over one data dir.

Views parse the request and call exactly one of these; each returns a JSON-ready dict or raises an error
of the ``deniable.shared.errors`` tree (mapped to HTTP in :mod:`deniable.aggregator.http_errors`).
"""

from __future__ import annotations

import datetime as dt
import logging
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from flask import current_app

from deniable.aggregator import accountant, estimates, ingest
from deniable.aggregator.central import remaining
from deniable.aggregator.keyring import KeyProblem, Keyring
from deniable.aggregator.release_policy import next_refresh_at, parse_policy
from deniable.aggregator.store import CampaignRecord, Store
from deniable.shared.accounting import compose
from deniable.shared.campaign import CampaignConfig
from deniable.shared.errors import CampaignExists, DeniableError, InvalidConfig, InvalidParameter, PermissionDenied
from deniable.shared.limits import CAMPAIGN_STATUSES, TIMELINE_BUCKETS, TIMELINE_MAX_BUCKETS

__all__ = [
    "CREATE_FIELDS", "MAX_GROUP_CELLS", "CampaignExists", "Service", "config_of", "current_service",
]

log = logging.getLogger("deniable.aggregator")

#: Keys accepted by ``POST /api/v1/campaigns`` (``id``, ``question``, ``categories``, ``epsilon`` required).
CREATE_FIELDS = frozenset(
    {
        "id", "question", "categories", "epsilon", "mechanism", "group_fields", "trust_model", "budget",
        "adjacency", "group_values", "recurring", "release_policy", "delta", "budget_delta", "budget_rho",
        "group_size",
    }
)
_REQUIRED = ("id", "question", "categories", "epsilon")


#: Most cells (declared values × categories) a grouped estimate of one field may hold on this aggregator.
#: A central release draws exact noise for every cell (30–50 µs each), empty groups included, so this
#: keeps the largest release to a few seconds and its JSON body to tens of megabytes.
MAX_GROUP_CELLS = 100_000


def _check_group_cells(config: CampaignConfig) -> None:
    for name, values in config.group_values.items():
        cells = len(values) * config.k
        if cells > MAX_GROUP_CELLS:
            raise InvalidConfig(
                f"'group_values.{name}' declares {len(values)} values for {config.k} categories: a grouped "
                f"estimate would hold {cells} cells, at most {MAX_GROUP_CELLS} on this aggregator (every "
                "declared group is estimated, empty ones too); declare fewer values or fewer categories"
            )




def config_of(record: CampaignRecord) -> CampaignConfig:
    """The campaign's descriptor with its current status."""
    return CampaignConfig.from_json({**record.config, "status": record.status})


def _count_is_private(record: CampaignRecord) -> bool:
    """Under add/remove adjacency a central campaign's participant count is private (a neighbour has n ± 1)."""
    return record.trust_model == "central" and record.adjacency != "replace"


class Service:
    """Campaigns, reports and estimates of one data dir: the store plus the campaign keys."""

    def __init__(self, data_dir: Path, *, database: Path, max_batch: int = 1000) -> None:
        self.data_dir = Path(data_dir)
        self.store = Store(database)
        self.keyring = Keyring(data_dir)
        self.max_batch = max_batch
        self.check_keys()

    def check_keys(self) -> list[KeyProblem]:
        """Check every campaign's key file against its descriptor (logs an ERROR per unusable key).

        A database that cannot list its campaigns is logged too, and does not stop the worker: it keeps
        serving ``/healthz`` and answers ``/readyz`` with the reason.
        """
        try:
            campaigns = {record.id: config_of(record).public_key_bytes for record in self.store.list_campaigns()}
        except (sqlite3.Error, DeniableError, ValueError) as exc:
            log.error("cannot check the campaign keys at start: the database cannot list campaigns: %s", exc)
            return []
        return self.keyring.check(campaigns)

    # -- campaigns -------------------------------------------------------------------------------

    def create_campaign(self, body: Any) -> dict[str, Any]:
        """Validate ``body``, generate the campaign's key pair and store both; return the public config."""
        if not isinstance(body, dict):
            raise InvalidConfig("the body must be a JSON object describing the campaign")
        unknown = sorted(str(key)[:40] for key in set(body) - CREATE_FIELDS)
        missing = [key for key in _REQUIRED if key not in body]
        if unknown or missing:
            parts = [f"missing {missing}"] if missing else []
            parts += [f"unknown {unknown[:5]}"] if unknown else []
            raise InvalidConfig(
                f"campaign fields are wrong: {'; '.join(parts)}; allowed: {sorted(CREATE_FIELDS)}"
            )
        private, public = self.keyring.new_keypair()
        config = CampaignConfig.create(
            id=body["id"],
            question=body["question"],
            categories=body["categories"],
            epsilon=body["epsilon"],
            public_key=public,
            mechanism=body.get("mechanism", "auto"),
            group_fields=body.get("group_fields", ()),
            trust_model=body.get("trust_model", "local"),
            budget=body.get("budget"),
            adjacency=body.get("adjacency"),
            group_values=body.get("group_values"),
            recurring=body.get("recurring", False),
            delta=body.get("delta"),
            budget_delta=body.get("budget_delta"),
            budget_rho=body.get("budget_rho"),
            group_size=body.get("group_size"),
        )
        _check_group_cells(config)
        policy = None
        if "release_policy" in body:
            if config.trust_model != "central":
                raise InvalidConfig("'release_policy' applies to central campaigns only; leave it out")
            policy = parse_policy(body["release_policy"])
        with self.store.transaction() as conn:
            if self.store.campaign_exists(conn, config.id):
                raise CampaignExists(
                    f"a campaign with the id {config.id!r} already exists; choose another id "
                    "(ids are never reused, so devices can pin a config safely)"
                )
            self.keyring.save(config.id, private)
            self.store.insert_campaign(
                conn,
                config.id,
                config.to_json(),
                trust_model=config.trust_model,
                budget=config.budget,
                adjacency=config.adjacency,
            )
            if policy is not None:
                self.store.set_release_policy(
                    conn,
                    config.id,
                    min_reports=policy.min_reports,
                    min_refresh_interval_s=policy.min_refresh_interval_seconds,
                    updated_by="admin",
                )
        return config.to_json()

    def campaign(self, campaign_id: str) -> CampaignConfig:
        """The current descriptor of a campaign (raises ``UnknownCampaign``)."""
        return config_of(self.store.get_campaign(campaign_id))

    def get_campaign(self, campaign_id: str) -> dict[str, Any]:
        """The public config a device needs."""
        return self.campaign(campaign_id).to_json()

    def list_campaigns(
        self, *, exact_counts: bool, status: str | None = None, limit: int | None = None, offset: int = 0
    ) -> dict[str, Any]:
        """The campaigns (of one ``status`` if given, oldest first; ``limit`` from ``offset``) with their
        report counts, ε spent and dates; ``total`` counts every match and ``next_offset`` is where the next
        page starts (None on the last page).

        Without ``exact_counts`` (the analyst's view) ``n_reports`` is null for a central campaign under
        ``add-remove`` adjacency: there the number of participants is itself a count that is released only
        with noise (a release's ``n``). The admin, who operates the curator and holds the raw data anyway,
        sees the exact count; so does anyone under ``replace``, where n is public by definition.
        """
        if status is not None and status not in CAMPAIGN_STATUSES:
            raise InvalidParameter(f"'status' must be one of {', '.join(CAMPAIGN_STATUSES)}, got {status[:32]!r}")
        records = self.store.list_campaigns(status=status, limit=limit, offset=offset)
        total = self.store.count_campaigns(status=status)
        end = offset + len(records)
        return {
            "campaigns": [self._summary(record, exact_counts=exact_counts) for record in records],
            "total": total,
            "offset": offset,
            "next_offset": end if limit is not None and end < total else None,
        }

    @staticmethod
    def _summary(record: CampaignRecord, *, exact_counts: bool) -> dict[str, Any]:
        return {
            **config_of(record).to_json(),
            "n_reports": record.n_reports if exact_counts or not _count_is_private(record) else None,
            "epsilon_spent": float(record.epsilon_spent),
            "created_at": record.created_at,
            "closed_at": record.closed_at,
        }

    def campaign_summary(self, campaign_id: str, *, exact_counts: bool) -> dict[str, Any]:
        """One campaign as :meth:`list_campaigns` lists it (config, counters, dates)."""
        return self._summary(self.store.get_campaign(campaign_id), exact_counts=exact_counts)

    def close_campaign(self, campaign_id: str) -> dict[str, Any]:
        """Close a campaign (idempotent); return its config, now with status 'closed'."""
        return config_of(self.store.close_campaign(campaign_id)).to_json()

    # -- reports and estimates ---------------------------------------------------------------------

    def submit_reports(self, campaign_id: str, body: Any) -> dict[str, Any]:
        """Process one batch of envelopes for the campaign (see :mod:`deniable.aggregator.ingest`)."""
        config = self.campaign(campaign_id)
        private_key = self.keyring.private_key(campaign_id, config.public_key_bytes)
        return ingest.submit_batch(self.store, config, private_key, body, max_batch=self.max_batch)

    def estimate(
        self,
        campaign_id: str,
        *,
        group_by: str | None,
        level: float,
        noise: str | None = None,
        refresh: bool = False,
        round: str | None = None,
        role: str = "analyst",
        sample: str | None = None,
    ) -> dict[str, Any]:
        """The estimate (local; of one ``round`` if recurring) or noisy release (central; ``refresh`` draws
        a new one, logged with the caller's ``role``; ``sample`` a Poisson-subsampling rate) of a campaign."""
        config = self.campaign(campaign_id)
        return estimates.estimate(
            self.store, config, group_by=group_by, level=level, noise=noise, refresh=refresh, round=round,
            role=role, sample=sample,
        )  # fmt: skip

    # -- central release policy and log --------------------------------------------------------------

    def _central(self, campaign_id: str, what: str) -> CampaignRecord:
        record = self.store.get_campaign(campaign_id)
        if record.trust_model != "central":
            raise InvalidParameter(
                f"{what} applies to central campaigns only; campaign {campaign_id!r} is local (its reports are "
                "randomized on the devices and its estimates spend no budget)"
            )
        return record

    def _policy_body(self, campaign_id: str) -> dict[str, Any]:
        conn = self.store.connection()
        row = self.store.release_policy(conn, campaign_id)
        policy = estimates.release_policy(self.store, conn, campaign_id)
        earliest = next_refresh_at(policy, self.store.last_release_at(conn, campaign_id))
        return {
            "campaign_id": campaign_id,
            **policy.to_json(),
            "default": row is None,
            "updated_at": None if row is None else row.updated_at,
            "updated_by": None if row is None else row.updated_by,
            "next_refresh_at": None if earliest is None else earliest.isoformat(),
        }

    def release_policy(self, campaign_id: str) -> dict[str, Any]:
        """The central campaign's release policy (the defaults until the admin sets one)."""
        self._central(campaign_id, "a release policy")
        return self._policy_body(campaign_id)

    def set_release_policy(self, campaign_id: str, body: Any, *, role: str) -> dict[str, Any]:
        """Replace the central campaign's release policy; return it."""
        self._central(campaign_id, "a release policy")
        policy = parse_policy(body)
        with self.store.transaction() as conn:
            self.store.set_release_policy(
                conn,
                campaign_id,
                min_reports=policy.min_reports,
                min_refresh_interval_s=policy.min_refresh_interval_seconds,
                updated_by=role,
            )
        return self._policy_body(campaign_id)

    def releases(self, campaign_id: str, *, after: int, limit: int) -> dict[str, Any]:
        """The central campaign's logged releases (oldest first, ``seq > after``, at most ``limit``), with
        its budget, ε spent and policy. ``next_after`` is the cursor of the next page (``None``: no more)."""
        record = self._central(campaign_id, "the release log")
        rows = self.store.releases(campaign_id, after=after, limit=limit + 1)
        more, rows = len(rows) > limit, rows[:limit]
        budget = float(record.budget or 0.0)
        config = self.campaign(campaign_id)
        books = accountant.totals_body(
            config.privacy_budget, compose(accountant.costs(self.store.connection(), campaign_id)),
            deltas=() if config.delta is None else (config.delta,),
        )  # fmt: skip
        return {
            "campaign_id": campaign_id,
            "budget": budget,
            "epsilon_spent": float(record.epsilon_spent),
            "epsilon_remaining": remaining(record.epsilon_spent, budget) if config.budget_rho is None else 0.0,
            "accountant": books,
            "policy": self._policy_body(campaign_id),
            "releases": [
                {
                    "seq": row.seq,
                    "released_at": row.released_at,
                    "role": row.role,
                    "epsilon": row.epsilon,
                    "cost": row.cost,
                    "release_key": row.release_key,
                    "parameters": row.parameters,
                }
                for row in rows
            ],
            "next_after": rows[-1].seq if more and rows else None,
        }

    def top(self, campaign_id: str, *, j: int, refresh: bool = False, role: str = "analyst") -> dict[str, Any]:
        """The j most common answers of a central campaign (exponential mechanism), charged to its budget."""
        return estimates.central_top(self.store, self.campaign(campaign_id), j=j, refresh=refresh, role=role)
    def stored_estimate(
        self, campaign_id: str, *, group_by: str | None, level: float = 0.95, round: str | None = None
    ) -> dict[str, Any] | None:
        """The estimate when reading it is free (local, or a central release already kept), else None."""
        config = self.campaign(campaign_id)
        return estimates.stored_estimate(self.store, config, group_by=group_by, level=level, round=round)

    def rounds(self, campaign_id: str) -> dict[str, Any]:
        """The rounds of a recurring campaign that hold reports, with their report counts, in label order.

        A non-recurring campaign has no rounds (its one collection is estimated without ``round``).
        """
        config = self.campaign(campaign_id)
        rounds = self.store.rounds(campaign_id) if config.recurring else []
        return {
            "campaign_id": campaign_id,
            "recurring": config.recurring,
            "rounds": [{"round": label, "n": n} for label, n in rounds],
        }

    def readiness(self, *, min_free_bytes: int) -> tuple[bool, dict[str, Any]]:
        """Whether this worker can take reports now: ``(ready, body)`` with one entry per check.

        * ``database``: a write probe in a transaction (``BEGIN IMMEDIATE``, upsert, ``COMMIT`` with its
          fsync) and a read of every campaign (a damaged file or a locked, read-only or full database
          fails here);
        * ``keys``: every open campaign's key file is usable and matches its descriptor;
        * ``disk``: the free space of the data dir's file system is at least ``min_free_bytes``.

        Each failing check says why; the body never names a file (the route is public).
        """
        checks: dict[str, dict[str, Any]] = {}
        campaigns: list[CampaignConfig] = []
        try:
            self.store.write_probe()
            campaigns = [config_of(record) for record in self.store.list_campaigns()]
            checks["database"] = {"ok": True}
        except (sqlite3.Error, DeniableError, ValueError) as exc:
            checks["database"] = {"ok": False, "reason": f"the database does not take a write: {exc}"}
        unusable = [
            config.id
            for config in campaigns
            if config.status == "open" and self.keyring.problem(config.id, config.public_key_bytes) is not None
        ]
        checks["keys"] = (
            {"ok": True, "campaigns": len(campaigns)}
            if not unusable
            else {"ok": False, "reason": f"campaign key unavailable for {', '.join(map(repr, unusable[:10]))}"
                  + (f" and {len(unusable) - 10} more" if len(unusable) > 10 else "")}
        )  # fmt: skip
        free = shutil.disk_usage(self.data_dir).free
        checks["disk"] = {"ok": free >= min_free_bytes, "free_bytes": free, "min_free_bytes": min_free_bytes}
        if free < min_free_bytes:
            checks["disk"]["reason"] = (
                f"free disk {free:,} bytes is below the floor of {min_free_bytes:,} bytes (--min-free-disk)"
            )
        ready = all(check["ok"] for check in checks.values())
        return ready, {"status": "ready" if ready else "not_ready", "checks": checks}
    def timeline(
        self, campaign_id: str, *, bucket: str = "day", round: str | None = None, exact_counts: bool
    ) -> dict[str, Any]:
        """Accepted reports per UTC hour or day, zero-filled from the first bucket with reports to the last.

        Counts only: no report, device or pseudonym appears. A local campaign's report count is not what
        LDP protects (each value is randomized on its device; who took part, and when, is visible to the
        aggregator by design), so analysts get it. A central campaign's timeline is a count of participants
        per hour, a histogram of the raw data the curator holds: it is served to the admin only (like the
        exact ``n_reports``) and to analysts not at all, rather than charged to the ε budget (see
        docs/analysts.md for why). Of one ``round`` (recurring campaigns), or of every report when None.
        """
        if bucket not in TIMELINE_BUCKETS:
            raise InvalidParameter(f"'bucket' must be one of {', '.join(TIMELINE_BUCKETS)}, got {bucket[:32]!r}")
        config = self.campaign(campaign_id)
        if config.trust_model == "central" and not exact_counts:
            raise PermissionDenied(
                f"campaign {campaign_id!r} is central: its timeline counts participants from the raw data and "
                "is not released to analysts (it would need its own share of the ε budget, spent again for "
                "every new hour); the admin token may read it, analysts read the noisy n of a release"
            )
        if round is not None:
            round = estimates.round_of(config, round)
        hours = self.store.arrivals(campaign_id, round=round)
        counts: dict[dt.datetime, int] = {}
        for hour, n in hours:
            start = dt.datetime.strptime(hour, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
            if bucket == "day":
                start = start.replace(hour=0)
            counts[start] = counts.get(start, 0) + n
        step = dt.timedelta(hours=1) if bucket == "hour" else dt.timedelta(days=1)
        buckets: list[dict[str, Any]] = []
        if counts:
            first, last = min(counts), max(counts)
            span = (last - first) // step + 1
            if span > TIMELINE_MAX_BUCKETS:
                raise InvalidParameter(
                    f"the reports of campaign {campaign_id!r} span {span} {bucket}s, more than the "
                    f"{TIMELINE_MAX_BUCKETS} one timeline holds; ask for bucket=day"
                )
            buckets = [
                {"start": _iso(first + i * step), "reports": counts.get(first + i * step, 0)} for i in range(span)
            ]
        return {
            "campaign_id": campaign_id,
            "bucket": bucket,
            "round": round,
            "total": sum(counts.values()),
            "buckets": buckets,
        }

    def health(self) -> dict[str, Any]:
        """Liveness: the database answers a query (readiness is :meth:`readiness`)."""
        self.store.connection().execute("SELECT 1").fetchone()
        return {"status": "ok"}


def _iso(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def current_service() -> Service:
    """The :class:`Service` of the app handling the current request."""
    service: Service = current_app.extensions["deniable"]
    return service
