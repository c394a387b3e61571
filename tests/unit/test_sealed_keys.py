"""Campaign keys sealed under the key-encryption key (``aggregator/sealed_keys.py``): what opens, what fails
and how the failure is named; the keyring's load_private_key over sealed keys."""

from __future__ import annotations

import base64
import dataclasses
from pathlib import Path

import pytest
from support.store import make_store

from deniable.aggregator.keyring import Keyring, load_private_key
from deniable.aggregator.sealed_keys import KEK_BYTES, kek_id, parse_kek, seal, unseal
from deniable.shared.errors import CampaignKeyUnavailable

KEK = bytes(range(KEK_BYTES))


def test_a_sealed_key_opens_only_for_its_campaign_kind_and_kek() -> None:
    sealed = seal(KEK, "c1", "hpke", b"key file bytes")
    assert unseal(KEK, "c1", "hpke", sealed) == (b"key file bytes", None)
    assert sealed.kek_id == kek_id(KEK) and len(sealed.nonce) == 12 and b"key file" not in sealed.sealed
    moved = unseal(KEK, "c2", "hpke", sealed)  # a row copied to another campaign
    assert moved[0] == b"" and "does not open" in str(moved[1])
    other_kind = unseal(KEK, "c1", "issuer", sealed)
    assert other_kind[0] == b"" and "does not open" in str(other_kind[1])
    other_kek = bytes(reversed(KEK))
    wrong = unseal(other_kek, "c1", "hpke", sealed)
    assert wrong[0] == b"" and kek_id(KEK) in str(wrong[1]) and kek_id(other_kek) in str(wrong[1])
    relabelled = dataclasses.replace(sealed, kek_id=kek_id(other_kek))  # claims the other KEK: the tag says no
    assert unseal(other_kek, "c1", "hpke", relabelled)[0] == b""


@pytest.mark.parametrize("position", [0, 5, 13, 29])
def test_every_flipped_byte_of_a_sealed_key_is_refused(position: int) -> None:
    sealed = seal(KEK, "c1", "hpke", b"0123456789abcdef")
    damaged = bytearray(sealed.sealed)
    damaged[position] ^= 0x01
    data, reason = unseal(KEK, "c1", "hpke", dataclasses.replace(sealed, sealed=bytes(damaged)))
    assert data == b"" and "does not open" in str(reason)


def test_two_seals_of_one_key_use_fresh_nonces() -> None:
    assert seal(KEK, "c1", "hpke", b"k").nonce != seal(KEK, "c1", "hpke", b"k").nonce


def test_the_kek_is_read_as_base64url_or_hex_and_anything_else_is_refused_with_how_to_make_one() -> None:
    text = base64.urlsafe_b64encode(KEK).rstrip(b"=").decode()
    assert parse_kek(text, source="X") == KEK == parse_kek(KEK.hex(), source="X") == parse_kek(text + "=\n", source="X")
    for bad in ("", "short", KEK.hex()[:-2], base64.urlsafe_b64encode(KEK + b"!").decode()):
        with pytest.raises(ValueError, match=r"X must be a 32-byte key.*secrets\.token_bytes"):
            parse_kek(bad, source="X")


def test_load_private_key_unseals_a_campaigns_key_from_the_database_and_names_what_is_wrong(tmp_path: Path) -> None:
    store = make_store(tmp_path, "c1")
    private, _ = Keyring.new_keypair()
    with store.transaction() as conn:
        Keyring(tmp_path, sealed_in=store, kek=KEK).save("c1", private, conn=conn)
    assert load_private_key(tmp_path, "c1", sealed_in=store, kek=KEK) == private
    assert not (tmp_path / "keys").exists()  # nothing was read from (or written to) key files
    with pytest.raises(CampaignKeyUnavailable, match="sealed key in the database: is sealed under key-encryption key"):
        load_private_key(tmp_path, "c1", sealed_in=store, kek=bytes(KEK_BYTES))
    with pytest.raises(CampaignKeyUnavailable, match="'c2': sealed key in the database: is missing"):
        load_private_key(tmp_path, "c2", sealed_in=store, kek=KEK)
    with pytest.raises(ValueError, match="key-encryption key"):
        load_private_key(tmp_path, "c1", sealed_in=store)
    store.close()
