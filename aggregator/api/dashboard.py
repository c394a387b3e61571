"""The analysts' dashboard at ``/dashboard``: server-rendered HTML, no script, hand-made SVG charts.

Pages (who may open each: :data:`deniable.aggregator.api.auth.SESSION_ACCESS`):

* ``GET /dashboard/sign-in`` and ``POST /dashboard/sign-in``: the token, typed once into a form, becomes a
  session cookie (:mod:`deniable.aggregator.api.sessions`); ``POST /dashboard/sign-out`` ends it.
* ``GET /dashboard``: the campaigns with status, trust model, reports and ε spent and left.
* ``GET /dashboard/campaigns/<id>?group_by=&round=&bucket=``: every category's estimate with its 95%
  interval as error bars and as a table, a group and round selector, the report timeline, a CSV download;
  central campaigns add the accountant's totals, the release log and the local-versus-central comparison.
* ``GET /dashboard/campaigns/<id>/estimate.csv``: the tidy rows of :mod:`deniable.analyst.records`, the
  same numbers as the API's JSON.
* ``POST /dashboard/campaigns/<id>/release`` (central: draws the first release of a grouping, spending ε)
  and ``POST /dashboard/campaigns/<id>/close`` (admin): the only state changes, each behind CSRF checks.

Viewing never spends privacy budget: a central campaign's page shows the release already kept, and
drawing one is a button that says what it costs. Every response carries a strict Content-Security-Policy
(no script at all, styles from this origin only), ``X-Frame-Options: DENY`` and ``Cache-Control: no-store``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from flask import Blueprint, make_response, redirect, render_template, request, send_file, url_for
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Response

from deniable.aggregator.api.bodies import query_params, query_str
from deniable.aggregator.api.charts import Bar, error_bar_chart, timeline_chart
from deniable.aggregator.api.context import current_service
from deniable.aggregator.api.sessions import (
    Session,
    check_csrf,
    check_sign_in_csrf,
    current_session,
    end_session,
    open_session,
    sign_in_csrf,
)
from deniable.analyst.records import estimate_rows
from deniable.shared.errors import DeniableError, PermissionDenied
from deniable.shared.fields import plural
from deniable.shared.limits import CAMPAIGN_PAGE_DEFAULT, RELEASES_PAGE_DEFAULT, TIMELINE_BUCKETS

__all__ = ["CONTENT_SECURITY_POLICY", "bp", "home"]

_HERE = Path(__file__).resolve().parent
bp = Blueprint("dashboard", __name__, url_prefix="/dashboard", template_folder="templates")
#: ``GET /``: a browser that opens the aggregator's address lands on the dashboard.
home = Blueprint("home", __name__)


@home.get("/")
def index() -> Response:
    """Redirect to the dashboard (the API lives under /api/v1, its document at /api/v1/openapi.json)."""
    return redirect(url_for("dashboard.root"), code=303)

#: No script of any origin, no inline style, no framing, forms only to this origin.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)


@bp.after_request
def _headers(response: Response) -> Response:
    response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Referrer-Policy"] = "same-origin"
    response.headers.setdefault("Cache-Control", "no-store")
    return response


def _page(template: str, status: int = 200, **context: Any) -> Response:
    session = context.pop("session", None) or current_session()
    response = make_response(render_template(f"dashboard/{template}", session=session, plural=plural, **context))
    response.status_code = status
    return response


@bp.errorhandler(DeniableError)
def _deniable_error(exc: DeniableError) -> Response:
    from deniable.aggregator.api.errors import STATUS_OF

    status = next(code for cls, code in STATUS_OF if isinstance(exc, cls))
    return _page("error.html", status, title="That did not work", message=str(exc))


@bp.errorhandler(HTTPException)
def _http_error(exc: HTTPException) -> Response:
    if exc.response is not None:  # a redirect raised by the sign-in check
        return exc.response  # type: ignore[return-value]
    return _page("error.html", exc.code or 500, title=exc.name, message=exc.description or exc.name)


def _session() -> Session:
    session = current_session()
    assert session is not None  # the auth hook let only signed-in requests through
    return session


# -- sign-in -----------------------------------------------------------------------------------------


@bp.get("/static/dashboard.css")
def stylesheet() -> Response:
    """The one stylesheet (the CSP allows styles from this origin only)."""
    response = send_file(_HERE / "static" / "dashboard.css", mimetype="text/css", max_age=3600)
    response.headers["Cache-Control"] = "public, max-age=3600"
    return response


@bp.get("/", strict_slashes=False)
def root() -> Response:
    """The campaign list when signed in, else the sign-in form."""
    target = "dashboard.campaigns" if current_session() else "dashboard.sign_in_form"
    return redirect(url_for(target), code=303)


def _sign_in_page(status: int = 200, error: str | None = None) -> Response:
    response = make_response("")
    csrf = sign_in_csrf(response)
    response.set_data(render_template("dashboard/sign_in.html", session=None, csrf=csrf, title="Sign in",
                                      error=error, plural=plural))  # fmt: skip
    response.status_code = status
    return response


@bp.get("/sign-in")
def sign_in_form() -> Response:
    """The sign-in form: one password field for the analyst or admin token."""
    if current_session() is not None:
        return redirect(url_for("dashboard.campaigns"), code=303)
    return _sign_in_page()


@bp.post("/sign-in")
def sign_in() -> Response:
    """Exchange the token for a session cookie; 401 with the form again if the token is not valid."""
    check_sign_in_csrf()
    response = redirect(url_for("dashboard.campaigns"), code=303)
    token = request.form.get("token", "").strip()
    if not token or len(token) > 512 or open_session(token, response) is None:
        return _sign_in_page(
            401,
            "That token is not valid for this aggregator. Paste the analyst or admin token from the token "
            "file in the data dir (deniable tokens shows where it is).",
        )
    return response


@bp.post("/sign-out")
def sign_out() -> Response:
    """End the session (the row and the cookie); back to the sign-in form."""
    check_csrf(_session())
    response = redirect(url_for("dashboard.sign_in_form"), code=303)
    end_session(response)
    return response


# -- campaigns ---------------------------------------------------------------------------------------


def _left(campaign: dict[str, Any]) -> float | None:
    if campaign.get("trust_model") != "central" or campaign.get("budget") is None:
        return None
    return max(0.0, round(float(campaign["budget"]) - float(campaign["epsilon_spent"]), 12))


@bp.get("/campaigns")
@query_params("offset")
def campaigns() -> Response:
    """Every campaign, a page at a time, with status, trust model, reports and ε spent and left."""
    session = _session()
    offset = request.args.get("offset", "0")
    start = int(offset) if offset.isdigit() and len(offset) < 12 else 0
    page = current_service().list_campaigns(
        exact_counts=session.role == "admin", limit=CAMPAIGN_PAGE_DEFAULT, offset=start
    )
    for campaign in page["campaigns"]:
        campaign["epsilon_left"] = _left(campaign)
    return _page("campaigns.html", title="Campaigns", page=page, session=session)


def _groups(body: dict[str, Any]) -> Iterator[tuple[str | None, dict[str, Any]]]:
    if isinstance(body.get("groups"), dict):
        yield from body["groups"].items()
    else:
        yield None, body


def _comparison(config: Any, body: dict[str, Any]) -> list[dict[str, Any]]:
    """Per category: the central release's stderr against a local campaign's at the same ε, k and n.

    The local stderr is √Var(ĉ_v) of the mechanism a local campaign would choose (Wang et al. 2017, Thm. 2:
    n·q*(1−q*)/(p*−q*)² + n_v·(1−p*−q*)/(p*−q*)) at the release's noisy counts, clipped at 0."""
    from deniable.shared.mechanisms import choose_mechanism

    mechanism = choose_mechanism(config.k, config.epsilon)
    counts = [max(0, round(c["count"] or 0)) for c in body["categories"]]
    local = mechanism.count_variance(counts)
    rows = []
    for cat, variance in zip(body["categories"], local, strict=True):
        local_se = math.sqrt(max(0.0, float(variance)))
        central_se = cat["stderr"] or 0.0
        rows.append({
            "category": cat["category"], "central": central_se, "local": local_se,
            "ratio": local_se / central_se if central_se else None,
        })  # fmt: skip
    return rows


def _survey_sections(body: dict[str, Any], group_by: str | None) -> list[dict[str, Any]]:
    """One figure per question and group of a survey: proportions of categories (choice) or options (multi)
    with their 95% intervals, or the mean of a number question with its interval, on its declared range."""
    by_cell: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for row in estimate_rows(body):  # each (group, question)'s rows, in order, found without a scan per section
        by_cell.setdefault((row["group"], row["question_id"]), []).append(row)
    sections = []
    for value, group in _groups(body):
        where = "all respondents" if value is None else f"{group_by} = {value}"
        for answer in group.get("questions", ()):
            qid, kind = answer["question"], answer["kind"]
            mine = by_cell.get((value, qid), [])
            section: dict[str, Any] = {
                "title": f"{answer.get('text', qid)}", "where": where, "value": value, "question": qid, "kind": kind,
                "n": answer.get("n"), "answered": answer.get("answered"), "skipped": answer.get("skipped"),
            }  # fmt: skip
            if kind == "number":
                (mean,) = [r for r in mine if r["statistic"] == "mean"]
                low, high = answer["mean"]["range"]
                section["mean"] = mean
                section["chart"] = error_bar_chart(
                    [Bar("mean", mean["estimate"], mean["ci_low"], mean["ci_high"])], percent=False,
                    domain=(float(low), float(high)),
                    title=f"Estimated mean of {answer.get('text', qid)}, {where}, with its 95% interval",
                )  # fmt: skip
            else:
                shares = [r for r in mine if r["statistic"] == "proportion"]
                counts = {r["category"]: r for r in mine if r["statistic"] == "count"}
                what = "option" if kind == "multi" else "answer"
                section["rows"] = [(r, counts[r["category"]]) for r in shares]
                section["chart"] = error_bar_chart(
                    [Bar(r["category"], r["estimate"], r["ci_low"], r["ci_high"]) for r in shares],
                    title=f"Estimated share choosing each {what} of {answer.get('text', qid)}, {where}, "
                    "with 95% intervals",
                )  # fmt: skip
            sections.append(section)
    return sections


@bp.get("/campaigns/<campaign_id>")
@query_params("group_by", "round", "bucket")
def campaign(campaign_id: str) -> Response:
    """One campaign: estimates with error bars per group, selectors, timeline, accountant, comparison."""
    session = _session()
    service = current_service()
    admin = session.role == "admin"
    summary = service.campaign_summary(campaign_id, exact_counts=admin)
    config = service.campaign(campaign_id)
    group_by = query_str("group_by") or None
    if group_by is not None and group_by not in config.group_fields:
        group_by = None
    rounds = [r["round"] for r in service.rounds(campaign_id)["rounds"]] if config.recurring else []
    round_ = query_str("round") or (rounds[-1] if rounds else None)
    if round_ is not None and round_ not in rounds:
        round_ = rounds[-1] if rounds else None
    bucket = query_str("bucket") or "day"
    bucket = bucket if bucket in TIMELINE_BUCKETS else "day"

    body = None
    if not config.recurring or round_ is not None:
        body = service.stored_estimate(campaign_id, group_by=group_by, round=round_)
    sections = []
    if body is not None and config.is_survey:
        sections = _survey_sections(body, group_by)
    elif body is not None:
        rows = estimate_rows(body, question=config.question)
        for value, group in _groups(body):
            group_rows = [r for r in rows if r["group"] == value]
            shares = [r for r in group_rows if r["statistic"] == "proportion"]
            counts = {r["category"]: r for r in group_rows if r["statistic"] == "count"}
            title = "all respondents" if value is None else f"{group_by} = {value}"
            bars = [Bar(r["category"], r["estimate"], r["ci_low"], r["ci_high"]) for r in shares]
            sections.append({
                "title": title, "n": group.get("n"), "value": value,
                "chart": error_bar_chart(bars, title=f"Estimated share of each answer, {title}, with 95% intervals"),
                "rows": [(r, counts[r["category"]]) for r in shares],
            })  # fmt: skip
    try:
        timeline = service.timeline(campaign_id, bucket=bucket, round=round_, exact_counts=admin)
        timeline_error = None
    except PermissionDenied as exc:
        timeline, timeline_error = None, str(exc)
    timeline_svg = None
    if timeline is not None and timeline["buckets"]:
        points = [(b["start"], b["reports"]) for b in timeline["buckets"]]
        timeline_svg = timeline_chart(points, title=f"Accepted reports per {bucket} (UTC)")
    comparison, releases = None, None
    if config.trust_model == "central":
        releases = service.releases(campaign_id, after=0, limit=RELEASES_PAGE_DEFAULT)
        if body is not None and body.get("categories"):
            comparison = _comparison(config, body)
    return _page(
        "campaign.html",
        title=campaign_id,
        session=session,
        c=summary,
        config=config,
        body=body,
        sections=sections,
        group_by=group_by,
        rounds=rounds,
        round=round_,
        bucket=bucket,
        buckets=TIMELINE_BUCKETS,
        timeline=timeline,
        timeline_svg=timeline_svg,
        timeline_error=timeline_error,
        comparison=comparison,
        releases=releases,
        epsilon_left=_left(summary),
    )


def _back(campaign_id: str) -> str:
    form = {"group_by": request.form.get("group_by"), "round": request.form.get("round")}
    params: dict[str, Any] = {k: v for k, v in form.items() if v}
    return url_for("dashboard.campaign", campaign_id=campaign_id, **params)


@bp.get("/campaigns/<campaign_id>/estimate.csv")
@query_params("group_by", "round")
def csv(campaign_id: str) -> Response:
    """The estimate as tidy CSV rows (the numbers of the API's JSON, written exactly)."""
    service = current_service()
    config = service.campaign(campaign_id)
    group_by = query_str("group_by") or None
    round_ = query_str("round") or None
    body = service.stored_estimate(campaign_id, group_by=group_by, round=round_)
    if body is None:
        raise DeniableError(f"campaign {campaign_id!r} has no release of this grouping yet; draw one on its page first")
    text = estimate_rows(body, question=config.question).to_csv()
    name = "-".join(filter(None, (campaign_id, group_by, round_, "estimate"))) + ".csv"
    response = make_response(text)
    response.headers["Content-Type"] = "text/csv; charset=utf-8"
    response.headers["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


@bp.post("/campaigns/<campaign_id>/release")
def release(campaign_id: str) -> Response:
    """Central: draw the first release of a grouping (spends the campaign's ε once; later views are free)."""
    check_csrf(_session())
    group_by = request.form.get("group_by") or None
    current_service().estimate(campaign_id, group_by=group_by, level=0.95)
    return redirect(_back(campaign_id), code=303)


@bp.post("/campaigns/<campaign_id>/close")
def close(campaign_id: str) -> Response:
    """Admin: close the campaign (later reports are refused)."""
    check_csrf(_session())
    current_service().close_campaign(campaign_id)
    return redirect(_back(campaign_id), code=303)
