"""The browser client in real headless Chromium: bundle weight, answer time, page load to ready (issue 16).

    .venv/bin/python benchmarks/browser.py [--answers 300] [--loads 30]

Starts the real aggregator on a free loopback port, opens ``/survey/<id>`` in Debian's Chromium and prints:

- the bundle's size (``aggregator/api/static/survey.js``), minified and gzipped (level 9), against the goal
  of 40 kB (40,960 bytes) dependencies included;
- the median (and p90) of one answer's **randomize + seal + store** inside the page: the one-shot DRBG
  draw (HMAC_DRBG over WebCrypto), the mechanism's exact sampler, canonical JSON, padding, Ed25519 signing,
  HPKE sealing (X25519 + ChaCha20-Poly1305) and one IndexedDB readwrite transaction holding the envelope
  (what ``Client.submit`` does after the descriptor is validated), for GRR at k = 5 and OUE at k = 32;
  goal under 5 ms;
- the median of a full ``Client.submit`` (descriptor GET + validation + pin check + the above);
- the median time from navigation start to the page's ``deniable-ready`` mark (descriptor validated,
  pinned, form rendered), in a fresh browser context each time; goal under 300 ms on loopback;
- beside each, the renderer main thread's task time (CDP ``Performance.getMetrics`` ``TaskDuration``):
  the time the page's own work took, without the waits for the server and the network (still wall time
  inside each task, so the machine's load inflates it too).

Figures depend on the machine's load (printed with them): the goals are for an idle machine.
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support.browser import chromium  # noqa: E402
from support.server import start_server  # noqa: E402

BUNDLE = ROOT / "aggregator" / "api" / "static" / "survey.js"

ANSWER_SCRIPT = """
async ([campaignId, answers, full]) => {
  const m = await import('/survey/static/survey.js');
  const descriptor = m.parseJson(await (await fetch(`/api/v1/campaigns/${campaignId}`)).text());
  const campaign = await m.Campaign.fromJson(descriptor);
  const store = await m.DeviceStore.open(`bench-${campaignId}`);
  const times = [];
  for (let i = 0; i < (full ? 0 : answers); i += 1) {
    const secret = crypto.getRandomValues(new Uint8Array(32));
    const t0 = performance.now();
    const { reportId, report } = await m.oneShotAnswer(campaign, secret, i % campaign.k);
    const envelope = JSON.stringify(await m.seal(campaign.makePayload(report, {}), { campaign, secret, reportId }));
    await store.tx('readwrite', (t) => t.put('outbox', reportId, { report_id: reportId, envelope }));
    times.push(performance.now() - t0);
  }
  store.close();
  const whole = [];
  for (let i = 0; i < (full ? Math.min(answers, 100) : 0); i += 1) {
    const client = await m.Client.open({ dbName: `bench-full-${campaignId}-${i}` });
    const t0 = performance.now();
    await client.submit(campaignId, campaign.categories[i % campaign.k]);
    whole.push(performance.now() - t0);
    client.close();
  }
  return full ? whole : times;
}
"""


def task_seconds(cdp: Any) -> float:
    """The renderer main thread's busy time so far (CDP Performance ``TaskDuration``, seconds of CPU)."""
    metrics = cdp.send("Performance.getMetrics")["metrics"]
    return float(next(m["value"] for m in metrics if m["name"] == "TaskDuration"))


def quantile(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--answers", type=int, default=300)
    parser.add_argument("--loads", type=int, default=30)
    args = parser.parse_args()
    raw = BUNDLE.read_bytes()
    gz = len(gzip.compress(raw, compresslevel=9))
    print(f"machine load (1, 5, 15 min): {os.getloadavg()}")
    print(f"bundle {BUNDLE.relative_to(ROOT)}: {len(raw)} bytes minified, {gz} bytes gzipped "
          f"(goal < 40960: {gz / 40960:.2f} of it)")  # fmt: skip
    for name, when in (("survey-extra.js", "surveys, shuffled and central campaigns, admission tokens"),
                       ("survey-compat.js", "browsers whose WebCrypto lacks X25519 or Ed25519")):  # fmt: skip
        part = BUNDLE.with_name(name).read_bytes()
        print(f"  {name} ({when} only): {len(part)} bytes minified, "
              f"{len(gzip.compress(part, compresslevel=9))} bytes gzipped")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        server = start_server(Path(tmp) / "data", workers=1)
        try:
            server.create_campaign(id="bench-grr", question="Which?", categories=list("abcde"), epsilon=1.0,
                                   mechanism="grr")  # fmt: skip
            server.create_campaign(id="bench-oue", question="Which?", categories=[f"c{i}" for i in range(32)],
                                   epsilon=1.0, mechanism="oue")  # fmt: skip
            with chromium() as browser:
                page = browser.new_page()
                page.goto(f"{server.url}/survey/bench-grr")
                page.wait_for_selector("[data-state=ready]")
                cdp = page.context.new_cdp_session(page)
                cdp.send("Performance.enable")
                for campaign in ("bench-grr", "bench-oue"):
                    busy = task_seconds(cdp)
                    times = page.evaluate(ANSWER_SCRIPT, [campaign, args.answers, False])
                    busy = (task_seconds(cdp) - busy) * 1000 / len(times)
                    full = page.evaluate(ANSWER_SCRIPT, [campaign, args.answers, True])
                    median = statistics.median(times)
                    print(f"{campaign}: randomize + seal + store one answer: median {median:.2f} ms, "
                          f"p90 {quantile(times, 0.9):.2f} ms over {len(times)} (goal < 5 ms: {median / 5:.2f} of it); "
                          f"full Client.submit (descriptor GET + validation + pin + the above): median "
                          f"{statistics.median(full):.2f} ms over {len(full)}; renderer main-thread task time "
                          f"of the first loop: {busy:.2f} ms per answer")  # fmt: skip
                loads, html, busy = [], [], []
                for _ in range(args.loads):
                    context = browser.new_context()
                    fresh = context.new_page()
                    session = context.new_cdp_session(fresh)
                    session.send("Performance.enable")
                    fresh.goto(f"{server.url}/survey/bench-grr")
                    fresh.wait_for_selector("[data-state=ready]")
                    loads.append(fresh.evaluate("performance.getEntriesByName('deniable-ready')[0].startTime"))
                    html.append(fresh.evaluate("performance.getEntriesByType('navigation')[0].responseEnd"))
                    busy.append(task_seconds(session) * 1000)
                    context.close()
                median = statistics.median(loads)
                print(f"page load to ready (navigation start to 'deniable-ready', fresh context): median "
                      f"{median:.1f} ms, p90 {quantile(loads, 0.9):.1f} ms over {len(loads)} "
                      f"(goal < 300 ms: {median / 300:.2f} of it); of it the HTML's arrival: median "
                      f"{statistics.median(html):.1f} ms; renderer main-thread task time to ready: median "
                      f"{statistics.median(busy):.1f} ms")  # fmt: skip
        finally:
            server.stop()
    print(f"machine load after (1, 5, 15 min): {os.getloadavg()}")


if __name__ == "__main__":
    main()
