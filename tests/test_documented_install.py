"""The README's cluster install, as an operator runs it (issue 35): its steps run as written, the
release they ask for would start, someone can sign in and ops has a Superset; helm's notes say
where the page is and how to sign in, and warn when that would not work. A README step that is
wrong fails here (tests/test_containers.py then plays the same release with podman, signs in and
chats)."""

import json
import secrets
from pathlib import Path

import pytest
import yaml

from sstools.devstack.install import (
    MY_VALUES,
    README,
    DocumentedInstall,
    InstallFailed,
    my_values,
    run_steps,
    what_would_not_work,
)
from sstools.devstack.manifests import CHART, lint
from sstools.ops.environments import parse_environments

OPERATOR = {
    "DATABASE_URL": "postgresql://sstools:secret@db.internal:5432/sstools",
    "ADMIN_PASSWORD": secrets.token_urlsafe(16),
    "SUPERSET_PASSWORD": secrets.token_urlsafe(16),
}
ADMIN_PASSWORD_STEP = '  --from-literal=ops-admin-password="$ADMIN_PASSWORD" \\\n'


def _installed(folder: Path, readme: str) -> DocumentedInstall:
    (folder / MY_VALUES).write_text(yaml.safe_dump(my_values(readme, None)))
    return run_steps(folder, OPERATOR, readme)


def test_the_readme_steps_ask_for_a_release_that_starts_and_that_a_person_can_use(tmp_path: Path) -> None:
    install = _installed(tmp_path, README.read_text())
    (secret,) = install.secrets.values()
    assert secret["ops-admin-password"] == OPERATOR["ADMIN_PASSWORD"]
    assert secret["database-url"] == OPERATOR["DATABASE_URL"]
    assert secret["jwt-private-key"].startswith("-----BEGIN PRIVATE KEY-----")
    assert what_would_not_work(install, install.rendered()) == []

    notes = install.notes()
    assert "https://sstools.example.com/agent" in notes
    assert (
        'as "admin" with the password in key "ops-admin-password" of Secret "sstools-agent-secrets"' in notes
    )
    assert "sstools-ops users add NAME --role admin" in notes
    assert "prod: https://superset.example.com (production)" in notes
    assert "\n\nOnce every pod is ready, check the release" in notes
    assert "  helm test sstools -n default --logs\n" in notes
    assert "WARNING" not in notes


def test_without_the_admin_password_in_the_secret_the_install_is_refused(tmp_path: Path) -> None:
    readme = README.read_text()
    assert ADMIN_PASSWORD_STEP in readme
    install = _installed(tmp_path, readme.replace(ADMIN_PASSWORD_STEP, ""))
    assert "ops-admin-password" not in next(iter(install.secrets.values()))
    assert what_would_not_work(install, install.rendered()) == [
        "no one can sign in: the Secret holds no admin password and no single sign-on is set"
    ]


def test_a_secret_of_another_name_than_the_values_name_leaves_the_pods_without_their_keys(
    tmp_path: Path,
) -> None:
    readme = README.read_text().replace(
        "kubectl create secret generic sstools-agent-secrets", "kubectl create secret generic sstools"
    )
    install = _installed(tmp_path, readme)
    problems = what_would_not_work(install, install.rendered())
    assert any(
        "needs key 'database-url' of Secret 'sstools-agent-secrets'" in problem for problem in problems
    )
    assert "no one can sign in: the Secret holds no admin password and no single sign-on is set" in problems


def test_a_step_that_fails_or_names_a_missing_file_fails_the_install(tmp_path: Path) -> None:
    readme = README.read_text()
    with pytest.raises(InstallFailed, match=r"values-production\.yaml does not exist"):
        _installed(tmp_path / "one", readme.replace("values-prod.yaml -f", "values-production.yaml -f"))
    with pytest.raises(InstallFailed, match="runs no `kubectl apply"):
        _installed(
            tmp_path / "two", readme.replace("kubectl create secret generic", "kubectl apply secret generic")
        )


def test_with_no_superset_the_install_is_refused_and_the_notes_warn(tmp_path: Path) -> None:
    readme = README.read_text()
    values = my_values(readme, "[]")
    (tmp_path / MY_VALUES).write_text(yaml.safe_dump(values))
    install = run_steps(tmp_path, OPERATOR, readme)
    assert what_would_not_work(install, install.rendered()) == ["ops has no Superset: ENVIRONMENTS is empty"]
    assert "WARNING: no Superset is configured" in install.notes()


@pytest.fixture(autouse=True)
def _folders(tmp_path: Path) -> None:
    for name in ("one", "two"):
        (tmp_path / name).mkdir()


def test_the_production_values_example_of_an_environment_is_one_ops_takes(tmp_path: Path) -> None:
    text = (CHART / "values-prod.yaml").read_text()
    block = text.split("# environments-example-start\n", 1)[1].split("  # environments-example-end", 1)[0]
    example = yaml.safe_load("\n".join(line.removeprefix("  #") for line in block.splitlines()))
    (entry,) = parse_environments(json.dumps(example["environments"])).values()
    assert (entry.id, entry.production, entry.password_env) == ("prod", True, "SUPERSET_PROD_PASSWORD")
    assert example["extraSecretEnv"] == {"SUPERSET_PROD_PASSWORD": "superset-prod-password"}
    values = tmp_path / "example.yaml"
    values.write_text(yaml.safe_dump({"ops": example}))
    lint(values_files=[CHART / "values-prod.yaml", values])  # values.schema.json takes it too
