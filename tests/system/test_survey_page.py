"""The survey page ``/survey/<id>`` in a real headless Chromium against the real server (issue 16).

The page loads the browser client bundle (``aggregator/api/static/survey.js``, built from ``js/``), which
fetches, validates and pins the descriptor, renders the question, and on submit randomizes, seals and
stores the answer in IndexedDB before posting the sealed report. Checked here: the page loads under its
strict CSP with no console error; answering delivers one report that the aggregator counts once; a reload
sends nothing; an answer given offline waits in the outbox and is delivered exactly once when the browser
is back online; 2,000 answers scripted inside the page (each a device of its own, with a seeded secret,
so the run is reproducible given the campaign key) give estimates whose intervals hold the true counts,
and exactly the reports the Python device makes from the same secrets (byte compatibility end to end);
a survey of four questions (choice, multi, number) created by the aggregator, answered by two browsers,
counted once each and estimated per question.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests
from support.browser import chromium
from support.server import RunningServer, free_port
from support.shuffler import create_shuffled_campaign, start_shuffler, wait_for

from deniable.client.memo import one_shot_answer
from deniable.shared.descriptor import CampaignConfig

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "browser_embed"
FLEET = 2000
TRUE_P = (0.5, 0.3, 0.2)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.fixture(scope="module")
def server(aggregator: RunningServer) -> RunningServer:
    aggregator.create_campaign(
        id="web-smoking", question="Did you smoke in the last 30 days?", categories=["no", "yes"], epsilon=1.0,
        group_fields=["country"], group_values={"country": ["nl", "fr"]},
    )  # fmt: skip
    aggregator.create_campaign(
        id="web-offline", question="How do you get to work?", categories=["walk", "bike", "car"], epsilon=2.0,
    )  # fmt: skip
    aggregator.create_campaign(
        id="web-fleet", question="Which platform do you use most?", categories=["android", "ios", "web"],
        epsilon=2.0, mechanism="grr",
    )  # fmt: skip
    return aggregator


def reports_of(server: RunningServer, campaign_id: str) -> int:
    return int(server.estimate(campaign_id)["n"])


def submit(page: Any) -> None:
    """Click Submit answer and wait until the page says the answer was delivered."""
    page.get_by_role("button", name="Submit answer").click()
    page.wait_for_selector("[role=status][data-kind=done]", timeout=15000)


def open_page(browser: Any, server: RunningServer, campaign_id: str, context: Any = None) -> tuple[Any, Any, dict]:
    context = context or browser.new_context()
    page = context.new_page()
    seen: dict[str, list[Any]] = {"posts": [], "errors": []}
    page.on("request", lambda r: seen["posts"].append(r.url) if r.method == "POST" else None)
    page.on(
        "console",
        lambda m: seen["errors"].append(m.text) if m.type == "error" and "Failed to load" not in m.text else None,
    )
    page.on(  # a failed load shows in the console without its URL; the browser's own /favicon.ico is no error
        "response",
        lambda r: seen["errors"].append(f"{r.status} {r.url}") if r.status >= 400 and "favicon" not in r.url else None,
    )
    page.on("pageerror", lambda e: seen["errors"].append(str(e)))
    response = page.goto(f"{server.url}/survey/{campaign_id}")
    assert response is not None and response.status == 200
    page.wait_for_selector("[data-deniable-survey][data-state=ready]", timeout=15000)
    return context, page, seen


def test_the_page_is_served_with_a_strict_csp_and_an_unknown_campaign_is_a_404(server: RunningServer) -> None:
    page = requests.get(f"{server.url}/survey/web-smoking", timeout=30)
    csp = page.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "default-src 'none'" in csp and "unsafe" not in csp
    assert '<script type="module" src="/survey/static/survey.js"></script>' in page.text
    assert "<script>" not in page.text  # no inline script at all
    start = page.text.index('<script type="application/json" id="deniable-descriptor">')
    carried = page.text[page.text.index(">", start) + 1 : page.text.index("</script>", start)]
    assert json.loads(carried) == requests.get(f"{server.url}/api/v1/campaigns/web-smoking", timeout=30).json()
    bundle = requests.get(f"{server.url}/survey/static/survey.js", timeout=30)
    assert bundle.status_code == 200 and bundle.headers["Content-Type"].startswith("text/javascript")
    for name in ("survey-extra.js", "survey-compat.js"):
        part = requests.get(f"{server.url}/survey/static/{name}", timeout=30)
        assert part.status_code == 200 and part.headers["Content-Type"].startswith("text/javascript")
    assert requests.get(f"{server.url}/survey/no-such-survey", timeout=30).status_code == 404


def test_answering_delivers_one_report_counted_once_and_a_reload_sends_nothing(
    browser: Any, server: RunningServer
) -> None:
    context, page, seen = open_page(browser, server, "web-smoking")
    assert page.get_by_role("group", name="Did you smoke in the last 30 days?").is_visible()
    note = page.get_by_role("region", name="What happens to your answer").inner_text()
    assert "randomized in this browser" in note and "cannot know what you chose" in note
    page.get_by_label("yes").check()
    page.get_by_label("Your country (sent as it is)").select_option("fr")
    submit(page)
    assert reports_of(server, "web-smoking") == 1
    assert len(seen["posts"]) == 1
    page.reload()
    page.wait_for_selector("[data-deniable-survey][data-state=ready]", timeout=15000)
    page.wait_for_timeout(300)
    assert len(seen["posts"]) == 1, "a reload re-sent a report"
    page.get_by_label("yes").check()
    page.get_by_label("Your country (sent as it is)").select_option("fr")
    submit(page)  # the same answer again: the same report
    assert reports_of(server, "web-smoking") == 1, "the repeated answer was counted twice"
    assert seen["errors"] == []
    context.close()


def test_an_answer_given_offline_is_delivered_exactly_once_when_back_online(
    browser: Any, server: RunningServer
) -> None:
    context, page, seen = open_page(browser, server, "web-offline")
    before = reports_of(server, "web-offline")
    context.set_offline(True)
    page.get_by_label("bike").check()
    page.get_by_role("button", name="Submit answer").click()
    page.wait_for_selector("[role=status][data-kind=waiting]", timeout=15000)
    assert reports_of(server, "web-offline") == before
    pending = "async () => (await (await document.querySelector('[data-deniable-survey]').deniable).client.pending())"
    assert len(page.evaluate(pending)) == 1
    context.set_offline(False)
    page.wait_for_selector("[role=status][data-kind=done]", timeout=15000)
    assert reports_of(server, "web-offline") == before + 1
    page.reload()
    page.wait_for_selector("[data-deniable-survey][data-state=ready]", timeout=15000)
    page.wait_for_timeout(300)
    assert reports_of(server, "web-offline") == before + 1
    assert seen["errors"] == [] or all("ERR_INTERNET_DISCONNECTED" in e for e in seen["errors"])
    context.close()


FLEET_SCRIPT = """
async ([count, values, seeds]) => {
  const m = await import('/survey/static/survey.js');
  let delivered = 0;
  let errors = [];
  let waiting = [];
  const device = async (i) => {  // one device: its own database, seeded secret, answer and delivery
    const secret = Uint8Array.from(seeds[i].match(/../g), (b) => parseInt(b, 16));
    const client = await m.Client.open({ dbName: `fleet-${i}`, secret });
    await client.submit('web-fleet', values[i]);
    return client;
  };
  const flush = async (client) => {
    const result = await client.flush();
    delivered += result.delivered;
    if (result.pending) {
      errors.push(result.error);
      waiting.push(client);
    } else client.close();
  };
  for (let start = 0; start < count; start += 50) {
    const clients = await Promise.all(Array.from({ length: Math.min(50, count - start) }, (_, j) => device(start + j)));
    await Promise.all(clients.map(flush));
  }
  for (let round = 0; round < 3 && waiting.length; round += 1) {  // a loaded machine may time out a POST
    const again = waiting;
    waiting = [];
    errors = [];
    await Promise.all(again.map(flush));
  }
  return [delivered, errors.slice(0, 3)];
}
"""


def test_two_thousand_scripted_answers_give_estimates_within_their_intervals(
    browser: Any, server: RunningServer
) -> None:
    config = CampaignConfig.from_json(server.get("/api/v1/campaigns/web-fleet").json())
    seeds = [hashlib.sha256(f"fleet-{i}".encode()).digest() for i in range(FLEET)]
    cut = [round(FLEET * TRUE_P[0]), round(FLEET * (TRUE_P[0] + TRUE_P[1]))]
    values = [0 if i < cut[0] else 1 if i < cut[1] else 2 for i in range(FLEET)]
    truth = [values.count(v) for v in range(3)]
    context, page, _ = open_page(browser, server, "web-fleet")
    delivered, errors = page.evaluate(
        FLEET_SCRIPT, [FLEET, [config.categories[v] for v in values], [s.hex() for s in seeds]]
    )
    context.close()
    assert delivered == FLEET, errors
    estimate = server.estimate("web-fleet")
    assert estimate["n"] == FLEET
    # the same secrets in the Python device give the same reports: the server's tally is theirs
    python_reports = np.array([one_shot_answer(config, seed, v)[1] for seed, v in zip(seeds, values, strict=True)])
    expected = config.build_mechanism().estimate(python_reports)
    rows = {row["category"]: row for row in estimate["categories"]}
    assert [rows[c]["count"] for c in config.categories] == pytest.approx(list(expected.counts), abs=1e-6)
    # The campaign key (hence the fingerprint in every one-shot nonce) is fresh per run, so the reports are a
    # new sample each run: each category's interval at level 1 − 10⁻⁴ must hold the truth (a false alarm of
    # at most 3·10⁻⁴ per run over the three categories); the 95% intervals are shown on failure.
    strict = {row["category"]: row for row in server.estimate("web-fleet", level=1 - 1e-4)["categories"]}
    for v, label in enumerate(config.categories):
        low, high = strict[label]["ci"]
        assert low <= truth[v] <= high, (label, truth[v], rows[label], strict[label])


def test_the_embedding_example_answers_from_its_own_page(browser: Any, server: RunningServer) -> None:
    """examples/browser_embed: the package in one's own page (own markup and script), on one origin."""
    server.create_campaign(id="product-rating", question="How likely are you to recommend us?",
                           categories=["unlikely", "maybe", "likely"], epsilon=1.0)  # fmt: skip
    port = free_port()
    example = subprocess.Popen(
        [sys.executable, str(EXAMPLE / "serve.py"), "--aggregator", server.url, "--port", str(port)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert example.stdout is not None and "serving the example" in example.stdout.readline()
        context = browser.new_context()
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"http://127.0.0.1:{port}/?campaign=product-rating")
        page.wait_for_selector("body[data-state=ready]", timeout=15000)
        note = page.get_by_role("region", name="What happens to your answer").inner_text()
        assert "randomized in this browser" in note
        page.get_by_label("likely", exact=True).check()
        page.get_by_role("button", name="Send").click()
        page.wait_for_selector("body[data-state=sent]", timeout=15000)
        context.close()
        assert errors == []
        assert reports_of(server, "product-rating") == 1
        for name in ("survey-extra.js", "survey-compat.js"):  # what the bundle imports on demand, forwarded too
            assert requests.get(f"http://127.0.0.1:{port}/survey/static/{name}", timeout=30).status_code == 200
    finally:
        example.terminate()
        example.wait(timeout=10)
        if example.stdout is not None:
            example.stdout.close()


def test_a_shuffled_campaign_is_answered_through_its_shuffler_never_the_aggregator(
    browser: Any, server: RunningServer, tmp_path: Path
) -> None:
    """Three browsers answer a shuffled campaign: each report goes to the shuffler (CORS, CSP allowing its
    origin), which forwards one signed batch of the three; the aggregator counts them and saw no report POST."""
    shuffler = start_shuffler(tmp_path / "shuffler", upstream=server.url)
    try:
        config = create_shuffled_campaign(server, shuffler, id="web-shuffled", min_batch=3)
        page_csp = requests.get(f"{server.url}/survey/web-shuffled", timeout=30).headers["Content-Security-Policy"]
        assert f"connect-src 'self' {shuffler.url}" in page_csp
        posts: list[str] = []
        for answer in ("yes", "no", "yes"):
            context, page, seen = open_page(browser, server, "web-shuffled")
            assert "shuffler" in page.get_by_role("region", name="What happens to your answer").inner_text()
            page.get_by_label(answer, exact=True).check()
            submit(page)
            posts += seen["posts"]
            assert seen["errors"] == []
            context.close()
        assert len(posts) == 3 and all(url.startswith(shuffler.url) for url in posts), posts
        wait_for(lambda: reports_of(server, "web-shuffled") == 3, what="the shuffler's batch of three")
    finally:
        shuffler.stop()
    assert config["shuffler"]["min_batch"] == 3


SURVEY_SCRIPT = """
async ([descriptor]) => {
  const m = await import('/survey/static/survey.js');
  window.posted = [];
  const fetch = async (url, init) => {  // an aggregator in the page: the survey's descriptor, then verdicts
    if (init.method === 'GET') return new Response(JSON.stringify(descriptor), { status: 200 });
    const { reports } = JSON.parse(init.body);
    window.posted.push(...reports);
    const results = reports.map((r) => ({ report_id: r.report_id, status: 'accepted', reason: null }));
    const body = { results, accepted: reports.length, duplicate: 0, rejected: 0 };
    return new Response(JSON.stringify(body), { status: 200 });
  };
  const client = await m.Client.open({ dbName: 'survey-v3', fetch });
  const element = document.createElement('div');
  element.id = 'v3';
  document.querySelector('main').replaceChildren(element);
  await m.mountSurvey(element, { campaignId: descriptor.id, client });
  return element.dataset.state;
}
"""


def test_a_survey_of_every_question_kind_is_rendered_answered_and_opens_in_python(
    browser: Any, server: RunningServer
) -> None:
    """A format 3 survey (choice, number, optional multi) rendered from its descriptor in Chromium, answered
    with the keyboard and mouse; the envelope the page seals opens with the aggregator's code and decodes
    under the survey's rules (the page's own aggregator is scripted: survey campaigns are created elsewhere)."""
    from deniable.shared.envelope import Envelope, open_envelope

    vectors = json.loads((Path(__file__).parents[1] / "vectors" / "wire-v3.json").read_text(encoding="utf-8"))
    descriptor = next(c["config"] for c in vectors["campaigns"] if c["name"] == "per-question")
    config = CampaignConfig.from_json(descriptor)
    context, page, seen = open_page(browser, server, "web-smoking")
    state = page.evaluate(SURVEY_SCRIPT, [descriptor])
    assert state == "ready", page.locator("#v3").inner_text()
    assert page.get_by_role("group", name="How old are you?").is_visible()
    assert page.get_by_role("group", name="Which apps did you use today? (optional)").is_visible()
    page.get_by_label("Your country (sent as it is)").select_option("DE")
    page.get_by_role("button", name="Submit answer").click()
    page.wait_for_selector("[role=status][data-kind=error]")
    assert "needs an answer" in page.get_by_role("status").inner_text()  # InvalidAnswer, nothing sent
    page.get_by_role("group", name="Did you smoke in the last 30 days?").get_by_label("yes").check()
    page.get_by_label("A number from 18 to 99").fill("37")
    page.get_by_label("maps").check()
    page.get_by_label("chat").check()
    submit(page)
    posted = page.evaluate("window.posted")
    assert seen["errors"] == []
    context.close()
    assert len(posted) == 1
    envelope = Envelope.from_json(posted[0])
    private = bytes.fromhex(vectors["keypair"]["private_key_hex"])
    payload = open_envelope(envelope, campaign_id=config.id, private_key=private, padded_length=config.padded_length)
    decoded = config.decode(payload)
    assert set(decoded.answers) == {"smoke", "age", "apps"} and decoded.groups == {"country": "DE"}


SURVEY_QUESTIONS: list[dict[str, Any]] = [
    {"id": "smoke", "text": "Did you smoke this month?", "kind": "choice", "categories": ["no", "yes", "quit"]},
    {"id": "apps", "text": "Which apps did you use today?", "kind": "multi",
     "options": ["mail", "maps", "news", "chat"], "max_selected": 3},
    {"id": "sleep", "text": "Hours of sleep last night?", "kind": "choice", "categories": ["<6", "6-8", ">8"]},
    {"id": "age", "text": "How old are you?", "kind": "number", "range": [18, 99]},
]  # fmt: skip


def test_a_survey_created_by_the_aggregator_is_answered_counted_once_and_estimated_per_question(
    browser: Any, server: RunningServer
) -> None:
    """A format 3 survey (two choice questions, a multi and a number) created by the real aggregator: two
    browsers answer it on /survey/<id> (the page preloads survey-extra.js, no console error under the CSP);
    each is counted once, a repeat after a reload is a duplicate, and the estimate is served per question."""
    config = server.create_campaign(id="web-health", title="Health this month", questions=SURVEY_QUESTIONS,
                                    epsilon=4.0, split="per_question", group_fields=["country"],
                                    group_values={"country": ["nl", "fr"]})  # fmt: skip
    assert config["format_version"] == 3 and [q["kind"] for q in config["questions"]] == [
        "choice", "multi", "choice", "number"]  # fmt: skip
    html = requests.get(f"{server.url}/survey/web-health", timeout=30).text
    assert '<link rel="modulepreload" href="/survey/static/survey-extra.js">' in html
    assert "modulepreload" not in requests.get(f"{server.url}/survey/web-smoking", timeout=30).text

    def answer(page: Any, smoke: str, apps: list[str], sleep: str, age: str, country: str) -> None:
        page.get_by_role("group", name="Did you smoke this month?").get_by_label(smoke).check()
        for app in apps:
            page.get_by_label(app).check()
        page.get_by_role("group", name="Hours of sleep last night?").get_by_label(sleep).check()
        page.get_by_label("A number from 18 to 99").fill(age)
        page.get_by_label("Your country (sent as it is)").select_option(country)
        submit(page)

    context, page, seen = open_page(browser, server, "web-health")
    assert page.get_by_role("heading", name="Health this month").is_visible()
    assert "Select up to 3." in page.get_by_role("group", name="Which apps did you use today?").inner_text()
    answer(page, "yes", ["maps", "chat"], "6-8", "37", "nl")
    assert reports_of(server, "web-health") == 1 and len(seen["posts"]) == 1
    page.reload()
    page.wait_for_selector("[data-deniable-survey][data-state=ready]", timeout=15000)
    page.wait_for_timeout(300)
    assert len(seen["posts"]) == 1, "a reload re-sent a report"
    answer(page, "yes", ["maps", "chat"], "6-8", "37", "nl")  # the same answers: the same report again
    assert len(seen["posts"]) == 2  # the memoized envelope, re-sent: the aggregator answers duplicate
    assert reports_of(server, "web-health") == 1, "the repeated answers were counted twice"
    assert seen["errors"] == []
    context.close()
    other, page, seen = open_page(browser, server, "web-health")
    answer(page, "no", [], ">8", "64", "fr")
    assert seen["errors"] == []
    other.close()
    body = server.estimate("web-health")
    assert body["n"] == 2
    questions = {q["question"]: q for q in body["questions"]}
    assert list(questions) == ["smoke", "apps", "sleep", "age"]
    assert all(q["answered"] == 2 for q in questions.values())
    assert [r["category"] for r in questions["smoke"]["categories"]] == ["no", "yes", "quit"]
    assert [r["option"] for r in questions["apps"]["options"]] == ["mail", "maps", "news", "chat"]
    assert questions["age"]["kind"] == "number" and len(questions["age"]["mean"]["ci"]) == 2
    grouped = server.estimate("web-health", group_by="country")
    assert set(grouped["groups"]) == {"nl", "fr"}


def test_a_recurring_survey_is_answered_round_by_round_from_its_links(browser: Any, server: RunningServer) -> None:
    """A recurring survey created by the aggregator, answered on /survey/<id>?round=<label>: one report per
    browser and round (the permanent responses: the same answers cost ε once, which the ledger shows), each
    round estimated on its own; without a round the page says that it needs one and sends nothing."""
    server.create_campaign(id="web-weekly", title="This week", questions=SURVEY_QUESTIONS[:2], epsilon=2.0,
                           split="per_question", recurring=True)  # fmt: skip
    context = browser.new_context()
    for label in ("2026-w48", "2026-w49"):
        _, page, seen = open_page(browser, server, f"web-weekly?round={label}", context)
        page.get_by_role("group", name="Did you smoke this month?").get_by_label("quit").check()
        page.get_by_label("news").check()
        submit(page)
        assert seen["errors"] == [] and len(seen["posts"]) == 1
        page.close()
    _, page, seen = open_page(browser, server, "web-weekly", context)
    ledger = page.evaluate("""async () => {
      const m = await import('/survey/static/survey.js');
      const client = await m.Client.open({ dbName: 'deniable' });
      return (await client.ledger()).campaigns['web-weekly'];
    }""")
    assert ledger["epsilon"] == 2.0  # the second round re-sent the permanent responses: nothing more spent
    page.get_by_role("group", name="Did you smoke this month?").get_by_label("no").check()
    page.get_by_role("button", name="Submit answer").click()
    page.wait_for_selector("[role=status][data-kind=error]", timeout=15000)
    assert "collects in rounds" in page.get_by_role("status").inner_text() and seen["posts"] == []
    context.close()
    for label in ("2026-w48", "2026-w49"):
        body = server.estimate("web-weekly", round=label)
        assert body["round"] == label and body["n"] == 1
        assert [q["answered"] for q in body["questions"]] == [1, 1]
