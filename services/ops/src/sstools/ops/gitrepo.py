"""A git repository of dashboard exports: branches, and commits of what an environment holds.

Driven through the git CLI. Commits are made in a temporary worktree of the branch, so the
repository's own checkout never changes and a failed commit leaves nothing behind; one lock
serialises changes (the repository lives on one volume of one ops replica).
"""

import asyncio
import io
import shutil
import tempfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any

from sstools.ops.errors import Conflict, InvalidRequest, NotFound, OperationError

DEFAULT_BRANCH = "main"


class GitFailed(OperationError):
    status = 500
    code = "git_failed"


class GitRepository:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = asyncio.Lock()

    async def _git(self, *args: str, cwd: Path | None = None, check: bool = True) -> tuple[int, str]:
        process = await asyncio.create_subprocess_exec(
            "git",
            *args,
            cwd=cwd or self.path,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={"GIT_TERMINAL_PROMPT": "0", "HOME": str(self.path), "PATH": "/usr/local/bin:/usr/bin:/bin"},
        )
        output, _ = await process.communicate()
        text = output.decode(errors="replace").strip()
        if check and process.returncode != 0:
            raise GitFailed(f"git {args[0]} failed: {text[-500:]}")
        return process.returncode or 0, text

    async def ensure(self) -> None:
        """Create the repository, with an empty first commit on main, if it is not there."""
        async with self._lock:
            if (self.path / ".git").exists():
                return
            self.path.mkdir(parents=True, exist_ok=True)
            await self._git("init", "--quiet", "--initial-branch", DEFAULT_BRANCH)
            await self._git(
                *_identity("sstools-ops"),
                "commit",
                "--quiet",
                "--allow-empty",
                "-m",
                "Repository of dashboard exports",
            )

    async def _valid_branch(self, name: str) -> None:
        code, _ = await self._git("check-ref-format", "--branch", name, check=False)
        if code != 0 or name.startswith("-"):
            raise InvalidRequest(f"{name!r} is not a valid branch name", branch=name)

    async def _sha(self, ref: str) -> str | None:
        code, sha = await self._git("rev-parse", "--verify", "--quiet", f"refs/heads/{ref}", check=False)
        return sha if code == 0 else None

    async def branches(self) -> list[str]:
        await self.ensure()
        _, text = await self._git("for-each-ref", "--format=%(refname:short)", "refs/heads")
        return sorted(text.split())

    async def create_branch(self, name: str, start: str = DEFAULT_BRANCH) -> dict[str, Any]:
        await self.ensure()
        await self._valid_branch(name)
        async with self._lock:
            if await self._sha(name) is not None:
                raise Conflict(f"branch {name!r} already exists", branch=name)
            if await self._sha(start) is None:
                raise NotFound(f"no branch {start!r} to start from", branch=start)
            await self._git("branch", name, start)
            return {"branch": name, "from": start, "sha": await self._sha(name)}

    async def commit(self, branch: str, files: dict[str, bytes], message: str, author: str) -> dict[str, Any]:
        """Write ``files`` (repository paths) on ``branch`` and commit them if anything changed."""
        await self.ensure()
        await self._valid_branch(branch)
        async with self._lock:
            if await self._sha(branch) is None:
                raise NotFound(f"no branch {branch!r}; create it first", branch=branch)
            worktree = Path(tempfile.mkdtemp(prefix="sstools-commit-"))
            shutil.rmtree(worktree)
            await self._git("worktree", "add", "--quiet", str(worktree), branch)
            try:
                for name, data in files.items():
                    target = worktree / name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(data)
                await self._git(
                    "add", "--all", "--", *sorted({name.split("/")[0] for name in files}), cwd=worktree
                )
                _, changed = await self._git("diff", "--cached", "--name-status", cwd=worktree)
                if not changed:
                    return {
                        "branch": branch,
                        "sha": await self._sha(branch),
                        "committed": False,
                        "changed": [],
                    }
                await self._git(*_identity(author), "commit", "--quiet", "-m", message, cwd=worktree)
            finally:
                await self._git("worktree", "remove", "--force", str(worktree), check=False)
            return {
                "branch": branch,
                "sha": await self._sha(branch),
                "committed": True,
                "changed": changed.splitlines(),
            }


def _identity(name: str) -> tuple[str, ...]:
    return ("-c", f"user.name={name}", "-c", f"user.email={name}@sstools.local")


def export_files(archive: bytes, env_id: str) -> dict[str, bytes]:
    """A Superset export laid out under ``environments/<env>/``: its dated top folder and the
    metadata file (a timestamp, nothing else) dropped, so an unchanged dashboard commits nothing."""
    files: dict[str, bytes] = {}
    with zipfile.ZipFile(io.BytesIO(archive)) as bundle:
        for name in bundle.namelist():
            parts = PurePosixPath(name).parts[1:]
            if not parts or parts == ("metadata.yaml",) or ".." in parts:
                continue
            files[str(PurePosixPath("environments", env_id, *parts))] = bundle.read(name)
    return files
