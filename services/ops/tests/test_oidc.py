"""The relying party's logic (sstools.ops.oidc) on its own: the pure rules, ID-token verification
against a provider simulated in memory (its own keys, so every claim can be made wrong on
purpose), the settings' checks at start, and tokens from the real provider (tools/oidc) altered
after it signed them."""

import base64
import hashlib
import hmac
import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urljoin, urlsplit

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from pydantic import SecretStr, ValidationError

from sstools.common.catalogue import Role
from sstools.devstack.oidc import Client, Person, RunningProvider, running
from sstools.devstack.testing import free_port
from sstools.ops.oidc import (
    Discovery,
    OidcClient,
    OidcConfig,
    OidcNoUsername,
    OidcTokenInvalid,
    OidcUnavailable,
    OidcUnmapped,
    parse_default_role,
    parse_role_mapping,
    pkce_challenge,
    role_for,
    safe_return_to,
)

from .conftest import ops_settings

ISSUER = "https://idp.example"
CLIENT_ID = "sstools-ops"
SECRET = "s3cret:with/odd chars"
REDIRECT = "https://agent.example/api/auth/oidc/callback"
NONCE = "the-nonce-of-this-sign-in"
MAPPING = {"viewers": Role.VIEWER, "analysts": Role.ANALYST, "operators": Role.OPERATOR, "admins": Role.ADMIN}


def config(**more: Any) -> OidcConfig:
    fields: dict[str, Any] = {
        "issuer": ISSUER,
        "client_id": CLIENT_ID,
        "client_secret": lambda: SECRET,
        "redirect_url": REDIRECT,
        "scopes": "openid profile email groups",
        "username_claim": "preferred_username",
        "groups_claim": "groups",
        "role_mapping": MAPPING,
        "default_role": None,
        "provider_name": "SSO",
    }
    return OidcConfig(**{**fields, **more})


# --- the pure rules ----------------------------------------------------------------------------


def test_pkce_challenge_is_rfc_7636_s256() -> None:
    # RFC 7636, appendix B
    assert (
        pkce_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
        == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    )


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        (None, "/agent"),
        ("", "/agent"),
        ("/agent", "/agent"),
        ("/agent/", "/agent/"),
        ("/agent/chat?env=prod&x=1", "/agent/chat?env=prod&x=1"),
        ("/agent?env=dev", "/agent?env=dev"),
        ("//evil.example", "/agent"),
        ("//evil.example/agent", "/agent"),
        ("https://evil.example/agent", "/agent"),
        ("http:/agent", "/agent"),
        ("javascript:alert(1)", "/agent"),
        ("/\\evil.example", "/agent"),
        ("/agent\\evil", "/agent"),
        ("/agent/%5c%5cevil", "/agent"),
        ("/agentevil", "/agent"),
        ("/api/auth/me", "/agent"),
        ("agent", "/agent"),
        ("/agent/../api", "/agent"),
        ("/agent/%2E%2E/api", "/agent"),
        ("/agent#sso=planted", "/agent"),
        ("/agent\n", "/agent"),
        ("/agent/é", "/agent"),
        ("/agent/" + "a" * 3000, "/agent"),
    ],
)
def test_return_to_stays_under_the_page(given: str | None, kept: str) -> None:
    assert safe_return_to(given) == kept


def test_role_mapping_parses_and_refuses_with_the_reason() -> None:
    assert parse_role_mapping('{"a": "viewer", "b": "admin"}') == {"a": Role.VIEWER, "b": Role.ADMIN}
    assert parse_role_mapping("") == {}
    for text, said in (
        ("{not json", "not JSON"),
        ('["admins"]', "JSON object"),
        ('{"x": "root"}', "'x' the role 'root'"),
        ('{"": "viewer"}', "empty group"),
        ('{"x": 1}', "the role 1"),
    ):
        with pytest.raises(ValueError, match=said):
            parse_role_mapping(text)
    assert parse_default_role("") is None
    assert parse_default_role("analyst") is Role.ANALYST
    with pytest.raises(ValueError, match="'superuser' is not a role"):
        parse_default_role("superuser")


def test_the_highest_mapped_role_wins_else_the_default() -> None:
    assert role_for(("viewers", "admins", "analysts"), MAPPING, None) is Role.ADMIN
    assert role_for(("analysts", "other"), MAPPING, Role.VIEWER) is Role.ANALYST
    assert role_for(("other",), MAPPING, Role.VIEWER) is Role.VIEWER
    assert role_for((), MAPPING, None) is None


@pytest.mark.parametrize(
    "claims",
    [
        {},
        {"preferred_username": ""},
        {"preferred_username": "two words"},
        {"preferred_username": "tab\there"},
        {"preferred_username": "a/b"},
        {"preferred_username": "x" * 201},
        {"preferred_username": 42},
        {"preferred_username": ["ana"]},
    ],
)
def test_a_username_must_be_one_accounts_allow(claims: dict[str, Any]) -> None:
    with pytest.raises(OidcNoUsername) as refused:
        OidcClient(config()).identity({"sub": "s-1", "groups": ["admins"], **claims})
    assert refused.value.code == "oidc_no_username"


def test_identity_reads_the_configured_claims() -> None:
    client = OidcClient(config(username_claim="email", groups_claim="roles"))
    claims = {
        "sub": "s-1",
        "email": "ana@example.com",
        "preferred_username": "x",
        "roles": ["analysts", "operators"],
    }
    identity = client.identity(claims)
    assert (identity.username, identity.groups, identity.role) == (
        "ana@example.com",
        ("analysts", "operators"),
        Role.OPERATOR,
    )
    assert identity.subject.key == (ISSUER, "s-1")  # the account is found by these, not the name
    for sub in (None, "", 7, "s" * 256):
        with pytest.raises(OidcTokenInvalid):
            client.identity({**claims, "sub": sub})
    assert client.identity({"sub": "s-1", "email": "a" * 200, "roles": ["viewers"]}).username == "a" * 200
    with pytest.raises(OidcUnmapped) as unmapped:  # a missing groups claim: no groups
        client.identity({"sub": "s-1", "email": "ana@example.com"})
    assert (unmapped.value.username, unmapped.value.detail) == ("ana@example.com", {"groups": []})
    with_default = OidcClient(config(groups_claim="roles", default_role=Role.VIEWER))
    assert with_default.identity({"sub": "s-1", "preferred_username": "ana"}).role is Role.VIEWER
    for groups in ("admins", [1], [["admins"]], {"admins": True}):
        with pytest.raises(OidcTokenInvalid):
            client.identity({"sub": "s-1", "email": "ana@example.com", "roles": groups})


def test_discovery_must_name_the_issuer_s256_and_an_asymmetric_algorithm() -> None:
    document = {
        "issuer": ISSUER,
        "authorization_endpoint": f"{ISSUER}/auth",
        "token_endpoint": f"{ISSUER}/token",
        "jwks_uri": f"{ISSUER}/jwks",
        "code_challenge_methods_supported": ["S256"],
        "id_token_signing_alg_values_supported": ["HS256", "RS256", "none", "EdDSA"],
    }
    assert Discovery.of(document, ISSUER).algorithms == ("RS256", "EdDSA")
    assert Discovery.of({**document, "id_token_signing_alg_values_supported": None}, ISSUER).algorithms == (
        "RS256",
    )
    for broken in (
        {"issuer": f"{ISSUER}/"},
        {"issuer": "https://evil.example"},
        {"code_challenge_methods_supported": ["plain"]},
        {"id_token_signing_alg_values_supported": ["HS256", "none"]},
        {"token_endpoint": "ftp://idp.example/token"},
        {"jwks_uri": None},
    ):
        with pytest.raises(OidcUnavailable):
            Discovery.of({**document, **broken}, ISSUER)
    with pytest.raises(OidcUnavailable):
        Discovery.of(["not", "an", "object"], ISSUER)


# --- the settings ------------------------------------------------------------------------------


def sso(**more: Any) -> dict[str, Any]:
    return {
        "oidc_issuer": ISSUER,
        "oidc_client_id": CLIENT_ID,
        "oidc_client_secret": SECRET,
        "oidc_redirect_url": REDIRECT,
        "oidc_role_mapping": '{"admins": "admin"}',
        **more,
    }


def test_settings_off_by_default_and_complete_when_on(tmp_path: Path) -> None:
    off = ops_settings("postgresql://x@127.0.0.1/x", oidc_client_secret_file="")
    assert off.oidc_client_secret_file is None
    assert off.oidc_config() is None
    assert off.password_sign_in is True
    on = ops_settings("postgresql://x@127.0.0.1/x", **sso(oidc_scopes=" openid  email "))
    made = on.oidc_config()
    assert made is not None
    assert made.scopes == "openid email"
    assert made.client_secret() == SECRET
    assert made.role_mapping == {"admins": Role.ADMIN}
    secret_file = tmp_path / "secret"
    secret_file.write_text("from-the-file\n")
    by_file = ops_settings(
        "postgresql://x@127.0.0.1/x", **sso(oidc_client_secret="", oidc_client_secret_file=secret_file)
    )
    read = by_file.oidc_config()
    assert read is not None
    assert read.client_secret() == "from-the-file"
    secret_file.write_text("rotated")  # read at each use
    assert read.client_secret() == "rotated"
    assert "from-the-file" not in repr(by_file)
    secret_file.write_text("\n")
    with pytest.raises(ValueError, match="needs a client secret"):
        read.client_secret()
    secret_file.unlink()  # not there (yet): ops starts, and each exchange says so (oidc_unavailable)
    with pytest.raises(ValueError, match="cannot be read"):
        read.client_secret()


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        (sso(oidc_client_id=""), "OPS_OIDC_CLIENT_ID is required"),
        (sso(oidc_client_secret=""), "needs a client secret"),
        (sso(oidc_client_secret_file=Path("/nonexistent/secret")), "give one of"),
        (sso(oidc_redirect_url=""), "OPS_OIDC_REDIRECT_URL"),
        (sso(oidc_redirect_url="/api/auth/oidc/callback"), "OPS_OIDC_REDIRECT_URL"),
        (sso(oidc_issuer="idp.example"), "OPS_OIDC_ISSUER must be"),
        (sso(oidc_role_mapping="{oops"), "not JSON"),
        (sso(oidc_role_mapping='{"admins": "god"}'), "'god'"),
        (sso(oidc_role_mapping="{}"), "OPS_OIDC_ROLE_MAPPING or OPS_OIDC_DEFAULT_ROLE"),
        (sso(oidc_default_role="root"), "'root' is not a role"),
        (sso(oidc_scopes="profile email"), "must include openid"),
        ({"password_sign_in": False}, "nobody could sign in"),
        ({"oidc_role_mapping": '["x"]'}, "JSON object"),  # refused even while SSO is off
    ],
)
def test_settings_refuse_to_start_with_the_reason(settings: dict[str, Any], said: str) -> None:
    with pytest.raises(ValidationError, match=said):
        ops_settings("postgresql://x@127.0.0.1/x", **settings)


def test_a_default_role_alone_is_enough() -> None:
    made = ops_settings(
        "postgresql://x@127.0.0.1/x", **sso(oidc_role_mapping="{}", oidc_default_role="viewer")
    ).oidc_config()
    assert made is not None
    assert made.default_role is Role.VIEWER
    assert isinstance(ops_settings("postgresql://x@127.0.0.1/x", **sso()).oidc_client_secret, SecretStr)


# --- verification against a provider in memory -------------------------------------------------


class FakeProvider:
    """Discovery, JWKS and a token endpoint over httpx.MockTransport, with keys of its own."""

    def __init__(self) -> None:
        self.now = 1000.0  # the OidcClient's monotonic clock
        self.algorithms = ["RS256"]
        self.private: dict[str, Any] = {}
        self.published: list[dict[str, Any]] = []
        self.fetches: Counter[str] = Counter()
        self.token_requests: list[httpx.Request] = []
        self.token_reply = httpx.Response(200, json={"id_token": "x", "token_type": "Bearer"})
        self.add_key("rsa-1", rsa.generate_private_key(public_exponent=65537, key_size=2048), "RS256")

    def add_key(self, kid: str, private: Any, algorithm: str, publish: bool = True) -> None:
        self.private[kid] = private
        if publish:
            self.published.append({**_public_jwk(private), "kid": kid, "alg": algorithm, "use": "sig"})

    def handler(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        self.fetches[path] += 1
        if path == "/.well-known/openid-configuration":
            return httpx.Response(
                200,
                json={
                    "issuer": ISSUER,
                    "authorization_endpoint": f"{ISSUER}/auth",
                    "token_endpoint": f"{ISSUER}/token",
                    "jwks_uri": f"{ISSUER}/jwks",
                    "code_challenge_methods_supported": ["S256"],
                    "id_token_signing_alg_values_supported": self.algorithms,
                },
            )
        if path == "/jwks":
            return httpx.Response(200, json={"keys": self.published})
        if path == "/token":
            self.token_requests.append(request)
            return self.token_reply
        return httpx.Response(404)

    def token(self, kid: str = "rsa-1", algorithm: str = "RS256", **claims: Any) -> str:
        now = int(time.time())
        payload = {
            "iss": ISSUER,
            "aud": CLIENT_ID,
            "sub": "ana",
            "iat": now,
            "exp": now + 300,
            "nonce": NONCE,
            "preferred_username": "ana",
            "groups": ["analysts"],
            **claims,
        }
        payload = {name: value for name, value in payload.items() if value is not None}
        return jwt.encode(payload, self.private[kid], algorithm=algorithm, headers={"kid": kid})


def _segment(value: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def _jwk(private: Any) -> str:
    public = private.public_key()
    if isinstance(public, rsa.RSAPublicKey):
        return jwt.algorithms.RSAAlgorithm.to_jwk(public)
    if isinstance(public, ec.EllipticCurvePublicKey):
        return jwt.algorithms.ECAlgorithm.to_jwk(public)
    return jwt.algorithms.OKPAlgorithm.to_jwk(public)


def _public_jwk(private: Any) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(_jwk(private))
    return document


@pytest.fixture
def fake() -> FakeProvider:
    return FakeProvider()


@pytest.fixture
async def client(fake: FakeProvider) -> AsyncIterator[OidcClient]:
    made = OidcClient(
        config(), http=httpx.AsyncClient(transport=httpx.MockTransport(fake.handler)), clock=lambda: fake.now
    )
    try:
        yield made
    finally:
        await made.aclose()


async def test_a_genuine_token_passes_and_discovery_and_keys_are_fetched_once(
    fake: FakeProvider, client: OidcClient
) -> None:
    claims = await client.verify(fake.token(), NONCE)
    assert (claims["sub"], claims["groups"]) == ("ana", ["analysts"])
    await client.verify(fake.token(), NONCE)
    assert fake.fetches == {"/.well-known/openid-configuration": 1, "/jwks": 1}
    fake.now += 3601  # an hour on: both fetched again
    await client.verify(fake.token(), NONCE)
    assert fake.fetches == {"/.well-known/openid-configuration": 2, "/jwks": 2}


# Times are seconds from when the test runs (not from collection: a long run reaches a test many
# minutes after it was collected).
FROM_NOW = {"exp", "iat"}


@pytest.mark.parametrize(
    ("claims", "why"),
    [
        ({"nonce": "another-sign-in"}, "nonce"),
        ({"nonce": None}, "nonce"),
        ({"nonce": 7}, "nonce"),
        ({"iss": "https://evil.example"}, "issuer"),
        ({"iss": None}, "iss"),
        ({"aud": "another-client"}, "audience"),
        ({"aud": None}, "aud"),
        ({"aud": [CLIENT_ID, "another"]}, "azp"),
        ({"aud": [CLIENT_ID, "another"], "azp": "another"}, "azp"),
        ({"azp": "another"}, "azp"),
        ({"exp": -120}, "expired"),
        ({"exp": None}, "exp"),
        ({"iat": None}, "iat"),
        ({"iat": 600}, "iat|future"),
        ({"sub": None}, "sub"),
    ],
)
async def test_a_token_with_a_wrong_claim_is_refused(
    fake: FakeProvider, client: OidcClient, claims: dict[str, Any], why: str
) -> None:
    now = int(time.time())
    dated: dict[str, Any] = {
        name: now + value if name in FROM_NOW and isinstance(value, int) else value
        for name, value in claims.items()
    }
    with pytest.raises(OidcTokenInvalid, match=f"(?i){why}"):
        await client.verify(fake.token(**dated), NONCE)


async def test_tolerances_the_specification_allows(fake: FakeProvider, client: OidcClient) -> None:
    now = int(time.time())
    await client.verify(fake.token(exp=now - 30), NONCE)  # within the minute's leeway
    await client.verify(fake.token(iat=now + 30), NONCE)
    await client.verify(fake.token(aud=[CLIENT_ID, "another"], azp=CLIENT_ID), NONCE)
    await client.verify(fake.token(aud=[CLIENT_ID]), NONCE)


async def test_only_listed_asymmetric_algorithms_and_the_provider_s_keys(
    fake: FakeProvider, client: OidcClient
) -> None:
    genuine = fake.token()
    header, payload, signature = genuine.split(".")
    # the payload changed after signing
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    forged_payload = base64.urlsafe_b64encode(json.dumps({**claims, "sub": "root"}).encode()).rstrip(b"=")
    with pytest.raises(OidcTokenInvalid, match="Signature"):
        await client.verify(f"{header}.{forged_payload.decode()}.{signature}", NONCE)
    # signed by another key under the provider's kid
    fake.add_key(
        "rsa-1-forged", rsa.generate_private_key(public_exponent=65537, key_size=2048), "RS256", False
    )
    forged = jwt.encode(
        jwt.decode(genuine, options={"verify_signature": False}),
        fake.private["rsa-1-forged"],
        algorithm="RS256",
        headers={"kid": "rsa-1"},
    )
    with pytest.raises(OidcTokenInvalid, match="Signature"):
        await client.verify(forged, NONCE)
    # alg none, and HS256 keyed with the public key (the classic confusion)
    unsigned = f"{_segment({'alg': 'none', 'kid': 'rsa-1'})}.{payload}."
    with pytest.raises(OidcTokenInvalid, match="'none'"):
        await client.verify(unsigned, NONCE)
    public_pem = (
        fake.private["rsa-1"]
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    header_segment = base64.urlsafe_b64encode(
        json.dumps({"alg": "HS256", "typ": "JWT", "kid": "rsa-1"}).encode()
    ).rstrip(b"=")
    signing_input = header_segment + b"." + payload.encode()
    mac = base64.urlsafe_b64encode(hmac.new(public_pem, signing_input, hashlib.sha256).digest()).rstrip(b"=")
    with pytest.raises(OidcTokenInvalid, match="'HS256'"):
        await client.verify((signing_input + b"." + mac).decode(), NONCE)
    # ES256 and EdDSA: refused until the provider lists them, then verified
    fake.add_key("ec-1", ec.generate_private_key(ec.SECP256R1()), "ES256")
    fake.add_key("ed-1", ed25519.Ed25519PrivateKey.generate(), "EdDSA")
    with pytest.raises(OidcTokenInvalid, match="'ES256'"):
        await client.verify(fake.token("ec-1", "ES256"), NONCE)
    fake.algorithms = ["RS256", "ES256", "EdDSA"]
    fake.now += 3601
    await client.verify(fake.token("ec-1", "ES256"), NONCE)
    await client.verify(fake.token("ed-1", "EdDSA"), NONCE)
    # a kid naming a key of another type than the algorithm's
    mismatched = jwt.encode(claims, fake.private["rsa-1"], algorithm="RS256", headers={"kid": "ec-1"})
    with pytest.raises(OidcTokenInvalid, match="no key"):
        await client.verify(mismatched, NONCE)


async def test_an_unknown_kid_fetches_the_keys_again_once(fake: FakeProvider, client: OidcClient) -> None:
    await client.verify(fake.token(), NONCE)
    fake.now += 60
    # the provider rotated its key: the first token under the new kid fetches the JWKS again
    fake.add_key("rsa-2", rsa.generate_private_key(public_exponent=65537, key_size=2048), "RS256")
    await client.verify(fake.token("rsa-2"), NONCE)
    assert fake.fetches["/jwks"] == 2
    # a kid nobody publishes: fetched again at most every few seconds, then refused
    fake.add_key("made-up", rsa.generate_private_key(public_exponent=65537, key_size=2048), "RS256", False)
    for _ in range(3):
        with pytest.raises(OidcTokenInvalid, match="no key"):
            await client.verify(fake.token("made-up"), NONCE)
    assert fake.fetches["/jwks"] == 2
    fake.now += 11
    with pytest.raises(OidcTokenInvalid, match="no key"):
        await client.verify(fake.token("made-up"), NONCE)
    assert fake.fetches["/jwks"] == 3


async def test_the_authorization_url_carries_pkce_state_nonce_and_prompt(client: OidcClient) -> None:
    url = await client.authorization_url(state="st", nonce="no", code_verifier="v" * 64, prompt_none=False)
    assert url.startswith(f"{ISSUER}/auth?")
    assert dict(parse_qsl(urlsplit(url).query)) == {
        "response_type": "code",
        "client_id": CLIENT_ID,
        "redirect_uri": REDIRECT,
        "scope": "openid profile email groups",
        "state": "st",
        "nonce": "no",
        "code_challenge": pkce_challenge("v" * 64),
        "code_challenge_method": "S256",
    }
    silent = await client.authorization_url(state="st", nonce="no", code_verifier="v" * 64, prompt_none=True)
    assert dict(parse_qsl(urlsplit(silent).query))["prompt"] == "none"


async def test_the_code_exchange_authenticates_with_basic_and_sends_the_verifier(
    fake: FakeProvider, client: OidcClient
) -> None:
    fake.token_reply = httpx.Response(200, json={"id_token": "the.id.token", "access_token": "a"})
    assert await client.exchange("the-code", "the-verifier") == "the.id.token"
    (request,) = fake.token_requests
    scheme, _, credentials = request.headers["authorization"].partition(" ")
    assert scheme == "Basic"
    # RFC 6749 2.3.1: each form-encoded, then joined
    assert base64.b64decode(credentials).decode() == "sstools-ops:s3cret%3Awith%2Fodd%20chars"
    assert dict(parse_qsl(request.content.decode())) == {
        "grant_type": "authorization_code",
        "code": "the-code",
        "redirect_uri": REDIRECT,
        "code_verifier": "the-verifier",
    }
    for reply, refusal in (
        (httpx.Response(400, json={"error": "invalid_grant"}), OidcTokenInvalid),
        (httpx.Response(200, json={"access_token": "no id token"}), OidcTokenInvalid),
        (httpx.Response(200, text="not json"), OidcTokenInvalid),
        (httpx.Response(401, json={"error": "invalid_client"}), OidcUnavailable),
        (httpx.Response(503, text="down"), OidcUnavailable),
    ):
        fake.token_reply = reply
        with pytest.raises(refusal):
            await client.exchange("the-code", "the-verifier")


async def test_a_provider_out_of_reach_or_a_secret_gone_is_unavailable(tmp_path: Path) -> None:
    def unreachable(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    gone = OidcClient(config(), http=httpx.AsyncClient(transport=httpx.MockTransport(unreachable)))
    try:
        with pytest.raises(OidcUnavailable, match="cannot be reached"):
            await gone.discovery()
    finally:
        await gone.aclose()

    fake = FakeProvider()

    def no_secret() -> str:
        raise ValueError("OPS_OIDC_CLIENT_SECRET_FILE cannot be read")

    secretless = OidcClient(
        config(client_secret=no_secret), http=httpx.AsyncClient(transport=httpx.MockTransport(fake.handler))
    )
    try:
        with pytest.raises(OidcUnavailable, match="no client secret"):
            await secretless.exchange("code", "verifier")
        assert fake.token_requests == []
    finally:
        await secretless.aclose()


# --- tokens of the real provider -----------------------------------------------------------------

REAL_REDIRECT = "http://127.0.0.1:9/api/auth/oidc/callback"  # never reached: followed by hand
ANA = Person("ana", "ana-password", "ana@example.com", "Ana Analyst", ("analysts",))


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningProvider]:
    clients = [
        Client(CLIENT_ID, "real-secret", (REAL_REDIRECT,)),
        Client("other", "other-secret", (REAL_REDIRECT,)),
    ]
    with running(tmp_path_factory.mktemp("oidc"), free_port(), clients, [ANA]) as provider:
        yield provider


async def _real_id_token(provider: RunningProvider, client_id: str, secret: str, nonce: str) -> str:
    """Ana signs in at the real provider for ``client_id``; the ID token its code is exchanged
    for by ops' own client."""
    client = OidcClient(
        config(
            issuer=provider.issuer,
            client_id=client_id,
            client_secret=lambda: secret,
            redirect_url=REAL_REDIRECT,
        )
    )
    verifier = "v" * 64
    try:
        url = await client.authorization_url(
            state="s", nonce=nonce, code_verifier=verifier, prompt_none=False
        )
        async with httpx.AsyncClient(timeout=30) as browser:
            reply = await browser.get(url)
            while not (reply.is_redirect and reply.headers["location"].startswith(REAL_REDIRECT)):
                if reply.is_redirect:
                    reply = await browser.get(urljoin(str(reply.url), reply.headers["location"]))
                    continue
                action = reply.text.split('action="', 1)[1].split('"', 1)[0]
                csrf = reply.text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
                reply = await browser.post(
                    urljoin(str(reply.url), action),
                    data={"csrf": csrf, "username": "ana", "password": ANA.password},
                )
            code = dict(parse_qsl(urlsplit(reply.headers["location"]).query))["code"]
        return await client.exchange(code, verifier)
    finally:
        await client.aclose()


async def test_the_real_provider_s_token_passes_and_altered_ones_do_not(real: RunningProvider) -> None:
    ops = OidcClient(
        config(issuer=real.issuer, client_secret=lambda: "real-secret", redirect_url=REAL_REDIRECT)
    )
    try:
        token = await _real_id_token(real, CLIENT_ID, "real-secret", NONCE)
        claims = await ops.verify(token, NONCE)
        assert ops.identity(claims).role is Role.ANALYST
        with pytest.raises(OidcTokenInvalid, match="nonce"):
            await ops.verify(token, "another-sign-in-s-nonce")
        header, _, signature = token.split(".")
        promoted = {**claims, "groups": ["admins"]}
        forged_payload = base64.urlsafe_b64encode(json.dumps(promoted).encode()).rstrip(b"=").decode()
        with pytest.raises(OidcTokenInvalid, match="Signature"):
            await ops.verify(f"{header}.{forged_payload}.{signature}", NONCE)
        kid = jwt.get_unverified_header(token)["kid"]
        resigned = jwt.encode(
            promoted,
            rsa.generate_private_key(public_exponent=65537, key_size=2048),
            algorithm="RS256",
            headers={"kid": kid},
        )
        with pytest.raises(OidcTokenInvalid, match="Signature"):
            await ops.verify(resigned, NONCE)
        # a genuine token of the same provider, issued to another client
        other = await _real_id_token(real, "other", "other-secret", NONCE)
        with pytest.raises(OidcTokenInvalid, match=r"(?i)audience"):
            await ops.verify(other, NONCE)
    finally:
        await ops.aclose()
