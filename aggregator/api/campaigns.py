"""Campaigns: create (admin), list and summarize (analyst), read (public), close (admin), timeline (analyst)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint

from deniable.aggregator.api.auth import ADMIN, current_role
from deniable.aggregator.api.bodies import json_object, query_int, query_params, query_str
from deniable.aggregator.api.context import current_service
from deniable.shared.limits import CAMPAIGN_PAGE_DEFAULT, CAMPAIGN_PAGE_MAX

bp = Blueprint("campaigns", __name__, url_prefix="/api/v1/campaigns")


@bp.post("")
def create() -> tuple[dict[str, Any], int]:
    """Create a campaign and its HPKE key pair; 201 with the public config."""
    return current_service().create_campaign(json_object("the campaign")), 201


@bp.get("")
@query_params("status", "limit", "offset")
def list_all() -> dict[str, Any]:
    """A page of campaigns (``?status=open|closed&limit=&offset=``) with their counters (exact report counts
    of central add/remove campaigns: admin only)."""
    return current_service().list_campaigns(
        exact_counts=current_role() == ADMIN,
        status=query_str("status"),
        limit=query_int("limit", default=CAMPAIGN_PAGE_DEFAULT, low=1, high=CAMPAIGN_PAGE_MAX),
        offset=query_int("offset", default=0, low=0, high=2**53) or 0,
    )


@bp.get("/<campaign_id>")
def get_one(campaign_id: str) -> dict[str, Any]:
    """The public config a device fetches and pins."""
    return current_service().get_campaign(campaign_id)


@bp.get("/<campaign_id>/summary")
def summary(campaign_id: str) -> dict[str, Any]:
    """The campaign as the list shows it: config, report count, ε spent, dates."""
    return current_service().campaign_summary(campaign_id, exact_counts=current_role() == ADMIN)


@bp.get("/<campaign_id>/timeline")
@query_params("bucket", "round")
def timeline(campaign_id: str) -> dict[str, Any]:
    """Accepted reports per UTC hour or day (``?bucket=hour|day&round=``); central campaigns: admin only."""
    return current_service().timeline(
        campaign_id,
        bucket=query_str("bucket", default="day") or "day",
        round=query_str("round"),
        exact_counts=current_role() == ADMIN,
    )


@bp.post("/<campaign_id>/close")
def close(campaign_id: str) -> dict[str, Any]:
    """Close the campaign: later report batches get 409."""
    return current_service().close_campaign(campaign_id)
