"""The one exception tree of deniable, shared by the device client and the aggregator.

::

    DeniableError
    ├── InvalidParameter (ValueError)   a privacy or mechanism parameter is out of range
    ├── InvalidReport (ValueError)      a report, envelope or payload is malformed or out of range
    ├── InvalidConfig (ValueError)      a campaign descriptor is malformed or changed after pinning
    ├── BudgetExceeded                  an ε budget (device ledger or central accountant) would be exceeded
    ├── UnknownCampaign (LookupError)   no campaign with that id
    ├── CampaignClosed                  the campaign no longer accepts reports
    └── TransportError                  the aggregator could not be reached or answered 5xx

The aggregator maps each class to one HTTP status in one place; messages say what is wrong, where, and
what to do, e.g. ``epsilon must be a finite number in (0, 20], got 0``.
"""

from __future__ import annotations

__all__ = [
    "BudgetExceeded",
    "CampaignClosed",
    "DeniableError",
    "InvalidConfig",
    "InvalidParameter",
    "InvalidReport",
    "TransportError",
    "UnknownCampaign",
]


class DeniableError(Exception):
    """Base class of every error deniable raises on purpose."""

    code = "deniable_error"


class InvalidParameter(DeniableError, ValueError):
    """A parameter (ε, k, a value, a level) is outside its allowed range."""

    code = "invalid_parameter"


class InvalidReport(DeniableError, ValueError):
    """A report, envelope or decrypted payload is malformed or outside the report space."""

    code = "invalid_report"


class InvalidConfig(DeniableError, ValueError):
    """A campaign descriptor is malformed, or differs from the one pinned at first use."""

    code = "invalid_config"


class BudgetExceeded(DeniableError):
    """Spending ``requested`` would take the ε spent past the budget.

    The message always names what was spent, what is left and what was asked for.
    """

    code = "budget_exceeded"

    def __init__(self, message: str, *, spent: float, remaining: float, requested: float) -> None:
        super().__init__(message)
        self.spent = spent
        self.remaining = remaining
        self.requested = requested


class UnknownCampaign(DeniableError, LookupError):
    """No campaign has this id."""

    code = "unknown_campaign"


class CampaignClosed(DeniableError):
    """The campaign is closed and accepts no more reports."""

    code = "campaign_closed"


class TransportError(DeniableError):
    """The aggregator could not be reached, or answered with a server error (retryable)."""

    code = "transport_error"
