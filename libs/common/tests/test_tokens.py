import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from sstools.common.tokens import (
    JwtCodec,
    PublicKeyCodec,
    SigningKey,
    TokenAlgorithmRejected,
    TokenAudienceInvalid,
    TokenClaimMissing,
    TokenExpired,
    TokenKeyUnknown,
    TokenMalformed,
    TokenNotYetValid,
    TokenSignatureInvalid,
    TokenType,
    TokenTypeInvalid,
    jwks,
    parse_public_keys,
)

SECRET = "s" * 64
OTHER_SECRET = "o" * 64
AUDIENCE = "sstools-ops"


@pytest.fixture
def codec() -> JwtCodec:
    return JwtCodec(SECRET)


def _b64(data: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def _valid_payload() -> dict[str, object]:
    now = datetime.now(UTC)
    return {
        "sub": "alice",
        "typ": "user",
        "aud": AUDIENCE,
        "iat": int(now.timestamp()),
        "exp": int((now + timedelta(minutes=5)).timestamp()),
    }


def test_issued_token_verifies_with_its_claims(codec: JwtCodec) -> None:
    token = codec.issue(
        "alice",
        token_type=TokenType.USER,
        audience=AUDIENCE,
        ttl=timedelta(minutes=5),
        claims={"role": "analyst"},
    )
    claims = codec.verify(token, audience=AUDIENCE, token_type=TokenType.USER)
    assert claims.subject == "alice"
    assert claims.token_type is TokenType.USER
    assert claims.extra == {"role": "analyst"}
    assert claims.expires_at - claims.issued_at == timedelta(minutes=5)
    assert claims.token_id


def test_expired_token_is_rejected(codec: JwtCodec) -> None:
    issued = datetime.now(UTC) - timedelta(hours=1)
    token = codec.issue(
        "alice", token_type=TokenType.USER, audience=AUDIENCE, ttl=timedelta(minutes=5), now=issued
    )
    with pytest.raises(TokenExpired) as error:
        codec.verify(token, audience=AUDIENCE, token_type=TokenType.USER)
    assert error.value.code == "token_expired"


def test_token_signed_with_another_secret_is_rejected(codec: JwtCodec) -> None:
    forged = JwtCodec(OTHER_SECRET).issue(
        "alice", token_type=TokenType.USER, audience=AUDIENCE, ttl=timedelta(minutes=5)
    )
    with pytest.raises(TokenSignatureInvalid):
        codec.verify(forged, audience=AUDIENCE, token_type=TokenType.USER)


def test_tampered_payload_is_rejected(codec: JwtCodec) -> None:
    token = codec.issue("alice", token_type=TokenType.USER, audience=AUDIENCE, ttl=timedelta(minutes=5))
    header, _, signature = token.split(".")
    elevated = {**_valid_payload(), "sub": "admin"}
    with pytest.raises(TokenSignatureInvalid):
        codec.verify(f"{header}.{_b64(elevated)}.{signature}", audience=AUDIENCE, token_type=TokenType.USER)


@pytest.mark.parametrize("alg", ["none", "None", "NONE"])
def test_unsigned_alg_none_token_is_rejected(codec: JwtCodec, alg: str) -> None:
    unsigned = f"{_b64({'alg': alg, 'typ': 'JWT'})}.{_b64(_valid_payload())}."
    with pytest.raises(TokenAlgorithmRejected):
        codec.verify(unsigned, audience=AUDIENCE, token_type=TokenType.USER)


def test_other_hmac_algorithm_is_rejected(codec: JwtCodec) -> None:
    token = jwt.encode(_valid_payload(), SECRET, algorithm="HS512")
    with pytest.raises(TokenAlgorithmRejected):
        codec.verify(token, audience=AUDIENCE, token_type=TokenType.USER)


@pytest.mark.parametrize("claim", ["exp", "iat", "aud", "sub", "typ"])
def test_token_missing_a_required_claim_is_rejected(codec: JwtCodec, claim: str) -> None:
    payload = _valid_payload()
    del payload[claim]
    token = jwt.encode(payload, SECRET, algorithm="HS256")
    with pytest.raises(TokenClaimMissing, match=claim):
        codec.verify(token, audience=AUDIENCE, token_type=TokenType.USER)


def test_token_for_another_audience_is_rejected(codec: JwtCodec) -> None:
    token = codec.issue(
        "alice", token_type=TokenType.USER, audience="sstools-convo", ttl=timedelta(minutes=5)
    )
    with pytest.raises(TokenAudienceInvalid):
        codec.verify(token, audience=AUDIENCE, token_type=TokenType.USER)


def test_audience_list_is_not_accepted_in_place_of_one_audience(codec: JwtCodec) -> None:
    token = jwt.encode({**_valid_payload(), "aud": [AUDIENCE, "other"]}, SECRET, algorithm="HS256")
    with pytest.raises(TokenAudienceInvalid):
        codec.verify(token, audience=AUDIENCE, token_type=TokenType.USER)


def test_service_token_does_not_pass_as_user_token(codec: JwtCodec) -> None:
    token = codec.issue("agent", token_type=TokenType.SERVICE, audience=AUDIENCE, ttl=timedelta(minutes=5))
    with pytest.raises(TokenTypeInvalid):
        codec.verify(token, audience=AUDIENCE, token_type=TokenType.USER)
    assert codec.verify(token, audience=AUDIENCE, token_type=TokenType.SERVICE).subject == "agent"


def test_token_issued_in_the_future_is_rejected(codec: JwtCodec) -> None:
    later = datetime.now(UTC) + timedelta(hours=1)
    token = codec.issue(
        "alice", token_type=TokenType.USER, audience=AUDIENCE, ttl=timedelta(hours=2), now=later
    )
    with pytest.raises(TokenNotYetValid):
        codec.verify(token, audience=AUDIENCE, token_type=TokenType.USER)


@pytest.mark.parametrize("garbage", ["", "abc", "a.b", "a.b.c", "Bearer x.y.z"])
def test_malformed_token_gets_a_typed_error(codec: JwtCodec, garbage: str) -> None:
    with pytest.raises(TokenMalformed):
        codec.verify(garbage, audience=AUDIENCE, token_type=TokenType.USER)


def test_short_secret_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 32 bytes"):
        JwtCodec("short")


# Ops' tokens: EdDSA under its private key, verified with public keys chosen by kid.

OPS_KEY = SigningKey.generate()
NEXT_KEY = SigningKey.generate()


def _trusting(*keys: SigningKey) -> dict[str, Ed25519PublicKey]:
    return {key.kid: key.public_key for key in keys}


def _signed_by(key: SigningKey, subject: str = "alice") -> str:
    return PublicKeyCodec(_trusting(key), key).issue(
        subject, token_type=TokenType.USER, audience=AUDIENCE, ttl=timedelta(minutes=5)
    )


def test_a_token_ops_signs_verifies_with_its_public_key_alone() -> None:
    token = _signed_by(OPS_KEY)
    assert jwt.get_unverified_header(token) == {"alg": "EdDSA", "typ": "JWT", "kid": OPS_KEY.kid}
    verifier = PublicKeyCodec(parse_public_keys(OPS_KEY.public_pem()))  # what agent and convo hold
    assert verifier.verify(token, audience=AUDIENCE, token_type=TokenType.USER).subject == "alice"
    with pytest.raises(RuntimeError, match="holds no private key"):
        verifier.issue("mallory", token_type=TokenType.USER, audience=AUDIENCE, ttl=timedelta(minutes=5))


def test_during_a_rotation_both_keys_verify_and_afterwards_only_the_new_one() -> None:
    old, new = _signed_by(OPS_KEY), _signed_by(NEXT_KEY)
    during = PublicKeyCodec(_trusting(OPS_KEY, NEXT_KEY), NEXT_KEY)
    for token in (old, new):
        assert during.verify(token, audience=AUDIENCE, token_type=TokenType.USER).subject == "alice"
    after = PublicKeyCodec(_trusting(NEXT_KEY), NEXT_KEY)
    assert after.verify(new, audience=AUDIENCE, token_type=TokenType.USER).subject == "alice"
    with pytest.raises(TokenKeyUnknown):
        after.verify(old, audience=AUDIENCE, token_type=TokenType.USER)


def test_a_token_of_a_key_not_trusted_is_refused_whatever_kid_it_names() -> None:
    verifier = PublicKeyCodec(_trusting(OPS_KEY))
    stranger = SigningKey.generate()
    with pytest.raises(TokenKeyUnknown):
        verifier.verify(_signed_by(stranger), audience=AUDIENCE, token_type=TokenType.USER)
    stranger.kid = OPS_KEY.kid  # copied from a real token's header
    with pytest.raises(TokenSignatureInvalid) as refused:
        verifier.verify(_signed_by(stranger), audience=AUDIENCE, token_type=TokenType.USER)
    assert refused.value.code == "token_signature_invalid"
    without_kid = jwt.encode(_valid_payload(), stranger.private_key, algorithm="EdDSA")
    with pytest.raises(TokenKeyUnknown):
        verifier.verify(without_kid, audience=AUDIENCE, token_type=TokenType.USER)


@pytest.mark.parametrize("alg", ["HS256", "none", "RS256", "ES256"])
def test_only_eddsa_is_accepted_for_ops_tokens_even_keyed_with_the_public_key(alg: str) -> None:
    """The algorithm-confusion attack: an HS256 token whose HMAC key is the public key's PEM."""
    header = _b64({"alg": alg, "typ": "JWT", "kid": OPS_KEY.kid})
    signed = f"{header}.{_b64(_valid_payload())}"
    mac = hmac.new(OPS_KEY.public_pem().encode(), signed.encode(), hashlib.sha256).digest()
    forged = f"{signed}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"
    with pytest.raises(TokenAlgorithmRejected):
        PublicKeyCodec(_trusting(OPS_KEY)).verify(forged, audience=AUDIENCE, token_type=TokenType.USER)


def test_ops_refuses_to_sign_with_a_key_the_others_would_not_trust() -> None:
    with pytest.raises(ValueError, match="not among the trusted public keys"):
        PublicKeyCodec(_trusting(OPS_KEY), NEXT_KEY)


def test_the_jwks_document_names_each_key_as_tokens_do() -> None:
    document = jwks(_trusting(OPS_KEY, NEXT_KEY).values())
    keys = {key["kid"]: key for key in document["keys"]}
    assert set(keys) == {OPS_KEY.kid, NEXT_KEY.kid}
    published = jwt.PyJWK(keys[OPS_KEY.kid])  # as any JOSE library reads it
    token = _signed_by(OPS_KEY)
    assert jwt.decode(token, published.key, algorithms=["EdDSA"], audience=AUDIENCE)["sub"] == "alice"


def test_a_pem_bundle_is_read_key_by_key_and_bad_keys_are_named() -> None:
    bundle = f"rotation in progress:\n{OPS_KEY.public_pem()}\n{NEXT_KEY.public_pem()}"
    assert set(parse_public_keys(bundle)) == {OPS_KEY.kid, NEXT_KEY.kid}
    rsa_public = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    for text, reason in (
        ("", "no PEM public key"),
        ("-----BEGIN PUBLIC KEY-----\nnot base64\n-----END PUBLIC KEY-----", "not a PEM public key"),
        (rsa_public, "must be an Ed25519 key"),
    ):
        with pytest.raises(ValueError, match=reason):
            parse_public_keys(text)
    with pytest.raises(ValueError, match="not a PEM private key"):
        SigningKey.from_pem(OPS_KEY.public_pem())
    assert SigningKey.from_pem(OPS_KEY.private_pem()).kid == OPS_KEY.kid
