"""The agent with everything it talks to, for real, and the pytest fixtures over it (a plugin
the root conftest loads, so the agent's suites and the security suites share one stack): the
router (gRPC, its embedding model warm), ops (with PostgreSQL and the session's two Superset
instances), docparse, convo and the agent itself, each started in-process on free ports; the
chat is driven through ``gradio_client`` exactly as an API client would, with a user JWT in the
Authorization header; attached files are uploaded to convo's REST API first, as the page does, and
the turn names them by the ids convo issued."""

import asyncio
import dataclasses
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from gradio_client import Client
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text as sql

from sstools.agent.events import STREAM_EVENTS
from sstools.agent.main import assemble as assemble_agent
from sstools.agent.settings import AgentSettings
from sstools.agent.ui.app import CHAT_PATH
from sstools.agent.ui.client import chat_client
from sstools.common.catalogue import Role
from sstools.common.db import create_engine
from sstools.common.runtime import Service
from sstools.convo.main import assemble as assemble_convo
from sstools.convo.settings import ConvoSettings
from sstools.convo.store import MIGRATIONS as CONVO_MIGRATIONS
from sstools.devstack.demo import LOCAL_CONVO_TIMEOUT_SECONDS, PASSWORD_ENV, client, environments
from sstools.devstack.fake_llm import FakeLlm
from sstools.devstack.keys import PRIVATE_KEY, PUBLIC_KEYS, user_token
from sstools.devstack.superset import Instance
from sstools.devstack.testing import FaultyLink, free_port, http_get, serving, started_service, wait_until
from sstools.docparse.main import assemble as assemble_docparse
from sstools.docparse.settings import DocparseSettings
from sstools.ops.main import assemble as assemble_ops
from sstools.ops.settings import OpsSettings
from sstools.ops.store import MIGRATIONS
from sstools.ops.store.users import UserStore
from sstools.ops.superset.client import SupersetClient
from sstools.router.main import assemble as assemble_router
from sstools.router.settings import RouterSettings

CONFIRMATION_SECRET = "agent-test-confirmations-" + "c" * 32
AGENT_SECRET = "agent-ops-secret-0123"
USERS = {"vera": Role.VIEWER, "anna": Role.ANALYST, "oleg": Role.OPERATOR, "root": Role.ADMIN}


@dataclass
class Reply:
    """One turn's final list of ChatMessages, as the API client received it."""

    messages: list[dict[str, Any]]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [
            message["metadata"]
            for message in self.messages
            if (message.get("metadata") or {}).get("type") == kind
        ]

    @property
    def types(self) -> list[str]:
        return [str((message.get("metadata") or {}).get("type")) for message in self.messages]

    @property
    def state(self) -> str:
        return str(self.of("state")[-1]["state"])

    @property
    def text(self) -> str:
        return "".join(
            str(message["content"]) for message in self.messages if message["metadata"].get("type") == "token"
        )


def convo_settings_for(database_url: str, **settings: Any) -> ConvoSettings:
    """A convo on free ports on ``database_url`` that trusts the test key (``settings`` override)."""
    return ConvoSettings(
        **{
            "grpc_port": 0,
            "http_port": 0,
            "metrics_port": 0,
            "database_url": database_url,
            "jwt_public_keys": PUBLIC_KEYS,
            **settings,
        }
    )


@dataclass
class AgentStack:
    chat_url: str
    metrics_url: str
    ops_url: str
    database_url: str
    agent_settings: AgentSettings
    tracer_provider: TracerProvider
    ops_link: FaultyLink | None = None
    convo_url: str = ""  # convo's REST API (uploads, conversations)
    # The last card each conversation showed: a confirm or reject answers it, as the page does.
    cards: dict[str, dict[str, Any]] = field(default_factory=dict)

    def token(self, username: str) -> str:
        return user_token(username)

    def client(self, username: str = "root") -> Client:
        return chat_client(self.chat_url, {"Authorization": f"Bearer {self.token(username)}"})

    async def upload(
        self,
        conversation_id: str,
        content: bytes,
        name: str,
        *,
        username: str | None = "root",
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """One file to convo's upload route, as the page sends it (``username=None``: no token)."""
        sent = {"Content-Type": "application/octet-stream"}
        if username is not None:
            sent["Authorization"] = f"Bearer {self.token(username)}"
        async with httpx.AsyncClient(base_url=self.convo_url, timeout=60) as http:
            return await http.post(
                f"/api/assistant/conversations/{conversation_id}/uploads",
                params={"name": name},
                content=content,
                headers=sent | (headers or {}),
            )

    async def say(
        self,
        text: str,
        conversation_id: str,
        *,
        action: str = "send",
        env_id: str = "dev",
        username: str = "root",
        client: Client | None = None,
        files: list[Path] | None = None,
        upload_ids: list[str] | None = None,
        files_input: str | None = None,
        ui_context: str = "",
        card: dict[str, Any] | None = None,
    ) -> Reply:
        """One turn. ``files`` are uploaded first by the turn's user (``client``'s, if given; each
        must be taken: 201) and named by their ids; ``upload_ids`` are named as they are;
        ``files_input`` replaces the whole ``files`` input (a test's malformed value).

        A confirm or reject answers ``card`` — by default the last one the conversation showed —
        by its call id and digest, with ``text`` (a JSON object, if any) as the edited arguments;
        with no card known, ``text`` is sent as it is."""
        ids = []
        token = {"Authorization": client.headers["Authorization"]} if client is not None else {}
        for path in files or []:
            uploaded = await self.upload(
                conversation_id, path.read_bytes(), path.name, username=username, headers=token
            )
            assert uploaded.status_code == 201, f"{path.name}: {uploaded.status_code} {uploaded.text[:300]}"
            ids.append(uploaded.json()["upload_id"])
        ids += upload_ids or []
        attached = files_input if files_input is not None else json.dumps(ids) if ids else ""
        answered = card or self.cards.get(conversation_id)
        if action in ("confirm", "reject") and answered is not None:
            edits = json.loads(text) if text.strip().startswith("{") else {}
            text = json.dumps({"call_id": answered["call_id"], "digest": answered["digest"], "args": edits})

        def submit() -> list[dict[str, Any]]:
            job = (client or self.client(username)).submit(
                text, conversation_id, action, env_id, ui_context, attached, api_name="/chat"
            )
            return list(job.result(timeout=120))

        reply = Reply(await asyncio.to_thread(submit))
        for message in reply.messages:  # the declared contract, on every turn a test takes
            STREAM_EVENTS.validate_python(message["metadata"])
        if shown := reply.of("confirm_required"):
            self.cards[conversation_id] = shown[-1]
        return reply

    async def rows(self, query: str, **params: Any) -> list[dict[str, Any]]:
        """What a query finds in the stack's database (convo's and the checkpointer's tables)."""
        engine = create_engine(self.database_url)
        try:
            async with engine.connect() as connection:
                return [dict(row) for row in (await connection.execute(sql(query), params)).mappings()]
        finally:
            await engine.dispose()

    async def metrics(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        """Every sample the agent's /metrics shows now, by name and labels."""
        exposition = (await http_get(self.metrics_url)).text
        return {
            (sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(exposition)
            for sample in family.samples
        }

    async def audit(self, conversation_id: str) -> list[dict[str, Any]]:
        """The conversation's audit records in convo, oldest first."""
        return await self.rows(
            "SELECT action, decision, code, tool_name, tool_args, calls, outcome, task_id, user_id"
            " FROM assistant_audit WHERE conversation_id = :id ORDER BY created_at",
            id=conversation_id,
        )


def agent_environment(settings: AgentSettings) -> dict[str, str]:
    """What a process of the agent's console command needs of ``settings`` to reach this stack:
    its secrets, ops and the router (a test adds ports and the other peers it needs)."""
    return {
        "DATABASE_URL": settings.database_url,
        "JWT_PUBLIC_KEYS": settings.jwt_public_keys,
        "CONFIRMATION_SECRET": settings.confirmation_secret.get_secret_value(),
        "AGENT_OPS_URL": settings.ops_url,
        "AGENT_OPS_CLIENT_SECRET": settings.ops_client_secret.get_secret_value(),
        "AGENT_ROUTER_TARGET": settings.router_target,
    }


def new_conversation() -> str:
    return str(uuid.uuid4())


async def _users(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        store = UserStore(engine)
        for username, role in USERS.items():
            await store.create(username, f"{username}-pass-123", role)
    finally:
        await engine.dispose()


@pytest.fixture
async def agent_stack(
    supersets: dict[str, Instance], fresh_database_url: str, tracer_provider: TracerProvider, tmp_path: Path
) -> AsyncIterator[AgentStack]:
    """The agent with the offline model."""
    async with running_stack(supersets, fresh_database_url, tracer_provider, tmp_path) as stack:
        yield stack


@pytest.fixture
def llm() -> FakeLlm:
    return FakeLlm(model="scripted")


@pytest.fixture
async def llm_stack(
    supersets: dict[str, Instance],
    fresh_database_url: str,
    tracer_provider: TracerProvider,
    tmp_path: Path,
    llm: FakeLlm,
) -> AsyncIterator[AgentStack]:
    """The agent with ChatOpenAI against the scripted OpenAI-compatible server."""
    async with scripted_stack(llm, supersets, fresh_database_url, tracer_provider, tmp_path) as stack:
        yield stack


@asynccontextmanager
async def scripted_stack(
    llm: FakeLlm,
    supersets: dict[str, Instance],
    fresh_database_url: str,
    tracer_provider: TracerProvider,
    tmp_path: Path,
    **overrides: Any,
) -> AsyncIterator[AgentStack]:
    """:func:`running_stack` with the scripted model serving on a socket."""
    async with (
        serving(llm.app()) as url,
        running_stack(
            supersets,
            fresh_database_url,
            tracer_provider,
            tmp_path,
            llm_base_url=f"{url}/v1",
            llm_model=llm.model,
            llm_api_key="scripted-key",
            **overrides,
        ) as stack,
    ):
        yield stack


@pytest.fixture
async def dev(supersets: dict[str, Instance]) -> AsyncIterator[SupersetClient]:
    """A client of the dev Superset, to check what the stack did there."""
    superset = client(supersets["dev"], PASSWORD_ENV)
    yield superset
    await superset.aclose()


@pytest.fixture
async def prod(supersets: dict[str, Instance]) -> AsyncIterator[SupersetClient]:
    """A client of the prod Superset, to check what the stack did there."""
    superset = client(supersets["prod"], PASSWORD_ENV)
    yield superset
    await superset.aclose()


@asynccontextmanager
async def running_stack(
    supersets: dict[str, Instance],
    fresh_database_url: str,
    tracer_provider: TracerProvider,
    tmp_path: Path,
    *,
    faulty_ops: bool = False,
    ops_environments: str | None = None,
    ops_overrides: dict[str, Any] | None = None,
    account_check_seconds: float = 5.0,
    **agent_overrides: Any,
) -> AsyncIterator[AgentStack]:
    """The whole stack; with ``faulty_ops`` the agent reaches ops through a :class:`FaultyLink`;
    ``ops_environments`` replaces ops' ENVIRONMENTS (dev and prod) and ``ops_overrides`` any other
    of ops' settings (single sign-on, say); agent and convo trust ops' word that a user is active
    ``account_check_seconds``; ``agent_overrides`` replace any of the agent's settings (a dead
    peer's address, say)."""
    await asyncio.to_thread(MIGRATIONS.upgrade, fresh_database_url)
    await asyncio.to_thread(CONVO_MIGRATIONS.upgrade, fresh_database_url)
    await _users(fresh_database_url)
    async with AsyncExitStack() as stack:
        router = await stack.enter_async_context(
            started_service(
                RouterSettings(grpc_port=0, metrics_port=0, jwt_public_keys=PUBLIC_KEYS),
                assemble_router,
                tracer_provider,
            )
        )
        ops_settings = OpsSettings(
            http_port=0,
            metrics_port=0,
            database_url=fresh_database_url,
            jwt_private_key=PRIVATE_KEY,
            jwt_public_keys=PUBLIC_KEYS,
            confirmation_secret=CONFIRMATION_SECRET,
            service_clients=f"agent:{AGENT_SECRET}",
            environments=ops_environments or environments(supersets, PASSWORD_ENV),
            backup_dir=tmp_path / "backups",
            git_repo=tmp_path / "exports",
            **(ops_overrides or {}),
        )
        ops = await stack.enter_async_context(started_service(ops_settings, assemble_ops, tracer_provider))
        docparse = await stack.enter_async_context(
            started_service(
                DocparseSettings(grpc_port=0, metrics_port=0, workers=1, jwt_public_keys=PUBLIC_KEYS),
                assemble_docparse,
                tracer_provider,
            )
        )
        ops_url = f"http://127.0.0.1:{ops.ports['api']}"
        convo_settings = convo_settings_for(
            fresh_database_url, ops_url=ops_url, account_check_seconds=account_check_seconds
        )
        convo = await stack.enter_async_context(
            started_service(convo_settings, assemble_convo, tracer_provider)
        )
        link = await stack.enter_async_context(FaultyLink(ops.ports["api"])) if faulty_ops else None
        agent_values: dict[str, Any] = {
            "http_port": 0,
            "metrics_port": 0,
            "database_url": fresh_database_url,
            "jwt_public_keys": PUBLIC_KEYS,
            "confirmation_secret": CONFIRMATION_SECRET,
            "ops_url": f"http://127.0.0.1:{link.port}" if link else ops_url,
            "ops_client_secret": AGENT_SECRET,
            "account_check_seconds": account_check_seconds,
            "router_target": f"127.0.0.1:{router.ports['grpc']}",
            "convo_target": f"127.0.0.1:{convo.ports['grpc']}",
            "docparse_target": f"127.0.0.1:{docparse.ports['grpc']}",
            # suites drive many turns a minute as one user; the limit has tests of its own
            "turns_per_user": 10_000,
            "convo_timeout_seconds": LOCAL_CONVO_TIMEOUT_SECONDS,
        }
        agent_settings = AgentSettings(**(agent_values | agent_overrides))
        agent = await stack.enter_async_context(
            started_service(agent_settings, assemble_agent, tracer_provider)
        )

        await agent_ready(agent)
        yield AgentStack(
            f"http://127.0.0.1:{agent.ports['chat']}{CHAT_PATH}/",
            f"http://127.0.0.1:{agent.ports['metrics']}/metrics",
            ops_url,
            fresh_database_url,
            agent_settings,
            tracer_provider,
            link,
            convo_url=f"http://127.0.0.1:{convo.ports['rest']}",
        )


async def agent_ready(agent: Service) -> None:
    async def ready() -> bool:
        return (await http_get(f"http://127.0.0.1:{agent.ports['metrics']}/readyz")).status_code == 200

    await wait_until(ready, 30, "the agent to be ready")


@asynccontextmanager
async def another_replica(stack: AgentStack) -> AsyncIterator[AgentStack]:
    """A second agent process of the stack's settings (its own ports), sharing what the first
    shares — convo, ops, the checkpoints — and the cards the page was shown: a replica as the
    chart runs several."""
    async with started_service(stack.agent_settings, assemble_agent, stack.tracer_provider) as agent:
        await agent_ready(agent)
        yield dataclasses.replace(
            stack,
            chat_url=f"http://127.0.0.1:{agent.ports['chat']}{CHAT_PATH}/",
            metrics_url=f"http://127.0.0.1:{agent.ports['metrics']}/metrics",
        )


def agent_process(settings: AgentSettings) -> tuple[dict[str, str], str, int]:
    """The stack's agent as a process of its own (to kill and start again): its environment, chat
    URL and probes port, for :func:`sstools.devstack.testing.service_process`."""
    http_port, metrics_port = free_port(), free_port()
    environment = {
        **agent_environment(settings),
        "AGENT_CONVO_TARGET": settings.convo_target,
        "AGENT_DOCPARSE_TARGET": settings.docparse_target,
        # as the stack's own agent: suites send many turns a minute, convo shares two cores
        "AGENT_TURNS_PER_USER": str(settings.turns_per_user),
        "AGENT_CONVO_TIMEOUT_SECONDS": str(settings.convo_timeout_seconds),
        "AGENT_HTTP_PORT": str(http_port),
        "AGENT_METRICS_PORT": str(metrics_port),
    }
    return environment, f"http://127.0.0.1:{http_port}{CHAT_PATH}/", metrics_port


@pytest.fixture
def conversation() -> str:
    return new_conversation()


def dump(reply: Reply) -> str:
    """For assertion messages."""
    return json.dumps([message.get("metadata") for message in reply.messages], ensure_ascii=False)[:3000]
