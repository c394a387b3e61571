"""A sensitive yes/no survey under local differential privacy, from question to answer.

Each respondent's device flips its own answer with randomized response (Warner 1965) before anything
leaves it: with ε = 1 a "yes" is reported as "yes" with probability e/(e+1) ≈ 0.73, so no single report
says what that person answered. The aggregator only ever sees randomized reports, yet it estimates how
many said "yes", with a standard error and a 95% confidence interval.

Run it (it starts a throwaway aggregator on 127.0.0.1 and stops it at the end):

    .venv/bin/python examples/sensitive_survey.py --n 5000 --epsilon 1
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from deniable.aggregator.harness import running_server
from deniable.client import Client
from deniable.client.fleet import simulate_fleet

CAMPAIGN = "cheating-2026"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000, help="respondents (default 5000)")
    parser.add_argument("--p", type=float, default=0.2, help="true share answering yes (default 0.2)")
    parser.add_argument("--epsilon", type=float, default=1.0, help="privacy parameter (default 1)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the simulated population")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    answers = ["yes" if rng.random() < args.p else "no" for _ in range(args.n - 1)]

    with tempfile.TemporaryDirectory() as tmp, running_server(Path(tmp) / "data", workers=1) as server:
        # 1. The survey owner creates the campaign (admin token); the mechanism is chosen for k = 2.
        config = server.call(
            "POST",
            "/api/v1/campaigns",
            role="admin",
            body={
                "id": CAMPAIGN,
                "question": "Have you ever cheated on an exam?",
                "categories": ["no", "yes"],
                "epsilon": args.epsilon,
            },
        )
        print(f"campaign {config['id']!r}: mechanism {config['mechanism']}, ε = {config['epsilon']:g}")

        # 2. One real device: randomizes, records the ε it spent, encrypts, queues, then delivers.
        with Client(server.url) as device:
            receipt = device.submit(CAMPAIGN, "yes")
            device.flush()
            ledger = device.ledger()
        print(f"one device answered: report {receipt.report_id[:8]}…, ε spent {receipt.epsilon_spent:g}")
        print(f"its ledger: ε {ledger.spent:g} spent of a lifetime budget of {ledger.lifetime_budget:g}")

        # 3. Everyone else, as a simulated fleet (same randomizer and encryption, one device each).
        fleet = simulate_fleet(server.url, CAMPAIGN, answers)
        print(f"{fleet.accepted + 1} reports accepted in {fleet.seconds:.1f}s")

        # 4. The analyst reads the estimate: only randomized reports were ever stored.
        estimate = server.call("GET", f"/api/v1/campaigns/{CAMPAIGN}/estimate", role="analyst")

    truth = answers.count("yes") + 1
    yes = estimate["categories"][1]
    low, high = yes["ci"]
    print(f"true number of yes:   {truth}")
    print(f"estimated:            {yes['count']:.1f} ± {yes['stderr']:.1f} (95% CI {low:.1f} to {high:.1f})")
    print(
        f"estimated proportion: {yes['proportion']:.3f} (95% CI {yes['proportion_ci'][0]:.3f} to "
        f"{yes['proportion_ci'][1]:.3f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
