"""Argument types that reach another system (:mod:`sstools.common.tool_args`): a branch name is
one git accepts as a branch and never an option or revision syntax; a name where an id belongs
says which tool finds the id."""

import subprocess

import pytest
from pydantic import TypeAdapter, ValidationError

from sstools.common.catalogue import ARGS
from sstools.common.tool_args import GitRef

BRANCH = TypeAdapter(GitRef)
GOOD = ["main", "feature/x-1", "a.b", "release/1.2.3", "v1.0_rc-2", "x" * 200]
# Options, revision syntax and what `git check-ref-format` refuses, each a way to make git do or
# name something else than a branch.
BAD = [
    "-x",
    "--upload-pack=touch /tmp/pwned",
    "a..b",
    "refs/heads/../x",
    "HEAD~1",
    "HEAD^",
    "a@{1}",
    "a:b",
    "x.lock",
    "a/b.lock/c",
    "a/",
    "/a",
    "a//b",
    ".a",
    "a.",
    "feature/.hidden",
    "a b",
    "a\nb",
    "x" * 201,
]


def _git_accepts(name: str) -> bool:
    return subprocess.run(["git", "check-ref-format", "--branch", name], capture_output=True).returncode == 0


@pytest.mark.parametrize("name", GOOD)
def test_a_branch_name_git_accepts_is_taken(name: str) -> None:
    assert _git_accepts(name)
    assert BRANCH.validate_python(name) == name


@pytest.mark.parametrize("name", BAD)
def test_an_option_revision_or_name_git_refuses_is_no_branch(name: str) -> None:
    with pytest.raises(ValidationError):
        BRANCH.validate_python(name)


@pytest.mark.parametrize(
    ("tool", "args", "where", "said"),
    [
        (
            "deploy_dashboard",
            {"dashboard_id": "Sales Overview", "env_id": "prod"},
            ("dashboard_id",),
            "'Sales Overview' is not a dashboard id (a number): search_dashboards finds it by its name",
        ),
        (
            "get_health_summary",
            {"dashboard_ids": [3, "sales-overview"], "env_id": "dev"},
            ("dashboard_ids", 1),
            "'sales-overview' is not a dashboard id (a number): search_dashboards finds it by its name",
        ),
        (
            "superset_execute_sql",
            {"database_id": "examples", "sql": "select 1", "env_id": "dev"},
            ("database_id",),
            "'examples' is not a database id (a number): superset_explore_database finds it by its name",
        ),
    ],
)
def test_a_name_where_an_id_belongs_is_refused_naming_the_tool_that_finds_it(
    tool: str, args: dict[str, object], where: tuple[object, ...], said: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        ARGS[tool].model_validate(args)
    assert [(issue["loc"], issue["msg"]) for issue in refused.value.errors()] == [(where, said)]


def test_an_id_written_as_digits_is_still_an_id_and_bounds_still_hold() -> None:
    deploy = ARGS["deploy_dashboard"].model_validate({"dashboard_id": "42", "env_id": "prod"})
    assert deploy.dashboard_id == 42  # type: ignore[attr-defined]
    for wrong in (0, "0", 2**53 + 1):
        with pytest.raises(ValidationError, match="dashboard_id"):
            ARGS["deploy_dashboard"].model_validate({"dashboard_id": wrong, "env_id": "prod"})
