"""Agent process: the chat app on ``AGENT_HTTP_PORT``, probes and metrics on ``AGENT_METRICS_PORT``."""

from sstools.agent.settings import AgentSettings
from sstools.agent.ui.app import build_app
from sstools.common.runtime import Service, service_main


def assemble(settings: AgentSettings, service: Service) -> None:
    service.add_http("chat", build_app(), settings.http_port)


def main() -> None:
    service_main(AgentSettings, assemble)
