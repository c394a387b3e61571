"""One place for every bound of deniable, and why each layer's range is what it is.

A bound lives here once; the modules that enforce it import it, and their messages quote it. Helpers add
their own sections; keep each bound next to the reason for its value.

Every message about a bound is written by the helpers here, so that a range is stated the same way
everywhere: ``'epsilon' must be a number in [0.001, 10], got 11``, closed intervals written ``[low, high]``.

ε has two layers, and each says its own range:

* **Campaigns** (:data:`CAMPAIGN_EPSILON`, [0.001, 10]): the ε of one report of a local campaign, or of one
  release of a central one. This is what the aggregator creates, what a device accepts in a descriptor, what
  the OpenAPI document, the docs and ``deniable demo`` state. Above 10 randomized response keeps the true
  answer with probability e^10/(e^10+1) > 0.99995 (no meaningful deniability left); below 0.001 the estimate's
  standard error exceeds 1,000·√n (a million respondents give a count ± 10⁶: no usable signal).
* **Mechanisms and noise** (:data:`MECHANISM_EPSILON`, [1e-06, 20]): what the library objects accept for
  simulation, audits and benchmarks (``GRR(epsilon=...)``, ``deniable compare``, ``deniable audit``). The floor
  is numerical: below 1e-6, p* − q* ≈ ε/2 loses all precision in floating point and the variance overflows;
  the ceiling keeps e^ε and the OLH hash range g = round(e^ε) + 1 far inside exact integer arithmetic.

A bool is not a number here (JSON ``true`` would otherwise pass as 1) and neither is a string (``"1"``): the
messages say so, since both are common mistakes of hand-written JSON.
"""

from __future__ import annotations

import math
from numbers import Real

from deniable.shared.errors import DeniableError

__all__ = [
    "CAMPAIGN_EPSILON",
    "CAMPAIGN_PAGE_DEFAULT",
    "CAMPAIGN_PAGE_MAX",
    "CAMPAIGN_STATUSES",
    "CENTRAL_DELTA_RANGE",
    "DEFAULT_MIN_REFRESH_INTERVAL_SECONDS",
    "DEFAULT_MIN_REPORTS_BEFORE_RELEASE",
    "DEVICE_BUDGET_MAX",
    "MAX_GROUP_SIZE",
    "MAX_MIN_REPORTS_BEFORE_RELEASE",
    "MAX_REFRESH_INTERVAL_SECONDS",
    "MAX_RHO",
    "MAX_SUBSAMPLE_DENOMINATOR_BITS",
    "MAX_TOP",
    "MEAN_LATTICE",
    "MECHANISM_EPSILON",
    "NUMBER_STEPS",
    "OUTBOX_MAX_AGE_DEFAULT",
    "OUTBOX_MAX_AGE_RANGE",
    "RELEASES_PAGE_DEFAULT",
    "RELEASES_PAGE_MAX",
    "RETRY_AFTER_MAX_WAIT",
    "STATE_BUSY_TIMEOUT",
    "TIMELINE_BUCKETS",
    "TIMELINE_MAX_BUCKETS",
    "check_range",
    "range_text",
]

# -- ε ---------------------------------------------------------------------------------------------------

#: ε of one report (local) or one release (central) of a campaign, inclusive.
CAMPAIGN_EPSILON: tuple[float, float] = (0.001, 10.0)
#: ε a mechanism or a noise sampler accepts as a library object, inclusive.
MECHANISM_EPSILON: tuple[float, float] = (1e-6, 20.0)
#: Largest device cap (per campaign) and lifetime ε budget a client accepts: far beyond any sensible budget,
#: it only stops typos (``--lifetime-budget 1e9``) from disabling the ledger.
DEVICE_BUDGET_MAX = 1000.0


# -- the device's outbox ----------------------------------------------------------------------------------

#: Seconds a report may wait in the device's outbox before it expires (recorded as expired in the ledger,
#: never dropped silently): 30 days, long enough for a device that is offline over a holiday, short
#: enough that a campaign is not answered with a report the user has forgotten.
OUTBOX_MAX_AGE_DEFAULT = 30 * 86400.0
#: Accepted range of ``Client(outbox_max_age=...)`` in seconds: one minute to ten years.
OUTBOX_MAX_AGE_RANGE = (60.0, 3650 * 86400.0)
#: Longest ``Retry-After`` (seconds) one flush waits out in place; a longer one ends the flush and the
#: next flush before that time sends nothing.
RETRY_AFTER_MAX_WAIT = 30.0
#: Seconds a device process waits for another one holding the state database (SQLite busy timeout),
#: e.g. 20 processes opening a new state dir at once.
STATE_BUSY_TIMEOUT = 30.0


def range_text(bounds: tuple[float, float]) -> str:
    """``[0.001, 10]``: a closed interval as every message states it."""
    low, high = bounds
    return f"[{low:g}, {high:g}]"


def _got(value: object) -> str:
    """What a message says it got, naming the type when the value is not a number at all."""
    if isinstance(value, bool):
        return f"{value!r} (a boolean is not a number; JSON true/false are not accepted)"
    if isinstance(value, str):
        shown = repr(value) if len(value) <= 40 else f"a string of {len(value)} characters"
        return f"{shown} (a string is not a number; send the number without quotes)"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # 11.0 from a command line reads as the 11 that was typed
    if value is None or isinstance(value, int | float | Real):
        return repr(value)
    return f"a {type(value).__name__} (not a number)"


def check_range(
    name: str, value: object, bounds: tuple[float, float], error: type[DeniableError]
) -> float:
    """``value`` as a float if it is a finite real number in ``bounds`` (inclusive), else ``error`` with the
    one message form: ``'epsilon' must be a number in [0.001, 10], got 11`` (a command-line flag such as
    ``--epsilon`` is named without quotes)."""
    low, high = bounds
    if not isinstance(value, bool) and isinstance(value, Real):
        number = float(value)
        if math.isfinite(number) and low <= number <= high:
            return number
    shown = name if name.startswith("-") else repr(name)
    raise error(f"{shown} must be a number in {range_text(bounds)}, got {_got(value)}")


# -- central release policy (aggregator/release_policy.py) ------------------------------------------

#: Default minimum number of stored reports before a central campaign may spend ε on any release. An
#: empty or nearly empty campaign's release is almost pure noise: spending budget on it is the attack of
#: issue 12 item 6 (four refreshes of an empty campaign spent its whole budget). 20 keeps the noise
#: (sd ≈ 2.7 per bin at ε = 0.5) below the count a meaningful estimate needs; the admin sets another value
#: per campaign.
DEFAULT_MIN_REPORTS_BEFORE_RELEASE = 20
#: Largest minimum an admin may set (beyond it no campaign could ever release).
MAX_MIN_REPORTS_BEFORE_RELEASE = 1_000_000_000

#: Default minimum time between two ε-spending releases when the second is a refresh: one day, so that
#: repeated ``?refresh=true`` cannot drain a budget in minutes; the admin sets another value per campaign
#: (0 turns the rule off).
DEFAULT_MIN_REFRESH_INTERVAL_SECONDS = 86_400
#: Largest interval an admin may set: one year.
MAX_REFRESH_INTERVAL_SECONDS = 366 * 86_400

#: Releases listed per page by ``GET .../releases`` (default and most): a budget of 100 at ε = 0.001 allows
#: 100,000 releases, so the list is paginated to keep every response bounded.
RELEASES_PAGE_DEFAULT = 100
RELEASES_PAGE_MAX = 1000

# -- the trusted curator (central campaigns) -------------------------------------------------------------

#: δ of one Gaussian release, or of an (ε, δ) budget: at most 10⁻³ (δ is the chance the guarantee fails
#: outright, so it must stay far below 1/n for every n a survey reaches) and at least 10⁻¹⁵, where the
#: erfc-based privacy profile still has full relative precision.
CENTRAL_DELTA_RANGE = (1e-15, 1e-3)
#: A ρ (zCDP) budget is at most 50, the ρ that ε = 10 pure releases imply (ε²/2), the largest ε accepted.
MAX_RHO = 50.0
#: Reports one respondent may contribute to a central campaign (group privacy charges g·ε): a household
#: or a person with a few devices, not a panel; beyond 100 the guarantee g·ε means nothing.
MAX_GROUP_SIZE = 100
#: Poisson-subsampling rates are rounded down to multiples of 2^−32 so that each record's coin is one
#: exact comparison of 32 CSPRNG bits; the amplified ε is computed from the rate actually used.
MAX_SUBSAMPLE_DENOMINATOR_BITS = 32
#: The exponential mechanism releases at most the 20 most common answers (peeling spends ε/j on each).
MAX_TOP = 20

# -- number questions (deniable.shared.mechanisms.mean) -----------------------------------------------------
#: Steps of a number question's declared grid: at least one; at most 2^20, so that the exact laws of the
#: Piecewise Mechanism (one per grid point, cached on the device) stay small.
NUMBER_STEPS: tuple[int, int] = (1, 1 << 20)
#: Cells of the Piecewise Mechanism's output lattice over [−C, C]: the variance grows by at most
#: (2C/cells)²/4, and the device computes cells + 1 exact probabilities per grid point it answers.
MEAN_LATTICE: tuple[int, int] = (2, 1 << 16)

# -- the analyst's views (campaign lists, timelines) ------------------------------------------------------

#: Campaigns in one page of ``GET /api/v1/campaigns`` when ``limit`` is not given, and the most it may ask:
#: each entry carries the campaign's descriptor (up to 4096 category labels), so a page stays a few MB.
CAMPAIGN_PAGE_DEFAULT = 100
CAMPAIGN_PAGE_MAX = 1000

#: The statuses a campaign list may be filtered by.
CAMPAIGN_STATUSES: tuple[str, ...] = ("open", "closed")

#: Bucket widths of ``GET .../timeline``: the store keeps hours, days are sums of 24 of them (UTC).
TIMELINE_BUCKETS: tuple[str, ...] = ("hour", "day")

#: Most buckets one timeline answer holds (zero-filled from the first to the last): a bit over a year of
#: hours, or 27 years of days. A longer span of hours is refused with a hint to ask for days.
TIMELINE_MAX_BUCKETS = 10_000
