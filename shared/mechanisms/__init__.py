"""ε-local-differential-privacy frequency oracles: randomizer, exact output law, tally and estimator together.

>>> from deniable.shared.mechanisms import GRR
>>> m = GRR(epsilon=1.0, k=16)
>>> report = m.randomize(3)          # device path: exact sampling from the OS CSPRNG

See :mod:`.estimate` for the estimator and its variance and :mod:`deniable.shared.sampling` for the
exact samplers.
"""

from .base import MAX_EPSILON, MAX_K, MIN_EPSILON, Mechanism
from .choose import MECHANISMS, choose_mechanism, mechanism_from_name
from .estimate import Estimate, Tally, project_to_simplex
from .grr import GRR, BinaryRR
from .olh import OLH, OLHReport, OLHReports, olh_hash
from .oue import OUE

__all__ = [
    "GRR",
    "MAX_EPSILON",
    "MAX_K",
    "MECHANISMS",
    "MIN_EPSILON",
    "OLH",
    "OUE",
    "BinaryRR",
    "Estimate",
    "Mechanism",
    "OLHReport",
    "OLHReports",
    "Tally",
    "choose_mechanism",
    "mechanism_from_name",
    "olh_hash",
    "project_to_simplex",
]
