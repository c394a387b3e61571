"""Who may call what: one table classifying every route, enforced in one ``before_request`` hook.

Roles are ordered ``public < analyst < admin``: the admin token passes every analyst check. The
``issuer`` role stands apart: its token (held by the app's backend) may call only the admission-token
issuing route, and only it may call that route. Tokens travel
as ``Authorization: Bearer <token>`` and are compared with :func:`hmac.compare_digest` (constant time).
A missing or unknown token is 401; a valid token of a lower role is 403. A route missing from
:data:`ROUTE_ACCESS` is refused (fail closed), and a test walks ``app.url_map`` to keep the table complete.

The dashboard's pages (:data:`SESSION_ACCESS`) are for browsers: they take no bearer token but the session
cookie of a sign-in (:mod:`deniable.aggregator.api.sessions`), checked by the same hook. Without a session a
page redirects to the sign-in form and a POST is 403; a session of a lower role is 403.
"""

from __future__ import annotations

import hmac

from flask import Flask, abort, current_app, redirect, request, url_for
from werkzeug.datastructures import WWWAuthenticate
from werkzeug.exceptions import Forbidden, Unauthorized

__all__ = [
    "ADMIN", "ANALYST", "ISSUER", "PUBLIC", "ROUTE_ACCESS", "SESSION_ACCESS", "current_role", "install_auth",
    "role_of_token",
]

PUBLIC = "public"
ANALYST = "analyst"
ADMIN = "admin"
ISSUER = "issuer"
_RANK = {PUBLIC: 0, ISSUER: 0, ANALYST: 1, ADMIN: 2}

#: Every endpoint of the app and the least role allowed to call it.
ROUTE_ACCESS: dict[str, str] = {
    "health.healthz": PUBLIC,
    "health.readyz": PUBLIC,
    "openapi.document": PUBLIC,
    "campaigns.create": ADMIN,
    "campaigns.list_all": ANALYST,
    "campaigns.get_one": PUBLIC,
    "campaigns.summary": ANALYST,
    "campaigns.timeline": ANALYST,
    "campaigns.close": ADMIN,
    "reports.submit": PUBLIC,
    "reports.submit_batch": PUBLIC,  # authenticated by the shuffler's signature over the batch
    "estimates.estimate": ANALYST,
    "estimates.rounds": ANALYST,
    "estimates.top": ANALYST,
    "tokens.issue": ISSUER,
    "releases.list_all": ANALYST,
    "releases.get_policy": ANALYST,
    "releases.set_policy": ADMIN,
}

#: Every browser page (the dashboard's, and the survey pages of :mod:`deniable.aggregator.api.survey`) and the
#: least role its session must have (``public``: no session needed).
SESSION_ACCESS: dict[str, str] = {
    "home.index": PUBLIC,
    "dashboard.root": PUBLIC,
    "dashboard.sign_in_form": PUBLIC,
    "dashboard.sign_in": PUBLIC,
    "dashboard.stylesheet": PUBLIC,
    "dashboard.sign_out": ANALYST,
    "dashboard.campaigns": ANALYST,
    "dashboard.campaign": ANALYST,
    "dashboard.csv": ANALYST,
    "dashboard.release": ANALYST,
    "dashboard.close": ADMIN,
    "survey.page": PUBLIC,
    "survey.script": PUBLIC,
    "survey.extra": PUBLIC,
    "survey.compat": PUBLIC,
    "survey.stylesheet": PUBLIC,
}

_CHALLENGE = WWWAuthenticate("Bearer", {"realm": "deniable"})


def role_of_token(token: str, *, admin: str, analyst: str, issuer: str | None = None) -> str | None:
    """The role a presented token grants, or None; every comparison always runs, in constant time."""
    presented = token.encode("utf-8", "surrogateescape")
    is_admin = hmac.compare_digest(presented, admin.encode())
    is_analyst = hmac.compare_digest(presented, analyst.encode())
    is_issuer = issuer is not None and hmac.compare_digest(presented, issuer.encode())
    if is_admin:
        return ADMIN
    if is_analyst:
        return ANALYST
    return ISSUER if is_issuer else None


def _bearer_token() -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def current_role() -> str:
    """The role the current request's bearer token grants (``public`` without a valid token)."""
    token = _bearer_token()
    if token is None:
        return PUBLIC
    tokens = current_app.config["DENIABLE_TOKENS"]
    return role_of_token(token, admin=tokens.admin, analyst=tokens.analyst, issuer=tokens.issuer) or PUBLIC


def _enforce() -> None:
    if request.url_rule is None:  # no route matched: let routing answer 404/405
        return
    endpoint = request.endpoint or ""
    if endpoint in SESSION_ACCESS:
        _enforce_session(SESSION_ACCESS[endpoint])
        return
    needed = ROUTE_ACCESS.get(endpoint)
    if needed is None:
        raise Forbidden("this route has no access rule; it is refused until one is added to ROUTE_ACCESS")
    if needed == PUBLIC:
        return
    token = _bearer_token()
    if token is None:
        raise Unauthorized(
            f"this route needs the {needed} token: send the header 'Authorization: Bearer <token>'",
            www_authenticate=_CHALLENGE,
        )
    tokens = current_app.config["DENIABLE_TOKENS"]
    granted = role_of_token(token, admin=tokens.admin, analyst=tokens.analyst, issuer=tokens.issuer)
    if granted is None:
        raise Unauthorized(
            "the bearer token is not valid for this aggregator; check the token file in the data dir",
            www_authenticate=_CHALLENGE,
        )
    if needed == ISSUER and granted != ISSUER:
        raise Forbidden(f"this route needs the issuer token; the {granted} token may not call it")
    if _RANK[granted] < _RANK[needed]:
        raise Forbidden(f"this route needs the {needed} token; the {granted} token may not call it")


def _enforce_session(needed: str) -> None:
    if needed == PUBLIC:
        return
    from deniable.aggregator.api.sessions import current_session

    session = current_session()
    if session is None:
        if request.method in ("GET", "HEAD"):
            abort(redirect(url_for("dashboard.sign_in_form"), code=303))
        raise Forbidden("you are not signed in to the dashboard (or the session ended); sign in again")
    if _RANK[session.role] < _RANK[needed]:
        raise Forbidden(f"this needs the {needed} role; you signed in as {session.role}")


def install_auth(app: Flask) -> None:
    """Enforce :data:`ROUTE_ACCESS` on every request of ``app``."""
    app.before_request(_enforce)
