"""The device client of deniable: randomize on the device, account for ε, encrypt, deliver exactly once.

>>> from deniable.client import Client
>>> client = Client("http://127.0.0.1:8000", state_dir="~/.local/share/myapp/deniable")  # doctest: +SKIP
>>> receipt = client.submit("smoking-2026", "yes", groups={"country": "NL"})            # doctest: +SKIP
>>> client.submit("health-2026", {"smoke": "yes", "age": 37, "apps": ["mail", "maps"]})  # a survey  # doctest: +SKIP
>>> client.flush()                                                                       # doctest: +SKIP
>>> client.pending()                        # what still waits, and why                  # doctest: +SKIP
>>> client.ledger()                                                                      # doctest: +SKIP
>>> client.obtain_tokens("smoking-2026", 1, my_backend.issue)  # campaigns with admission tokens  # doctest: +SKIP

Depends only on the standard library, ``cryptography`` and :mod:`deniable.shared`; never imports numpy or
Flask.
"""

from deniable.shared.errors import (
    AdmissionTokenRequired,
    BudgetExceeded,
    CampaignClosed,
    DeliveryError,
    DeniableError,
    DeviceStateError,
    InvalidAnswer,
    InvalidConfig,
    InvalidParameter,
    TransportError,
    UnknownCampaign,
)

from .device import Client, ForgetWarning, Forgotten, Receipt
from .ledger import CampaignSpend, Ledger
from .outbox import FlushResult, RetryPolicy
from .state import ExpiredReport, PendingReport, Rejection, default_state_dir
from .tokens import TokenBatch
from .transport import HTTPTransport, Response, Transport

__all__ = [
    "AdmissionTokenRequired",
    "BudgetExceeded",
    "CampaignClosed",
    "CampaignSpend",
    "Client",
    "DeliveryError",
    "DeniableError",
    "DeviceStateError",
    "ExpiredReport",
    "FlushResult",
    "ForgetWarning",
    "Forgotten",
    "HTTPTransport",
    "InvalidAnswer",
    "InvalidConfig",
    "InvalidParameter",
    "Ledger",
    "PendingReport",
    "Receipt",
    "Rejection",
    "Response",
    "RetryPolicy",
    "TokenBatch",
    "Transport",
    "TransportError",
    "UnknownCampaign",
    "default_state_dir",
]
