"""One place for every bound of deniable, and why each layer's range is what it is.

A bound lives here once; the modules that enforce it import it, and their messages quote it. Helpers add
their own sections; keep each bound next to the reason for its value.
"""

from __future__ import annotations

__all__ = [
    "OUTBOX_MAX_AGE_DEFAULT",
    "OUTBOX_MAX_AGE_RANGE",
    "RETRY_AFTER_MAX_WAIT",
    "STATE_BUSY_TIMEOUT",
]

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
