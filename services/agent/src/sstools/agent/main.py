"""Agent process: Gradio ``/chat`` on ``AGENT_HTTP_PORT`` (with the chat port's own probes),
probes and metrics on ``AGENT_METRICS_PORT``. Ready once the checkpoint tables exist."""

import gradio as gr
import openai
from fastapi import FastAPI

from sstools.agent.chat import ChatService, Clients
from sstools.agent.checkpoints import Checkpoints, CheckpointSchema
from sstools.agent.clients.convo import ConvoClient, TurnBudget
from sstools.agent.clients.docparse import DocparseClient
from sstools.agent.clients.ops import OpsClient
from sstools.agent.clients.router import ToolRouter
from sstools.agent.graph import AgentGraph, build_graph
from sstools.agent.grounding import Grounding, PersonGround
from sstools.agent.llm import chat_model
from sstools.agent.planner import OFFLINE_MODEL_NAME
from sstools.agent.settings import AgentSettings
from sstools.agent.telemetry import TurnMetrics
from sstools.agent.tools import Passes, build_tools
from sstools.agent.ui.app import CHAT_PATH, chat_blocks
from sstools.agent.ui.closed import ClosedGradioUploads
from sstools.common.accounts import Accounts
from sstools.common.confirmation import ConfirmationCodec
from sstools.common.metrics import GenAiClientMetrics
from sstools.common.runtime import Service, service_main


def assemble(settings: AgentSettings, service: Service) -> None:
    checkpoints = Checkpoints(settings.database_url)
    ops = OpsClient(
        settings.ops_url,
        settings.ops_client_id,
        settings.ops_client_secret.get_secret_value(),
        timeout=settings.tool_timeout_seconds,
        tracer_provider=service.tracer_provider,
    )
    accounts = Accounts(
        settings.ops_url,
        settings.account_check_seconds,
        timeout=settings.tool_timeout_seconds,
        tracer_provider=service.tracer_provider,
    )
    # the service token ops issues the agent authenticates it to its gRPC peers too
    router = ToolRouter(settings.router_target, settings.router_timeout_seconds, service.tracer_provider, ops)
    convo = ConvoClient(
        settings.convo_target,
        settings.convo_timeout_seconds,
        service.tracer_provider,
        ops,
        upload_timeout_seconds=settings.docparse_timeout_seconds,
    )
    docparse = DocparseClient(
        settings.docparse_target, settings.docparse_timeout_seconds, service.tracer_provider, ops
    )
    llm_http = openai.DefaultAsyncHttpxClient(timeout=settings.llm_timeout_seconds)
    model, model_name, provider_name = chat_model(settings, llm_http)
    tracer = service.tracer_provider.get_tracer("sstools.agent")
    model_metrics = GenAiClientMetrics(service.registry)
    passes = Passes(ConfirmationCodec(settings.confirmation_secret.get_secret_value()))
    tools = build_tools(
        ops,
        passes,
        task_wait_seconds=settings.tool_timeout_seconds * settings.task_wait_share,
        retry_backoff_seconds=settings.tool_retry_backoff_seconds,
    )
    grounding = Grounding(ops, settings.grounding_seconds)
    compiled: list[AgentGraph] = []

    def graph() -> AgentGraph:
        """Compiled on first use, once the checkpointer exists (it belongs to the event loop)."""
        if not compiled:
            saver = checkpoints.saver
            timeout = settings.tool_timeout_seconds
            compiled.append(
                build_graph(
                    lambda: model,
                    tools,
                    saver,
                    gate_facts=ops,
                    passes=passes,
                    tool_timeout_seconds=timeout,
                    tracer=tracer,
                    model_name=model_name,
                    provider_name=provider_name,
                    model_metrics=model_metrics,
                    ground=lambda run: PersonGround(grounding, router, run.user_token, run.username),
                )
            )
        return compiled[0]

    chat = ChatService(
        graph,
        Clients(router=router, convo=convo, ops=ops, docparse=docparse, accounts=accounts),
        model_name,
        tracer,
        TurnMetrics(service.registry, tools),
        lease_ttl_seconds=settings.lease_ttl_seconds,
        turn_budget=TurnBudget(settings.turns_per_user, settings.turns_window_seconds),
        service_identity=settings.ops_client_id,
        # the offline planner answers from tool results only: it always searches
        prefetch_limit=settings.prefetch_dashboard_limit if model_name != OFFLINE_MODEL_NAME else 0,
    )
    codec = settings.token_codec()

    async def close() -> None:
        await router.close()
        await convo.close()
        await docparse.close()
        await ops.aclose()
        await accounts.aclose()
        await llm_http.aclose()
        await checkpoints.close()

    app = FastAPI(title="SS-Tools agent", version="0.1.0")
    service.add_http("chat", app, settings.http_port)  # its probes at /healthz and /readyz
    app.add_middleware(ClosedGradioUploads, chat_path=CHAT_PATH)  # files go to convo, by id
    gr.mount_gradio_app(app, chat_blocks(chat, codec, settings.concurrency_limit, model_name), path=CHAT_PATH)
    service.readiness.checks["checkpoints"] = checkpoints.check
    service.add_background(checkpoints.prepare)
    service.add_cleanup(close)


def main() -> None:
    """``sstools-agent [serve|migrate]``, and ``sstools-agent check [--username NAME]``: what
    ``helm test`` runs (:mod:`sstools.agent.release_check`)."""
    import sys  # here, with the imports below: only main() needs them

    if sys.argv[1:2] == ["check"]:
        import argparse

        from sstools.agent import release_check
        from sstools.common.runtime import load_settings

        parser = argparse.ArgumentParser(prog="sstools-agent check", description=release_check.__doc__)
        parser.add_argument(
            "--username", default="admin", help="who signs in (password: $AGENT_CHECK_PASSWORD)"
        )
        username = parser.parse_args(sys.argv[2:]).username
        raise SystemExit(release_check.main(load_settings(AgentSettings), username))
    service_main(AgentSettings, assemble, migrations=CheckpointSchema())
