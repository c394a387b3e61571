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
from .mean import Duchi, Hybrid, Piecewise
from .olh import OLH, OLHReport, OLHReports, olh_hash
from .oue import OUE
from .registry import KINDS, REGISTRY, mechanism_class, mechanism_names, register, unregister
from .sets import BitVector, Padding

# The built-in mechanisms, listed once, in the order messages and the OpenAPI document name them.
for _cls in (BinaryRR, GRR, OUE, OLH, BitVector, Padding, Duchi, Piecewise, Hybrid):
    register(_cls)

__all__ = [
    "GRR",
    "KINDS",
    "MAX_EPSILON",
    "MAX_K",
    "MECHANISMS",
    "MIN_EPSILON",
    "OLH",
    "OUE",
    "REGISTRY",
    "BinaryRR",
    "Estimate",
    "Mechanism",
    "OLHReport",
    "OLHReports",
    "Tally",
    "choose_mechanism",
    "mechanism_class",
    "mechanism_from_name",
    "mechanism_names",
    "olh_hash",
    "project_to_simplex",
    "register",
    "unregister",
]
