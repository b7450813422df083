"""JWT issue and verification: HS256 only, with ``exp``, ``iat``, ``aud`` and ``typ`` required.

Three kinds of token: ``user`` tokens come from the browser and authorise an operation;
``service`` tokens authenticate one service to another; ``confirmation`` tokens carry a person's
confirmation of one call from the agent's gate to ops (:mod:`sstools.common.confirmation`, under
a secret of their own). A verifier always names the kind it expects, so no kind can ever pass
where another is needed.
Every failure is a ``TokenError`` subclass with a stable ``code`` callers can put in a response.
"""

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

import jwt

ALGORITHM = "HS256"
# The audience of user tokens: every service that acts for the browser's user accepts it.
USER_AUDIENCE = "sstools"
# RFC 7518 §3.2: an HS256 key must be at least as long as the hash output.
MIN_SECRET_BYTES = 32
_REQUIRED_CLAIMS = ["exp", "iat", "aud", "sub", "typ"]


class TokenType(StrEnum):
    USER = "user"
    SERVICE = "service"
    CONFIRMATION = "confirmation"


class TokenError(Exception):
    code = "token_invalid"


class TokenMalformed(TokenError):
    code = "token_malformed"


class TokenAlgorithmRejected(TokenError):
    code = "token_algorithm_rejected"


class TokenSignatureInvalid(TokenError):
    code = "token_signature_invalid"


class TokenExpired(TokenError):
    code = "token_expired"


class TokenNotYetValid(TokenError):
    code = "token_not_yet_valid"


class TokenClaimMissing(TokenError):
    code = "token_claim_missing"


class TokenAudienceInvalid(TokenError):
    code = "token_audience_invalid"


class TokenTypeInvalid(TokenError):
    code = "token_type_invalid"


@dataclass(frozen=True)
class TokenClaims:
    subject: str
    token_type: TokenType
    audience: str
    issued_at: datetime
    expires_at: datetime
    token_id: str
    extra: Mapping[str, Any] = field(default_factory=dict)


class JwtCodec:
    """Issues and verifies tokens signed with one shared secret."""

    def __init__(self, secret: str, *, leeway_seconds: float = 0.0) -> None:
        if len(secret.encode()) < MIN_SECRET_BYTES:
            raise ValueError(f"JWT secret must be at least {MIN_SECRET_BYTES} bytes")
        self._secret = secret
        self._leeway = leeway_seconds

    def issue(
        self,
        subject: str,
        *,
        token_type: TokenType,
        audience: str,
        ttl: timedelta,
        claims: Mapping[str, Any] | None = None,
        now: datetime | None = None,
    ) -> str:
        issued_at = now or datetime.now(UTC)
        payload: dict[str, Any] = dict(claims or {})
        payload.update(
            sub=subject,
            typ=token_type.value,
            aud=audience,
            iat=issued_at,
            exp=issued_at + ttl,
            jti=uuid.uuid4().hex,
        )
        return jwt.encode(payload, self._secret, algorithm=ALGORITHM)

    def verify(self, token: str, *, audience: str, token_type: TokenType) -> TokenClaims:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.DecodeError as error:
            raise TokenMalformed(f"not a JWT: {error}") from None
        if header.get("alg") != ALGORITHM:
            raise TokenAlgorithmRejected(f"algorithm {header.get('alg')!r} is not accepted")
        try:
            payload = jwt.decode(
                token,
                self._secret,
                algorithms=[ALGORITHM],
                audience=audience,
                leeway=self._leeway,
                options={"require": _REQUIRED_CLAIMS, "strict_aud": True},
            )
        except jwt.ExpiredSignatureError:
            raise TokenExpired("token has expired") from None
        except jwt.ImmatureSignatureError:
            raise TokenNotYetValid("token is not valid yet") from None
        except jwt.MissingRequiredClaimError as error:
            raise TokenClaimMissing(f"token lacks the {error.claim!r} claim") from None
        except (jwt.InvalidAudienceError, jwt.InvalidIssuerError):
            raise TokenAudienceInvalid(f"token is not meant for {audience!r}") from None
        except jwt.InvalidSignatureError:
            raise TokenSignatureInvalid("token signature does not match") from None
        except jwt.InvalidTokenError as error:
            raise TokenMalformed(f"token rejected: {error}") from None
        if payload["typ"] != token_type.value:
            raise TokenTypeInvalid(f"expected a {token_type.value} token, got {payload['typ']!r}")
        standard = {"sub", "typ", "aud", "iat", "exp", "jti", "nbf"}
        return TokenClaims(
            subject=str(payload["sub"]),
            token_type=token_type,
            audience=audience,
            issued_at=datetime.fromtimestamp(payload["iat"], UTC),
            expires_at=datetime.fromtimestamp(payload["exp"], UTC),
            token_id=str(payload.get("jti", "")),
            extra={key: value for key, value in payload.items() if key not in standard},
        )
