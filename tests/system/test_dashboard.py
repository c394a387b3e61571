"""The dashboard in a real headless Chromium (Debian's ``chromium``, driven by Playwright), against the real
server: sign-in with the keyboard, the campaign list, a campaign page whose error bars carry the API's
numbers, the CSV download equal to the API, hostile labels rendered as text with no script run, sign-out
that really ends the session; plus the CSRF, cookie and header rules over plain HTTP.

Screenshots go to ``tests/artifacts/dashboard/`` (gitignored) and are checked not to be blank. Playwright
never downloads a browser here: it is pointed at ``/usr/bin/chromium`` (``make test`` installs it). Without
Chromium the browser tests skip, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests
from support.browser import chromium
from support.reports import simulate_envelopes, upload
from support.server import RunningServer

from deniable.aggregator.api.auth import ADMIN, PUBLIC, SESSION_ACCESS
from deniable.aggregator.api.sessions import COOKIE
from deniable.analyst import Analyst

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "dashboard"
HOSTILE = "<img src=x onerror=alert(1)>"
HOSTILE_LABEL = "<script>alert(2)</script>"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.fixture(scope="module")
def server(aggregator: RunningServer) -> RunningServer:
    """The module's server with a grouped local campaign, a central one with a release, a hostile one."""
    rng = np.random.default_rng(21)
    local = aggregator.create_campaign(
        id="dash-local", question="Which platform do you use most?", categories=["android", "ios", "web"],
        epsilon=2.0, group_fields=["country"], group_values={"country": ["nl", "fr"]},
    )  # fmt: skip
    groups = [{"country": "nl" if i % 3 else "fr"} for i in range(240)]
    values = rng.choice(3, size=240, p=[0.5, 0.3, 0.2]).tolist()
    assert (
        upload(aggregator, "dash-local", simulate_envelopes(local, values, rng=rng, groups=groups))["accepted"] == 240
    )
    central = aggregator.create_campaign(
        id="dash-central", question="Did you vote?", categories=["no", "yes"], epsilon=0.5,
        trust_model="central", budget=2.0,
    )  # fmt: skip
    upload(aggregator, "dash-central", simulate_envelopes(central, rng.integers(0, 2, 80).tolist(), rng=rng))
    aggregator.estimate("dash-central")  # one release: the page shows it without spending more
    hostile = aggregator.create_campaign(
        id="dash-hostile", question=HOSTILE, categories=[HOSTILE_LABEL, "b"], epsilon=1.0
    )
    upload(aggregator, "dash-hostile", simulate_envelopes(hostile, [0, 1, 1], rng=rng))
    return aggregator


def _not_blank(path: Path) -> None:
    from PIL import Image

    with Image.open(path) as image:
        colours = image.convert("RGB").getcolors(maxcolors=1 << 16)
    assert colours is None or len(colours) > 20, f"{path} looks blank ({len(colours or [])} colours)"


def _shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    _not_blank(path)


def _sign_in(page: Any, server: RunningServer, token: str) -> None:
    page.goto(server.url + "/dashboard")
    assert page.url.endswith("/dashboard/sign-in")
    page.keyboard.press("Tab")  # the skip link, then the token field: usable without a mouse
    page.focus("#token")
    page.keyboard.type(token)
    page.keyboard.press("Enter")
    page.wait_for_url("**/dashboard/campaigns")


def test_sign_in_list_campaign_page_csv_and_sign_out(browser: Any, server: RunningServer, tmp_path: Path) -> None:
    context = browser.new_context(accept_downloads=True, viewport={"width": 1100, "height": 900})
    page = context.new_page()
    urls: list[str] = []
    page.on("request", lambda request: urls.append(request.url))
    page.goto(server.url + "/dashboard/sign-in")
    assert page.get_by_label("Token").get_attribute("type") == "password"
    _shot(page, "sign-in")
    page.fill("#token", "not-a-token")
    page.click("button[type=submit]")
    assert "not valid for this aggregator" in page.locator("[role=alert]").inner_text()
    _sign_in(page, server, server.analyst_token)

    # the list: every campaign with status, trust model, reports and ε
    row = page.locator("tr[data-campaign='dash-central']")
    cells = [c.strip() for c in row.locator("th, td").all_inner_texts()]
    assert cells[:4] == ["dash-central", "Did you vote?", "open", "central"]
    assert cells[4] == "private" and cells[6:] == ["0.5", "1.5"]  # ε spent 0.5 of 2
    local_cells = [c.strip() for c in page.locator("tr[data-campaign='dash-local'] td").all_inner_texts()]
    assert local_cells[3] == "240"
    assert re.fullmatch(r"\d+ campaigns", page.locator("table.campaigns caption").inner_text().strip())
    _shot(page, "campaigns")

    # a campaign page: the error bars carry the API's numbers
    page.click("a[href='/dashboard/campaigns/dash-local']")
    page.select_option("#group_by", "country")
    page.click("form.selector button")
    page.wait_for_url("**group_by=country**")
    api = server.estimate("dash-local", group_by="country")
    for value, group in api["groups"].items():
        bars = page.locator(f"figure[data-group='{value}'] g.bar")
        assert bars.count() == 3
        for i, category in enumerate(group["categories"]):
            bar = bars.nth(i)
            assert bar.get_attribute("data-category") == category["category"]
            assert float(bar.get_attribute("data-estimate")) == category["proportion"]
            assert float(bar.get_attribute("data-ci-low")) == category["proportion_ci"][0]
            assert float(bar.get_attribute("data-ci-high")) == category["proportion_ci"][1]
            cx = float(bar.locator("circle").get_attribute("cx"))
            x1, x2 = (float(bar.locator("line.whisker").get_attribute(a)) for a in ("x1", "x2"))
            assert x1 < cx < x2  # the dot sits inside its interval
    assert page.locator("svg.timeline g.bucket").count() >= 1
    total = sum(int(b.get_attribute("data-reports")) for b in page.locator("svg.timeline g.bucket").all())
    assert total == 240
    _shot(page, "campaign-local")

    # the CSV download equals the API's numbers
    with page.expect_download() as info:
        page.click("a.download")
    downloaded = Path(info.value.path()).read_bytes().decode("utf-8")
    analyst = Analyst(server.url, token=server.analyst_token)
    assert downloaded == analyst.estimates("dash-local", group_by="country").to_csv()
    for row in csv.DictReader(io.StringIO(downloaded)):
        category = next(c for c in api["groups"][row["group"]]["categories"] if c["category"] == row["category"])
        if row["statistic"] == "count":
            assert float(row["estimate"]) == category["count"] and float(row["ci_high"]) == category["ci"][1]

    # a central campaign: the stored release, the accountant and the comparison, nothing spent by looking
    spent_before = analyst.accountant("dash-central")["epsilon_spent"]
    page.goto(server.url + "/dashboard/campaigns/dash-central")
    assert page.locator("#accountant").get_attribute("data-left") == "1.5"
    release = server.estimate("dash-central")
    shown = [float(b.get_attribute("data-estimate")) for b in page.locator("g.bar").all()]
    assert shown == [c["proportion"] for c in release["categories"]]
    assert page.locator("table.comparison tbody tr").count() == 2
    assert float(page.locator("#accountant-totals").get_attribute("data-spent")) == 0.5
    logged = page.locator("table.releases tbody tr")
    assert logged.count() == 1 and logged.first.get_attribute("data-epsilon") == "0.5"
    assert "not released to analysts" in page.locator("#timeline-heading + p").inner_text()
    assert analyst.accountant("dash-central")["epsilon_spent"] == spent_before
    _shot(page, "campaign-central")

    # phone width: nothing wider than the screen
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(server.url + "/dashboard/campaigns/dash-local")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    _shot(page, "campaign-phone")

    # the token never appears in a URL, a cookie readable by script, or browser storage
    assert not any(server.analyst_token in url for url in urls)
    assert page.evaluate("document.cookie") == ""
    assert page.evaluate("window.localStorage.length + window.sessionStorage.length") == 0
    cookie = next(c for c in context.cookies() if c["name"] == COOKIE)
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/dashboard"
    assert server.analyst_token not in cookie["value"]

    # sign-out ends the session on the server: the old cookie no longer opens anything
    page.click("form.signout button")
    page.wait_for_url("**/dashboard/sign-in")
    _shot(page, "signed-out")
    replay = requests.get(server.url + "/dashboard/campaigns", cookies={COOKIE: cookie["value"]},
                          allow_redirects=False, timeout=30)  # fmt: skip
    assert replay.status_code == 303 and replay.headers["Location"].endswith("/dashboard/sign-in")
    context.close()


def test_hostile_text_is_text_and_no_script_runs(browser: Any, server: RunningServer) -> None:
    context = browser.new_context()
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    _sign_in(page, server, server.admin_token)
    assert page.locator("tr[data-campaign='dash-hostile'] td.question").inner_text() == HOSTILE
    response = page.goto(server.url + "/dashboard/campaigns/dash-hostile")
    assert "script-src" not in response.headers["content-security-policy"]
    assert "default-src 'none'" in response.headers["content-security-policy"]
    assert page.locator("h1#question").inner_text() == HOSTILE
    assert page.locator("table.numbers tbody th").first.inner_text() == HOSTILE_LABEL
    assert page.locator("g.bar").first.get_attribute("data-category") == HOSTILE_LABEL
    assert page.locator("main img").count() == 0 and page.locator("main script").count() == 0
    assert page.locator("script").count() == 0
    page.wait_for_timeout(300)
    assert dialogs == []
    _shot(page, "hostile")
    context.close()


SURVEY_QUESTIONS: list[dict[str, Any]] = [
    {"id": "os", "text": "Which platform?", "kind": "choice", "categories": ["android", "ios", "web"]},
    {"id": "apps", "text": "Which apps today?", "kind": "multi", "options": ["mail", "maps", HOSTILE_LABEL],
     "max_selected": 2},
    {"id": "age", "text": HOSTILE, "kind": "number", "range": [18, 99]},
]  # fmt: skip


def test_a_survey_page_shows_every_question_with_the_apis_error_bars(browser: Any, server: RunningServer) -> None:
    """Categories, options and a mean, per group: each bar's numbers are the API's; hostile question text
    and option labels stay text; the CSV is the analyst client's rows."""
    from deniable.client.fleet import simulate_fleet
    from deniable.shared.sampling import seeded_randbelow

    server.create_campaign(id="dash-survey", title="Device survey", questions=SURVEY_QUESTIONS, epsilon=3.0,
                           split="per_question", group_fields=["country"], group_values={"country": ["nl", "fr"]})
    rng = np.random.default_rng(4)
    answers = [{"os": ["android", "ios", "web"][int(rng.integers(0, 3))],
                "apps": [["mail"], ["maps", HOSTILE_LABEL], []][i % 3], "age": int(rng.integers(18, 100))}
               for i in range(300)]  # fmt: skip
    simulate_fleet(server.url, "dash-survey", answers, [{"country": "nl" if i % 2 else "fr"} for i in range(300)],
                   randbelow=seeded_randbelow(rng))  # fmt: skip
    context = browser.new_context(accept_downloads=True, viewport={"width": 1100, "height": 900})
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    _sign_in(page, server, server.analyst_token)
    assert page.locator("tr[data-campaign='dash-survey'] td.question").inner_text() == "Device survey"
    page.goto(server.url + "/dashboard/campaigns/dash-survey?group_by=country")
    api = server.estimate("dash-survey", group_by="country")
    for value, group in api["groups"].items():
        for answer in group["questions"]:
            figure = page.locator(f"figure[data-group='{value}'][data-question='{answer['question']}']")
            assert figure.count() == 1 and figure.get_attribute("data-kind") == answer["kind"]
            bars = figure.locator("g.bar")
            if answer["kind"] == "number":
                bar = bars.first
                assert float(bar.get_attribute("data-estimate")) == answer["mean"]["mean"]
                assert [float(bar.get_attribute(a)) for a in ("data-ci-low", "data-ci-high")] == answer["mean"]["ci"]
                assert figure.locator("h3").inner_text() == HOSTILE  # hostile text is text
                continue
            rows = answer["categories" if answer["kind"] == "choice" else "options"]
            assert bars.count() == len(rows)
            for i, row in enumerate(rows):
                bar = bars.nth(i)
                assert bar.get_attribute("data-category") == row.get("category", row.get("option"))
                assert float(bar.get_attribute("data-estimate")) == row["proportion"]
                assert float(bar.get_attribute("data-ci-low")) == row["proportion_ci"][0]
                assert float(bar.get_attribute("data-ci-high")) == row["proportion_ci"][1]
                cx = float(bar.locator("circle").get_attribute("cx"))
                x1, x2 = (float(bar.locator("line.whisker").get_attribute(a)) for a in ("x1", "x2"))
                assert x1 <= cx <= x2
    assert page.locator("figure.question").count() == 2 * 3
    assert page.locator("main script").count() == 0 and page.locator("main img").count() == 0
    _shot(page, "campaign-survey")
    with page.expect_download() as info:
        page.click("a.download")
    downloaded = Path(info.value.path()).read_bytes().decode("utf-8")
    analyst = Analyst(server.url, token=server.analyst_token)
    assert downloaded == analyst.estimates("dash-survey", group_by="country").to_csv()
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(server.url + "/dashboard/campaigns/dash-survey")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    page.wait_for_timeout(300)
    assert dialogs == []
    context.close()


# -- over plain HTTP: CSRF, cookies, access --------------------------------------------------------------


def _signed_in(server: RunningServer, token: str) -> tuple[requests.Session, str]:
    session = requests.Session()
    form = session.get(server.url + "/dashboard/sign-in", timeout=30)
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text).group(1)  # type: ignore[union-attr]
    done = session.post(server.url + "/dashboard/sign-in", data={"token": token, "csrf": csrf},
                        allow_redirects=False, timeout=30)  # fmt: skip
    assert done.status_code == 303, done.text
    page = session.get(server.url + "/dashboard/campaigns", timeout=30)
    return session, re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]


def test_state_changes_need_the_csrf_token_and_the_same_origin(server: RunningServer) -> None:
    session, csrf = _signed_in(server, server.admin_token)
    url = server.url + "/dashboard/campaigns/dash-local/close"
    assert session.post(url, data={}, allow_redirects=False, timeout=30).status_code == 403
    assert session.post(url, data={"csrf": "x" + csrf}, allow_redirects=False, timeout=30).status_code == 403
    cross = session.post(url, data={"csrf": csrf}, headers={"Origin": "https://evil.example"}, allow_redirects=False,
                         timeout=30)  # fmt: skip
    assert cross.status_code == 403 and "another site" in cross.text
    assert Analyst(server.url, token=server.analyst_token).campaign("dash-local")["status"] == "open"
    # sign-in is protected too: a form token that is not the pre-session cookie's is refused
    fresh = requests.post(server.url + "/dashboard/sign-in", data={"token": server.admin_token, "csrf": "forged"},
                          allow_redirects=False, timeout=30)  # fmt: skip
    assert fresh.status_code == 403 and COOKIE not in fresh.headers.get("Set-Cookie", "")


def test_every_dashboard_page_needs_a_session_of_its_role(server: RunningServer) -> None:
    anonymous = requests.Session()
    paths = {
        "dashboard.campaigns": "/dashboard/campaigns",
        "dashboard.campaign": "/dashboard/campaigns/dash-local",
        "dashboard.csv": "/dashboard/campaigns/dash-local/estimate.csv",
        "dashboard.release": "/dashboard/campaigns/dash-central/release",
        "dashboard.close": "/dashboard/campaigns/dash-local/close",
        "dashboard.sign_out": "/dashboard/sign-out",
    }
    assert set(paths) == {e for e, role in SESSION_ACCESS.items() if role != PUBLIC}
    posts = {"dashboard.release", "dashboard.close", "dashboard.sign_out"}
    for endpoint, path in paths.items():
        if endpoint in posts:
            answer = anonymous.post(server.url + path, data={}, allow_redirects=False, timeout=30)
            assert answer.status_code == 403, endpoint
        else:
            answer = anonymous.get(server.url + path, allow_redirects=False, timeout=30)
            assert answer.status_code == 303 and answer.headers["Location"].endswith("/dashboard/sign-in"), endpoint
        bearer = anonymous.get(server.url + path, headers=server.auth("admin"), allow_redirects=False, timeout=30)
        assert bearer.status_code in (303, 405), endpoint  # a bearer token is not a session
    analyst, csrf = _signed_in(server, server.analyst_token)
    for endpoint in (e for e, role in SESSION_ACCESS.items() if role == ADMIN):
        answer = analyst.post(server.url + paths[endpoint], data={"csrf": csrf}, allow_redirects=False, timeout=30)
        assert answer.status_code == 403 and "signed in as analyst" in answer.text
    page = analyst.get(server.url + "/dashboard/campaigns", timeout=30)
    assert page.headers["Cache-Control"] == "no-store" and page.headers["X-Frame-Options"] == "DENY"
    cookie = next(c for c in analyst.cookies if c.name == COOKIE)
    assert not cookie.secure  # plain HTTP on loopback; behind TLS (or SECURE_COOKIES) it is Secure
    assert (
        requests.get(server.url + "/dashboard/static/dashboard.css", timeout=30)
        .headers["Content-Type"]
        .startswith("text/css")
    )


def test_every_dashboard_route_is_in_the_session_table(tmp_path: Path) -> None:
    from deniable.aggregator.api.app import create_app

    app = create_app({"DATA_DIR": tmp_path / "d", "ADMIN_TOKEN": "a" * 40, "ANALYST_TOKEN": "b" * 40})
    rules = app.url_map.iter_rules()
    pages = {rule.endpoint for rule in rules if rule.rule.startswith(("/dashboard", "/survey")) or rule.rule == "/"}
    assert pages == set(SESSION_ACCESS)
    home = app.test_client().get("/")
    assert home.status_code == 303 and home.headers["Location"].endswith("/dashboard/")
