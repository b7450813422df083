import json
from pathlib import Path

import pytest

from sstools.ops.environments import EnvironmentConfigError, parse_environments

from .conftest import ops_settings


def _entry(**overrides: object) -> dict[str, object]:
    return {
        "id": "dev",
        "name": "Development",
        "url": "http://127.0.0.1:8088",
        "password_env": "SS_DEV",
        **overrides,
    }


def test_environments_parse_with_production_from_the_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "prod-password"
    secret.write_text("prod-secret\n")
    monkeypatch.setenv("SS_DEV", "dev-secret")
    raw = json.dumps(
        [
            _entry(),
            _entry(
                id="prod-eu",
                name="Production",
                url="https://bi.example.test",
                password_env=None,
                password_file=str(secret),
            ),
            _entry(id="demo", name="Demo", production=True),
        ]
    )
    environments = parse_environments(raw)
    assert [(env.id, env.production) for env in environments.values()] == [
        ("dev", False),
        ("prod-eu", True),
        ("demo", True),
    ]
    assert environments["dev"].password() == "dev-secret"
    assert environments["prod-eu"].password() == "prod-secret"


@pytest.mark.parametrize(
    ("browser_url", "origin"),
    [
        (None, None),
        ("http://127.0.0.1:8088", "http://127.0.0.1:8088"),
        ("https://BI.Example.test:443/superset/", "https://bi.example.test"),
        ("http://bi.example.test:80", "http://bi.example.test"),
        ("https://bi.example.test:8443/x?y=1", "https://bi.example.test:8443"),
    ],
)
def test_the_drawer_origin_is_the_browser_url_as_a_browser_names_its_origin(
    browser_url: str | None, origin: str | None
) -> None:
    environment = parse_environments(json.dumps([_entry(browser_url=browser_url)]))["dev"]
    assert environment.browser_origin == origin


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("not json", "not valid"),
        (json.dumps([_entry(), _entry()]), "same id"),
        (json.dumps([_entry(url="ftp://host")]), "not valid"),
        (json.dumps([_entry(password_env=None)]), "password_env or password_file"),
        (json.dumps([_entry(password_file="/x")]), "password_env or password_file"),
        (json.dumps([_entry(id="Prod Env!")]), "not valid"),
    ],
)
def test_bad_environment_lists_are_refused_with_the_reason(raw: str, reason: str) -> None:
    with pytest.raises(EnvironmentConfigError, match=reason):
        parse_environments(raw)


def test_a_bad_list_stops_the_service_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVIRONMENTS", "[{}]")
    with pytest.raises(ValueError, match="ENVIRONMENTS is not valid"):
        ops_settings("postgresql://postgres@127.0.0.1:5432/sstools")


def test_missing_password_variable_is_named() -> None:
    environments = parse_environments(json.dumps([_entry(password_env="NO_SUCH_VARIABLE_HERE")]))
    with pytest.raises(EnvironmentConfigError, match="NO_SUCH_VARIABLE_HERE is not set"):
        environments["dev"].password()
