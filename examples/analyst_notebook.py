"""From the aggregator to a DataFrame and a plot: an analyst's notebook, as a script.

The cells (``# %%``, the percent format Jupyter, VS Code and jupytext open as a notebook) go: start a
throwaway aggregator and let simulated devices answer a grouped question; then, as the analyst, list the
campaigns, read the estimate per group as tidy rows, turn them into a pandas DataFrame and plot each
answer's share with its 95% interval; then the reports over time. Only the first cell is the "operator"
side; everything after it is what an analyst runs against a real deployment (with ``Analyst(url)`` and
the token in ``DENIABLE_TOKEN`` or a token file).

    .venv/bin/python examples/analyst_notebook.py --n 3000 --plot analyst.png

Needs pandas and matplotlib (``pip install 'deniable[aggregator,pandas]'``).
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from pathlib import Path

import numpy as np

from deniable.aggregator.harness import running_server
from deniable.analyst import Analyst
from deniable.client.fleet import simulate_fleet

CAMPAIGN = "commute-2026"
QUESTION = "How do you usually get to work?"
MODES = ["car", "transit", "bike", "foot"]
CITIES = ["amsterdam", "lyon"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=3000, help="simulated respondents (default 3000)")
    parser.add_argument("--epsilon", type=float, default=2.0, help="ε of each answer (default 2)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the simulated population")
    parser.add_argument("--plot", type=Path, default=Path("analyst-notebook.png"), help="where the figure goes")
    args = parser.parse_args(argv)

    with contextlib.ExitStack() as stack:
        # %% The operator's side: a server, a campaign, devices that randomize their answers and report.
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        server = stack.enter_context(running_server(Path(tmp) / "data", workers=1))
        admin = Analyst(server.url, token=server.admin_token)
        admin.create_campaign(CAMPAIGN, QUESTION, MODES, args.epsilon, group_fields=["city"],
                              group_values={"city": CITIES})  # fmt: skip
        rng = np.random.default_rng(args.seed)
        habits = {"amsterdam": [0.2, 0.3, 0.4, 0.1], "lyon": [0.5, 0.3, 0.1, 0.1]}
        cities = rng.choice(CITIES, size=args.n).tolist()
        answers = [MODES[rng.choice(4, p=habits[city])] for city in cities]
        simulate_fleet(server.url, CAMPAIGN, answers, groups=[{"city": c} for c in cities])

        # %% The analyst: which campaigns are there?
        analyst = Analyst(server.url, token=server.analyst_token)
        for campaign in analyst.iter_campaigns(status="open"):
            reports, epsilon = campaign["n_reports"], campaign["epsilon"]
            print(f"{campaign['id']}: {campaign['question']} ({reports} reports, ε = {epsilon:g})")

        # %% The estimate per city as tidy rows, then as a DataFrame.
        rows = analyst.estimates(CAMPAIGN, group_by="city")
        frame = rows.to_pandas()
        shares = frame[frame.statistic == "proportion"].set_index(["group", "category"])
        print(shares[["estimate", "ci_low", "ci_high", "n"]].round(3).to_string())
        rows.to_csv(args.plot.with_suffix(".csv"))

        # %% Each answer's share per city with its 95% interval.
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), width_ratios=[3, 2])
        width = 0.8 / len(CITIES)
        for i, city in enumerate(CITIES):
            part = shares.loc[city].reindex(MODES)
            x = np.arange(len(MODES)) + (i - (len(CITIES) - 1) / 2) * width
            err = [part.estimate - part.ci_low, part.ci_high - part.estimate]
            left.bar(x, part.estimate, width, yerr=err, capsize=4, label=f"{city} (n = {int(part.n.iloc[0])})")
        left.set_xticks(np.arange(len(MODES)), MODES)
        left.set_ylabel("estimated share (95% interval)")
        left.set_title(QUESTION, fontsize=10)
        left.axhline(0, color="black", linewidth=0.8)
        left.legend()

        # %% The reports over time (one bucket per hour).
        timeline = analyst.timeline(CAMPAIGN, bucket="hour").to_pandas()
        right.bar(timeline.start.str[11:16], timeline.reports, color="tab:gray")
        right.set_title("accepted reports per hour (UTC)", fontsize=10)
        fig.tight_layout()
        args.plot.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(args.plot, dpi=110)
        print(f"{int(timeline.reports.sum())} reports; plot written to {args.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
