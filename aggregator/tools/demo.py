"""``deniable demo`` (what ``make demo`` runs): one sensitive question asked under three trust models.

1. Starts the real aggregator (``deniable serve`` as a subprocess on a free 127.0.0.1 port, SQLite in a
   temporary data dir, random tokens passed by environment).
2. Creates the same yes/no question twice: a **local** campaign (randomized response on each device) and
   a **central** one (the devices send their raw answer, encrypted, to a curator who adds discrete
   Laplace noise to each release and keeps an ε budget).
3. Simulates n respondents (10,000 by default) holding "yes" with probability p and has each answer both
   campaigns through the client SDK (``simulate_fleet``: exact randomization from ``secrets``, HPKE
   envelopes, batched delivery). The central campaign needs the devices' explicit opt-in
   (``allow_central=True``), which the demo gives on the simulated users' behalf and says so.
   A third, **shuffled**, campaign goes through a real shuffler (``deniable shuffle``, a second subprocess
   with its own data dir and keys): its devices randomize at the ε₀ whose shuffled batch of n is
   (ε, 10⁻⁶)-DP to the aggregator (:func:`deniable.shared.amplification.local_epsilon_for`), so all three
   give the aggregator the same ε; the shuffler forwards the n reports as one batch.
4. Prints truth, local estimate ± CI, shuffled estimate ± CI and central release ± CI, and writes the
   error-against-n figure of
   ``deniable compare`` with this run's two standard errors marked, to ``deniable-demo.png`` in the ``--out``
   folder (default: the working directory; ``make demo`` uses ``demo-output/``), and prints its path.

It starts by saying in one sentence what ε means, since every number it prints depends on it.

The server is stopped and the data dir removed in a ``finally``: nothing is left running after an error
or Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from deniable.aggregator.cli import needs
from deniable.aggregator.harness import ServerProcess, running_server, running_shuffler
from deniable.aggregator.ratelimit import SIMULATION_ENV
from deniable.shared.descriptor import MAX_BUDGET
from deniable.shared.errors import DeniableError, InvalidParameter
from deniable.shared.limits import CAMPAIGN_EPSILON, check_range

from .plots import plot_path

__all__ = ["register", "run_demo"]

QUESTION = "Have you used an illegal drug in the past year?"
#: Name of the figure in the ``--out`` folder.
PLOT_NAME = "deniable-demo.png"
CATEGORIES = ["no", "yes"]


def _fleet(server: ServerProcess, campaign_id: str, answers: list[str], *, central: bool, label: str) -> None:
    from tqdm import tqdm

    from deniable.client.fleet import simulate_fleet

    with tqdm(total=len(answers), desc=label, unit=" devices", leave=True) as bar:

        def progress(done: int, total: int) -> None:
            bar.update(done - bar.n)

        result = simulate_fleet(
            server.url, campaign_id, answers, progress=progress, allow_central=central, batch_size=500
        )
    if result.accepted != len(answers):
        raise RuntimeError(f"{campaign_id}: only {result.accepted} of {len(answers)} reports were accepted")


#: δ of the demo's central Gaussian release and of its (ε, δ) budget.
DELTA = 1e-5
#: δ of the shuffled batch's central guarantee.
SHUFFLE_DELTA = 1e-6


def _row(label: str, body: dict[str, Any]) -> tuple[str, float, float, float]:
    yes = body["categories"][1]
    return label, yes["count"], yes["ci"][1] - yes["count"], yes["stderr"]


def epsilon_sentence(epsilon: float) -> str:
    """What ε means, in one plain sentence, at this ε."""
    ratio = math.exp(epsilon)
    return (
        f"ε = {epsilon:g} means that whatever one person answers, what the analyst sees (a randomized report, "
        f"a noisy release) is at most e^{epsilon:g} ≈ {ratio:.3g} times more likely under that answer than "
        "under any other, so no single answer can be told from the data with confidence (smaller ε: more "
        "deniable, noisier estimates)."
    )


def _plot_target(args: argparse.Namespace) -> Path | None:
    """Where the figure goes: ``--plot FILE``, else ``PLOT_NAME`` in ``--out`` (created if only it is missing)."""
    if args.no_plot:
        return None
    if args.plot is not None:
        return plot_path(args.plot)
    out = Path(args.out)
    if not out.is_dir():
        if not out.parent.is_dir():
            raise ValueError(f"cannot create the output folder {out}: its parent {out.parent} does not exist")
        out.mkdir()
    return plot_path(out / PLOT_NAME)


def _dashboard(server: ServerProcess, tmp: Path, *, keep: bool) -> None:
    """Say where the dashboard is; with ``keep``, serve it until Ctrl-C (the caller then stops the server)."""
    url = f"{server.url}/dashboard"
    if not keep:
        print(f"the dashboard was at {url} while the demo ran; `make demo-dashboard` keeps it up to look at")
        return
    token_file = tmp / "analyst.token"
    fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(server.analyst_token + "\n")
    print(f"\ndashboard: {url}\nsign in with the analyst token in {token_file} (removed at the end)")
    print("press Ctrl-C to stop the server", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        while server.is_alive():
            time.sleep(0.5)


def run_demo(
    *,
    n: int,
    p: float,
    epsilon: float,
    budget: float,
    plot: Path | None,
    seed: int | None,
    workers: int = 2,
    dashboard: bool = False,
) -> dict[str, Any]:
    """Run the whole demo; return what it printed as data (truth, both bodies, the plot path). With
    ``dashboard`` the server stays up, its dashboard signed in with a printed token file, until Ctrl-C."""
    import numpy as np

    rng = np.random.default_rng(seed)
    print(epsilon_sentence(epsilon), flush=True)
    truth_values = rng.random(n) < p
    answers = [CATEGORIES[int(v)] for v in truth_values]
    truth = int(truth_values.sum())
    with (
        tempfile.TemporaryDirectory(prefix="deniable-demo-") as tmp,
        running_server(
            Path(tmp) / "data",
            workers=workers,
            log_path=Path(tmp) / "server.log",
            # the simulation lifts the per-address limits, but limits set in the caller's environment win
            extra_env={name: os.environ[name] for name in SIMULATION_ENV if name in os.environ},
        ) as server,
        running_shuffler(Path(tmp) / "shuffler", upstream=server.url, interval=0.2,
                         log_path=Path(tmp) / "shuffler.log") as shuffler,
    ):
        print(f"aggregator running at {server.url} (data in {tmp}, removed at the end)", flush=True)
        common = {"question": QUESTION, "categories": CATEGORIES, "epsilon": epsilon}
        server.call("POST", "/api/v1/campaigns", role="admin", body={"id": "demo-local", **common})
        server.call(
            "POST",
            "/api/v1/campaigns",
            role="admin",
            body={"id": "demo-central", "trust_model": "central", "budget": budget, "budget_delta": DELTA,
                  "delta": DELTA, **common},
        )
        from deniable.shared.amplification import local_epsilon_for
        from deniable.shared.limits import SHUFFLE_MIN_BATCH_RANGE

        batch = min(n, SHUFFLE_MIN_BATCH_RANGE[1])  # batches of at most 10⁵; ε₀ is chosen for that size
        forwarded = n // batch * batch  # a remainder below the threshold stays at the shuffler
        epsilon0 = local_epsilon_for(batch, epsilon, SHUFFLE_DELTA, steps=12)
        server.call(
            "POST", "/api/v1/campaigns", role="admin",
            body={"id": "demo-shuffled", "question": QUESTION, "categories": CATEGORIES, "epsilon": epsilon0,
                  "trust_model": "shuffled", "delta": SHUFFLE_DELTA, "shuffler": shuffler.shuffler_object(batch)},
        )  # fmt: skip
        print(f"shuffler running at {shuffler.url} (another party's data dir and keys), forwarding to the aggregator")
        print(f"{n} simulated respondents answer the three campaigns ({truth} hold 'yes')", flush=True)
        _fleet(server, "demo-local", answers, central=False, label="local   (randomized on device)")
        _fleet(server, "demo-shuffled", answers, central=False, label=f"shuffled (ε₀ = {epsilon0:.3g}, via shuffler)")
        deadline = time.monotonic() + 120
        path = "/api/v1/campaigns/demo-shuffled/estimate"
        while (shuffled := server.call("GET", path, role="analyst"))["n"] < forwarded:
            if time.monotonic() > deadline:
                raise RuntimeError("the shuffler did not forward its batch within 120 s (see its log)")
            time.sleep(0.2)
        print("the central campaign receives raw answers: each simulated user opted in to trust the curator")
        _fleet(server, "demo-central", answers, central=True, label="central (raw to the curator)  ")
        local = server.call("GET", "/api/v1/campaigns/demo-local/estimate", role="analyst")
        central = server.call("GET", "/api/v1/campaigns/demo-central/estimate", role="analyst")
        gaussian = server.call("GET", "/api/v1/campaigns/demo-central/estimate?noise=gaussian", role="analyst")
        rows = [
            _row(f"local ({local['mechanism']})", local),
            _row(f"shuffled (ε₀ = {epsilon0:.3g})", shuffled),
            _row(f"central ({central['noise']})", central),
            _row(f"central ({gaussian['noise']}, δ = {DELTA:g})", gaussian),
        ]
        print()
        print(f"Q: {QUESTION}  (ε = {epsilon:g}, n = {n})")
        print(f"{'':<30}{'count of yes':>14}{'± 95% CI':>12}{'stderr':>10}")
        print(f"{'truth':<30}{truth:>14}")
        for label, count, half, stderr in rows:
            print(f"{label:<30}{count:>14.1f}{half:>12.1f}{stderr:>10.2f}")
        if local.get("unbiased", {}).get("outside_range"):
            print(f"note: {local['unbiased']['note']}")
        books = gaussian["accountant"]
        (at,) = books["at_delta"]
        rules = ", ".join(f"{rule} {value:.3g}" for rule, value in at["by_rule"].items() if value is not None)
        print(
            f"central budget (ε, δ) = ({books['budget']['epsilon']:g}, {DELTA:g}): spent ε = {books['spent']:.3g} "
            f"at δ = {DELTA:g} ({books['left']:.3g} left; by rule: {rules}; ρ = {books['rho']:.3g}); "
            f"local: ε = {epsilon:g} once per device"
        )
        privacy = shuffled["privacy"]
        print(
            f"shuffled: each device randomized at ε₀ = {epsilon0:.3g} (its guarantee if the shuffler colludes); the "
            f"aggregator saw one batch of {privacy['smallest_batch']}, "
            f"({privacy['epsilon']:.3g}, {SHUFFLE_DELTA:g})-DP "
            f"({privacy['method']})"
        )
        print(
            f"the local error is {rows[0][3] / rows[2][3]:.0f}x the central one and {rows[0][3] / rows[1][3]:.1f}x the "
            "shuffled one; the central model's price is that the server holds every raw answer, the shuffled "
            "model's that the shuffler and the aggregator must not collude"
        )
        if plot is not None:
            from .compare import error_curves
            from .plots import plot_error_curves

            curves = error_curves(
                epsilons=sorted({0.5, 1.0, 2.0, epsilon}), p=p, k=2, trials=200, rng=rng, n_max=1_000_000,
                shuffle_delta=SHUFFLE_DELTA, shuffled_epsilons=[epsilon],
            )
            markers = [(f"this run: {label}", float(n), stderr) for label, _, _, stderr in rows]
            title = f"local, shuffled and central count error, p = {p:g}"
            written = plot_error_curves(curves, plot, title=title, markers=markers)
            print(f"comparison plot written to {written.absolute()}")
        _dashboard(server, Path(tmp), keep=dashboard)
    print("server stopped; nothing left running")
    return {"truth": truth, "local": local, "shuffled": shuffled, "central": central, "plot": plot}


def _run(args: argparse.Namespace) -> int:
    try:
        check_range("--epsilon", args.epsilon, CAMPAIGN_EPSILON, InvalidParameter)
        check_range("--budget", args.budget, (args.epsilon, MAX_BUDGET), InvalidParameter)
    except InvalidParameter as exc:
        print(f"deniable demo: {exc}")
        return 2
    if args.n < 10 or not 0 < args.p < 1:
        print(f"deniable demo: need --n >= 10 and --p in (0, 1), got --n {args.n} and --p {args.p:g}")
        return 2
    try:
        plot = _plot_target(args)
    except ValueError as exc:
        print(f"deniable demo: {exc}")
        return 2
    try:
        run_demo(
            n=args.n, p=args.p, epsilon=args.epsilon, budget=args.budget, plot=plot, seed=args.seed,
            dashboard=args.dashboard,
        )  # fmt: skip
    except KeyboardInterrupt:
        print("\ninterrupted; the server was stopped")
        return 130
    except (DeniableError, RuntimeError, OSError) as exc:  # OSError: the harness's urllib found no server
        print(f"deniable demo failed: {exc}\nthe server was stopped")
        return 1
    return 0


def register(subparsers: Any) -> None:
    """Add ``deniable demo``."""
    parser = subparsers.add_parser(
        "demo",
        help=needs("tools") + "run the aggregator and compare local and central answers to one question",
        description="Start a temporary aggregator, ask one sensitive question as a local and as a central "
        "campaign, simulate respondents with the client SDK and compare the two answers.",
    )
    parser.add_argument("--n", type=int, default=10_000, help="simulated respondents (default 10000)")
    parser.add_argument("--p", type=float, default=0.3, help="true share of 'yes' (default 0.3)")
    parser.add_argument("--epsilon", type=float, default=1.0, help="ε of both campaigns (default 1)")
    parser.add_argument("--budget", type=float, default=3.0, help="central ε budget, at least --epsilon (default 3)")
    parser.add_argument("--seed", type=int, default=None, help="numpy seed of the simulated population")
    parser.add_argument(
        "--out", default=".", metavar="DIR",
        help=f"folder of the comparison plot, {PLOT_NAME} (created if missing; default: the working directory)",
    )
    parser.add_argument(
        "--plot", type=Path, default=None, metavar="FILE.png",
        help=f"write the comparison plot to this file instead of DIR/{PLOT_NAME}",
    )
    parser.add_argument("--no-plot", action="store_true", help="skip the plot")
    parser.add_argument(
        "--dashboard", action="store_true", help="afterwards keep the server and its dashboard up until Ctrl-C"
    )
    parser.set_defaults(func=_run, extra="tools")
