"""JWT issue and verification, with ``exp``, ``iat``, ``aud`` and ``typ`` required.

Four kinds of token: ``user`` tokens come from the browser and authorise an operation;
``service`` tokens authenticate one service to another; ``superset`` tokens let ops act in one
Superset environment as a person for a minute (Superset's side checks them against ops' JWKS) —
all three signed by ops alone, with its
private Ed25519 key (EdDSA), and verified by every service with public keys only
(:class:`PublicKeyCodec`), each named by a ``kid`` so that two keys work side by side while one
replaces the other; ``confirmation`` tokens carry a person's confirmation of one call from the
agent's gate to ops (:mod:`sstools.common.confirmation`), under an HS256 secret of their own
(:class:`JwtCodec`). A verifier always names the kind it expects, so no kind can ever pass
where another is needed, and accepts only its own algorithm.
Every failure is a ``TokenError`` subclass with a stable ``code`` callers can put in a response.
"""

import base64
import hashlib
import json
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

SHARED_ALGORITHM = "HS256"
SIGNED_ALGORITHM = "EdDSA"
# The audience of user tokens: every service that acts for the browser's user accepts it.
USER_AUDIENCE = "sstools"
# The audience of service tokens: every internal service accepts them (ops' REST API, convo's,
# the router's and docparse's gRPC), since their one caller, the agent, reaches them all.
SERVICE_AUDIENCE = "sstools-services"
# The audience of a person's token for one Superset environment: a token for dev is no use in prod.
SUPERSET_AUDIENCE_PREFIX = "superset:"

# RFC 7518 §3.2: an HS256 key must be at least as long as the hash output.
MIN_SECRET_BYTES = 32
_REQUIRED_CLAIMS = ["exp", "iat", "aud", "sub", "typ"]


class TokenType(StrEnum):
    USER = "user"
    SERVICE = "service"
    CONFIRMATION = "confirmation"
    SUPERSET = "superset"


def superset_audience(env_id: str) -> str:
    return SUPERSET_AUDIENCE_PREFIX + env_id


class TokenError(Exception):
    code = "token_invalid"


class TokenMalformed(TokenError):
    code = "token_malformed"


class TokenAlgorithmRejected(TokenError):
    code = "token_algorithm_rejected"


class TokenSignatureInvalid(TokenError):
    code = "token_signature_invalid"


class TokenKeyUnknown(TokenSignatureInvalid):
    code = "token_key_unknown"


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


class _Codec:
    """Issue and verify, given which key signs and which key checks a token."""

    algorithm: str

    def __init__(self, leeway_seconds: float) -> None:
        self._leeway = leeway_seconds

    def _signing(self) -> tuple[Any, dict[str, str]]:
        """The key that signs, and the headers that name it."""
        raise NotImplementedError

    def _verifying(self, header: Mapping[str, Any]) -> Any:
        """The key that checks a token with this header (``TokenKeyUnknown`` if none)."""
        raise NotImplementedError

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
        key, headers = self._signing()
        return jwt.encode(payload, key, algorithm=self.algorithm, headers=headers or None)

    def verify(self, token: str, *, audience: str, token_type: TokenType) -> TokenClaims:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.DecodeError as error:
            raise TokenMalformed(f"not a JWT: {error}") from None
        if header.get("alg") != self.algorithm:
            raise TokenAlgorithmRejected(f"algorithm {header.get('alg')!r} is not accepted")
        key = self._verifying(header)
        try:
            payload = jwt.decode(
                token,
                key,
                algorithms=[self.algorithm],
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


class JwtCodec(_Codec):
    """Issues and verifies tokens signed with one shared secret (HS256)."""

    algorithm = SHARED_ALGORITHM

    def __init__(self, secret: str, *, leeway_seconds: float = 0.0) -> None:
        if len(secret.encode()) < MIN_SECRET_BYTES:
            raise ValueError(f"JWT secret must be at least {MIN_SECRET_BYTES} bytes")
        super().__init__(leeway_seconds)
        self._secret = secret

    def _signing(self) -> tuple[Any, dict[str, str]]:
        return self._secret, {}

    def _verifying(self, header: Mapping[str, Any]) -> Any:
        return self._secret


def key_id(public_key: Ed25519PublicKey) -> str:
    """The key's RFC 7638 JWK thumbprint: the same key gets the same id everywhere, unasked."""
    members = {"crv": "Ed25519", "kty": "OKP", "x": _x(public_key)}
    digest = hashlib.sha256(json.dumps(members, separators=(",", ":"), sort_keys=True).encode()).digest()
    return _b64(digest)


class SigningKey:
    """Ops' private Ed25519 key, from PEM (PKCS#8, as ``openssl genpkey -algorithm ed25519`` writes)."""

    def __init__(self, private_key: Ed25519PrivateKey) -> None:
        self.private_key = private_key
        self.public_key = private_key.public_key()
        self.kid = key_id(self.public_key)

    @classmethod
    def from_pem(cls, pem: str) -> "SigningKey":
        try:
            key = serialization.load_pem_private_key(pem.encode(), password=None)
        except (ValueError, TypeError) as error:
            raise ValueError(f"not a PEM private key: {error}") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError("the signing key must be an Ed25519 key")
        return cls(key)

    @classmethod
    def generate(cls) -> "SigningKey":
        return cls(Ed25519PrivateKey.generate())

    def private_pem(self) -> str:
        return self.private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()

    def public_pem(self) -> str:
        return self.public_key.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ).decode()


_PEM_BLOCK = re.compile(r"-----BEGIN PUBLIC KEY-----.+?-----END PUBLIC KEY-----", re.DOTALL)


def parse_public_keys(text: str) -> dict[str, Ed25519PublicKey]:
    """Ed25519 public keys in PEM, one after another, by key id; ValueError when there is none,
    or one is not such a key."""
    keys: dict[str, Ed25519PublicKey] = {}
    for block in _PEM_BLOCK.findall(text):
        try:
            key = serialization.load_pem_public_key(block.encode())
        except ValueError as error:
            raise ValueError(f"not a PEM public key: {error}") from None
        if not isinstance(key, Ed25519PublicKey):
            raise ValueError("every public key must be an Ed25519 key")
        keys[key_id(key)] = key
    if not keys:
        raise ValueError("no PEM public key (-----BEGIN PUBLIC KEY-----) found")
    return keys


def jwks(keys: Iterable[Ed25519PublicKey]) -> dict[str, Any]:
    """The keys as a JWKS document (RFC 7517), for anyone who verifies ops' tokens."""
    return {
        "keys": [
            {
                "kty": "OKP",
                "crv": "Ed25519",
                "x": _x(key),
                "kid": key_id(key),
                "alg": SIGNED_ALGORITHM,
                "use": "sig",
            }
            for key in keys
        ]
    }


class PublicKeyCodec(_Codec):
    """Verifies EdDSA tokens with the public keys it trusts, chosen by ``kid``; issues them only
    where it holds the private key (ops)."""

    algorithm = SIGNED_ALGORITHM

    def __init__(
        self,
        trusted: Mapping[str, Ed25519PublicKey],
        signing: SigningKey | None = None,
        *,
        leeway_seconds: float = 0.0,
    ) -> None:
        super().__init__(leeway_seconds)
        if signing is not None and signing.kid not in trusted:
            raise ValueError(
                f"the signing key's public half (kid {signing.kid}) is not among the trusted public keys: "
                "the other services would refuse every token it signs"
            )
        self.trusted = dict(trusted)
        self._signing_key = signing

    def _signing(self) -> tuple[Any, dict[str, str]]:
        if self._signing_key is None:
            raise RuntimeError(
                "this service holds no private key: it verifies tokens, it does not issue them"
            )
        return self._signing_key.private_key, {"kid": self._signing_key.kid}

    def _verifying(self, header: Mapping[str, Any]) -> Any:
        key = self.trusted.get(str(header.get("kid", "")))
        if key is None:
            raise TokenKeyUnknown(f"token signed with a key not trusted here (kid {header.get('kid')!r})")
        return key


def _x(public_key: Ed25519PublicKey) -> str:
    return _b64(public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
