"""The local OpenID Connect provider (tools/oidc) as ops and Superset's authlib will use it:
discovery, the authorization-code flow with PKCE, the sign-in page, silent sign-in, userinfo,
group changes seen at the next sign-in, and sign-out, all over plain HTTP with redirects
followed by hand."""

import base64
import hashlib
import secrets
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit

import httpx
import jwt
import pytest

from sstools.devstack.oidc import (
    Client,
    Form,
    Person,
    RunningProvider,
    only_form,
    running,
    start,
    stop,
    wait_ready,
    write_config,
)
from sstools.devstack.testing import free_port

SUPERSET = Client(
    "superset-a",
    "superset-a-secret",
    ("http://127.0.0.1:1/oauth-authorized/sso",),
    ("http://127.0.0.1:1/login/",),
)
# Authenticates in the form body, where the first authenticates with HTTP Basic.
OPS = Client(
    "ops",
    "ops-secret",
    ("http://127.0.0.1:2/auth/callback",),
    ("http://127.0.0.1:2/signed-out",),
    token_endpoint_auth_method="client_secret_post",
)
ANA = Person("ana", "ana-password", "ana@example.com", "Ana Analyst", ("analysts",))
MOVER = Person("mo", "mo-password", "mo@example.com", "Mo Mover", ("viewers",))
PROVIDER_NAME = "Test <SSO> & Co"
SCOPE = "openid profile email groups"


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningProvider]:
    folder = tmp_path_factory.mktemp("oidc")
    with running(folder, free_port(), [SUPERSET, OPS], [ANA, MOVER], provider_name=PROVIDER_NAME) as started:
        yield started


@pytest.fixture(scope="module")
def discovery(provider: RunningProvider) -> dict[str, Any]:
    reply = httpx.get(provider.discovery_url)
    reply.raise_for_status()
    document: dict[str, Any] = reply.json()
    return document


@pytest.fixture
def browser() -> Iterator[httpx.Client]:
    """A cookie jar of its own: one person's browser."""
    with httpx.Client(timeout=10, follow_redirects=False) as client:
        yield client


@dataclass
class Outcome:
    """Where a chain of redirects ended: a page of the provider's, or the client's callback."""

    visited: list[str]
    page: httpx.Response | None = None
    callback: dict[str, str] | None = None


def follow(browser: httpx.Client, response: httpx.Response, client: Client) -> Outcome:
    """Redirects by hand until the provider shows a page or sends the browser to the client
    (which is not listening: its query is what the client would receive)."""
    visited: list[str] = []
    while response.is_redirect:
        location = urljoin(str(response.url), response.headers["location"])
        visited.append(location)
        target = location.split("?")[0]
        if target in client.redirect_uris or target in client.post_logout_redirect_uris:
            return Outcome(visited, callback=dict(parse_qsl(urlsplit(location).query)))
        response = browser.get(location)
    return Outcome(visited, page=response)


@dataclass
class Request:
    """One authorization request's secrets, as a relying party keeps them."""

    client: Client
    verifier: str = field(default_factory=lambda: secrets.token_urlsafe(48))
    state: str = field(default_factory=lambda: secrets.token_urlsafe(12))
    nonce: str = field(default_factory=lambda: secrets.token_urlsafe(12))

    @property
    def challenge(self) -> str:
        digest = hashlib.sha256(self.verifier.encode()).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()

    def url(self, discovery: dict[str, Any], **extra: str) -> str:
        query = {
            "client_id": self.client.client_id,
            "redirect_uri": self.client.redirect_uris[0],
            "response_type": "code",
            "scope": SCOPE,
            "state": self.state,
            "nonce": self.nonce,
            "code_challenge": self.challenge,
            "code_challenge_method": "S256",
            **extra,
        }
        return f"{discovery['authorization_endpoint']}?{urlencode(query)}"


def authorize(browser: httpx.Client, discovery: dict[str, Any], request: Request, **extra: str) -> Outcome:
    return follow(browser, browser.get(request.url(discovery, **extra)), request.client)


def sign_in_form(browser: httpx.Client, form: Form, username: str, password: str) -> httpx.Response:
    return browser.post(form.action, data={**form.fields, "username": username, "password": password})


def sign_in(
    browser: httpx.Client, discovery: dict[str, Any], request: Request, person: Person
) -> dict[str, str]:
    """The whole interactive sign-in; the client's callback query."""
    outcome = authorize(browser, discovery, request)
    assert outcome.page is not None, outcome
    assert outcome.page.status_code == 200, outcome.page.text
    result = follow(
        browser,
        sign_in_form(browser, only_form(outcome.page), person.username, person.password),
        request.client,
    )
    assert result.callback is not None, result.page.text if result.page else result
    return result.callback


def exchange(
    discovery: dict[str, Any], request: Request, code: str, verifier: str | None = None
) -> httpx.Response:
    """The token request as the client sends it, authenticated as it registered."""
    client = request.client
    data = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": client.redirect_uris[0],
        "code_verifier": verifier or request.verifier,
    }
    if client.token_endpoint_auth_method == "client_secret_post":
        data |= {"client_id": client.client_id, "client_secret": client.client_secret}
        return httpx.post(discovery["token_endpoint"], data=data)
    return httpx.post(discovery["token_endpoint"], data=data, auth=(client.client_id, client.client_secret))


def verified_id_token(discovery: dict[str, Any], request: Request, id_token: str) -> dict[str, Any]:
    """The ID token's claims, checked as a relying party must: signature by a key of the
    provider's JWKS, RS256, audience, issuer, expiry, and the request's nonce."""
    assert jwt.get_unverified_header(id_token)["alg"] == "RS256"
    key = jwt.PyJWKClient(discovery["jwks_uri"]).get_signing_key_from_jwt(id_token)
    claims: dict[str, Any] = jwt.decode(
        id_token,
        key.key,
        algorithms=["RS256"],
        audience=request.client.client_id,
        issuer=discovery["issuer"],
        options={"require": ["exp", "iat", "sub", "aud", "iss"]},
    )
    assert claims["nonce"] == request.nonce
    return claims


def tokens_for(discovery: dict[str, Any], request: Request, callback: dict[str, str]) -> dict[str, Any]:
    assert callback.get("state") == request.state, callback
    reply = exchange(discovery, request, callback["code"])
    assert reply.status_code == 200, reply.text
    tokens: dict[str, Any] = reply.json()
    tokens["claims"] = verified_id_token(discovery, request, tokens["id_token"])
    return tokens


def test_discovery_names_the_issuer_and_s256_alone(
    provider: RunningProvider, discovery: dict[str, Any]
) -> None:
    assert discovery["issuer"] == provider.issuer
    for endpoint in (
        "authorization_endpoint",
        "token_endpoint",
        "userinfo_endpoint",
        "jwks_uri",
        "end_session_endpoint",
    ):
        assert discovery[endpoint].startswith(f"{provider.issuer}/"), endpoint
    assert discovery["code_challenge_methods_supported"] == ["S256"]
    assert discovery["response_types_supported"] == ["code"]
    assert "RS256" in discovery["id_token_signing_alg_values_supported"]
    assert {"openid", "profile", "email", "groups"} <= set(discovery["scopes_supported"])
    assert {"groups", "preferred_username"} <= set(discovery["claims_supported"])
    keys = httpx.get(discovery["jwks_uri"]).json()["keys"]
    assert [(key["kty"], key["alg"]) for key in keys] == [("RSA", "RS256")]
    assert all("d" not in key for key in keys)  # the public half alone


def test_code_flow_with_pkce_state_and_nonce(
    provider: RunningProvider, discovery: dict[str, Any], browser: httpx.Client
) -> None:
    request = Request(SUPERSET)
    outcome = authorize(browser, discovery, request)
    assert outcome.page is not None
    assert outcome.page.status_code == 200
    assert urlsplit(str(outcome.page.url)).path.startswith("/interaction/")
    # The heading names the configured provider, escaped.
    assert "<h1>Test &lt;SSO&gt; &amp; Co</h1>" in outcome.page.text
    form = only_form(outcome.page)
    assert {"csrf"} <= set(form.fields)

    refused = sign_in_form(browser, form, ANA.username, "not-the-password")
    assert refused.status_code in (200, 401)
    assert not refused.is_redirect
    assert "Wrong username or password" in refused.text
    form = only_form(refused)  # the form again
    assert form.fields.get("username") == ANA.username

    nobody = sign_in_form(browser, form, "nobody", ANA.password)
    assert "Wrong username or password" in nobody.text
    assert not nobody.is_redirect

    result = follow(browser, sign_in_form(browser, form, ANA.username, ANA.password), SUPERSET)
    assert result.callback is not None, result
    assert set(result.callback) == {"code", "state", "iss"}
    assert result.callback["state"] == request.state
    assert result.callback["iss"] == provider.issuer
    # No consent page on the way: straight from the form back to the client.
    assert not any("/interaction/" in url for url in result.visited)

    tokens = tokens_for(discovery, request, result.callback)
    assert tokens["token_type"].lower() == "bearer"
    assert "refresh_token" not in tokens
    claims = tokens["claims"]
    assert claims["sub"] == "ana"
    assert claims["preferred_username"] == "ana"
    assert claims["groups"] == ["analysts"]
    assert claims["email"] == ANA.email
    assert claims["name"] == ANA.name

    bearer = {"Authorization": f"Bearer {tokens['access_token']}"}
    userinfo = httpx.get(discovery["userinfo_endpoint"], headers=bearer)
    assert userinfo.status_code == 200, userinfo.text
    assert userinfo.json() == {
        "sub": "ana",
        "preferred_username": "ana",
        "name": ANA.name,
        "email": ANA.email,
        "groups": ["analysts"],
    }
    assert (
        httpx.get(discovery["userinfo_endpoint"], headers={"Authorization": "Bearer forged"}).status_code
        == 401
    )

    # A code is good once; replaying it revokes what it was exchanged for (RFC 6749 4.1.2).
    replayed = exchange(discovery, request, result.callback["code"])
    assert replayed.status_code == 400
    assert replayed.json()["error"] == "invalid_grant"
    assert httpx.get(discovery["userinfo_endpoint"], headers=bearer).status_code == 401


def test_a_wrong_code_verifier_is_refused(discovery: dict[str, Any], browser: httpx.Client) -> None:
    request = Request(OPS)
    callback = sign_in(browser, discovery, request, ANA)
    refused = exchange(discovery, request, callback["code"], verifier=secrets.token_urlsafe(48))
    assert refused.status_code == 400
    assert refused.json()["error"] == "invalid_grant"
    assert "id_token" not in refused.text


def test_requests_without_s256_pkce_are_refused(discovery: dict[str, Any], browser: httpx.Client) -> None:
    request = Request(SUPERSET)
    url = request.url(discovery)
    without = url.replace(f"&code_challenge={request.challenge}&code_challenge_method=S256", "")
    assert without != url
    outcome = follow(browser, browser.get(without), SUPERSET)
    assert outcome.callback is not None
    assert outcome.callback["error"] == "invalid_request"
    plain = authorize(
        browser, discovery, request, code_challenge=request.verifier, code_challenge_method="plain"
    )
    assert plain.callback is not None
    assert plain.callback["error"] == "invalid_request"


def test_silent_sign_in_with_a_session_and_across_clients(
    discovery: dict[str, Any], browser: httpx.Client
) -> None:
    first = Request(SUPERSET)
    sign_in(browser, discovery, first, ANA)
    # The same client again, then another, silently; then without prompt=none, as FAB asks:
    # no page any time, as long as the provider's session lasts.
    for client, prompt in ((SUPERSET, {"prompt": "none"}), (OPS, {"prompt": "none"}), (OPS, {})):
        request = Request(client)
        outcome = authorize(browser, discovery, request, **prompt)
        assert outcome.callback is not None, outcome.page.text if outcome.page else outcome
        assert not any("/interaction/" in url for url in outcome.visited)
        claims = tokens_for(discovery, request, outcome.callback)["claims"]
        assert (claims["sub"], claims["aud"]) == ("ana", client.client_id)


def test_silent_sign_in_without_a_session_says_login_required(
    discovery: dict[str, Any], browser: httpx.Client
) -> None:
    request = Request(SUPERSET)
    outcome = authorize(browser, discovery, request, prompt="none")
    assert outcome.callback is not None
    assert outcome.callback["error"] == "login_required"
    assert outcome.callback["state"] == request.state
    assert "code" not in outcome.callback


def test_a_group_change_shows_at_the_next_sign_in(
    provider: RunningProvider, discovery: dict[str, Any], browser: httpx.Client
) -> None:
    request = Request(SUPERSET)
    before = tokens_for(discovery, request, sign_in(browser, discovery, request, MOVER))
    assert before["claims"]["groups"] == ["viewers"]
    try:
        provider.write_people([ANA, replace(MOVER, groups=("operators", "analysts"))])
        again = Request(SUPERSET)
        outcome = authorize(browser, discovery, again, prompt="none")
        assert outcome.callback is not None
        after = tokens_for(discovery, again, outcome.callback)
        assert after["claims"]["groups"] == ["operators", "analysts"]
    finally:
        provider.write_people([ANA, MOVER])


def test_sign_out_ends_the_session(discovery: dict[str, Any], browser: httpx.Client) -> None:
    request = Request(OPS)
    tokens = tokens_for(discovery, request, sign_in(browser, discovery, request, ANA))
    query = {
        "id_token_hint": tokens["id_token"],
        "post_logout_redirect_uri": OPS.post_logout_redirect_uris[0],
        "state": "bye-state",
    }
    page = browser.get(f"{discovery['end_session_endpoint']}?{urlencode(query)}")
    assert page.status_code == 200
    form = only_form(page)  # submitted by the page's script in a browser
    assert form.fields.get("logout") == "yes"
    assert form.fields.get("xsrf")
    outcome = follow(browser, browser.post(form.action, data=form.fields), OPS)
    assert outcome.callback == {"state": "bye-state"}

    after = Request(OPS)
    silent = authorize(browser, discovery, after, prompt="none")
    assert silent.callback is not None
    assert silent.callback["error"] == "login_required"


def test_the_sign_in_form_escapes_and_checks_its_token(
    discovery: dict[str, Any], browser: httpx.Client
) -> None:
    outcome = authorize(browser, discovery, Request(SUPERSET))
    assert outcome.page is not None
    form = only_form(outcome.page)
    echoed = sign_in_form(browser, form, '<script>alert("x")</script>', "wrong")
    assert "<script>alert" not in echoed.text
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in echoed.text

    forged = browser.post(
        form.action, data={"csrf": "forged", "username": ANA.username, "password": ANA.password}
    )
    assert forged.status_code == 403
    assert not forged.is_redirect
    cross_site = browser.post(
        form.action,
        data={**form.fields, "username": ANA.username, "password": ANA.password},
        headers={"Origin": "http://evil.example"},
    )
    assert cross_site.status_code == 403
    assert not cross_site.is_redirect
    # Another browser (no interaction cookie) cannot finish this one's sign-in.
    with httpx.Client(timeout=10) as other:
        stranger = sign_in_form(other, form, ANA.username, ANA.password)
    assert stranger.status_code == 400
    assert not stranger.is_redirect
    # None of that spent the sign-in: the form itself, from this browser, still works.
    genuine = follow(browser, sign_in_form(browser, form, ANA.username, ANA.password), SUPERSET)
    assert genuine.callback is not None
    assert "code" in genuine.callback


def test_it_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    write_config(tmp_path, port, [SUPERSET], [ANA])
    process = start(tmp_path, port)
    try:
        provider = RunningProvider(
            f"http://127.0.0.1:{port}", tmp_path / "people.json", tmp_path / "oidc.log"
        )
        wait_ready(provider, process)
    finally:
        stop(process)
    assert process.returncode == 0, (tmp_path / "oidc.log").read_text()


def test_a_provider_that_cannot_start_says_why(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(RuntimeError, match="cannot listen"), running(tmp_path, port, [SUPERSET], [ANA]):
            pass
