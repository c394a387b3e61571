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

The other bounds have layers too, each narrower than the one it feeds:

* **Descriptor sizes** (categories, labels, questions, group values, the slug) are one range on both sides:
  the aggregator refuses to create what a device would refuse to pin, and the OpenAPI document states the
  same numbers (``tests/unit/test_limits_openapi.py`` walks the whole document and fails on any bound or
  pattern that is not a constant here).
* **Batches**: a device sends at most ``CLIENT_BATCH`` (500) envelopes per request, half of the ``MAX_BATCH``
  (1,000) an aggregator takes (both in :mod:`deniable.shared.contract`, the HTTP contract), so a batch still
  fits an aggregator configured smaller; a shuffled campaign's ``min_batch`` (:data:`SHUFFLE_MIN_BATCH_RANGE`)
  is bounded by what one request to the aggregator can carry, and refused at creation when it would not fit
  that aggregator's body limit. A device asks for at most :data:`MAX_TOKEN_REQUESTS` admission tokens per
  call, what the issuing route signs.
* **Server settings** (deadlines, connection bounds, rates, caps) each have a default and an accepted range:
  the range stops typos that would disable a protection, the default is what a small deployment needs.

A bool is not a number here (JSON ``true`` would otherwise pass as 1) and neither is a string (``"1"``): the
messages say so, since both are common mistakes of hand-written JSON.
"""

from __future__ import annotations

import math
from numbers import Real

from deniable.shared.errors import DeniableError, InvalidParameter

__all__ = [
    "AUTH_FAILURE_BURST_DEFAULT",
    "AUTH_FAILURE_RATE_DEFAULT",
    "BASE64URL_PATTERN",
    "BODY_TIMEOUT_DEFAULT",
    "BURST_RANGE",
    "CAMPAIGN_EPSILON",
    "CAMPAIGN_PAGE_DEFAULT",
    "CAMPAIGN_PAGE_MAX",
    "CAMPAIGN_STATUSES",
    "CENTRAL_DELTA_RANGE",
    "CLIENT_TIMEOUT_MAX",
    "CONFLICT_RETRY_ATTEMPTS",
    "DATABASE_BUSY_TIMEOUT_MS",
    "DEFAULT_MIN_REFRESH_INTERVAL_SECONDS",
    "DEFAULT_MIN_REPORTS_BEFORE_RELEASE",
    "DEVICE_BUDGET_MAX",
    "GENERATED_TOKEN_BYTES",
    "HEADER_TIMEOUT_DEFAULT",
    "INGEST_BURST_DEFAULT",
    "INGEST_RATE_DEFAULT",
    "KEEPALIVE_TIMEOUT",
    "KEY_PATTERN",
    "MAX_ACCOUNT_CHARS",
    "MAX_BODY_BYTES_DEFAULT",
    "MAX_BUDGET",
    "MAX_CATEGORIES",
    "MAX_CATEGORY_CHARS",
    "MAX_CONNECTIONS_DEFAULT",
    "MAX_CONNECTIONS_RANGE",
    "MAX_GROUP_CELLS",
    "MAX_GROUP_FIELDS",
    "MAX_GROUP_SIZE",
    "MAX_GROUP_VALUES",
    "MAX_GROUP_VALUES_DEFAULT",
    "MAX_GROUP_VALUES_RANGE",
    "MAX_GROUP_VALUE_CHARS",
    "MAX_HEADER_BYTES",
    "MAX_HEADER_FIELDS",
    "MAX_MIN_REPORTS_BEFORE_RELEASE",
    "MAX_QUERY_CHARS",
    "MAX_QUESTIONS",
    "MAX_QUESTION_CHARS",
    "MAX_REFRESH_INTERVAL_SECONDS",
    "MAX_RHO",
    "MAX_ROUNDS",
    "MAX_ROUND_CHARS",
    "MAX_SUBSAMPLE_DENOMINATOR_BITS",
    "MAX_TOKENS_PER_ACCOUNT",
    "MAX_TOKEN_REQUESTS",
    "MAX_TOP",
    "MEAN_LATTICE",
    "MECHANISM_EPSILON",
    "MIN_CATEGORIES",
    "MIN_FREE_DISK_BYTES_DEFAULT",
    "MIN_TOKEN_BITS",
    "MIN_TOKEN_OBSERVED_BITS",
    "NUMBER_STEPS",
    "OUTBOX_MAX_AGE_DEFAULT",
    "OUTBOX_MAX_AGE_RANGE",
    "PORT_RANGE",
    "PSEUDONYM_HEX_DIGITS",
    "PSEUDONYM_PATTERN",
    "QUESTION_SHARE",
    "RATE_LIMIT_TABLE_MAX",
    "RATE_RANGE",
    "RELEASES_PAGE_DEFAULT",
    "RELEASES_PAGE_MAX",
    "REPORT_ID_HEX_DIGITS",
    "REPORT_ID_PATTERN",
    "RETRY_AFTER_MAX",
    "RETRY_AFTER_MAX_WAIT",
    "RETRY_ATTEMPTS",
    "ROUND_PATTERN",
    "SHUFFLER_URL_MAX_CHARS",
    "SHUFFLE_DELTA_RANGE",
    "SHUFFLE_DESCRIPTOR_TTL",
    "SHUFFLE_FORWARD_TIMEOUT",
    "SHUFFLE_INTERVAL_DEFAULT",
    "SHUFFLE_MIN_BATCH_RANGE",
    "SHUFFLE_RETRY_MAX",
    "SHUFFLE_RETRY_MIN",
    "SIGNATURE_PATTERN",
    "SLUG_MAX_CHARS",
    "SLUG_PATTERN",
    "STATE_BUSY_TIMEOUT",
    "TIMELINE_BUCKETS",
    "TIMELINE_MAX_BUCKETS",
    "TIMEOUT_RANGE",
    "WORKERS_RANGE",
    "check_range",
    "check_timeout",
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


# -- names ------------------------------------------------------------------------------------------------

#: Most characters of a slug (a campaign id, a group field, a survey question's id). Ids appear in URLs, file
#: names and the HPKE info string (length-prefixed in one byte), so they are ASCII, lowercase (no two ids
#: differing only in case) and at most 64 characters.
SLUG_MAX_CHARS = 64
#: A slug: 1 to :data:`SLUG_MAX_CHARS` characters from a-z, 0-9 and '-', starting with a letter or digit.
SLUG_PATTERN = f"^[a-z0-9][a-z0-9-]{{0,{SLUG_MAX_CHARS - 1}}}$"
#: Hex digits of a report id (128 bits; a shuffled batch id has the same form) and of a pseudonym (256 bits;
#: a shuffled campaign's dedup token too), lowercase, and the patterns the OpenAPI document states.
REPORT_ID_HEX_DIGITS = 32
PSEUDONYM_HEX_DIGITS = 64
REPORT_ID_PATTERN = f"^[0-9a-f]{{{REPORT_ID_HEX_DIGITS}}}$"
PSEUDONYM_PATTERN = f"^[0-9a-f]{{{PSEUDONYM_HEX_DIGITS}}}$"
#: A 32-byte public key (X25519, Ed25519) in unpadded base64url is 43 characters; a 64-byte Ed25519
#: signature 86.
KEY_PATTERN = "^[A-Za-z0-9_-]{43}$"
SIGNATURE_PATTERN = "^[A-Za-z0-9_-]{86}$"
#: Unpadded base64url of any length (an envelope's ciphertext).
BASE64URL_PATTERN = "^[A-Za-z0-9_-]*$"


# -- the campaign descriptor (deniable.shared.descriptor, fields.py; the OpenAPI document states them) -----

#: Categories of one question: at least 2 (a single option is no question), at most 4096, so that a
#: descriptor stays below 1 MB and an OUE report (one bit per category) below 1 KB.
MIN_CATEGORIES = 2
MAX_CATEGORIES = 4096
#: Characters of one category label: what fits on a phone's answer button, with room for translations.
MAX_CATEGORY_CHARS = 200
#: Characters of a question's text.
MAX_QUESTION_CHARS = 2000
#: Group fields of one campaign: every field multiplies the cells of a grouped estimate.
MAX_GROUP_FIELDS = 8
#: Characters of one group value (a country code, a region name), sent inside every envelope.
MAX_GROUP_VALUE_CHARS = 64
#: Most characters of a query-string value (``group_by``, ``question``, ``group_after``, ``status``...):
#: every such value is a slug or a group value.
MAX_QUERY_CHARS = max(SLUG_MAX_CHARS, MAX_GROUP_VALUE_CHARS)
#: Values ``group_values`` may declare for one group field (a central release draws noise for each).
MAX_GROUP_VALUES = 1000
#: Characters of a round label of a recurring campaign (``"2026-11-29"``, ``"w48"``; ASCII only).
MAX_ROUND_CHARS = 32
#: A round label: 1 to :data:`MAX_ROUND_CHARS` characters from A-Z, a-z, 0-9, '.', '_' and '-', starting
#: with a letter or digit.
ROUND_PATTERN = f"^[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_ROUND_CHARS - 1}}}$"
#: The largest total ε budget of a central campaign: 100 releases at the largest per-release ε of 10 would
#: already mean no privacy at all; it stops typos, not analysts.
MAX_BUDGET = 100.0
#: Admission tokens one account may be granted per campaign (the descriptor's ``tokens_per_account``).
MAX_TOKENS_PER_ACCOUNT = 10_000
#: Most token requests one call of the issuing route signs (about 40 ms of CPU each on a loaded core, so a
#: call stays near a second).
MAX_TOKEN_REQUESTS = 32
#: Longest account name the issuing route takes (the backend's opaque user id, stored only as an HMAC).
MAX_ACCOUNT_CHARS = 256


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
#: Longest timeout, in seconds, of one HTTP request of the device or the analyst client (``timeout=``): ten
#: minutes is far beyond any answer (a central release of the largest grouped estimate takes seconds).
CLIENT_TIMEOUT_MAX = 600.0


def check_timeout(timeout: object) -> float:
    """A client request timeout in (0, :data:`CLIENT_TIMEOUT_MAX`] seconds, as a float; ``InvalidParameter``
    otherwise (the device's ``HTTPTransport`` and the analyst's connection both take one)."""
    if not (isinstance(timeout, int | float) and 0 < timeout <= CLIENT_TIMEOUT_MAX):
        raise InvalidParameter(f"'timeout' must be a number of seconds in (0, {CLIENT_TIMEOUT_MAX:g}], got {timeout!r}")
    return float(timeout)


#: Attempts of one delivery ``RetryPolicy`` (1 = no retry): 20 doublings of the backoff already span hours.
RETRY_ATTEMPTS: tuple[int, int] = (1, 20)
#: Milliseconds a writer of the aggregator's or the shuffler's SQLite database waits for the write lock
#: before SQLite reports "database is locked" (a batch of 1,000 reports commits in well under a second).
DATABASE_BUSY_TIMEOUT_MS = 30_000
#: Times the aggregator's store runs a transaction that a conflict rolled back (a PostgreSQL serialization
#: failure, deadlock or lock timeout, a row a concurrent batch inserted first, SQLite busy past its timeout)
#: before it answers 503, the first run included (``Store.retrying``). Its jittered pauses double from 2 ms
#: up to 128 ms, so 12 runs add at most about 0.8 s of pauses: a contended release or campaign creation gets
#: through, and a conflict that keeps recurring is answered 503 soon.
CONFLICT_RETRY_ATTEMPTS = 12


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

# -- surveys (deniable.shared.questions, deniable.shared.survey) ---------------------------------------------
#: Questions one survey (a format 3 campaign) may hold: 20 is a long questionnaire already; under the
#: per-question split each then runs at ε/20 or less, under sampling each sees n/20 respondents, and a
#: payload holds one report per question (the padding grows with every question).
MAX_QUESTIONS = 20
#: The integer weight of a question in the per-question split of ε (ε_q = ε·share_q/Σ shares): 1 to 100,
#: so the smallest share of a 20-question survey is above 1/2000 of ε.
QUESTION_SHARE: tuple[int, int] = (1, 100)

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
# -- the HTTP front of the aggregator (aggregator/server.py, aggregator/front.py) ----------------------

#: Seconds a client has, from the moment its connection opens (or its previous answer was sent), to send
#: a complete request line and headers. A slowloris client that trickles one header line every few seconds
#: is cut at this deadline whatever its pace (a per-read timeout would never fire). 10 s is generous for
#: a phone on a bad network (headers are < 1 KiB) and is nginx's order of magnitude (client_header_timeout
#: 60 s, but nginx counts between reads).
HEADER_TIMEOUT_DEFAULT = 10.0
#: Seconds a client has, once its headers are complete, to send the whole body. A full batch of 1,000
#: envelopes is about 0.5 MB, which needs 0.4 Mbit/s to arrive in 10 s; the largest body (8 MiB) needs
#: 6.7 Mbit/s, so operators accepting huge bodies from slow networks raise it.
BODY_TIMEOUT_DEFAULT = 10.0
#: Accepted range of both deadlines (seconds): below 0.1 s a loopback client would be cut mid-request,
#: beyond 10 minutes a deadline no longer bounds anything.
TIMEOUT_RANGE = (0.1, 600.0)
#: Seconds an idle keep-alive connection stays open between requests (the client reopens one after it).
KEEPALIVE_TIMEOUT = 5.0
#: Open connections one worker process holds at most; a connection beyond it is answered 503 with
#: ``Retry-After`` and closed at once, before it costs more than an accept. An idle connection costs a
#: few KiB and one file descriptor, so 2,048 per process (4,096 for the default 2 workers) keeps memory
#: small and leaves room below a default 20,000-descriptor limit, while 1,000 idle plus 200 slow attack
#: connections on one process still leave room for the honest ones.
MAX_CONNECTIONS_DEFAULT = 2048
#: Accepted range of the connection bound per process.
MAX_CONNECTIONS_RANGE = (16, 100_000)
#: Largest request line plus headers in bytes (h11's incomplete-event limit): an honest request's head is
#: well under 2 KiB; a bearer token is 43 characters.
MAX_HEADER_BYTES = 16 * 1024
#: Largest request body in bytes, by default: ``deniable serve --max-body-bytes`` (a larger ``Content-Length``
#: is 413), the shuffler's own body limit, and the aggregator's limit the shuffler assumes when it forms
#: batches (``deniable shuffle --upstream-max-body``: one number, so that the shuffler's batches fit the
#: aggregator it forwards to unless an operator changes one side). 8 MiB holds a batch of 1,000 envelopes
#: (about 0.5 MB) many times over, and the largest shuffled batch of the smallest campaigns (10⁵ binary
#: reports of 83 bytes, :data:`SHUFFLE_MIN_BATCH_RANGE`: 8.3 MB) in one request.
MAX_BODY_BYTES_DEFAULT = 8 * 1024 * 1024
#: Free bytes on the data dir's file system below which ``GET /readyz`` answers 503, by default
#: (``deniable serve --min-free-disk``): 256 MiB leaves room for SQLite's WAL and a checkpoint to finish, so
#: a load balancer stops sending reports before a write fails with "disk full".
MIN_FREE_DISK_BYTES_DEFAULT = 256 * 1024 * 1024
#: Most header fields in one request (gunicorn's and Apache's default is 100).
MAX_HEADER_FIELDS = 100
#: Worker processes, and threads per worker, of ``deniable serve`` and ``deniable shuffle``: beyond 64 a
#: process count is a typo on any machine this runs on (each worker holds its own database connection).
WORKERS_RANGE: tuple[int, int] = (1, 64)
#: TCP ports a server binds.
PORT_RANGE: tuple[int, int] = (1, 65535)

# -- rate limits per client address (aggregator/ratelimit.py) -------------------------------------------

#: Reports per second one client address may submit, sustained (token bucket refill rate), and the bucket's
#: size (the burst). A device sends a handful of reports per flush; 100/s with a burst of 2,000 (two full
#: batches) lets a NAT of many devices or an app backend relaying through one address work, and slows a
#: poisoning client to 360,000 reports an hour per address and process: rate limits bound the speed of
#: forged devices, only admission tokens bound their number.
INGEST_RATE_DEFAULT = 100.0
INGEST_BURST_DEFAULT = 2000
#: Failed authentications (401) per second one address may make, sustained, and the burst: 10 at once,
#: then one every 5 s. With 256-bit tokens guessing is hopeless anyway; the bucket keeps a brute force
#: against a weak operator-chosen token from running at the server's speed (issue 12: 1,562 tries/s).
AUTH_FAILURE_RATE_DEFAULT = 0.2
AUTH_FAILURE_BURST_DEFAULT = 10
#: Accepted ranges of a rate (per second) and of a burst.
RATE_RANGE = (0.001, 1_000_000.0)
BURST_RANGE = (1, 10_000_000)
#: Most client addresses one process keeps a bucket for; past it the least recently seen (which have
#: refilled the longest) are forgotten, so that a flood of spoofed sources cannot grow memory without bound
#: (a bucket is ~200 bytes: 100,000 of them ~20 MB).
RATE_LIMIT_TABLE_MAX = 100_000
#: Longest ``Retry-After`` the aggregator answers with, in seconds (a refusal of a request that can never
#: fit, e.g. more reports than the burst, says so instead of asking to wait).
RETRY_AFTER_MAX = 3600

# -- domains and response sizes (aggregator/ingest.py, aggregator/store.py, aggregator/service.py) -------

#: Distinct values one undeclared group field of a campaign may take; a report carrying a new value past
#: it is rejected with the reason. A grouped estimate then holds at most this many groups (× k categories),
#: instead of one per value any device chose to send (issue 12: 40,000 values made a 183 MB answer).
MAX_GROUP_VALUES_DEFAULT = 1000
#: Accepted range of the cap (an aggregator setting).
MAX_GROUP_VALUES_RANGE = (1, 100_000)
#: Distinct rounds a recurring campaign may hold (round labels come from the devices): a daily round for
#: 27 years. A report of a new round past it is rejected with the reason.
MAX_ROUNDS = 10_000
#: Most cells (declared values × categories) a grouped estimate of one field may hold on this aggregator.
#: A central release draws exact noise for every cell (30–50 µs each), empty groups included, so this
#: keeps the largest release to a few seconds and its JSON body to tens of megabytes. A local grouped
#: estimate lists at most this many cells per page (``group_after`` asks for the next page).
MAX_GROUP_CELLS = 100_000

# -- the shuffled trust model (shared/shuffle.py, aggregator/shuffler/) -------------------------------

#: The batch threshold a shuffled campaign may declare (``shuffler.min_batch``): at least 2 (a batch of one
#: hides nothing), at most 100,000 reports, which at the smallest campaigns (a binary question, 60-byte
#: inner ciphertexts, 83 bytes each in the batch's JSON) is one 8.3 MB request to the aggregator; a campaign
#: whose threshold does not fit the aggregator's body limit is refused at creation.
SHUFFLE_MIN_BATCH_RANGE: tuple[int, int] = (2, 100_000)
#: Characters of the shuffler's URL in a descriptor (``shuffler.url``): any real URL fits; it stops a
#: descriptor from carrying megabytes in one field.
SHUFFLER_URL_MAX_CHARS = 2000
#: δ a shuffled campaign may declare for its central (ε, δ) (the amplification bound's δ).
SHUFFLE_DELTA_RANGE: tuple[float, float] = (1e-15, 1e-3)
#: Seconds between two passes of the shuffler's forwarder (forming batches, sending what is due).
SHUFFLE_INTERVAL_DEFAULT = 1.0
#: Seconds the forwarder waits before retrying a batch the aggregator did not take, doubling to the maximum.
SHUFFLE_RETRY_MIN, SHUFFLE_RETRY_MAX = 1.0, 60.0
#: Seconds one forwarding request may take (a batch of 10⁵ is decrypted and stored in one request).
SHUFFLE_FORWARD_TIMEOUT = 300.0
#: Seconds the shuffler keeps a campaign descriptor fetched from the aggregator before fetching it again.
SHUFFLE_DESCRIPTOR_TTL = 60.0

# -- bearer tokens (aggregator/secret_files.py) -------------------------------------------------------

#: Least entropy, in bits, of a bearer token the aggregator starts with: 2¹²⁸ guesses are out of reach of
#: any attacker, rate limited or not. A given token's entropy is bounded from above by its length times
#: log2 of the smallest usual alphabet holding it (hex, base64url, printable ASCII...).
MIN_TOKEN_BITS = 128
#: Least observed information of a token, in bits (its length times the Shannon entropy of its own
#: character frequencies): refuses long tokens made of few symbols (``aaaa…``, ``abab…``) that the
#: alphabet bound overrates. A random 128-bit hex token observes ≥ 100 bits with overwhelming probability.
MIN_TOKEN_OBSERVED_BITS = 80
#: Bytes of a generated token (``secrets.token_urlsafe``): 256 bits.
GENERATED_TOKEN_BYTES = 32
