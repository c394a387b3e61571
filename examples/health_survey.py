"""A survey of three kinds of question in one campaign: one choice, several choices, a number.

The campaign asks "did you smoke in the last 30 days?" (``choice``), "which apps did you use today?"
(``multi``, at most 3, optional) and "how old are you?" (``number`` on [18, 99], for its mean). Each device
answers the whole survey in one envelope with ``Client.submit(campaign, {"smoke": "yes", "apps": [...],
"age": 37})``: every answer is checked on the device, randomized there under the survey's ε, and only the
randomized reports leave it. ``--split auto`` lets the campaign pick, with the planner, between giving
every question its share of ε (``per_question``) and asking each device one uniformly drawn question at
the whole ε (``sampling``); the descriptor says which and why.

A few devices answer through the real device client (state, ledger, pinning, outbox), the rest through
``simulate_fleet`` (the same randomizers, without a ledger per device). The aggregator then estimates
every question with a standard error and a 95% interval: the count of smokers, of each app's users, and
the mean age.

    .venv/bin/python examples/health_survey.py --n 4000 --epsilon 2 --split auto
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from deniable.aggregator.harness import running_server
from deniable.client import Client, InvalidAnswer
from deniable.client.fleet import simulate_fleet

CAMPAIGN = "health-2026"
APPS = ["mail", "maps", "news", "chat", "music"]
QUESTIONS: list[dict[str, Any]] = [
    {"id": "smoke", "text": "Did you smoke in the last 30 days?", "kind": "choice", "categories": ["no", "yes"]},
    {"id": "apps", "text": "Which apps did you use today? (at most 3)", "kind": "multi", "options": APPS,
     "max_selected": 3, "optional": True},
    {"id": "age", "text": "How old are you?", "kind": "number", "range": [18, 99]},
]  # fmt: skip


def population(n: int, seed: int | None) -> list[dict[str, Any]]:
    """n respondents' true answers: 30% smoke, each app used with its own rate (at most 3), ages 18-99,
    and one in ten skips the apps question."""
    rng = np.random.default_rng(seed)
    rates = [0.6, 0.45, 0.3, 0.25, 0.1]
    people = []
    for _ in range(n):
        answer: dict[str, Any] = {
            "smoke": "yes" if rng.random() < 0.3 else "no",
            "age": int(np.clip(rng.normal(45, 15), 18, 99)),
        }
        if rng.random() >= 0.1:
            used = [app for app, rate in zip(APPS, rates, strict=True) if rng.random() < rate]
            answer["apps"] = used[:3]
        people.append(answer)
    return people


def _print_question(question: dict[str, Any], truth: dict[str, Any]) -> None:
    head = f"\n{question['question']} ({question['kind']}, {question['mechanism']} at ε = {question['epsilon']:g}"
    print(f"{head}, {question['answered']} answers, n = {question['n']})")
    if question["kind"] == "number":
        mean = question["mean"]
        low, high = mean["ci"]
        print(f"  mean: true {truth['mean']:.2f}, estimate {mean['mean']:.2f} ± {mean['stderr']:.2f} "
              f"(95% CI {low:.2f} to {high:.2f})")  # fmt: skip
        return
    label = "category" if question["kind"] == "choice" else "option"
    for row in question["categories" if question["kind"] == "choice" else "options"]:
        low, high = row["ci"]
        print(f"  {row[label]:<8} true {truth[row[label]]:>6}  estimate {row['count']:>8.1f} ± {row['stderr']:>6.1f}"
              f"  (95% CI {low:.0f} to {high:.0f})")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4000, help="devices (default 4000)")
    parser.add_argument("--epsilon", type=float, default=2.0, help="the survey's ε (default 2)")
    parser.add_argument("--split", default="auto", choices=["auto", "per_question", "sampling"])
    parser.add_argument("--seed", type=int, default=None, help="seed of the simulated population")
    parser.add_argument("--clients", type=int, default=5, help="devices that use the full Client (default 5)")
    args = parser.parse_args(argv)
    people = population(args.n, args.seed)

    with tempfile.TemporaryDirectory() as tmp, running_server(Path(tmp) / "data", workers=1) as server:
        config = server.call("POST", "/api/v1/campaigns", role="admin", body={
            "id": CAMPAIGN, "title": "Health survey 2026", "questions": QUESTIONS, "epsilon": args.epsilon,
            "split": args.split,
        })  # fmt: skip
        split = config["split"]
        print(f"ε = {args.epsilon:g}, split {split['mode']} ({split['reason']})")
        for question in config["questions"]:
            print(f"  {question['id']}: {question['kind']}, {question['mechanism']} at ε = {question['epsilon']:g}")

        # The device part: a few real devices, each with its own state dir (ledger, pin, outbox).
        for i, answers in enumerate(people[: args.clients]):
            with Client(server.url, Path(tmp) / f"device-{i}") as device:
                receipt = device.submit(CAMPAIGN, answers)
                device.flush()
                print(f"device {i}: one envelope for the whole survey, ε spent {receipt.epsilon_spent:g}, "
                      f"ledger total {device.ledger().spent:g}")  # fmt: skip
                try:  # a bad answer is refused on the device, naming the question; nothing is spent or sent
                    device.submit(CAMPAIGN, {**answers, "age": 120}, reanswer=True)
                except InvalidAnswer as refused:
                    if i == 0:
                        print(f"device {i}: refused on the device: {refused}")
        fleet = simulate_fleet(server.url, CAMPAIGN, people[args.clients :])
        print(f"{fleet.accepted + args.clients} devices answered ({fleet.rejected} rejected)")
        body = server.call("GET", f"/api/v1/campaigns/{CAMPAIGN}/estimate", role="analyst")

    smokers = sum(p["smoke"] == "yes" for p in people)
    truths = {
        "smoke": {"yes": smokers, "no": len(people) - smokers},
        "apps": {app: sum(app in p.get("apps", ()) for p in people) for app in APPS},
        "age": {"mean": float(np.mean([p["age"] for p in people]))},
    }
    for question in body["questions"]:
        _print_question(question, truths[question["question"]])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
