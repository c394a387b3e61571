"""The wire's version numbers and suite name: what a descriptor names and what an envelope is sealed in.

The descriptor carries ``format_version`` and ``suite`` (``deniable.shared.descriptor``) and the envelope
writes ``v`` (``deniable.shared.envelope``); both read them from here, so that the descriptor knows which
formats exist without importing the cryptography that implements them. The byte layouts of each version
are in ``docs/wire-format.md``.
"""

from __future__ import annotations

from deniable.shared.errors import InvalidParameter

__all__ = [
    "DESCRIPTOR_VERSIONS", "FORMAT_VERSION", "SUITE_ID", "SUPPORTED_VERSIONS", "SURVEY_FORMAT_VERSION", "check_version"
]

#: The envelope format this code writes; :data:`SUPPORTED_VERSIONS` lists those it reads. Version 1 (no
#: padding, no proof of possession) is read and written only for campaigns whose descriptor says 1.
FORMAT_VERSION = 2
SUPPORTED_VERSIONS: tuple[int, ...] = (1, 2)
#: The descriptor format of a survey (``CampaignConfig.create_survey``): its descriptor holds ``questions``
#: and its payloads one report per question. Its envelopes are version 2 envelopes (the envelope's bytes did
#: not change; the campaign id bound into every envelope fixes which payload layout it holds).
SURVEY_FORMAT_VERSION = 3
#: The descriptor formats this code reads (``format_version``): 1 and 2 are one-question campaigns, whose
#: envelopes carry the same version number; 3 is a survey.
DESCRIPTOR_VERSIONS: tuple[int, ...] = (1, 2, SURVEY_FORMAT_VERSION)
#: The HPKE suite, named as in RFC 9180: KEM 0x0020, KDF 0x0001, AEAD 0x0003.
SUITE_ID = "X25519-HKDF-SHA256-ChaCha20Poly1305"


def check_version(version: object) -> None:
    """Raise ``InvalidParameter`` unless ``version`` is a format version this code reads and writes."""
    if isinstance(version, bool) or version not in SUPPORTED_VERSIONS:
        raise InvalidParameter(f"'version' must be one of {list(SUPPORTED_VERSIONS)}, got {version!r}")
