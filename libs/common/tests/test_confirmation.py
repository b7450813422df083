"""The confirmation token the agent's gate signs for one confirmed call and ops checks: what it
carries, the request fingerprint it binds, and every token ``verify`` must refuse."""

import hashlib
from datetime import UTC, datetime, timedelta

import pytest

from sstools.common.confirmation import Confirmation, ConfirmationCodec, request_fingerprint
from sstools.common.tokens import JwtCodec, TokenError, TokenType

SECRET = "confirmation-secret-" + "k" * 32
OTHER_SECRET = "confirmation-secret-" + "x" * 32
# The wire values ops and the agent agree on, written out rather than imported: a change to
# them is a change of the protocol, and must fail here.
WIRE_AUDIENCE = "sstools-ops-confirmation"
WIRE_TTL = timedelta(seconds=120)
CONFIRMED = Confirmation("anna", "create_dashboard", "call-7", "f" * 64)


def _issued(
    claims: dict[str, str],
    *,
    audience: str = WIRE_AUDIENCE,
    token_type: TokenType = TokenType.CONFIRMATION,
    now: datetime | None = None,
) -> str:
    """A token issued by the shared-secret codec itself, its claims and kind chosen by the test."""
    return JwtCodec(SECRET).issue(
        "anna", token_type=token_type, audience=audience, ttl=WIRE_TTL, claims=claims, now=now
    )


def _refusal(token: str) -> str:
    with pytest.raises(TokenError) as refused:
        ConfirmationCodec(SECRET).verify(token)
    return refused.value.code


def test_a_signed_confirmation_verifies_as_itself() -> None:
    codec = ConfirmationCodec(SECRET)
    assert codec.verify(codec.sign(CONFIRMED)) == CONFIRMED


def test_a_signed_confirmation_carries_the_agreed_claims_audience_and_lifetime() -> None:
    # Read with the plain codec, as any other verifier of the protocol would.
    claims = JwtCodec(SECRET).verify(
        ConfirmationCodec(SECRET).sign(CONFIRMED), audience=WIRE_AUDIENCE, token_type=TokenType.CONFIRMATION
    )
    assert claims.subject == "anna"
    assert dict(claims.extra) == {"tool": "create_dashboard", "call": "call-7", "req": "f" * 64}
    assert claims.expires_at - claims.issued_at == WIRE_TTL
    assert abs(claims.issued_at - datetime.now(UTC)) < timedelta(seconds=5)


def test_the_fingerprint_is_the_sha256_of_method_target_and_body() -> None:
    target = b"/api/v1/dashboards/?q=a%20b"
    body = b'{"title": "x"}'
    expected = hashlib.sha256(b"POST /api/v1/dashboards/?q=a%20b\n" + body).hexdigest()
    assert request_fingerprint("POST", target, body) == expected
    # the method counts as HTTP has it: upper case, whatever the caller wrote
    assert request_fingerprint("post", target, body) == expected


def test_each_part_of_the_request_changes_the_fingerprint() -> None:
    base = request_fingerprint("POST", b"/api/v1/dashboards/?q=1", b"{}")
    variants = {
        "method": request_fingerprint("PUT", b"/api/v1/dashboards/?q=1", b"{}"),
        "path": request_fingerprint("POST", b"/api/v1/datasets/?q=1", b"{}"),
        "query": request_fingerprint("POST", b"/api/v1/dashboards/?q=2", b"{}"),
        "body": request_fingerprint("POST", b"/api/v1/dashboards/?q=1", b"{ }"),
    }
    assert {part: fingerprint == base for part, fingerprint in variants.items()} == {
        "method": False,
        "path": False,
        "query": False,
        "body": False,
    }


def test_a_token_for_another_audience_is_refused() -> None:
    claims = {"tool": "t", "call": "c", "req": "r"}
    assert _refusal(_issued(claims, audience="sstools-ops")) == "token_audience_invalid"


def test_an_access_token_of_the_same_secret_is_not_a_confirmation() -> None:
    claims = {"tool": "t", "call": "c", "req": "r"}
    assert _refusal(_issued(claims, token_type=TokenType.USER)) == "token_type_invalid"


def test_a_token_signed_with_another_secret_is_refused() -> None:
    forged = ConfirmationCodec(OTHER_SECRET).sign(CONFIRMED)
    assert _refusal(forged) == "token_signature_invalid"


def test_an_expired_confirmation_is_refused() -> None:
    claims = {"tool": "t", "call": "c", "req": "r"}
    issued_long_ago = datetime.now(UTC) - timedelta(minutes=10)
    assert _refusal(_issued(claims, now=issued_long_ago)) == "token_expired"


@pytest.mark.parametrize("missing", ["tool", "call", "req"])
def test_a_confirmation_lacking_a_claim_is_refused(missing: str) -> None:
    claims = {name: "x" for name in ("tool", "call", "req") if name != missing}
    assert _refusal(_issued(claims)) == "token_claim_missing"
