"""The exponential mechanism over a finite set, sampled exactly (McSherry and Talwar, FOCS 2007).

``P(r) ∝ exp(c·u(x, r))`` over the candidates r, with c = ε/(2Δ_u) in general and c = ε/Δ_u when the
utility is **monotone** in the data (adding a person never lowers any score, removing never raises one):
both are ε-DP. For "the most common answer" u_r is the count of answer r, Δ_u = 1; counts are monotone
under add-remove (c = ε) but not under replace (one count −1, another +1: c = ε/2). A non-monotone utility
with c = ε/Δ_u is not ε-DP: its worst log-ratio approaches 2ε (tested).

Exact sampling over the K candidates, integers only: propose r uniformly, accept with probability
e^(−c(u_max − u_r)) (the exact coin of :func:`deniable.shared.sampling.bernoulli_exp`, c rational), else
repeat. The accepted law is ∝ e^(c·u_r); at most K proposals are expected.

Utility (Dwork and Roth 2014, Thm 3.11): P(u(out) ≤ OPT − ln(K/β)/c) ≤ β. Top-j answers by peeling: j
rounds at ε/j each, each without the answers already chosen (sequential composition: ε in all).

**Peeling is the one-shot Gumbel mechanism, sampled exactly.** The one-shot top-j of Durfee and Rogers
(NeurIPS 2019, Lemma 4.2) adds independent Gumbel(1/c) noise to every score once and releases the j
largest in order. By the Gumbel-max trick (Yellott 1977; the exponential race: argmin_r E_r/w_r with
E_r ~ Exp(1) is r with probability w_r/Σw, and given the winner the others' race is again an
exponential race among them, by memorylessness), the ordered top-j of the perturbed scores has the
Plackett–Luce law

    P(r₁, …, r_j) = Π_i w_{r_i} / Σ_{s ∉ {r₁…r_{i−1}}} w_s,   w_r = e^(c·u_r),

which is exactly the law of j exponential choices without replacement at scale c each: the two are one
mechanism with one privacy guarantee (j·c·Δ_u for monotone u, 2·j·c·Δ_u otherwise), and
:func:`plackett_luce` gives its law. Drawing Gumbel noise needs floating-point logarithms compared
against each other, and their rounding depends on ε (Mironov's attack, CCS 2012), so the product draws
the one-shot law by exact peeling; ``tests/unit/test_selection.py`` checks that a float one-shot Gumbel
simulation, the exact peeling and :func:`plackett_luce` agree (χ²), and that the ordered release at
c = ε/j is ε-DP exactly on every neighbouring count vector of a grid.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Sequence
from fractions import Fraction

from deniable.shared.sampling import RandBelow, bernoulli_exp

__all__ = ["exponential_choice", "plackett_luce", "score_scale", "top_answers", "utility_gap"]


def score_scale(epsilon: Fraction, *, sensitivity: int = 1, monotone: bool) -> Fraction:
    """c in P(r) ∝ e^(c·u_r): ε/Δ_u for a monotone utility, ε/(2Δ_u) otherwise."""
    if epsilon <= 0 or sensitivity < 1:
        raise ValueError(f"need epsilon > 0 and sensitivity >= 1, got {epsilon}, {sensitivity}")
    return Fraction(epsilon) / (sensitivity * (1 if monotone else 2))


def exponential_choice(
    scores: Sequence[int], scale: Fraction, randbelow: RandBelow = secrets.randbelow
) -> int:
    """An index r drawn with P(r) ∝ e^(scale·scores[r]), exactly (integer scores, rational scale)."""
    if not scores:
        raise ValueError("the exponential mechanism needs at least one candidate")
    top = max(scores)
    k = len(scores)
    while True:
        r = randbelow(k)
        if bernoulli_exp(scale * (top - scores[r]), randbelow):
            return r


def top_answers(
    scores: Sequence[int],
    j: int,
    *,
    epsilon: Fraction,
    monotone: bool,
    sensitivity: int = 1,
    randbelow: RandBelow = secrets.randbelow,
) -> list[int]:
    """The j highest-scoring candidates by peeling: j exponential choices at ε/j each (ε in all)."""
    if not 1 <= j <= len(scores):
        raise ValueError(f"j must be in [1, {len(scores)}], got {j}")
    scale = score_scale(Fraction(epsilon) / j, sensitivity=sensitivity, monotone=monotone)
    left = list(range(len(scores)))
    chosen = []
    for _ in range(j):
        pick = exponential_choice([scores[i] for i in left], scale, randbelow)
        chosen.append(left.pop(pick))
    return chosen


def plackett_luce(scores: Sequence[int], order: Sequence[int], scale: float) -> float:
    """P(the ordered release is ``order``) = Π_i w_{r_i}/Σ_{s not yet chosen} w_s, w_r = e^(scale·u_r): the
    law of both the peeling and the one-shot Gumbel top-j (for audits and tests; floats, never a draw)."""
    top = max(scores)
    weights = [math.exp(scale * (u - top)) for u in scores]
    left = sum(weights)
    probability = 1.0
    for r in order:
        probability *= weights[r] / left
        left -= weights[r]
    return probability


def utility_gap(k: int, scale: Fraction, beta: float = 0.05) -> float:
    """t with P(u(out) ≤ OPT − t) ≤ β for K = k candidates: t = ln(K/β)/c (Dwork and Roth, Thm 3.11)."""
    return math.log(k / beta) / float(scale)
