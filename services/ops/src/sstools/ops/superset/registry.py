"""One Superset connection pool per configured environment, made once and shared by every
request, and the clients over it: a person's (most calls), or the service account's (the few that
must not depend on one person's view: README, "What runs as whom")."""

from collections import OrderedDict
from collections.abc import Callable, Mapping

from opentelemetry.sdk.trace import TracerProvider

from sstools.ops.environments import Environment
from sstools.ops.errors import NotFound
from sstools.ops.superset.client import SupersetClient
from sstools.ops.telemetry import SupersetMetrics

# People whose client (with its Superset session for CSRF) is kept; the least recent is dropped.
PEOPLE_KEPT = 1024

# Signs the token that lets ops act as a person (the username) in one environment (the env id).
Mint = Callable[[str, str], str]


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
        mint: Mint,
        *,
        timeout: float,
        read_retries: int,
        tracer_provider: TracerProvider | None = None,
        metrics: SupersetMetrics | None = None,
    ) -> None:
        self.environments = dict(environments)
        self._mint = mint
        self._clients = {
            env_id: SupersetClient(
                environment,
                timeout=timeout,
                read_retries=read_retries,
                tracer_provider=tracer_provider,
                metrics=metrics,
            )
            for env_id, environment in environments.items()
        }
        self._people: OrderedDict[tuple[str, str], SupersetClient] = OrderedDict()

    def environment(self, env_id: str) -> Environment:
        """The configured environment (:class:`UnknownEnvironment` if there is none by that id)."""
        return self.service_account(env_id).environment

    def as_person(self, env_id: str, username: str) -> SupersetClient:
        """``env_id``'s client acting as ``username``: Superset's permissions for them decide."""
        key = (env_id, username)
        client = self._people.get(key)
        if client is None:
            client = self.service_account(env_id).as_person(username, lambda: self._mint(username, env_id))
            self._people[key] = client
            if len(self._people) > PEOPLE_KEPT:
                self._people.popitem(last=False)
        self._people.move_to_end(key)
        return client

    def service_account(self, env_id: str) -> SupersetClient:
        """``env_id``'s client signed in as its configured account, for what runs as no person."""
        try:
            return self._clients[env_id]
        except KeyError:
            raise UnknownEnvironment(env_id, sorted(self._clients)) from None

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
