"""Mechanism speed and accuracy against the peers and a bare numpy floor.

    .venv/bin/python benchmarks/mechanisms.py [--n 1000000] [--k 16] [--epsilon 1] [--repeat 3] [--no-peers]

For n users, k categories and ε, prints per mechanism: our simulate + estimate wall time, a bare numpy
implementation of the same mechanism (the floor), pure-ldp and multi-freq-ldpy (``pip install -e '.[bench]'``;
skipped with a note when not installed), the ratios, our MSE against theory (Σ_v Var(ĉ_v) from
``count_variance``), and the secure per-report ``randomize`` cost on the device path.

Goals (issue 2): simulate + estimate ≥ 20× faster than the faster peer and within 2× of bare numpy, MSE within
5% of theory, secure GRR ``randomize`` under 50 µs per report at k = 16.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable

import numpy as np

from deniable.shared.mechanisms import GRR, OLH, OUE, BinaryRR, Mechanism

PRIME = (1 << 31) - 1


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    """Best-of-``repeat`` wall time and the last result."""
    best, result = math.inf, None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


# -- bare numpy floors: the same mechanisms with no validation, no objects -------------------------------
def bare_grr(x: np.ndarray, k: int, eps: float, rng: np.random.Generator) -> np.ndarray:
    p = math.exp(eps) / (math.exp(eps) + k - 1)
    q = 1 / (math.exp(eps) + k - 1)
    y = np.where(rng.random(x.size) < p, x, (x + 1 + rng.integers(0, k - 1, x.size)) % k)
    return (np.bincount(y, minlength=k) - x.size * q) / (p - q)


def bare_oue(x: np.ndarray, k: int, eps: float, rng: np.random.Generator) -> np.ndarray:
    q = 1 / (math.exp(eps) + 1)
    bits = rng.random((x.size, k)) < q
    bits[np.arange(x.size), x] = rng.random(x.size) < 0.5
    return (bits.sum(axis=0) - x.size * q) / (0.5 - q)


def bare_olh(x: np.ndarray, k: int, eps: float, rng: np.random.Generator) -> np.ndarray:
    g = round(math.exp(eps)) + 1
    p = math.exp(eps) / (math.exp(eps) + g - 1)
    a = rng.integers(1, PRIME, x.size, dtype=np.uint64)
    b = rng.integers(0, PRIME, x.size, dtype=np.uint64)
    h = (a * x.astype(np.uint64) + b) % np.uint64(PRIME) % np.uint64(g)
    y = np.where(rng.random(x.size) < p, h, (h + np.uint64(1) + rng.integers(0, g - 1, x.size, dtype=np.uint64))
                 % np.uint64(g))
    support = [np.count_nonzero((a * np.uint64(v) + b) % np.uint64(PRIME) % np.uint64(g) == y) for v in range(k)]
    return (np.asarray(support) - x.size / g) / (p - 1 / g)


BARE = {"binary-rr": bare_grr, "grr": bare_grr, "oue": bare_oue, "olh": bare_olh}


# -- peers -------------------------------------------------------------------------------------------------
def peer_multi_freq(name: str, x: np.ndarray, k: int, eps: float) -> np.ndarray | None:
    try:
        from multi_freq_ldpy.pure_frequency_oracles import GRR as mf_grr
        from multi_freq_ldpy.pure_frequency_oracles import LH as mf_lh
        from multi_freq_ldpy.pure_frequency_oracles import UE as mf_ue
    except ImportError:
        return None
    values = x.tolist()
    if name in ("grr", "binary-rr"):
        reports = [mf_grr.GRR_Client(v, k, eps) for v in values]
        freq = mf_grr.GRR_Aggregator_MI(reports, k, eps)
    elif name == "oue":
        reports = [mf_ue.UE_Client(v, k, eps, True) for v in values]
        freq = mf_ue.UE_Aggregator_MI(reports, eps, True)
    else:
        reports = [mf_lh.LH_Client(v, k, eps, True) for v in values]
        freq = mf_lh.LH_Aggregator_MI(reports, k, eps, True)
    return np.asarray(freq) * len(values)


def peer_pure_ldp(name: str, x: np.ndarray, k: int, eps: float) -> np.ndarray | None:
    try:
        if name in ("grr", "binary-rr"):
            from pure_ldp.frequency_oracles.direct_encoding import DEClient as Client
            from pure_ldp.frequency_oracles.direct_encoding import DEServer as Server

            client, server = Client(epsilon=eps, d=k), Server(epsilon=eps, d=k)
        elif name == "oue":
            from pure_ldp.frequency_oracles.unary_encoding import UEClient as Client
            from pure_ldp.frequency_oracles.unary_encoding import UEServer as Server

            client, server = Client(epsilon=eps, d=k, use_oue=True), Server(epsilon=eps, d=k, use_oue=True)
        else:
            from pure_ldp.frequency_oracles.local_hashing import LHClient as Client
            from pure_ldp.frequency_oracles.local_hashing import LHServer as Server

            client, server = Client(epsilon=eps, d=k, use_olh=True), Server(epsilon=eps, d=k, use_olh=True)
    except ImportError:
        return None
    for v in x.tolist():  # pure-ldp items are 1..d
        server.aggregate(client.privatise(v + 1))
    return np.asarray(server.estimate_all(range(1, k + 1)))


PEERS = {"pure-ldp": peer_pure_ldp, "multi-freq-ldpy": peer_multi_freq}


def secure_randomize_cost(m: Mechanism, reports: int = 20_000) -> float:
    """Mean seconds per device report (exact sampling from secrets)."""
    start = time.perf_counter()
    for i in range(reports):
        m.randomize(i % m.k)
    return (time.perf_counter() - start) / reports


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--mse-runs", type=int, default=30, help="runs for the MSE-vs-theory check")
    parser.add_argument("--no-peers", action="store_true")
    args = parser.parse_args()
    n, k, eps = args.n, args.k, args.epsilon
    rng = np.random.default_rng(2026)
    x = rng.integers(0, k, n)
    truth = np.bincount(x, minlength=k)
    print(f"n = {n:,} users, k = {k}, ε = {eps}; best of {args.repeat} runs (seconds)\n")
    header = f"{'mechanism':<10} {'deniable':>9} {'numpy floor':>12} {'vs floor':>9} "
    header += " ".join(f"{p:>16}" for p in PEERS) + f" {'vs best peer':>13} {'MSE/theory':>12} {'randomize':>10}"
    print(header)
    for m in (BinaryRR(eps), GRR(eps, k), OUE(eps, k), OLH(eps, k)):
        xs = (x % 2) if m.k == 2 else x
        ours, _ = timed(lambda m=m, xs=xs: m.estimate(m.simulate(xs, rng=rng)), args.repeat)
        floor, _ = timed(lambda m=m, xs=xs: BARE[m.name](xs, m.k, eps, rng), args.repeat)
        peer_times = {}
        for peer, run in PEERS.items():
            if args.no_peers:
                peer_times[peer] = None
                continue
            start = time.perf_counter()
            result = run(m.name, xs, m.k, eps)
            peer_times[peer] = None if result is None else time.perf_counter() - start
        true_m = np.bincount(xs, minlength=m.k) if m.k == 2 else truth
        errs = [np.sum((m.estimate(m.simulate(xs, rng=rng)).counts - true_m) ** 2) for _ in range(args.mse_runs)]
        theory = float(np.sum(m.count_variance(true_m)))
        mse_ratio = statistics.fmean(errs) / theory
        mse_se = statistics.stdev(errs) / theory / math.sqrt(len(errs))  # standard error of that ratio
        cost = secure_randomize_cost(m)
        known = [t for t in peer_times.values() if t is not None]
        best_peer = f"{min(known) / ours:12.1f}x" if known else f"{'n/a':>13}"
        missing = "skipped" if args.no_peers else "not installed"
        peers_txt = " ".join(f"{t:16.2f}" if t is not None else f"{missing:>16}" for t in peer_times.values())
        print(f"{m.name:<10} {ours:9.3f} {floor:12.3f} {ours / floor:8.2f}x {peers_txt} {best_peer} "
              f"{mse_ratio:6.3f}±{mse_se:.3f} {cost * 1e6:8.1f}µs")
    print("\nvs floor: our time / bare numpy (goal ≤ 2); vs best peer: faster peer's time / ours (goal ≥ 20);")
    print(f"MSE/theory: mean squared error over {args.mse_runs} runs / Σ_v Var(ĉ_v), ± its standard error (goal:"
          " within 5%); randomize: secure device path per report (goal < 50 µs for GRR).")


if __name__ == "__main__":
    main()
