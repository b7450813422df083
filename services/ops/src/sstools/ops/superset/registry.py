"""One Superset client per configured environment, made once and shared by every request."""

from collections.abc import Mapping

from opentelemetry.sdk.trace import TracerProvider

from sstools.ops.environments import Environment
from sstools.ops.errors import NotFound
from sstools.ops.superset.client import SupersetClient


class UnknownEnvironment(NotFound):
    code = "invalid_environment"

    def __init__(self, env_id: str, known: list[str]) -> None:
        super().__init__(
            f"no environment {env_id!r}; configured: {', '.join(known) or 'none'}", env_id=env_id
        )


class Supersets:
    def __init__(
        self,
        environments: Mapping[str, Environment],
        *,
        timeout: float,
        read_retries: int,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        self.environments = dict(environments)
        self._clients = {
            env_id: SupersetClient(
                environment, timeout=timeout, read_retries=read_retries, tracer_provider=tracer_provider
            )
            for env_id, environment in environments.items()
        }

    def client(self, env_id: str) -> SupersetClient:
        try:
            return self._clients[env_id]
        except KeyError:
            raise UnknownEnvironment(env_id, sorted(self._clients)) from None

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
