"""Races against the real server (2 gunicorn workers × 4 threads): concurrency never counts twice or loses.

* The same batch posted by 8 threads at once: each report is ``accepted`` exactly once in all the replies
  together, every other answer is ``duplicate``, and ``n`` is the number of distinct reports.
* Eight reports of ONE device (one pseudonym, eight report ids), each posted by its own thread at once:
  exactly one is accepted and counted.
* Batches posted while the campaign is being closed: each batch is either acknowledged (its reports are
  then counted) or refused with 409; the number of ``accepted`` answers equals the final ``n``, so no
  acknowledged report is lost to the close and nothing slips in after it.
* Two admins creating the same campaign id at once: one 201, the others 409, and the winner's key is the
  one on disk (reports sealed to the returned public key decrypt).
* A survey's batch (choice, multi, number) posted by 8 threads at once counts each report once, every
  question's tally equal to a recount; 8 central survey releases at once are all served (never a 503 from
  a conflict between the workers' transactions) and each is charged once.

Each runs over SQLite and over PostgreSQL (``backend_aggregator``).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
import requests
from support.reports import seal_reports, simulate_envelopes, upload
from support.server import RunningServer

from deniable.shared.descriptor import CampaignConfig

THREADS = 8


def _together(calls: list[Callable[[], requests.Response]]) -> list[requests.Response]:
    """Run the calls on their own threads, released at the same instant by a barrier."""
    barrier = threading.Barrier(len(calls))

    def run(call: Callable[[], requests.Response]) -> requests.Response:
        barrier.wait()
        return call()

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(run, calls))


def _post(server: RunningServer, campaign_id: str, envelopes: list[dict[str, Any]]) -> Callable[[], Any]:
    url = f"{server.url}/api/v1/campaigns/{campaign_id}/reports"
    return lambda: requests.post(url, json={"reports": envelopes}, timeout=60)  # a connection per thread


@pytest.fixture(scope="module")
def server(backend_aggregator: RunningServer) -> RunningServer:
    """The module's real server: 2 gunicorn workers (processes) with 4 threads each, over SQLite and over
    PostgreSQL (where the workers' connections race like instances do)."""
    assert backend_aggregator.workers == 2 and backend_aggregator.threads >= 4
    return backend_aggregator


def _campaign(server: RunningServer, campaign_id: str) -> CampaignConfig:
    raw = server.create_campaign(id=campaign_id, question="Race?", categories=["a", "b", "c"], epsilon=1.0)
    return CampaignConfig.from_json(raw)


def test_the_same_batch_from_many_threads_counts_once(server: RunningServer) -> None:
    config = _campaign(server, "race-same-batch")
    envelopes = simulate_envelopes(config, [0, 1, 2] * 40, rng=np.random.default_rng(1))
    replies = _together([_post(server, config.id, envelopes)] * THREADS)
    assert all(r.status_code == 200 for r in replies), [r.text[:200] for r in replies]
    statuses: dict[str, Counter[str]] = {}
    for reply in replies:
        for result in reply.json()["results"]:
            statuses.setdefault(result["report_id"], Counter())[result["status"]] += 1
    assert len(statuses) == len(envelopes)
    assert all(c == Counter({"accepted": 1, "duplicate": THREADS - 1}) for c in statuses.values()), statuses
    assert server.estimate(config.id)["n"] == len(envelopes)


def test_one_device_racing_itself_counts_once(server: RunningServer) -> None:
    config = _campaign(server, "race-one-device")
    envelopes = [config.seal(config.make_payload(i % 3, {}), device_secret=b"\x07" * 32).to_json()
                 for i in range(THREADS)]  # fmt: skip
    replies = _together([_post(server, config.id, [envelope]) for envelope in envelopes])
    statuses = Counter(r.json()["results"][0]["status"] for r in replies)
    assert statuses == Counter({"accepted": 1, "duplicate": THREADS - 1})
    assert server.estimate(config.id)["n"] == 1


def test_batches_racing_a_close_are_counted_or_refused(server: RunningServer) -> None:
    config = _campaign(server, "race-close")
    rng = np.random.default_rng(3)
    batches = [simulate_envelopes(config, rng.integers(0, 3, size=25).tolist(), rng=rng) for _ in range(THREADS)]
    upload(server, config.id, batches[0])  # some reports before the race
    close_url = f"{server.url}/api/v1/campaigns/{config.id}/close"

    def close() -> requests.Response:
        return requests.post(close_url, headers=server.auth("admin"), timeout=60)

    replies = _together([*(_post(server, config.id, batch) for batch in batches[1:]), close])
    *posts, closed = replies
    assert closed.status_code == 200 and closed.json()["status"] == "closed"
    accepted = 25
    for reply in posts:
        assert reply.status_code in (200, 409), reply.text[:300]
        if reply.status_code == 200:
            accepted += reply.json()["accepted"]
        else:
            assert reply.json()["error"]["code"] == "campaign_closed"
    assert server.estimate(config.id)["n"] == accepted
    late = server.post(f"/api/v1/campaigns/{config.id}/reports", json={"reports": batches[-1]})
    assert late.status_code == 409
    assert server.estimate(config.id)["n"] == accepted


def test_creating_one_id_twice_at_once_keeps_the_winners_key(server: RunningServer) -> None:
    url = f"{server.url}/api/v1/campaigns"
    body = {"id": "race-create", "question": "Who wins?", "categories": ["no", "yes"], "epsilon": 1.0}
    replies = _together([lambda: requests.post(url, json=body, headers=server.auth("admin"), timeout=60)] * THREADS)
    codes = Counter(r.status_code for r in replies)
    assert codes == Counter({201: 1, 409: THREADS - 1}), codes
    (winner,) = [r.json() for r in replies if r.status_code == 201]
    assert server.get("/api/v1/campaigns/race-create").json()["public_key"] == winner["public_key"]
    envelopes = simulate_envelopes(winner, [0, 1, 1, 0], rng=np.random.default_rng(4))
    assert upload(server, "race-create", envelopes) == {"accepted": 4, "duplicate": 0, "rejected": 0}


SURVEY: list[dict[str, Any]] = [
    {"id": "smoke", "text": "Smoke?", "kind": "choice", "categories": ["no", "yes"]},
    {"id": "apps", "text": "Apps?", "kind": "multi", "options": ["mail", "maps", "news"], "max_selected": 2},
    {"id": "age", "text": "Age?", "kind": "number", "range": [18, 99]},
]  # fmt: skip


def _survey_envelopes(config: CampaignConfig, n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` devices' sealed survey answers (randomized locally, or the values of a central survey)."""
    from deniable.client.report import randomize_survey
    from deniable.shared.sampling import seeded_randbelow
    from deniable.shared.survey import check_answers

    rng = np.random.default_rng(seed)
    randbelow = seeded_randbelow(rng)
    reports = []
    for i in range(n):
        answers = check_answers(config.questions, {"smoke": ["no", "yes"][i % 2], "apps": [["mail"], []][i % 2],
                                                   "age": 18 + i % 80})  # fmt: skip
        reports.append(randomize_survey(config, answers, randbelow))
    return seal_reports(config, reports, rng=rng)


def test_the_same_survey_batch_from_many_threads_counts_once(server: RunningServer) -> None:
    config = CampaignConfig.from_json(server.create_campaign(
        id="race-survey", title="Race", questions=SURVEY, epsilon=3.0, split="per_question"))  # fmt: skip
    envelopes = _survey_envelopes(config, 40, seed=5)
    replies = _together([_post(server, config.id, envelopes)] * THREADS)
    assert all(r.status_code == 200 for r in replies), [r.text[:200] for r in replies]
    accepted = Counter(result["report_id"] for r in replies for result in r.json()["results"]
                       if result["status"] == "accepted")  # fmt: skip
    assert len(accepted) == len(envelopes) and set(accepted.values()) == {1}
    body = server.estimate(config.id)
    assert body["n"] == len(envelopes) and [q["answered"] for q in body["questions"]] == [len(envelopes)] * 3
    from deniable.aggregator.verify import verify_store

    store = server.open_store()
    try:
        [check] = [c for c in verify_store(store) if c.campaign_id == config.id]
    finally:
        store.close()
    assert check.ok and check.reports == len(envelopes), check.mismatches


def test_central_survey_releases_racing_each_other_are_all_served_and_charged_once(server: RunningServer) -> None:
    """On PostgreSQL the workers' SERIALIZABLE release transactions conflict; each conflict is run again
    (``Store.retrying``), never answered 503, and each release is logged with its cost once."""
    config = CampaignConfig.from_json(server.create_campaign(
        id="race-central-survey", title="Race", questions=SURVEY, epsilon=3.0, split="per_question",
        trust_model="central", budget=100.0, release_policy={"min_reports": 1, "min_refresh_interval_seconds": 0},
    ))  # fmt: skip
    assert upload(server, config.id, _survey_envelopes(config, 30, seed=6))["accepted"] == 30
    url = f"{server.url}/api/v1/campaigns/{config.id}/estimate"

    def release(question: str) -> Callable[[], requests.Response]:
        return lambda: requests.get(url, params={"question": question, "refresh": "true"},
                                    headers=server.auth("analyst"), timeout=60)  # fmt: skip

    replies = _together([release(SURVEY[i % 3]["id"]) for i in range(THREADS)])
    assert [r.status_code for r in replies] == [200] * THREADS, [r.text[:300] for r in replies]
    logged = server.get(f"/api/v1/campaigns/{config.id}/releases", role="analyst", params={"limit": 100}).json()
    assert len(logged["releases"]) == THREADS
    assert server.estimate(config.id, question="age")["accountant"]["spent"] == pytest.approx(THREADS * 1.0)
