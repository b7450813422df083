import base64
import json
from datetime import UTC, datetime, timedelta

import jwt
import pytest

from sstools.common.tokens import (
    JwtCodec,
    TokenAlgorithmRejected,
    TokenAudienceInvalid,
    TokenClaimMissing,
    TokenExpired,
    TokenMalformed,
    TokenNotYetValid,
    TokenSignatureInvalid,
    TokenType,
    TokenTypeInvalid,
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
