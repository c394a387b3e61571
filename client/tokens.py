"""Admission tokens on the device: obtain them blinded, keep them in the state database, spend one per report.

A campaign whose descriptor has ``admission`` (:mod:`deniable.shared.tokens`) accepts a report only with
an unspent token of its issuer. The device gets tokens in three steps, the middle one through the app's own
backend (which knows the user and forwards to the issuer route with the issuer token)::

    batch = client.request_tokens("survey-2026", 5)      # blinded requests; the secrets stay in memory
    responses = my_backend.issue(batch.requests)          # the app's call (user authenticated its way)
    client.add_tokens(batch, responses)                   # unblind, verify (RSASSA-PSS), store

or in one call, ``client.obtain_tokens("survey-2026", 5, my_backend.issue)``. Each ``submit`` to such a
campaign takes one stored token, in the same transaction that spends ε and queues the envelope; without a
token it raises :class:`~deniable.shared.errors.AdmissionTokenRequired` before anything is spent. A
re-sent (memoized) report re-sends its own token.

The blinding secrets (nonce, r⁻¹) of a batch live only in memory between the two calls: a batch that is
never finalized is simply lost (the issuer counted it against the account). Stored tokens are bearer
secrets: they sit in the 0700 state dir, like the envelopes.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass

from deniable.shared.descriptor import CampaignConfig
from deniable.shared.errors import InvalidConfig, InvalidParameter
from deniable.shared.limits import MAX_TOKEN_REQUESTS
from deniable.shared.tokens import Admission, Token, TokenRequest

__all__ = ["WALLET_SCHEMA", "TokenBatch", "held", "store_tokens", "take_token"]

#: The wallet table, created with the rest of the device state.
WALLET_SCHEMA = """
CREATE TABLE IF NOT EXISTS tokens (
    token TEXT PRIMARY KEY,
    campaign_id TEXT NOT NULL,
    obtained REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS tokens_campaign ON tokens (campaign_id);
"""


def admission_of(config: CampaignConfig) -> Admission:
    """The campaign's admission rule; ``InvalidConfig`` if it takes no tokens."""
    if config.admission is None:
        raise InvalidConfig(f"campaign {config.id!r} takes no admission tokens; submit answers without them")
    return config.admission


@dataclass(frozen=True)
class TokenBatch:
    """Blinded token requests of one campaign, with their secrets (in memory only)."""

    campaign_id: str
    admission: Admission
    pending: tuple[TokenRequest, ...]

    @classmethod
    def create(cls, config: CampaignConfig, count: int) -> TokenBatch:
        """``count`` fresh blinded requests (1..:data:`~deniable.shared.limits.MAX_TOKEN_REQUESTS`, what the
        issuing route signs per call)."""
        admission = admission_of(config)
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_TOKEN_REQUESTS:
            raise InvalidParameter(f"'count' must be a whole number from 1 to {MAX_TOKEN_REQUESTS}, got {count!r}")
        return cls(config.id, admission, tuple(TokenRequest.create(config.id, admission) for _ in range(count)))

    @property
    def requests(self) -> list[str]:
        """The TokenRequests to forward to the issuer (base64url), in order."""
        return [request.text for request in self.pending]

    def finalize(self, responses: Sequence[object]) -> list[Token]:
        """The verified tokens of the issuer's responses (one per request, same order).

        Raises ``InvalidParameter`` if the count differs or a response does not unblind into a token that
        passes the standard RSASSA-PSS verification (a faulty or malicious issuer); then none is kept.
        """
        if isinstance(responses, str | bytes) or len(responses) != len(self.pending):
            raise InvalidParameter(
                f"the issuer must answer each of the {len(self.pending)} token requests with one response, "
                f"got {len(responses) if not isinstance(responses, str | bytes) else 'a string'}"
            )
        tokens = [request.finalize(self.admission, r) for request, r in zip(self.pending, responses, strict=True)]
        for token in tokens:
            token.verify(self.admission, self.campaign_id)  # what the aggregator will check
        return tokens


def store_tokens(db: sqlite3.Connection, campaign_id: str, tokens: Sequence[Token]) -> None:
    """Add tokens to the wallet (within the caller's transaction)."""
    now = time.time()
    db.executemany(
        "INSERT OR IGNORE INTO tokens (token, campaign_id, obtained) VALUES (?, ?, ?)",
        [(token.text, campaign_id, now) for token in tokens],
    )


def take_token(db: sqlite3.Connection, campaign_id: str) -> Token | None:
    """Remove and return the oldest unspent token of the campaign (within the caller's transaction)."""
    row = db.execute(
        "SELECT token FROM tokens WHERE campaign_id = ? ORDER BY obtained, token LIMIT 1", (campaign_id,)
    ).fetchone()
    if row is None:
        return None
    db.execute("DELETE FROM tokens WHERE token = ?", (row[0],))
    return Token.parse(row[0])


def held(db: sqlite3.Connection, campaign_id: str) -> int:
    """How many unspent tokens of the campaign the wallet holds."""
    return int(db.execute("SELECT COUNT(*) FROM tokens WHERE campaign_id = ?", (campaign_id,)).fetchone()[0])
