"""Real Superset signing people in through the local OpenID Connect provider (tools/oidc), as
services/ops/superset/sstools_oidc_config.py sets it up: the login page's button, the whole
authorization-code flow with PKCE followed by hand in one browser (one cookie jar for 127.0.0.1, as
a browser keeps it: every port sees every cookie), the roles the groups map to, a group change
seen at the next sign-in, silent sign-in with the provider's session, one user per person, and
who is refused: someone whose groups map to no role, a name that differs only by case."""

import html
import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx
import pytest

from sstools.devstack.oidc import Client, Person, RunningProvider, only_form, running
from sstools.devstack.superset import (
    Agent,
    Instance,
    SupersetSso,
    _write_config,
    default_home,
    prepare_instance,
    session_cookie_name,
)
from sstools.devstack.superset import running as superset_running
from sstools.devstack.testing import free_port

ENV_ID = "ssotest"
PROVIDER_NAME = "sso"
ANA = Person("ana", "ana-password", "ana@example.com", "Ana Analyst", ("analysts",))
VERA = Person("vera", "vera-password", "vera@example.com", "Vera Van Viewer", ("viewers",))
MO = Person("mo", "mo-password", "mo@example.com", "Mo Mover", ("viewers",))
LEAVER = Person("leo", "leo-password", "leo@example.com", "Leo Leaver", ("analysts",))
OUTSIDER = Person("otto", "otto-password", "otto@example.com", "Otto Outsider", ("contractors",))
# Another account at the provider whose name differs from Ana's only by case.
SHOUTING_ANA = Person("ANA", "shouting-password", "ana.upper@example.com", "Ana Upper", ("analysts",))
PEOPLE = (ANA, VERA, MO, LEAVER, OUTSIDER, SHOUTING_ANA)
ROLES_MAPPING = {"analysts": ["Alpha", "sql_lab"], "viewers": ["Gamma"], "operators": ["Alpha"]}


@dataclass(frozen=True)
class Stack:
    provider: RunningProvider
    superset: Instance
    sso: SupersetSso

    @property
    def callback(self) -> str:
        return self.sso.redirect_uri(self.superset.url)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    superset_port = free_port()
    superset_url = f"http://127.0.0.1:{superset_port}"
    client = Client(
        "superset-ssotest",
        "superset-ssotest-secret",
        (f"{superset_url}/oauth-authorized/{PROVIDER_NAME}",),
        (f"{superset_url}/login/",),
    )
    folder = tmp_path_factory.mktemp("sso")
    with running(folder / "oidc", free_port(), [client], PEOPLE) as provider:
        sso = SupersetSso(
            issuer=provider.issuer,
            client_id=client.client_id,
            client_secret=client.client_secret,
            provider_name=PROVIDER_NAME,
            roles_mapping=ROLES_MAPPING,
        )
        home = default_home()
        # As `make run` wires it: the drawer and the person hook too, the hook's security manager
        # building on the sign-in's (the hook's JWKS is fetched only when a person token comes).
        instance = prepare_instance(
            home,
            folder / ENV_ID,
            ENV_ID,
            superset_port,
            agent_url="http://127.0.0.1:1",
            ops_jwks_url="http://127.0.0.1:1/.well-known/jwks.json",
            sso=sso,
        )
        with superset_running(home, [instance]):
            yield Stack(provider, instance, sso)


@pytest.fixture(scope="module")
def admin(stack: Stack) -> Iterator[httpx.Client]:
    """Superset's own admin through the REST login with a password, as ops signs in: the
    provider's sign-in leaves that path to service accounts."""
    with httpx.Client(base_url=stack.superset.url, timeout=30) as client:
        login = {"username": "admin", "password": default_home().admin_password(), "provider": "db"}
        reply = client.post("/api/v1/security/login", json=login)
        assert reply.status_code == 200, reply.text
        client.headers["Authorization"] = f"Bearer {reply.json()['access_token']}"
        yield client


@pytest.fixture
def browser() -> Iterator[httpx.Client]:
    """One person's browser: one cookie jar for 127.0.0.1, whatever the port."""
    with httpx.Client(timeout=30, follow_redirects=False) as client:
        yield client


@pytest.fixture
def people(stack: Stack) -> Iterator[None]:
    """Whoever a test moves to other groups is back where they were after it."""
    yield
    stack.provider.write_people(PEOPLE)


@dataclass
class Visit:
    """Where a sign-in went (every URL the browser was sent to), whether it showed the
    provider's password form, and the page it ended on."""

    visited: list[str]
    asked_for_password: bool
    page: httpx.Response


def follow(browser: httpx.Client, response: httpx.Response) -> tuple[list[str], httpx.Response]:
    visited: list[str] = []
    while response.is_redirect:
        location = urljoin(str(response.url), response.headers["location"])
        visited.append(location)
        assert len(visited) < 20, visited
        response = browser.get(location)
    return visited, response


def sign_in(stack: Stack, browser: httpx.Client, person: Person | None) -> Visit:
    """Superset's "Sign in with ..." button, then the provider's form when it shows one (None:
    the test expects it not to), then wherever Superset sends the browser."""
    visited, page = follow(browser, browser.get(f"{stack.superset.url}/login/{PROVIDER_NAME}"))
    asked = urlsplit(str(page.url)).path.startswith("/interaction/")
    if asked:
        assert person is not None, f"the provider asked for a password: {visited}"
        assert page.status_code == 200, page.text
        form = only_form(page)
        posted = browser.post(
            form.action, data={**form.fields, "username": person.username, "password": person.password}
        )
        more, page = follow(browser, posted)
        visited += more
    return Visit(visited, asked, page)


def forget_superset(browser: httpx.Client) -> None:
    """Superset's session gone, the provider's kept: a new tab after Superset's session ended."""
    browser.cookies.delete(session_cookie_name(ENV_ID))


def me(stack: Stack, browser: httpx.Client) -> httpx.Response:
    return browser.get(f"{stack.superset.url}/api/v1/me/")


def my_roles(stack: Stack, browser: httpx.Client) -> set[str]:
    reply = browser.get(f"{stack.superset.url}/api/v1/me/roles/")
    assert reply.status_code == 200, reply.text
    return set(reply.json()["result"]["roles"])


def users_named(admin: httpx.Client, username: str) -> list[dict[str, Any]]:
    """Every user whose name is ``username`` in any case, with their roles, as the admin sees them."""
    reply = admin.get("/api/v1/security/users/", params={"q": "(page_size:100)"})
    assert reply.status_code == 200, reply.text
    return [user for user in reply.json()["result"] if user["username"].lower() == username.lower()]


def role_names(user: dict[str, Any]) -> set[str]:
    return {role["name"] for role in user.get("roles", [])}


def bootstrap(page: httpx.Response) -> dict[str, Any]:
    """The data Superset's single-page app renders the page from."""
    found = re.search(r'data-bootstrap="([^"]*)"', page.text)
    assert found is not None, page.text[:2000]
    data: dict[str, Any] = json.loads(html.unescape(found.group(1)))
    return data


def test_the_configuration_puts_the_sign_in_above_the_person_hook(tmp_path: Path) -> None:
    sso = SupersetSso("http://127.0.0.1:9", "c", "s", "sso", {"viewers": ("Gamma",)})
    _write_config(tmp_path, Agent("dev", "http://agent", "http://ops/jwks", sso))
    text = (tmp_path / "superset_config.py").read_text()
    assert "SESSION_COOKIE_NAME = 'superset_session_dev'" in text
    assert "SSTOOLS_OIDC_ROLES_MAPPING = {'viewers': ['Gamma']}" in text
    settings = text.index("SSTOOLS_OIDC_ISSUER = 'http://127.0.0.1:9'")
    sign_in_manager = text.index("CUSTOM_SECURITY_MANAGER = SstoolsOidcSecurityManager")
    person_manager = text.index("CUSTOM_SECURITY_MANAGER = SstoolsPersonSecurityManager")
    assert settings < sign_in_manager < person_manager
    compile(text, "superset_config.py", "exec")

    _write_config(tmp_path, Agent("prod"))
    text = (tmp_path / "superset_config.py").read_text()
    assert "SESSION_COOKIE_NAME = 'superset_session_prod'" in text
    assert "SSTOOLS_OIDC" not in text
    assert "AUTH_TYPE" not in text


def test_a_missing_or_malformed_setting_stops_superset_by_name(tmp_path: Path) -> None:
    config = Path(__file__).parents[3] / "services" / "ops" / "superset" / "sstools_oidc_config.py"
    complete = SupersetSso("http://127.0.0.1:9", "c", "s", "sso", {"viewers": ["Gamma"]}).settings()
    cases = {
        "missing": "\n".join(line for line in complete.splitlines() if "CLIENT_SECRET" not in line),
        "name": complete.replace("= 'sso'", "= 'Local SSO'"),
        "mapping": complete.replace("['Gamma']", "'Gamma'"),
        "complete": complete,
    }
    script = (
        "import json, sys\n"
        "cases, text, results = json.loads(sys.argv[1]), open(sys.argv[2]).read(), {}\n"
        "for case, settings in cases.items():\n"
        "    scope = {}\n"
        "    try:\n"
        "        exec(settings + '\\n' + text, scope)\n"
        "        results[case] = scope['AUTH_TYPE']\n"
        "    except (KeyError, ValueError) as error:\n"
        "        results[case] = f'{type(error).__name__}: {error}'\n"
        "print(json.dumps(results))\n"
    )
    python = default_home().bin / "python"
    result = subprocess.run(
        [str(python), "-c", script, json.dumps(cases), str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads(result.stdout.strip().splitlines()[-1])
    assert results["missing"].startswith("KeyError"), results
    assert "SSTOOLS_OIDC_CLIENT_SECRET must be set" in results["missing"]
    assert results["name"].startswith("ValueError: SSTOOLS_OIDC_PROVIDER_NAME"), results
    assert results["mapping"].startswith("ValueError: SSTOOLS_OIDC_ROLES_MAPPING"), results
    assert results["complete"] == 4  # AUTH_OAUTH


def test_the_login_page_offers_the_provider_alone(stack: Stack, browser: httpx.Client) -> None:
    page = browser.get(f"{stack.superset.url}/login/")
    assert page.status_code == 200
    conf = bootstrap(page)["common"]["conf"]
    assert conf["AUTH_TYPE"] == 4  # AUTH_OAUTH: no password form
    # The page's one button: "Sign in with Sso", a link to /login/sso.
    assert [provider["name"] for provider in conf["AUTH_PROVIDERS"]] == [PROVIDER_NAME]

    start = browser.get(f"{stack.superset.url}/login/{PROVIDER_NAME}")
    assert start.is_redirect
    location = start.headers["location"]
    assert location.startswith(f"{stack.provider.issuer}/"), location
    query = {key: values[0] for key, values in parse_qs(urlsplit(location).query).items()}
    assert query["client_id"] == stack.sso.client_id
    assert query["redirect_uri"] == stack.callback
    assert query["response_type"] == "code"
    assert query["code_challenge_method"] == "S256"
    assert query["code_challenge"]
    assert query["nonce"]
    assert set(query["scope"].split()) == {"openid", "profile", "email", "groups"}

    # FAB's self-registration form, which AUTH_USER_REGISTRATION would add, is not there.
    assert browser.get(f"{stack.superset.url}/register/form").status_code == 404


def test_a_sign_in_gives_the_roles_of_the_persons_groups(stack: Stack, browser: httpx.Client) -> None:
    assert me(stack, browser).status_code == 401
    visit = sign_in(stack, browser, ANA)
    assert visit.asked_for_password
    assert any(url.startswith(f"{stack.callback}?") for url in visit.visited), visit.visited
    assert visit.page.status_code == 200
    assert urlsplit(str(visit.page.url)).path != "/login/", visit.visited
    # Superset's session under this instance's own name, not Flask's "session" that another
    # instance on 127.0.0.1 would overwrite.
    names = {cookie.name for cookie in browser.cookies.jar}
    assert session_cookie_name(ENV_ID) in names
    assert "session" not in names

    reply = me(stack, browser)
    assert reply.status_code == 200, reply.text
    user = reply.json()["result"]
    assert (user["username"], user["email"]) == ("ana", ANA.email)
    assert (user["first_name"], user["last_name"]) == ("Ana", "Analyst")
    assert my_roles(stack, browser) == {"Alpha", "sql_lab"}

    # No password of Superset's own: not the provider's, not an empty one.
    for password in (ANA.password, "\x00"):
        login = {"username": "ana", "password": password, "provider": "db"}
        refused = httpx.post(f"{stack.superset.url}/api/v1/security/login", json=login)
        assert refused.status_code in (400, 401), refused.text


def test_a_viewer_gets_the_viewers_roles(stack: Stack, browser: httpx.Client) -> None:
    sign_in(stack, browser, VERA)
    reply = me(stack, browser)
    assert reply.status_code == 200, reply.text
    user = reply.json()["result"]
    assert (user["username"], user["first_name"], user["last_name"]) == ("vera", "Vera", "Van Viewer")
    assert my_roles(stack, browser) == {"Gamma"}


def test_signing_in_again_is_silent_and_the_same_user(
    stack: Stack, browser: httpx.Client, admin: httpx.Client
) -> None:
    sign_in(stack, browser, ANA)
    first = me(stack, browser).json()["result"]

    forget_superset(browser)
    assert me(stack, browser).status_code == 401
    again = sign_in(stack, browser, None)  # the provider's session: no form this time
    assert not again.asked_for_password
    assert not any("/interaction/" in url for url in again.visited), again.visited
    assert any(url.startswith(f"{stack.callback}?") for url in again.visited), again.visited
    second = me(stack, browser).json()["result"]
    assert second["id"] == first["id"]
    assert second["login_count"] == first["login_count"] + 1

    # Another browser, with the password again: still the one user.
    with httpx.Client(timeout=30, follow_redirects=False) as other:
        assert sign_in(stack, other, ANA).asked_for_password
        assert me(stack, other).json()["result"]["id"] == first["id"]
    assert [user["username"] for user in users_named(admin, "ana")] == ["ana"]


@pytest.mark.usefixtures("people")
def test_a_group_change_changes_the_roles_at_the_next_sign_in(stack: Stack, browser: httpx.Client) -> None:
    sign_in(stack, browser, MO)
    assert my_roles(stack, browser) == {"Gamma"}
    mo_id = me(stack, browser).json()["result"]["id"]

    stack.provider.write_people([*PEOPLE[:2], replace(MO, groups=("analysts", "operators")), *PEOPLE[3:]])
    assert my_roles(stack, browser) == {"Gamma"}  # the session signed in before keeps its roles
    forget_superset(browser)
    sign_in(stack, browser, None)
    assert me(stack, browser).json()["result"]["id"] == mo_id
    assert my_roles(stack, browser) == {"Alpha", "sql_lab"}


def test_someone_in_no_mapped_group_is_refused(
    stack: Stack, browser: httpx.Client, admin: httpx.Client
) -> None:
    visit = sign_in(stack, browser, OUTSIDER)
    assert visit.asked_for_password  # the provider knew them; Superset refuses them
    assert any(url.startswith(f"{stack.callback}?") for url in visit.visited), visit.visited
    assert urlsplit(str(visit.page.url)).path == "/login/", visit.visited
    assert me(stack, browser).status_code == 401
    assert users_named(admin, OUTSIDER.username) == []  # and no user was made for them


@pytest.mark.usefixtures("people")
def test_leaving_every_mapped_group_refuses_the_sign_in_and_takes_the_roles(
    stack: Stack, browser: httpx.Client, admin: httpx.Client
) -> None:
    sign_in(stack, browser, LEAVER)
    assert my_roles(stack, browser) == {"Alpha", "sql_lab"}

    stack.provider.write_people([*PEOPLE[:3], replace(LEAVER, groups=()), *PEOPLE[4:]])
    forget_superset(browser)
    visit = sign_in(stack, browser, None)
    assert urlsplit(str(visit.page.url)).path == "/login/", visit.visited
    assert me(stack, browser).status_code == 401
    # The user stays (dashboards they own keep an owner) with no role: what ops does as them
    # through the person hook is refused as well.
    [leaver] = users_named(admin, LEAVER.username)
    assert role_names(leaver) == set()


def test_a_name_differing_only_by_case_is_refused(
    stack: Stack, browser: httpx.Client, admin: httpx.Client
) -> None:
    with httpx.Client(timeout=30, follow_redirects=False) as ana_browser:
        sign_in(stack, ana_browser, ANA)  # "ana" exists
    visit = sign_in(stack, browser, SHOUTING_ANA)
    assert urlsplit(str(visit.page.url)).path == "/login/", visit.visited
    assert me(stack, browser).status_code == 401
    [ana] = users_named(admin, "ana")
    assert (ana["username"], role_names(ana)) == ("ana", {"Alpha", "sql_lab"})
