"""Generate ``tests/vectors/admission-tokens-v1.json`` (run by hand; the tests never run it).

    .venv/bin/python tests/vectors/make_token_vectors.py

Known answers of deniable's admission tokens (RSABSSA-SHA384-PSS-Deterministic, RFC 9474; Privacy Pass
token type 0x0002, RFC 9578), derived from this implementation after it reproduced, byte for byte, the
published RSABSSA-SHA384-PSS vector of the CFRG draft (4096-bit key; those vectors stay outside the
repository). A fresh 2048-bit key, nonce, salt and blinding factor are drawn on every run: regenerate only
when the token format changes. The key is a test key and signs nothing else.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

from deniable.shared import blindrsa
from deniable.shared.tokens import Admission, Token, public_key_text, token_input


def main() -> None:
    key = blindrsa.generate_key()
    private = key.private_numbers()
    admission = Admission(public_key_text(key.public_key()), 5)
    campaign_id = "vector-campaign"
    nonce = secrets.token_bytes(32)
    msg = token_input(nonce, campaign_id, admission.key_id)
    salt = secrets.token_bytes(blindrsa.SALT_BYTES)
    blinded = blindrsa.blind(key.public_key(), msg, salt=salt)
    blind_sig = blindrsa.blind_sign(key, blinded.blinded)
    sig = blindrsa.finalize(key.public_key(), msg, blind_sig, blinded.inv)
    token = Token(msg + sig)
    token.verify(admission, campaign_id)
    vectors = {
        "description": "RSABSSA-SHA384-PSS-Deterministic (sLen 48, no prefix) and a Privacy Pass type 0x0002 "
        "token; integers and byte strings in lowercase hex",
        "n": f"{private.public_numbers.n:x}",
        "e": f"{private.public_numbers.e:x}",
        "d": f"{private.d:x}",
        "p": f"{private.p:x}",
        "q": f"{private.q:x}",
        "issuer_key": admission.issuer_key,
        "token_key_id": admission.key_id.hex(),
        "campaign_id": campaign_id,
        "nonce": nonce.hex(),
        "token_input": msg.hex(),
        "salt": salt.hex(),
        "encoded_message": blindrsa.emsa_pss_encode(msg, key.key_size - 1, salt).hex(),
        "inv": f"{blinded.inv:x}",
        "blinded_msg": blinded.blinded.hex(),
        "blind_sig": blind_sig.hex(),
        "sig": sig.hex(),
        "token": token.text,
    }
    path = Path(__file__).with_name("admission-tokens-v1.json")
    path.write_text(json.dumps(vectors, indent=2) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
