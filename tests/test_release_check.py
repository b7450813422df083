"""``sstools-agent check``, what ``helm test`` runs in a release: against a whole running stack
(ops over PostgreSQL and the session's Supersets, the router with its model, the agent's own
settings), each step must say what works and, for what does not, what to do about it."""

import asyncio
import os
import sys
from contextlib import ExitStack
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider

from sstools.agent.release_check import PASSWORD_VARIABLE, Step, check
from sstools.devstack.agentstack import AgentStack, agent_environment, running_stack
from sstools.devstack.oidc import Client, Person, running
from sstools.devstack.superset import Instance
from sstools.devstack.testing import free_port, started_service
from sstools.router.main import assemble as assemble_router
from sstools.router.settings import RouterSettings

PASSWORD = "root-pass-123"  # root, an admin of the stack's accounts (agentstack.USERS)


def _outcomes(steps: list[Step]) -> dict[str, str]:
    return {step.name: step.outcome for step in steps}


async def test_the_agents_check_command_passes_every_step_of_a_working_release(
    agent_stack: AgentStack,
) -> None:
    environment = {
        "PATH": os.environ["PATH"],
        **agent_environment(agent_stack.agent_settings),
        PASSWORD_VARIABLE: PASSWORD,
    }
    process = await asyncio.create_subprocess_exec(
        Path(sys.executable).with_name("sstools-agent"),
        "check",
        "--username",
        "root",
        env=environment,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    lines = out.decode().splitlines()
    assert process.returncode == 0, (lines, err.decode()[-2000:])
    assert lines == [
        "OK      sign in: root, role admin, with a password",
        "OK      list environments: dev, prod (production)",
        lines[2],
    ], lines
    assert lines[2].startswith("OK      route a question: 'покажи дашборды продаж' → search_dashboards"), (
        lines
    )
    assert "'list the environments' → list_environments" in lines[2], lines


async def test_a_wrong_password_fails_the_sign_in_and_says_why_the_environments_were_not_listed(
    agent_stack: AgentStack,
) -> None:
    steps = await check(agent_stack.agent_settings, "root", "not-roots-password")
    assert _outcomes(steps) == {"sign in": "failed", "list environments": "skipped", "route a question": "ok"}
    assert steps[0].detail == "root was refused (401): bad_credentials"
    assert steps[1].detail == "no person is signed in (root could not sign in)"


async def test_no_password_where_passwords_sign_in_fails_naming_the_variable(agent_stack: AgentStack) -> None:
    steps = await check(agent_stack.agent_settings, "root", None)
    assert steps[0] == Step("sign in", "failed", f"password sign-in is on, but {PASSWORD_VARIABLE} is empty")


async def test_a_router_that_does_not_answer_fails_even_though_the_agent_would_route_without_it(
    agent_stack: AgentStack,
) -> None:
    """The agent's own router client falls back to keywords in process: a check through that
    fallback would pass with no router at all."""
    dead = agent_stack.agent_settings.model_copy(update={"router_target": f"127.0.0.1:{free_port()}"})
    steps = await check(dead, "root", PASSWORD)
    assert _outcomes(steps) == {"sign in": "ok", "list environments": "ok", "route a question": "failed"}
    assert steps[2].detail.startswith("the router answered UNAVAILABLE"), steps[2]


async def test_a_router_without_its_model_fails_the_routing_step(
    agent_stack: AgentStack, tracer_provider: TracerProvider
) -> None:
    keywords_only = RouterSettings(
        grpc_port=0,
        metrics_port=0,
        jwt_public_keys=agent_stack.agent_settings.jwt_public_keys,
        embedding_model="st:/nowhere/no-such-model",
    )
    async with started_service(keywords_only, assemble_router, tracer_provider) as router:
        target = f"127.0.0.1:{router.ports['grpc']}"
        steps = await check(
            agent_stack.agent_settings.model_copy(update={"router_target": target}), "root", PASSWORD
        )
    assert steps[2] == Step(
        "route a question", "failed", "the router routes by keywords alone: its embedding model is not loaded"
    )


async def test_ops_with_no_superset_fails_the_environments_step_naming_the_value_to_set(
    supersets: dict[str, Instance], fresh_database_url: str, tracer_provider: TracerProvider, tmp_path: Path
) -> None:
    async with running_stack(
        supersets, fresh_database_url, tracer_provider, tmp_path, ops_environments="[]"
    ) as stack:
        steps = await check(stack.agent_settings, "root", PASSWORD)
    assert steps[1] == Step(
        "list environments", "failed", "ops has no Superset: set ops.environments in your values"
    )


async def test_with_password_sign_in_off_ops_must_send_a_browser_on_to_a_provider_that_answers(
    supersets: dict[str, Instance], fresh_database_url: str, tracer_provider: TracerProvider, tmp_path: Path
) -> None:
    callback = (
        "http://127.0.0.1:1/api/auth/oidc/callback"  # never reached: the check stops at the provider's door
    )
    person = Person("ana", "ana-pass", "ana@example.com", "Ana", ("admins",))
    port = free_port()
    sso = {
        "password_sign_in": False,
        "oidc_issuer": f"http://127.0.0.1:{port}",
        "oidc_client_id": "sstools-ops",
        "oidc_client_secret": "client-secret",
        "oidc_redirect_url": callback,
        "oidc_role_mapping": '{"admins": "admin"}',
        "oidc_provider_name": "Acme ID",
    }
    with ExitStack() as provider:
        provider.enter_context(
            running(
                tmp_path / "oidc",
                port,
                [Client("sstools-ops", "client-secret", (callback,))],
                [person],
                "Acme ID",
            )
        )
        async with running_stack(
            supersets, fresh_database_url, tracer_provider, tmp_path, ops_overrides=sso
        ) as stack:
            answered = await check(stack.agent_settings, "root", PASSWORD)
            provider.close()  # the provider goes; ops still knows its document
            gone = await check(stack.agent_settings, "root", PASSWORD)
    assert answered[:2] == [
        Step("sign in", "ok", "ops sends a browser on to Acme ID, which answers (127.0.0.1)"),
        Step(
            "list environments",
            "skipped",
            "no person is signed in"
            " (password sign-in is off: a person signs in through the provider, in a browser)",
        ),
    ], answered
    assert gone[0] == Step("sign in", "failed", "Acme ID at 127.0.0.1 does not answer: ConnectError"), gone


@pytest.fixture(autouse=True)
def _no_check_password(monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-process checks take the password as an argument alone."""
    monkeypatch.delenv(PASSWORD_VARIABLE, raising=False)
