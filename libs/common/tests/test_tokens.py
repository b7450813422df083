"""Token issue and verification (sstools.common.tokens): every claim a verifier checks (type,
audience, expiry, issued-at and not-before with and without leeway), the one algorithm each codec
accepts, key ids, key rotation and the JWKS document, malformed tokens, and the exact ``code``
of every refusal, which callers put in their 401 responses."""

import base64
import hashlib
import hmac
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from sstools.common.tokens import (
    JwtCodec,
    PublicKeyCodec,
    SigningKey,
    TokenAlgorithmRejected,
    TokenAudienceInvalid,
    TokenClaimMissing,
    TokenClaims,
    TokenError,
    TokenExpired,
    TokenKeyUnknown,
    TokenMalformed,
    TokenNotYetValid,
    TokenSignatureInvalid,
    TokenType,
    TokenTypeInvalid,
    jwks,
    parse_public_keys,
    superset_audience,
)

SECRET = "s" * 64
OTHER_SECRET = "o" * 64
AUDIENCE = "sstools-ops"


@pytest.fixture
def codec() -> JwtCodec:
    return JwtCodec(SECRET)


def _b64(data: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def _payload_of(token: str) -> dict[str, Any]:
    """A token's claims as they travel, read without any JWT library."""
    segment = token.split(".")[1]
    payload: dict[str, Any] = json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    return payload


def _whole(message: str) -> str:
    """A ``match`` pattern that only exactly ``message`` satisfies."""
    return rf"\A{re.escape(message)}\Z"


def _valid_payload() -> dict[str, object]:
    now = datetime.now(UTC)
    return {
        "sub": "alice",
        "typ": "user",
        "aud": AUDIENCE,
        "iat": int(now.timestamp()),
        "exp": int((now + timedelta(minutes=5)).timestamp()),
    }


def _refusal(
    verifier: JwtCodec | PublicKeyCodec, token: str, token_type: TokenType = TokenType.USER
) -> TokenError:
    """The error ``verifier`` refuses ``token`` with (as a user token for AUDIENCE, by default)."""
    with pytest.raises(TokenError) as refused:
        verifier.verify(token, audience=AUDIENCE, token_type=token_type)
    return refused.value


def test_an_issued_token_verifies_with_exactly_the_claims_it_was_issued_with(codec: JwtCodec) -> None:
    issued = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1)
    token = codec.issue(
        "alice",
        token_type=TokenType.USER,
        audience=AUDIENCE,
        ttl=timedelta(minutes=5),
        claims={"role": "analyst"},
        now=issued,
    )
    travelled = _payload_of(token)
    assert re.fullmatch(r"[0-9a-f]{32}", travelled["jti"])  # a fresh UUID per token
    assert travelled == {
        "role": "analyst",
        "sub": "alice",
        "typ": "user",
        "aud": AUDIENCE,
        "iat": int(issued.timestamp()),
        "exp": int(issued.timestamp()) + 300,
        "jti": travelled["jti"],
    }
    assert codec.verify(token, audience=AUDIENCE, token_type=TokenType.USER) == TokenClaims(
        subject="alice",
        token_type=TokenType.USER,
        audience=AUDIENCE,
        issued_at=issued,
        expires_at=issued + timedelta(minutes=5),
        token_id=travelled["jti"],
        extra={"role": "analyst"},
    )


def test_two_tokens_issued_alike_have_different_ids(codec: JwtCodec) -> None:
    first, second = (
        codec.issue("alice", token_type=TokenType.USER, audience=AUDIENCE, ttl=timedelta(minutes=5))
        for _ in range(2)
    )
    assert _payload_of(first)["jti"] != _payload_of(second)["jti"]


def test_a_token_without_an_id_or_with_not_before_keeps_only_its_own_claims_as_extra(codec: JwtCodec) -> None:
    now = int(time.time())
    payload = {**_valid_payload(), "nbf": now - 60, "tenant": "eu"}
    claims = codec.verify(
        jwt.encode(payload, SECRET, algorithm="HS256"), audience=AUDIENCE, token_type=TokenType.USER
    )
    assert (claims.token_id, claims.extra) == ("", {"tenant": "eu"})


@pytest.fixture
def local_time_nine_hours_ahead_of_utc() -> Iterator[None]:
    """The process's local time zone set to UTC+9 (a POSIX TZ string: no tz database needed)."""
    previous = os.environ.get("TZ")
    os.environ["TZ"] = "JST-9"
    time.tzset()
    try:
        yield
    finally:
        if previous is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = previous
        time.tzset()


@pytest.mark.usefixtures("local_time_nine_hours_ahead_of_utc")
def test_a_host_whose_local_time_is_not_utc_still_dates_its_tokens_in_utc(codec: JwtCodec) -> None:
    before = int(time.time())
    token = codec.issue("alice", token_type=TokenType.USER, audience=AUDIENCE, ttl=timedelta(minutes=5))
    after = int(time.time())
    assert before <= _payload_of(token)["iat"] <= after
    assert codec.verify(token, audience=AUDIENCE, token_type=TokenType.USER).subject == "alice"


def test_expired_token_is_rejected(codec: JwtCodec) -> None:
    issued = datetime.now(UTC) - timedelta(hours=1)
    token = codec.issue(
        "alice", token_type=TokenType.USER, audience=AUDIENCE, ttl=timedelta(minutes=5), now=issued
    )
    refused = _refusal(codec, token)
    assert (type(refused), refused.code) == (TokenExpired, "token_expired")


def test_token_issued_in_the_future_is_rejected(codec: JwtCodec) -> None:
    later = datetime.now(UTC) + timedelta(hours=1)
    token = codec.issue(
        "alice", token_type=TokenType.USER, audience=AUDIENCE, ttl=timedelta(hours=2), now=later
    )
    refused = _refusal(codec, token)
    assert (type(refused), refused.code) == (TokenNotYetValid, "token_not_yet_valid")


def test_a_token_not_valid_before_a_later_time_is_rejected_until_then(codec: JwtCodec) -> None:
    token = jwt.encode({**_valid_payload(), "nbf": int(time.time()) + 600}, SECRET, algorithm="HS256")
    refused = _refusal(codec, token)
    assert (type(refused), refused.code) == (TokenNotYetValid, "token_not_yet_valid")


# Ops' tokens: EdDSA under its private key, verified with public keys chosen by kid.

OPS_KEY = SigningKey.generate()
NEXT_KEY = SigningKey.generate()


def _trusting(*keys: SigningKey) -> dict[str, Ed25519PublicKey]:
    return {key.kid: key.public_key for key in keys}


def _signed_by(key: SigningKey, subject: str = "alice") -> str:
    return PublicKeyCodec(_trusting(key), key).issue(
        subject, token_type=TokenType.USER, audience=AUDIENCE, ttl=timedelta(minutes=5)
    )


def _encoded_for(verifier: JwtCodec | PublicKeyCodec, payload: dict[str, object]) -> str:
    """``payload`` signed as ``verifier`` expects: the shared secret, or ops' key named by kid."""
    if isinstance(verifier, JwtCodec):
        return jwt.encode(payload, SECRET, algorithm="HS256")
    return jwt.encode(payload, OPS_KEY.private_key, algorithm="EdDSA", headers={"kid": OPS_KEY.kid})


def _verifier(kind: str, leeway_seconds: float | None = None) -> JwtCodec | PublicKeyCodec:
    """A verifier of the given kind ("shared" secret or "public_key"), made when the test runs,
    with its default leeway unless one is given."""
    if kind == "shared":
        return JwtCodec(SECRET) if leeway_seconds is None else JwtCodec(SECRET, leeway_seconds=leeway_seconds)
    trusted = _trusting(OPS_KEY)
    if leeway_seconds is None:
        return PublicKeyCodec(trusted)
    return PublicKeyCodec(trusted, leeway_seconds=leeway_seconds)


@pytest.mark.parametrize("kind", ["shared", "public_key"])
def test_without_leeway_a_token_is_expired_from_the_second_it_names(kind: str) -> None:
    verifier = _verifier(kind)
    # The clock only moves on: "now" is at or past this second whenever the verifier looks.
    now = int(time.time())
    token = _encoded_for(verifier, {**_valid_payload(), "iat": now - 300, "exp": now})
    refused = _refusal(verifier, token)
    assert (type(refused), refused.code) == (TokenExpired, "token_expired")


@pytest.mark.parametrize("kind", ["shared", "public_key"])
def test_a_leeway_forgives_clock_skew_up_to_its_size_and_no_further(kind: str) -> None:
    verifier = _verifier(kind, leeway_seconds=60)
    now = int(time.time())
    within = [{"exp": now - 30}, {"iat": now + 30}, {"nbf": now + 30}]
    for claims in within:
        token = _encoded_for(verifier, {**_valid_payload(), **claims})
        assert verifier.verify(token, audience=AUDIENCE, token_type=TokenType.USER).subject == "alice", claims
    beyond: list[tuple[dict[str, int], type[TokenError], str]] = [
        ({"exp": now - 90}, TokenExpired, "token_expired"),
        ({"iat": now + 90}, TokenNotYetValid, "token_not_yet_valid"),
        ({"nbf": now + 90}, TokenNotYetValid, "token_not_yet_valid"),
    ]
    for skewed, error_type, code in beyond:
        refused = _refusal(verifier, _encoded_for(verifier, {**_valid_payload(), **skewed}))
        assert (type(refused), refused.code) == (error_type, code), skewed


def test_token_signed_with_another_secret_is_rejected(codec: JwtCodec) -> None:
    forged = JwtCodec(OTHER_SECRET).issue(
        "alice", token_type=TokenType.USER, audience=AUDIENCE, ttl=timedelta(minutes=5)
    )
    refused = _refusal(codec, forged)
    assert (type(refused), refused.code) == (TokenSignatureInvalid, "token_signature_invalid")


def test_tampered_payload_is_rejected(codec: JwtCodec) -> None:
    token = codec.issue("alice", token_type=TokenType.USER, audience=AUDIENCE, ttl=timedelta(minutes=5))
    header, _, signature = token.split(".")
    elevated = {**_valid_payload(), "sub": "admin"}
    refused = _refusal(codec, f"{header}.{_b64(elevated)}.{signature}")
    assert (type(refused), refused.code) == (TokenSignatureInvalid, "token_signature_invalid")


@pytest.mark.parametrize("alg", ["none", "None", "NONE"])
def test_unsigned_alg_none_token_is_rejected(codec: JwtCodec, alg: str) -> None:
    unsigned = f"{_b64({'alg': alg, 'typ': 'JWT'})}.{_b64(_valid_payload())}."
    refused = _refusal(codec, unsigned)
    assert (type(refused), refused.code) == (TokenAlgorithmRejected, "token_algorithm_rejected")


def test_other_hmac_algorithm_is_rejected(codec: JwtCodec) -> None:
    token = jwt.encode(_valid_payload(), SECRET, algorithm="HS512")
    refused = _refusal(codec, token)
    assert (type(refused), refused.code) == (TokenAlgorithmRejected, "token_algorithm_rejected")


def test_a_token_ops_signed_does_not_pass_where_the_shared_secret_is_expected(codec: JwtCodec) -> None:
    refused = _refusal(codec, _signed_by(OPS_KEY))
    assert (type(refused), refused.code) == (TokenAlgorithmRejected, "token_algorithm_rejected")


@pytest.mark.parametrize("claim", ["exp", "iat", "aud", "sub", "typ"])
def test_token_missing_a_required_claim_is_rejected_naming_the_claim(codec: JwtCodec, claim: str) -> None:
    payload = _valid_payload()
    del payload[claim]
    refused = _refusal(codec, jwt.encode(payload, SECRET, algorithm="HS256"))
    assert (type(refused), refused.code, str(refused)) == (
        TokenClaimMissing,
        "token_claim_missing",
        f"token lacks the {claim!r} claim",
    )


@pytest.mark.parametrize("audience", ["sstools-convo", "sstools", "SSTOOLS-OPS", ""])
def test_token_for_another_audience_is_rejected(codec: JwtCodec, audience: str) -> None:
    token = jwt.encode({**_valid_payload(), "aud": audience}, SECRET, algorithm="HS256")
    refused = _refusal(codec, token)
    # An empty audience is no audience at all.
    expected = (
        (TokenClaimMissing, "token_claim_missing")
        if audience == ""
        else (TokenAudienceInvalid, "token_audience_invalid")
    )
    assert (type(refused), refused.code) == expected


def test_audience_list_is_not_accepted_in_place_of_one_audience(codec: JwtCodec) -> None:
    token = jwt.encode({**_valid_payload(), "aud": [AUDIENCE, "other"]}, SECRET, algorithm="HS256")
    refused = _refusal(codec, token)
    assert (type(refused), refused.code) == (TokenAudienceInvalid, "token_audience_invalid")


@pytest.mark.parametrize("given", list(TokenType))
@pytest.mark.parametrize("expected", list(TokenType))
def test_a_token_passes_only_as_the_kind_it_was_issued_as(
    codec: JwtCodec, given: TokenType, expected: TokenType
) -> None:
    token = codec.issue("agent", token_type=given, audience=AUDIENCE, ttl=timedelta(minutes=5))
    if given is expected:
        assert codec.verify(token, audience=AUDIENCE, token_type=expected).token_type is given
    else:
        refused = _refusal(codec, token, expected)
        assert (type(refused), refused.code) == (TokenTypeInvalid, "token_type_invalid")


def test_each_refusal_names_what_it_refused(codec: JwtCodec) -> None:
    """The message goes to the caller as the 401's ``message``: it names the algorithm, key,
    audience or kind that was refused, which the code alone does not."""
    stranger = SigningKey.generate()
    trusting_ops = PublicKeyCodec(_trusting(OPS_KEY))
    no_alg = f"{_b64({'typ': 'JWT'})}.{_b64(_valid_payload())}.c2ln"
    cases: list[tuple[JwtCodec | PublicKeyCodec, str, TokenType, type[TokenError], str, str]] = [
        (
            codec,
            jwt.encode(_valid_payload(), SECRET, algorithm="HS512"),
            TokenType.USER,
            TokenAlgorithmRejected,
            "token_algorithm_rejected",
            "algorithm 'HS512' is not accepted",
        ),
        (
            codec,
            no_alg,
            TokenType.USER,
            TokenAlgorithmRejected,
            "token_algorithm_rejected",
            "algorithm None is not accepted",
        ),
        (
            trusting_ops,
            _signed_by(stranger),
            TokenType.USER,
            TokenKeyUnknown,
            "token_key_unknown",
            f"token signed with a key not trusted here (kid {stranger.kid!r})",
        ),
        (
            trusting_ops,
            jwt.encode(_valid_payload(), OPS_KEY.private_key, algorithm="EdDSA"),
            TokenType.USER,
            TokenKeyUnknown,
            "token_key_unknown",
            "token signed with a key not trusted here (kid None)",
        ),
        (
            codec,
            jwt.encode({**_valid_payload(), "aud": "sstools-convo"}, SECRET, algorithm="HS256"),
            TokenType.USER,
            TokenAudienceInvalid,
            "token_audience_invalid",
            "token is not meant for 'sstools-ops'",
        ),
        (
            codec,
            jwt.encode(_valid_payload(), SECRET, algorithm="HS256"),
            TokenType.CONFIRMATION,
            TokenTypeInvalid,
            "token_type_invalid",
            "expected a confirmation token, got 'user'",
        ),
    ]
    for verifier, token, token_type, kind, code, message in cases:
        refused = _refusal(verifier, token, token_type)
        assert (type(refused), refused.code, str(refused)) == (kind, code, message)


def _signed_payload(payload: bytes) -> str:
    """A correctly signed token whose payload is the given bytes, whatever they are."""
    return jwt.api_jws.encode(payload, SECRET, algorithm="HS256")


_GOOD = jwt.encode(_valid_payload(), SECRET, algorithm="HS256")
_HEADER, _PAYLOAD, _SIGNATURE = _GOOD.split(".")


@pytest.mark.parametrize(
    "garbage",
    [
        "",
        "abc",
        "a.b",
        "a.b.c",
        "Bearer x.y.z",
        f"Bearer {_GOOD}",
        f"{_GOOD}.extra",  # four segments
        f"{_HEADER}==.{_PAYLOAD}.{_SIGNATURE}",  # base64url in a JWT carries no padding
        f"{base64.urlsafe_b64encode(b'not json').decode()}.{_PAYLOAD}.{_SIGNATURE}",
        f"{_b64([1])}.{_PAYLOAD}.{_SIGNATURE}",  # a header that is no object
        f"{_HEADER}.{_PAYLOAD}.!!!",
        _signed_payload(b"not json"),
        _signed_payload(b"[1]"),
    ],
)
def test_malformed_token_gets_a_typed_error(codec: JwtCodec, garbage: str) -> None:
    refused = _refusal(codec, garbage)
    assert (type(refused), refused.code) == (TokenMalformed, "token_malformed")


@pytest.mark.parametrize("claim", [{"exp": "later"}, {"iat": "earlier"}, {"nbf": "soon"}, {"sub": 42}])
def test_a_claim_of_the_wrong_type_is_malformed(codec: JwtCodec, claim: dict[str, object]) -> None:
    # signed now, so that only the one claim is wrong: a token made when the tests were collected
    # has expired by the time a worker runs this late in the suite
    token = jwt.encode({**_valid_payload(), **claim}, SECRET, algorithm="HS256")
    refused = _refusal(codec, token)
    assert (type(refused), refused.code) == (TokenMalformed, "token_malformed")


def test_a_token_cut_short_of_its_signature_is_refused_as_unsigned(codec: JwtCodec) -> None:
    refused = _refusal(codec, f"{_HEADER}.{_PAYLOAD}.")
    assert (type(refused), refused.code) == (TokenSignatureInvalid, "token_signature_invalid")


@pytest.mark.parametrize(
    ("secret", "accepted"), [("s" * 31, False), ("s" * 32, True), ("ж" * 16, True), ("ж" * 15, False)]
)
def test_a_shared_secret_needs_32_bytes_counted_as_utf8(secret: str, accepted: bool) -> None:
    if accepted:
        token = JwtCodec(secret).issue(
            "alice", token_type=TokenType.USER, audience=AUDIENCE, ttl=timedelta(minutes=5)
        )
        assert jwt.decode(token, secret.encode(), algorithms=["HS256"], audience=AUDIENCE)["sub"] == "alice"
    else:
        with pytest.raises(ValueError, match=_whole("JWT secret must be at least 32 bytes")):
            JwtCodec(secret)


def test_a_token_ops_signs_verifies_with_its_public_key_alone() -> None:
    token = _signed_by(OPS_KEY)
    assert jwt.get_unverified_header(token) == {"alg": "EdDSA", "typ": "JWT", "kid": OPS_KEY.kid}
    verifier = PublicKeyCodec(parse_public_keys(OPS_KEY.public_pem()))  # what agent and convo hold
    assert verifier.verify(token, audience=AUDIENCE, token_type=TokenType.USER).subject == "alice"
    with pytest.raises(RuntimeError) as refused:
        verifier.issue("mallory", token_type=TokenType.USER, audience=AUDIENCE, ttl=timedelta(minutes=5))
    # No code here: a service misconfigured to issue; the message is what its operator reads.
    assert (
        str(refused.value) == "this service holds no private key: it verifies tokens, it does not issue them"
    )


def test_a_persons_token_for_one_superset_is_no_token_for_another() -> None:
    codec = PublicKeyCodec(_trusting(OPS_KEY), OPS_KEY)
    assert (superset_audience("dev"), superset_audience("prod")) == ("superset:dev", "superset:prod")
    token = codec.issue(
        "alice", token_type=TokenType.SUPERSET, audience=superset_audience("dev"), ttl=timedelta(minutes=1)
    )
    claims = jwt.decode(token, options={"verify_signature": False})
    assert (claims["aud"], claims["typ"]) == ("superset:dev", "superset")  # what Superset's hook reads
    assert codec.verify(token, audience="superset:dev", token_type=TokenType.SUPERSET).subject == "alice"
    with pytest.raises(TokenAudienceInvalid):
        codec.verify(token, audience="superset:prod", token_type=TokenType.SUPERSET)


def test_during_a_rotation_both_keys_verify_and_afterwards_only_the_new_one() -> None:
    old, new = _signed_by(OPS_KEY), _signed_by(NEXT_KEY)
    during = PublicKeyCodec(_trusting(OPS_KEY, NEXT_KEY), NEXT_KEY)
    for token in (old, new):
        assert during.verify(token, audience=AUDIENCE, token_type=TokenType.USER).subject == "alice"
    after = PublicKeyCodec(_trusting(NEXT_KEY), NEXT_KEY)
    assert after.verify(new, audience=AUDIENCE, token_type=TokenType.USER).subject == "alice"
    refused = _refusal(after, old)
    assert (type(refused), refused.code) == (TokenKeyUnknown, "token_key_unknown")


def test_a_token_of_a_key_not_trusted_is_refused_whatever_kid_it_names() -> None:
    verifier = PublicKeyCodec(_trusting(OPS_KEY))
    stranger = SigningKey.generate()
    refused = _refusal(verifier, _signed_by(stranger))
    assert (type(refused), refused.code) == (TokenKeyUnknown, "token_key_unknown")
    # A key the verifier does not know is also a signature it cannot accept.
    assert isinstance(refused, TokenSignatureInvalid)
    stranger.kid = OPS_KEY.kid  # copied from a real token's header
    refused = _refusal(verifier, _signed_by(stranger))
    assert (type(refused), refused.code) == (TokenSignatureInvalid, "token_signature_invalid")
    without_kid = jwt.encode(_valid_payload(), stranger.private_key, algorithm="EdDSA")
    refused = _refusal(verifier, without_kid)
    assert (type(refused), refused.code) == (TokenKeyUnknown, "token_key_unknown")


@pytest.mark.parametrize("alg", ["HS256", "none", "RS256", "ES256"])
def test_only_eddsa_is_accepted_for_ops_tokens_even_keyed_with_the_public_key(alg: str) -> None:
    """The algorithm-confusion attack: an HS256 token whose HMAC key is the public key's PEM."""
    header = _b64({"alg": alg, "typ": "JWT", "kid": OPS_KEY.kid})
    signed = f"{header}.{_b64(_valid_payload())}"
    mac = hmac.new(OPS_KEY.public_pem().encode(), signed.encode(), hashlib.sha256).digest()
    forged = f"{signed}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"
    refused = _refusal(PublicKeyCodec(_trusting(OPS_KEY)), forged)
    assert (type(refused), refused.code) == (TokenAlgorithmRejected, "token_algorithm_rejected")


def test_ops_refuses_to_sign_with_a_key_the_others_would_not_trust() -> None:
    untrusted = (
        f"the signing key's public half (kid {NEXT_KEY.kid}) is not among the trusted public keys: "
        "the other services would refuse every token it signs"
    )
    with pytest.raises(ValueError, match=_whole(untrusted)):
        PublicKeyCodec(_trusting(OPS_KEY), NEXT_KEY)


# RFC 8037, appendix A.1-A.3: an Ed25519 key, its public "x" and its RFC 7638 thumbprint.
RFC8037_D = "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"
RFC8037_X = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
RFC8037_THUMBPRINT = "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"


def _rfc8037_key() -> SigningKey:
    return SigningKey(Ed25519PrivateKey.from_private_bytes(base64.urlsafe_b64decode(RFC8037_D + "=")))


def test_a_key_is_named_by_its_rfc7638_thumbprint_and_published_as_the_rfc_writes_it() -> None:
    key = _rfc8037_key()
    assert key.kid == RFC8037_THUMBPRINT
    assert jwks([key.public_key]) == {
        "keys": [
            {
                "kty": "OKP",
                "crv": "Ed25519",
                "x": RFC8037_X,
                "kid": RFC8037_THUMBPRINT,
                "alg": "EdDSA",
                "use": "sig",
            }
        ]
    }
    # The token's header names the key by the same id.
    token = PublicKeyCodec({key.kid: key.public_key}, key).issue(
        "alice", token_type=TokenType.USER, audience=AUDIENCE, ttl=timedelta(minutes=5)
    )
    assert jwt.get_unverified_header(token)["kid"] == RFC8037_THUMBPRINT


def test_the_jwks_document_names_each_key_as_tokens_do() -> None:
    document = jwks(_trusting(OPS_KEY, NEXT_KEY).values())
    keys = {key["kid"]: key for key in document["keys"]}
    assert set(keys) == {OPS_KEY.kid, NEXT_KEY.kid}
    published = jwt.PyJWK(keys[OPS_KEY.kid])  # as any JOSE library reads it
    token = _signed_by(OPS_KEY)
    assert jwt.decode(token, published.key, algorithms=["EdDSA"], audience=AUDIENCE)["sub"] == "alice"


def _rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _cryptography_refusal(load: Callable[[], object]) -> str:
    """What cryptography itself says when it cannot load a key (an independent expectation)."""
    try:
        load()
    except ValueError as error:
        return str(error)
    raise AssertionError("cryptography loaded the key")


# These refusals stop a service at start-up, with no code: the message tells its operator
# which of them it is.


def test_a_pem_bundle_is_read_key_by_key_and_bad_keys_are_named() -> None:
    bundle = f"rotation in progress:\n{OPS_KEY.public_pem()}\n{NEXT_KEY.public_pem()}"
    assert set(parse_public_keys(bundle)) == {OPS_KEY.kid, NEXT_KEY.kid}
    assert set(parse_public_keys(_rfc8037_key().public_pem())) == {RFC8037_THUMBPRINT}
    not_base64 = "-----BEGIN PUBLIC KEY-----\nnot base64\n-----END PUBLIC KEY-----"
    unreadable = _cryptography_refusal(lambda: serialization.load_pem_public_key(not_base64.encode()))
    rsa_public = (
        _rsa_key()
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    for text, reason in (
        ("", "no PEM public key (-----BEGIN PUBLIC KEY-----) found"),
        (not_base64, f"not a PEM public key: {unreadable}"),
        (rsa_public, "every public key must be an Ed25519 key"),
        (f"{OPS_KEY.public_pem()}\n{rsa_public}", "every public key must be an Ed25519 key"),
    ):
        with pytest.raises(ValueError, match=_whole(reason)):
            parse_public_keys(text)


def test_the_signing_key_is_read_from_pkcs8_pem_and_must_be_ed25519() -> None:
    assert SigningKey.from_pem(OPS_KEY.private_pem()).kid == OPS_KEY.kid
    public_pem = OPS_KEY.public_pem().encode()
    unreadable = _cryptography_refusal(lambda: serialization.load_pem_private_key(public_pem, password=None))
    with pytest.raises(ValueError, match=_whole(f"not a PEM private key: {unreadable}")):
        SigningKey.from_pem(OPS_KEY.public_pem())
    rsa_private = _rsa_key().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    with pytest.raises(ValueError, match=_whole("the signing key must be an Ed25519 key")):
        SigningKey.from_pem(rsa_private.decode())
