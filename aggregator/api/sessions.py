"""Dashboard sign-in: a bearer token exchanged once for a server-side session, held by an HttpOnly cookie.

* The session id is 256 random bits (``secrets``); the store keeps only its SHA-256, so a copy of the
  database does not hold a usable cookie. The cookie is ``HttpOnly`` (no script reads it), ``SameSite=
  Strict`` (no other site's page sends it), ``Path=/dashboard``, and ``Secure`` when the request came over
  TLS or the app is configured with ``SECURE_COOKIES`` (behind a TLS-terminating proxy).
* Each session has its own CSRF token, put in every form of its pages and checked (constant time) on every
  state-changing POST, together with the ``Origin`` (or ``Sec-Fetch-Site``) header when the browser sends
  one. Sign-in itself is protected the same way by a short-lived pre-session cookie (login CSRF).
* A session remembers the SHA-256 of the token it was opened with: rotating a token ends its sessions.
  Sessions last :data:`SESSION_HOURS` at most; signing out deletes the row, so a copied cookie is dead too.

The token travels once, in the body of the sign-in POST: never in a URL, a cookie or browser storage.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import secrets
from dataclasses import dataclass

from flask import current_app, request
from werkzeug.exceptions import Forbidden
from werkzeug.wrappers import Response

from deniable.aggregator.api.auth import role_of_token
from deniable.aggregator.api.context import current_service

__all__ = [
    "COOKIE",
    "Session",
    "check_csrf",
    "check_sign_in_csrf",
    "current_session",
    "end_session",
    "open_session",
    "sign_in_csrf",
]

#: The session cookie and the pre-session (login CSRF) cookie.
COOKIE = "deniable_session"
SIGN_IN_COOKIE = "deniable_sign_in"
#: Longest life of a session; the analyst signs in again after it.
SESSION_HOURS = 8
_PATH = "/dashboard"


@dataclass(frozen=True)
class Session:
    """A signed-in browser: its role and the CSRF token its forms carry."""

    role: str
    csrf: str


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8", "surrogateescape")).digest()


def _secure() -> bool:
    return bool(request.is_secure or current_app.config.get("SECURE_COOKIES"))


def _set_cookie(response: Response, name: str, value: str, *, max_age: int) -> None:
    response.set_cookie(name, value, max_age=max_age, path=_PATH, secure=_secure(), httponly=True, samesite="Strict")


def _role_token(role: str) -> str:
    tokens = current_app.config["DENIABLE_TOKENS"]
    return str(tokens.admin if role == "admin" else tokens.analyst)


def current_session() -> Session | None:
    """The session of this request's cookie, or None (no cookie, unknown, expired, or its token rotated)."""
    cookie = request.cookies.get(COOKIE)
    if not cookie or len(cookie) > 128:
        return None
    found = current_service().store.session(_digest(cookie))
    if found is None:
        return None
    role, token_hash, csrf = found
    if not hmac.compare_digest(token_hash, _digest(_role_token(role))):
        return None
    return Session(role, csrf)


def open_session(token: str, response: Response) -> str | None:
    """Open a session for ``token`` on ``response``; its role, or None (nothing set) if the token is unknown."""
    tokens = current_app.config["DENIABLE_TOKENS"]
    role = role_of_token(token, admin=tokens.admin, analyst=tokens.analyst)
    if role is None:
        return None
    session_id = secrets.token_urlsafe(32)
    expires = dt.datetime.now(dt.UTC) + dt.timedelta(hours=SESSION_HOURS)
    current_service().store.add_session(
        _digest(session_id), role=role, token_hash=_digest(token), csrf=secrets.token_urlsafe(32), expires_at=expires
    )
    _set_cookie(response, COOKIE, session_id, max_age=SESSION_HOURS * 3600)
    response.delete_cookie(SIGN_IN_COOKIE, path=_PATH, secure=_secure(), httponly=True, samesite="Strict")
    return role


def end_session(response: Response) -> None:
    """Sign out: delete the session row and the cookie."""
    cookie = request.cookies.get(COOKIE)
    if cookie:
        current_service().store.delete_session(_digest(cookie))
    response.delete_cookie(COOKIE, path=_PATH, secure=_secure(), httponly=True, samesite="Strict")


def _same_origin() -> None:
    origin = request.headers.get("Origin")  # "null" under some referrer policies: then Sec-Fetch-Site decides
    if origin not in (None, "null") and origin != request.host_url.rstrip("/"):
        raise Forbidden("this form was sent from another site; open the dashboard and send it from there")
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None and site not in ("same-origin", "none"):
        raise Forbidden("this form was sent from another site; open the dashboard and send it from there")


def check_csrf(session: Session) -> None:
    """Refuse (403) a state-changing POST whose form lacks the session's CSRF token or comes cross-site."""
    _same_origin()
    sent = request.form.get("csrf", "")
    if not hmac.compare_digest(sent.encode("utf-8", "surrogateescape"), session.csrf.encode()):
        raise Forbidden("the form's CSRF token is missing or stale; reload the page and send it again")


def sign_in_csrf(response: Response) -> str:
    """A fresh login-CSRF token for the sign-in form, also set as the pre-session cookie."""
    token = secrets.token_urlsafe(32)
    _set_cookie(response, SIGN_IN_COOKIE, token, max_age=3600)
    return token


def check_sign_in_csrf() -> None:
    """Refuse (403) a sign-in POST whose form token does not equal its pre-session cookie."""
    _same_origin()
    cookie = request.cookies.get(SIGN_IN_COOKIE, "")
    sent = request.form.get("csrf", "")
    if not cookie or not hmac.compare_digest(sent.encode("utf-8", "surrogateescape"), cookie.encode()):
        raise Forbidden("the sign-in form is stale (or cookies are off); reload the sign-in page and try again")
