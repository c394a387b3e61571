"""The survey page at ``/survey/<campaign_id>``: a campaign answered in the respondent's own browser.

The page is a shell: a heading, a ``<noscript>`` note and one element that the browser client
(``js/``, bundled into ``static/survey.js`` by ``make js-bundle``; the built file is committed, so nothing
is built at run time) fills with the form. The script renders the question, the categories, the group
fields and a plain-language note of what is randomized from the descriptor it validated and pinned itself
(the answer of ``GET /api/v1/campaigns/<id>``, which the page carries as a JSON data block so that the
script need not wait for that round trip; never from the HTML around it); it randomizes, seals and stores
the answer in the browser (IndexedDB) and posts only the sealed report to
``/api/v1/campaigns/<id>/reports``.

Routes (all public, listed in :data:`deniable.aggregator.api.auth.SESSION_ACCESS` as browser pages):

* ``GET /survey/<campaign_id>``: the page (404 page for an unknown campaign); ``?round=<label>`` names
  the round a recurring campaign's answer belongs to (a link per round, e.g. ``?round=2026-w49``);
* ``GET /survey/static/survey.js``: the bundle (an ES module: the package's exports and the page's
  start-up); ``GET /survey/static/survey-extra.js``: the question kinds of surveys (descriptor format 3),
  the rules of shuffled and central campaigns, rounds of recurring surveys and admission tokens, which
  survey.js imports only when the descriptor needs them (the page preloads it for such a campaign);
  ``GET /survey/static/survey-compat.js``: pure-JS X25519 and Ed25519, imported only by a browser whose
  WebCrypto lacks them; ``GET /survey/static/survey.css``: the stylesheet.

Every answer carries a strict Content-Security-Policy: scripts and styles from this origin only (no
inline script, no ``eval``), ``connect-src 'self'`` (the page talks to this aggregator only; for a shuffled
campaign also to the origin of its shuffler, where its reports go), no framing,
no forms posted anywhere (the form is submitted by the script), plus ``X-Content-Type-Options: nosniff``
and ``Referrer-Policy: no-referrer``.
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path

from flask import Blueprint, make_response, render_template, send_file
from werkzeug.wrappers import Response

from deniable.aggregator.api.bodies import query_params, query_str
from deniable.aggregator.api.context import current_service
from deniable.shared.errors import UnknownCampaign

__all__ = ["CONTENT_SECURITY_POLICY", "bp"]

_HERE = Path(__file__).resolve().parent
bp = Blueprint("survey", __name__, url_prefix="/survey", template_folder="templates")

#: Script, style and fetch from this origin only; nothing inline, no framing, no form targets.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; img-src 'self'; "
    "form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
)


@bp.after_request
def _headers(response: Response) -> Response:
    response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers.setdefault("Cache-Control", "no-store")
    return response


def _static(name: str, mimetype: str) -> Response:
    response = send_file(_HERE / "static" / name, mimetype=mimetype, max_age=300)
    response.headers["Cache-Control"] = "public, max-age=300"
    return response


@bp.get("/static/survey.js")
def script() -> Response:
    """The browser client bundle (an ES module)."""
    return _static("survey.js", "text/javascript")


@bp.get("/static/survey-extra.js")
def extra() -> Response:
    """The second part of the bundle: the survey question kinds (descriptor format 3), loaded on demand."""
    return _static("survey-extra.js", "text/javascript")


@bp.get("/static/survey-compat.js")
def compat() -> Response:
    """The third part of the bundle: pure-JS X25519 and Ed25519, loaded only where WebCrypto lacks them."""
    return _static("survey-compat.js", "text/javascript")


@bp.get("/static/survey.css")
def stylesheet() -> Response:
    """The survey page's stylesheet."""
    return _static("survey.css", "text/css")


@bp.get("/<campaign_id>")
@query_params("round")
def page(campaign_id: str) -> Response:
    """The survey page of a campaign (the form itself is rendered by the script from the descriptor)."""
    try:
        config = current_service().campaign(campaign_id)
    except UnknownCampaign:
        response = make_response(render_template("survey/missing.html", campaign_id=campaign_id))
        response.status_code = 404
        return response
    # the bundle's second file, preloaded beside the first when this descriptor will import it
    extra = config.is_survey or config.trust_model != "local" or config.admission is not None
    # the descriptor's JSON as GET /api/v1/campaigns/<id> serves it, carried by the page as a data block
    # (never executed): the script validates and pins it as the answer of that GET, one round trip less
    descriptor = config.to_json()  # the campaign read above (get_campaign would read it again)
    # a recurring campaign's round, as the link names it (/survey/<id>?round=2026-w49); the script checks it
    round_label = (query_str("round") or "") if config.recurring else ""
    response = make_response(
        render_template("survey/page.html", config=config, extra=extra, descriptor=descriptor, round=round_label)
    )
    if config.shuffler is not None:  # a shuffled campaign's reports go to its shuffler, and only there
        origin = urllib.parse.urlsplit(config.shuffler.url)
        allowed = f"{origin.scheme}://{origin.netloc}"
        response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY.replace(
            "connect-src 'self'", f"connect-src 'self' {allowed}"
        )
    return response
