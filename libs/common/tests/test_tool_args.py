"""Argument types that reach another system (:mod:`sstools.common.tool_args`): a branch name is
one git accepts as a branch and never an option or revision syntax."""

import subprocess

import pytest
from pydantic import TypeAdapter, ValidationError

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
