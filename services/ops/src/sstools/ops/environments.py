"""The Superset environments ops can reach, from ``ENVIRONMENTS`` (a JSON list).

Each entry: ``id``, ``name``, ``url``, ``username``, and where its password lives
(``password_env``: the name of an environment variable, or ``password_file``: a mounted
secret), never the password itself; ``production: true`` makes it a production environment
(as an id naming prod always is). A bad entry stops the service at start with the reason, not
at the first call.
"""

import os
from pathlib import Path

from pydantic import BaseModel, Field, HttpUrl, TypeAdapter, ValidationError, model_validator

from sstools.common.policy import is_production


class EnvironmentConfigError(ValueError):
    """ENVIRONMENTS cannot be used as given."""


class Environment(BaseModel):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$")
    name: str = Field(min_length=1, max_length=200)
    url: HttpUrl
    username: str = Field(default="admin", min_length=1)
    password_env: str | None = None
    password_file: Path | None = None
    production: bool = False
    browser_url: HttpUrl | None = None

    @property
    def browser_origin(self) -> str | None:
        """The origin the drawer's messages come from: ``scheme://host[:port]``."""
        if self.browser_url is None:
            return None
        url = self.browser_url
        default_port = {"http": 80, "https": 443}[url.scheme]
        port = f":{url.port}" if url.port not in (None, default_port) else ""
        return f"{url.scheme}://{url.host}{port}"

    @model_validator(mode="after")
    def _one_password_source(self) -> "Environment":
        if (self.password_env is None) == (self.password_file is None):
            raise ValueError("give exactly one of password_env or password_file")
        self.production = is_production(self.id, self.production)
        return self

    def password(self) -> str:
        """Read when a client signs in, so a rotated secret is picked up without a restart."""
        if self.password_env is not None:
            value = os.environ.get(self.password_env)
            if value is None:
                raise EnvironmentConfigError(f"environment {self.id}: {self.password_env} is not set")
            return value
        assert self.password_file is not None
        return self.password_file.read_text().strip()


_ENVIRONMENTS = TypeAdapter(list[Environment])


def parse_environments(raw: str) -> dict[str, Environment]:
    try:
        environments = _ENVIRONMENTS.validate_json(raw or "[]")
    except ValidationError as error:
        raise EnvironmentConfigError(f"ENVIRONMENTS is not valid: {error}") from None
    ids = [environment.id for environment in environments]
    if len(ids) != len(set(ids)):
        raise EnvironmentConfigError("ENVIRONMENTS has two entries with the same id")
    return {environment.id: environment for environment in environments}
