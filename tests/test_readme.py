"""The README's configuration table lists exactly the variables the settings classes read."""

import re

from sstools.common.settings import environment_variables
from sstools.devstack.paths import REPO_ROOT
from sstools.devstack.stack import SETTINGS


def _readme_variables() -> dict[str, set[str]]:
    table: dict[str, set[str]] = {}
    for match in re.finditer(
        r"^\| `([A-Z0-9_]+)` \| ([a-z, ]+) \|", (REPO_ROOT / "README.md").read_text(), re.M
    ):
        table[match.group(1)] = {part.strip() for part in match.group(2).split(",")}
    return table


def test_configuration_table_matches_the_settings_classes() -> None:
    read_by: dict[str, set[str]] = {}
    for name, settings_class in SETTINGS.items():
        for variable in environment_variables(settings_class):
            read_by.setdefault(variable, set()).add(name)
    documented = {
        variable: set(SETTINGS) if services == {"all"} else services
        for variable, services in _readme_variables().items()
    }
    assert documented == read_by


def test_readme_starts_with_the_two_commands() -> None:
    first_lines = (REPO_ROOT / "README.md").read_text().splitlines()[:5]
    commands = [line.split("#")[0].strip() for line in first_lines if line.startswith("    ")]
    assert commands == ["make run", "make test"]
