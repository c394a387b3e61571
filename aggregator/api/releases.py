"""Central campaigns' release log and policy:

``GET /api/v1/campaigns/<id>/releases[?after=<seq>&limit=<n>]`` (analyst) lists every ε-spending release;
``GET /api/v1/campaigns/<id>/release-policy`` (analyst) reads the policy, ``PUT`` (admin) replaces it.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint

from deniable.aggregator.api.auth import current_role
from deniable.aggregator.api.bodies import json_body, query_int, query_params
from deniable.aggregator.api.context import current_service
from deniable.shared.limits import RELEASES_PAGE_DEFAULT, RELEASES_PAGE_MAX

bp = Blueprint("releases", __name__, url_prefix="/api/v1/campaigns")


@bp.get("/<campaign_id>/releases")
@query_params("after", "limit")
def list_all(campaign_id: str) -> dict[str, Any]:
    """Who released what when, at which ε (a page of the log, oldest first)."""
    return current_service().releases(
        campaign_id,
        after=query_int("after", default=0, low=0, high=2**62),
        limit=query_int("limit", default=RELEASES_PAGE_DEFAULT, low=1, high=RELEASES_PAGE_MAX),
    )


@bp.get("/<campaign_id>/release-policy")
def get_policy(campaign_id: str) -> dict[str, Any]:
    """The campaign's release policy and when the next refresh is possible."""
    return current_service().release_policy(campaign_id)


@bp.put("/<campaign_id>/release-policy")
def set_policy(campaign_id: str) -> dict[str, Any]:
    """Replace the campaign's release policy."""
    return current_service().set_release_policy(campaign_id, json_body(), role=current_role())
