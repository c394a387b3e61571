"""Per-request work the aggregator does besides HPKE: loading a campaign's descriptor, decoding one report.

    .venv/bin/python benchmarks/descriptor.py [--repeat N]

Prints, in process (no HTTP), medians over ``--repeat`` calls:

1. ``Service.campaign(id)``: read the stored descriptor and give the validated ``CampaignConfig`` (every
   report batch, estimate and config fetch starts with it), at k = 2 and k = 4096 categories. The stored
   descriptor is immutable (only its status changes), so it is parsed and validated once per campaign and
   descriptor hash; the figure is the cost of a request after the first.
2. One sealed report at k = 16 per mechanism, after its HPKE open: the payload checks and the decode, then
   the wire text and support that are stored, from the report decoded once (``Mechanism.stored_form``),
   beside the old path that re-encoded the report and decoded it again for its support; and the whole
   ``decode_envelope`` (open, proof of possession, decode) for scale.

Goal: (1) independent of k (a hash of the stored text, no parse); (2) decoded once is faster than the old way.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from deniable.aggregator.ingest import decode_envelope
from deniable.aggregator.keyring import load_private_key
from deniable.aggregator.service import Service
from deniable.shared.envelope import Envelope, open_envelope


def median_us(fn: Callable[[], object], repeat: int) -> float:
    fn()  # the first call fills any cache; the figure is the steady state
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=300)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        service = Service(data, database=data / "deniable.sqlite3")
        print(f"machine load (1 min): {load:.2f}")
        print("1. Service.campaign(id) per request")
        for k in (2, 4096):
            service.create_campaign(
                {"id": f"k{k}", "question": "q?", "categories": [f"c{i}" for i in range(k)], "epsilon": 1.0}
            )
            print(f"   k = {k:5d}: {median_us(lambda k=k: service.campaign(f'k{k}'), args.repeat):8.1f} µs")
        print("2. one report after its HPKE open, k = 16: payload checks and decode, then the stored wire text")
        print("   and support (decoded once: stored_form) against re-encoding and re-decoding it (the old path)")
        for mechanism in ("grr", "oue", "olh"):
            once, old, total = decode_figures(service, data, mechanism, args.repeat)
            print(f"   {mechanism}: {once:6.1f} µs decoded once, {old:6.1f} µs the old way ({old / once:4.2f}x); "
                  f"whole decode_envelope {total:6.1f} µs")


def decode_figures(service: Service, data: Path, mechanism: str, repeat: int) -> tuple[float, float, float]:
    """Median µs of the post-open work done once and the old way, and of the whole ``decode_envelope``."""
    cid = f"m-{mechanism}"
    categories = [f"c{i}" for i in range(16)]
    service.create_campaign({"id": cid, "question": "q?", "categories": categories, "epsilon": 1.0,
                             "mechanism": mechanism})  # fmt: skip
    config = service.campaign(cid)
    private_key = load_private_key(data, cid)
    mech = config.build_mechanism()
    envelope = config.seal(config.make_payload(mech.randomize(3)), device_secret=os.urandom(32)).to_json()
    payload = open_envelope(
        Envelope.from_json(envelope), campaign_id=cid, private_key=private_key, padded_length=config.padded_length
    )

    def once() -> object:
        report = config.decode(payload).value
        return json.dumps(mech.stored_form(report)[0], separators=(",", ":"))

    def old() -> object:
        report = config.decode(payload).value
        support = tuple(mech.support(report))
        return json.dumps(mech.encode_report(report), separators=(",", ":")), support

    total = median_us(lambda: decode_envelope(envelope, config, private_key), repeat)
    return median_us(once, repeat * 10), median_us(old, repeat * 10), total

if __name__ == "__main__":
    main()
