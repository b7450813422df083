"""Single sign-on over OpenID Connect: the relying party's side of the authorization-code flow
with PKCE, as plain logic (the routes are :mod:`sstools.ops.api.routes.single_sign_on`, the
one-time rows :mod:`sstools.ops.store.single_sign_on`).

- Discovery: ``{issuer}/.well-known/openid-configuration``, kept an hour; the issuer it names must
  be exactly the configured one (OpenID Connect Discovery §4.3), or nothing is trusted from it.
- Keys: the provider's JWKS, kept an hour and fetched again once when an ID token names a ``kid``
  it does not hold (the provider rotated its key), at most every few seconds.
- The authorization request carries ``state``, ``nonce`` and an S256 ``code_challenge``; the code
  is exchanged with ``client_secret_basic`` and the ``code_verifier``.
- The ID token is believed only when signed by a key of that JWKS with an asymmetric algorithm
  the provider lists (RS256, ES256 or EdDSA; never ``none`` nor a shared-secret HS*), issued by
  the issuer, for this client (``azp`` too when it names several audiences), current (a minute's
  leeway on ``exp`` and ``iat``), and carrying the nonce this sign-in stored.
- Then who it is: the issuer and the ``sub`` the provider gives the person (what the account is
  found by), the username claim (``OPS_OIDC_USERNAME_CLAIM``: the name a first sign-in's account
  gets, held to the rule accounts have: 1-200 characters, no whitespace, no "/"), and the groups
  claim mapped to a role, the highest one winning.

Every refusal is an :class:`OidcError` whose ``code`` is stable: the page maps codes to text.
"""

import base64
import hashlib
import hmac
import json
import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote, urlencode, urlsplit

import httpx
import jwt

from sstools.common.catalogue import Role
from sstools.ops.store.users import ProviderSubject

_log = logging.getLogger(__name__)

# Asymmetric algorithms an ID token may be signed with (and the provider must list it).
ALLOWED_ALGORITHMS = ("RS256", "ES256", "EdDSA")
# Clock difference tolerated between the provider and ops on exp and iat.
LEEWAY_SECONDS = 60
DISCOVERY_TTL_SECONDS = 3600.0
JWKS_TTL_SECONDS = 3600.0
# Shortest time between two JWKS fetches caused by unknown kids (forged tokens must not make ops
# hammer the provider).
JWKS_REFETCH_GAP_SECONDS = 10.0
# The same rule as accounts (the admin API, `sstools-ops users`).
USERNAME_MAX_CHARS = 200
# OpenID Connect Core §2: a sub is at most 255 ASCII characters.
SUBJECT_MAX_CHARS = 255
_USERNAME = re.compile(r"^[^\s/]+$")
# Where the page lives: the only place a sign-in may send the browser back to.
RETURN_PREFIX = "/agent"
_RETURN_TO_MAX_CHARS = 2000


class OidcError(Exception):
    """A single sign-on refused or impossible; ``code`` is stable, ``detail`` goes to the audit
    trail (never to the browser)."""

    code = "oidc_error"

    def __init__(self, message: str, *, username: str = "", detail: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.username = username
        self.detail: dict[str, Any] = dict(detail or {})


class OidcUnavailable(OidcError):
    """The provider could not be reached, or answered what a provider must not."""

    code = "oidc_unavailable"


class OidcStateUnknown(OidcError):
    """A callback for no sign-in this browser started here (unknown, used, expired)."""

    code = "oidc_state_unknown"


class OidcTokenInvalid(OidcError):
    """The code or the ID token did not pass."""

    code = "oidc_token_invalid"


class OidcNoUsername(OidcError):
    """The ID token names nobody ops can have as a user."""

    code = "oidc_no_username"


class OidcUnmapped(OidcError):
    """The person is in no group the role mapping names, and there is no default role."""

    code = "oidc_unmapped"


class OidcUserDisabled(OidcError):
    """The person's ops account is disabled: single sign-on does not enable it again."""

    code = "oidc_user_disabled"


class OidcNameTaken(OidcError):
    """The name the provider gives belongs to an account this subject is not linked to (a local
    account, or another subject's): an admin links them, or the provider's name changes."""

    code = "oidc_name_taken"


class OidcLastAdmin(OidcError):
    """The sign-in would demote the last active admin: refused, so ops keeps an admin."""

    code = "oidc_last_admin"


class OidcDenied(OidcError):
    """The provider sent the browser back with ``error=...`` (access_denied, login_required...)."""

    code = "oidc_denied"


def parse_role_mapping(text: str) -> dict[str, Role]:
    """``{"group": "role", ...}`` from JSON; ValueError with the reason otherwise."""
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError as error:
        raise ValueError(f"the role mapping is not JSON: {error}") from None
    if not isinstance(value, dict):
        raise ValueError('the role mapping must be a JSON object {"group": "role", ...}')
    roles = {role.value for role in Role}
    mapping = {}
    for group, role in value.items():
        if not group:
            raise ValueError("the role mapping names an empty group")
        if role not in roles:
            raise ValueError(
                f"the role mapping gives {group!r} the role {role!r}: not one of {sorted(roles)}"
            )
        mapping[group] = Role(role)
    return mapping


def parse_default_role(text: str) -> Role | None:
    """None for an empty value (a person in no mapped group is refused), else that role."""
    if not text:
        return None
    try:
        return Role(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a role: one of {[role.value for role in Role]}") from None


def pkce_challenge(verifier: str) -> str:
    """RFC 7636 S256: base64url(SHA-256(verifier)) without padding."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def safe_return_to(value: str | None) -> str:
    """Where the browser may go back to: a path of this origin under /agent, else /agent. No
    scheme, no "//" (another host), no backslash (browsers read it as "/"), nothing that is not
    printable ASCII."""
    if not value or len(value) > _RETURN_TO_MAX_CHARS:
        return RETURN_PREFIX
    if any(not (0x21 <= ord(character) <= 0x7E) for character in value) or "\\" in value:
        return RETURN_PREFIX
    if value.startswith("//") or "#" in value:
        return RETURN_PREFIX
    parts = urlsplit(value)
    if parts.scheme or parts.netloc:
        return RETURN_PREFIX
    path = unquote(parts.path)  # browsers read %2e%2e as ".." and %5c as "\\"
    if path != RETURN_PREFIX and not path.startswith(RETURN_PREFIX + "/"):
        return RETURN_PREFIX
    if ".." in path.split("/") or "\\" in path:
        return RETURN_PREFIX
    return value


def username_from(claims: Mapping[str, Any], claim: str) -> str:
    """The claim's value if it is a username accounts allow; :class:`OidcNoUsername` otherwise."""
    value = claims.get(claim)
    if not isinstance(value, str) or len(value) > USERNAME_MAX_CHARS or not _USERNAME.match(value):
        raise OidcNoUsername(
            f"the ID token's {claim!r} is not a user name (1-{USERNAME_MAX_CHARS} characters, "
            "no whitespace or '/')",
            detail={"claim": claim, "sub": str(claims.get("sub", ""))[:200]},
        )
    return value


def groups_from(claims: Mapping[str, Any], claim: str) -> tuple[str, ...]:
    """The claim's groups (none when it is missing); :class:`OidcTokenInvalid` for anything but a
    list of strings."""
    value = claims.get(claim)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(group, str) for group in value):
        raise OidcTokenInvalid(f"the ID token's {claim!r} is not a list of strings", detail={"claim": claim})
    return tuple(value)


def role_for(groups: tuple[str, ...], mapping: Mapping[str, Role], default: Role | None) -> Role | None:
    """The highest role a mapped group gives; ``default`` when none does (None: refused)."""
    roles = [mapping[group] for group in groups if group in mapping]
    return max(roles, key=lambda role: role.rank) if roles else default


def group_giving(role: Role, groups: tuple[str, ...], mapping: Mapping[str, Role]) -> str | None:
    """The first of ``groups`` whose mapping gives ``role``; None when none does (the default
    role gave it)."""
    return next((group for group in groups if mapping.get(group) is role), None)


@dataclass(frozen=True)
class OidcConfig:
    issuer: str
    client_id: str
    # Read at each use: a mounted secret file may be rotated under a running ops.
    client_secret: Callable[[], str] = field(repr=False)
    redirect_url: str
    scopes: str
    username_claim: str
    groups_claim: str
    role_mapping: Mapping[str, Role]
    default_role: Role | None
    provider_name: str


@dataclass(frozen=True)
class Discovery:
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    # What the provider signs ID tokens with, within ALLOWED_ALGORITHMS.
    algorithms: tuple[str, ...]

    @classmethod
    def of(cls, document: Any, issuer: str) -> "Discovery":
        if not isinstance(document, dict):
            raise OidcUnavailable("the discovery document is not a JSON object")
        if document.get("issuer") != issuer:
            raise OidcUnavailable(
                "the discovery document names another issuer",
                detail={"issuer": str(document.get("issuer"))[:200]},
            )
        endpoints = {}
        for name in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
            value = document.get(name)
            if not isinstance(value, str) or urlsplit(value).scheme not in ("http", "https"):
                raise OidcUnavailable(f"the discovery document has no usable {name}")
            endpoints[name] = value
        methods = document.get("code_challenge_methods_supported")
        if isinstance(methods, list) and "S256" not in methods:
            raise OidcUnavailable("the provider does not support PKCE with S256")
        listed = document.get("id_token_signing_alg_values_supported") or [
            "RS256"
        ]  # §3: RS256 is the default
        algorithms = tuple(alg for alg in ALLOWED_ALGORITHMS if isinstance(listed, list) and alg in listed)
        if not algorithms:
            raise OidcUnavailable(
                f"the provider signs ID tokens with none of {list(ALLOWED_ALGORITHMS)}",
                detail={"listed": str(listed)[:200]},
            )
        return cls(issuer=issuer, algorithms=algorithms, **endpoints)


@dataclass(frozen=True)
class Identity:
    """Who signed in, as ops will have them."""

    username: str
    groups: tuple[str, ...]
    role: Role
    role_group: str | None  # the group that gave the role (None: the default role)
    subject: ProviderSubject


class OidcClient:
    """One provider, as ops' single sign-on uses it."""

    def __init__(
        self,
        config: OidcConfig,
        *,
        http: httpx.AsyncClient | None = None,
        timeout: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self._http = http or httpx.AsyncClient(timeout=timeout, follow_redirects=False)
        self._clock = clock
        self._discovery: tuple[float, Discovery] | None = None
        self._jwks: tuple[float, dict[str, Any]] | None = None

    async def aclose(self) -> None:
        await self._http.aclose()

    async def discovery(self) -> Discovery:
        """The provider's endpoints, from the cache when fetched within the hour."""
        now = self._clock()
        if self._discovery is not None and now - self._discovery[0] < DISCOVERY_TTL_SECONDS:
            return self._discovery[1]
        url = f"{self.config.issuer.rstrip('/')}/.well-known/openid-configuration"
        discovery = Discovery.of(await self._get_json(url, "discovery"), self.config.issuer)
        self._discovery = (now, discovery)
        return discovery

    async def authorization_url(
        self, *, state: str, nonce: str, code_verifier: str, prompt_none: bool
    ) -> str:
        """Where the browser goes to sign in (``prompt=none``: only if the provider has a session)."""
        endpoint = (await self.discovery()).authorization_endpoint
        query = {
            "response_type": "code",
            "client_id": self.config.client_id,
            "redirect_uri": self.config.redirect_url,
            "scope": self.config.scopes,
            "state": state,
            "nonce": nonce,
            "code_challenge": pkce_challenge(code_verifier),
            "code_challenge_method": "S256",
        }
        if prompt_none:
            query["prompt"] = "none"
        return f"{endpoint}{'&' if '?' in endpoint else '?'}{urlencode(query)}"

    async def exchange(self, code: str, code_verifier: str) -> str:
        """The ID token the code is exchanged for (client_secret_basic, PKCE verifier)."""
        endpoint = (await self.discovery()).token_endpoint
        try:
            secret = self.config.client_secret()
        except (OSError, ValueError) as error:  # a secret file gone or emptied under ops
            _log.warning("no OIDC client secret", extra={"error": str(error)[:200]})
            raise OidcUnavailable("ops has no client secret for the provider") from None
        # RFC 6749 §2.3.1: both form-encoded before they are joined and base64-encoded.
        auth = httpx.BasicAuth(quote(self.config.client_id, safe=""), quote(secret, safe=""))
        data = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": self.config.redirect_url,
            "code_verifier": code_verifier,
        }
        try:
            reply = await self._http.post(
                endpoint, data=data, auth=auth, headers={"Accept": "application/json"}
            )
        except httpx.HTTPError as error:
            raise OidcUnavailable(f"the token endpoint cannot be reached: {error!r}"[:300]) from None
        body = _json_or_none(reply)
        if reply.status_code != 200:
            error_code = str(body.get("error", "")) if isinstance(body, dict) else ""
            detail = {"status": reply.status_code, "error": error_code[:100]}
            if reply.status_code >= 500 or error_code in ("invalid_client", "unauthorized_client"):
                # ops' configuration or the provider, not the person: say so in the log
                _log.warning("the OIDC token endpoint refused ops", extra=detail)
                raise OidcUnavailable("the token endpoint refused the exchange", detail=detail)
            raise OidcTokenInvalid("the provider refused the code", detail=detail)
        id_token = body.get("id_token") if isinstance(body, dict) else None
        if not isinstance(id_token, str) or not id_token:
            raise OidcTokenInvalid("the token response has no ID token")
        return id_token

    async def verify(self, id_token: str, nonce: str) -> dict[str, Any]:
        """The ID token's claims once everything the module's docstring lists holds;
        :class:`OidcTokenInvalid` otherwise."""
        discovery = await self.discovery()
        try:
            header = jwt.get_unverified_header(id_token)
        except jwt.PyJWTError as error:
            raise OidcTokenInvalid(f"the ID token does not parse: {error}") from None
        algorithm = header.get("alg")
        if algorithm not in discovery.algorithms:
            raise OidcTokenInvalid(
                f"the ID token is signed with {algorithm!r}, not one of {list(discovery.algorithms)}"
            )
        kid = header.get("kid")
        key = await self._signing_key(kid if isinstance(kid, str) else None, str(algorithm))
        try:
            claims: dict[str, Any] = jwt.decode(
                id_token,
                key,
                algorithms=[str(algorithm)],
                audience=self.config.client_id,
                issuer=self.config.issuer,
                leeway=LEEWAY_SECONDS,
                options={"require": ["iss", "aud", "exp", "iat", "sub"]},
            )
        except jwt.PyJWTError as error:
            raise OidcTokenInvalid(f"the ID token did not pass: {error}") from None
        audience = claims["aud"]
        azp = claims.get("azp")
        if isinstance(audience, list) and len(audience) > 1 and azp is None:
            raise OidcTokenInvalid("the ID token has several audiences and no azp")
        if azp is not None and azp != self.config.client_id:
            raise OidcTokenInvalid("the ID token was issued to another client (azp)")
        issued_at = claims["iat"]
        if not isinstance(issued_at, int | float) or issued_at > time.time() + LEEWAY_SECONDS:
            raise OidcTokenInvalid("the ID token was issued in the future")
        given = claims.get("nonce")
        if not isinstance(given, str) or not hmac.compare_digest(given.encode(), nonce.encode()):
            raise OidcTokenInvalid("the ID token's nonce is not this sign-in's")
        return claims

    def identity(self, claims: Mapping[str, Any]) -> Identity:
        """Subject, username, groups and role; :class:`OidcNoUsername` / :class:`OidcUnmapped`
        otherwise."""
        sub = claims.get("sub")
        if not isinstance(sub, str) or not 0 < len(sub) <= SUBJECT_MAX_CHARS:
            raise OidcTokenInvalid("the ID token's sub is not a subject", detail={"sub": str(sub)[:300]})
        username = username_from(claims, self.config.username_claim)
        groups = groups_from(claims, self.config.groups_claim)
        role = role_for(groups, self.config.role_mapping, self.config.default_role)
        if role is None:
            raise OidcUnmapped(
                "the person is in no group the role mapping names",
                username=username,
                detail={"groups": list(groups)},
            )
        return Identity(
            username,
            groups,
            role,
            group_giving(role, groups, self.config.role_mapping),
            ProviderSubject(self.config.issuer, sub),
        )

    async def _signing_key(self, kid: str | None, algorithm: str) -> Any:
        jwks = await self._keys(refresh=False)
        found = _find_key(jwks, kid, algorithm)
        stale = self._jwks is not None and self._clock() - self._jwks[0] >= JWKS_REFETCH_GAP_SECONDS
        if found is None and kid is not None and stale:
            found = _find_key(await self._keys(refresh=True), kid, algorithm)
        if found is None:
            raise OidcTokenInvalid(
                "the ID token is signed by no key the provider publishes", detail={"kid": kid}
            )
        try:
            return jwt.PyJWK(found, algorithm=algorithm).key
        except jwt.PyJWTError as error:
            raise OidcTokenInvalid(f"the provider's key {kid!r} is not a {algorithm} key: {error}") from None

    async def _keys(self, *, refresh: bool) -> dict[str, Any]:
        now = self._clock()
        if not refresh and self._jwks is not None and now - self._jwks[0] < JWKS_TTL_SECONDS:
            return self._jwks[1]
        document = await self._get_json((await self.discovery()).jwks_uri, "JWKS")
        if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
            raise OidcUnavailable("the provider's JWKS has no keys")
        self._jwks = (now, document)
        return document

    async def _get_json(self, url: str, what: str) -> Any:
        try:
            reply = await self._http.get(url, headers={"Accept": "application/json"})
        except httpx.HTTPError as error:
            raise OidcUnavailable(f"the provider's {what} cannot be reached: {error!r}"[:300]) from None
        body = _json_or_none(reply)
        if reply.status_code != 200 or body is None:
            raise OidcUnavailable(f"the provider's {what} answered {reply.status_code}")
        return body


def _find_key(jwks: Mapping[str, Any], kid: str | None, algorithm: str) -> dict[str, Any] | None:
    """The signing key named ``kid`` (without a kid: the one signing key that fits)."""
    fitting = [
        key
        for key in jwks.get("keys", [])
        if isinstance(key, dict)
        and key.get("use", "sig") == "sig"
        and key.get("alg", algorithm) == algorithm
        and key.get("kty") == _KEY_TYPES[algorithm]
    ]
    if kid is not None:
        named = [key for key in fitting if key.get("kid") == kid]
        return named[0] if len(named) == 1 else None
    return fitting[0] if len(fitting) == 1 else None


_KEY_TYPES = {"RS256": "RSA", "ES256": "EC", "EdDSA": "OKP"}


def _json_or_none(reply: httpx.Response) -> Any:
    try:
        return reply.json()
    except ValueError:
        return None
