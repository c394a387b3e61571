"""The HTTP API: one blueprint per resource. Views parse the request, call one service method, return a dict.

Paths are the public contract (``/api/v1/...``); the browser dashboard is ``/dashboard`` (HTML, session
cookie: :mod:`deniable.aggregator.api.dashboard`); a campaign's survey page, answered in the respondent's browser,
is ``/survey/<id>`` (:mod:`deniable.aggregator.api.survey`). Who may call each route is in
:data:`deniable.aggregator.api.auth.ROUTE_ACCESS`; what each takes and returns is in the OpenAPI document
(:mod:`deniable.aggregator.openapi_document`).
"""

from __future__ import annotations

from flask import Blueprint

from deniable.aggregator.api.campaigns import bp as campaigns
from deniable.aggregator.api.dashboard import bp as dashboard
from deniable.aggregator.api.dashboard import home
from deniable.aggregator.api.estimates import bp as estimates
from deniable.aggregator.api.health import bp as health
from deniable.aggregator.api.openapi import bp as openapi
from deniable.aggregator.api.releases import bp as releases
from deniable.aggregator.api.reports import bp as reports
from deniable.aggregator.api.survey import bp as survey
from deniable.aggregator.api.tokens import bp as tokens

__all__ = ["BLUEPRINTS"]

#: Every blueprint of the app, in registration order.
BLUEPRINTS: tuple[Blueprint, ...] = (
    health,
    openapi,
    campaigns,
    reports,
    estimates,
    releases,
    tokens,
    dashboard,
    survey,
    home,
)
