"""The types of the tools' arguments and of ops' endpoints, which the catalogue's declarations use.

The agent binds these models to its LangChain tools (the model sees their JSON schema), its
confirmation gate and fast path validate calls with them, and ops takes the same query and body
models as its request models and the same path templates as its routes — so the agent→ops
contract is one declaration, not two that can drift. URLs are built from validated values, each
path segment percent-encoded; an environment id is one validated type everywhere
(:data:`EnvId`), so ``prod/maintenance/end#`` is refused before any URL is made from it.
"""

import re
import uuid
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar
from urllib.parse import quote

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints
from pydantic_core import PydanticCustomError

ENV_ID_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
ENV_ID_MAX_CHARS = 63
_ENV_ID = re.compile(ENV_ID_PATTERN)

EnvId = Annotated[str, StringConstraints(pattern=ENV_ID_PATTERN, max_length=ENV_ID_MAX_CHARS)]
"""Lower-case letters, digits, ``-`` and ``_``, starting with a letter or digit, at most 63
characters. Whether it names a configured environment is asked where that is known."""

ObjectId = Annotated[int, Field(ge=1, le=2**53)]
"""A Superset object's id (dashboard, database, dataset)."""


def _named_instead(kind: str, finder: str) -> BeforeValidator:
    """A name where an id belongs is refused saying which tool finds the id: a person or model that
    knows a dashboard by its title is told where to look, not only that a number was expected."""

    def check(value: object) -> object:
        if isinstance(value, str) and not value.strip().isdigit():
            raise PydanticCustomError(
                "named_instead_of_id",
                "{named} is not a {kind} id (a number): {finder} finds it by its name",
                {"named": repr(value[:80]), "kind": kind, "finder": finder},
            )
        return value

    return BeforeValidator(check)


DashboardId = Annotated[ObjectId, _named_instead("dashboard", "search_dashboards")]
DatabaseId = Annotated[ObjectId, _named_instead("database", "superset_explore_database")]

IDENTIFIER_PATTERN = r"^[^\W\d][\w$-]{0,127}$"
SqlIdentifier = Annotated[str, StringConstraints(pattern=IDENTIFIER_PATTERN, max_length=128)]
"""A schema, table or column name: a letter or ``_`` first, then letters, digits, ``_``, ``$``
and ``-`` (any script's letters), at most 128 characters. Superset puts some of these into SQL
as text (SQL Lab's ``set search_path = "{schema}"`` on PostgreSQL), so nothing that could end a
quote, a statement or a comment — no quotes, spaces, dots, semicolons — can be one. Ops also
asks Superset whether the database has it before it is used."""

# Components split by "/", each a letter or digit first, a dot only between other characters:
# no "..", no "/." or trailing ".", no empty component.
_GIT_COMPONENT = r"[A-Za-z0-9][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*"
GIT_REF_PATTERN = rf"^{_GIT_COMPONENT}(?:/{_GIT_COMPONENT})*$"


def _no_lock_component(name: str) -> str:
    if any(component.endswith(".lock") for component in name.split("/")):
        raise ValueError("a branch name's part may not end with .lock")
    return name


GitRef = Annotated[
    str, StringConstraints(pattern=GIT_REF_PATTERN, max_length=200), AfterValidator(_no_lock_component)
]
"""A branch name: never an option (no leading ``-``), no spaces, no revision syntax (``~^:@{``,
``a..b``) and nothing ``git check-ref-format`` refuses — which ops asks too."""


# One line of free text (a title, a search word, a name, a reason): no control characters, so no
# newline lets it pose as another line of whatever it is put into (a prompt, a log, a card).
ONE_LINE = r"^[^\x00-\x1f\x7f]*$"
SearchText = Annotated[str, StringConstraints(pattern=ONE_LINE, max_length=200)]
Title = Annotated[str, StringConstraints(pattern=ONE_LINE, min_length=1, max_length=500)]
DatabaseName = Annotated[str, StringConstraints(pattern=ONE_LINE, min_length=1, max_length=250)]


def is_env_id(value: object) -> bool:
    return isinstance(value, str) and _ENV_ID.fullmatch(value) is not None


class ToolArgs(BaseModel):
    # A call naming an argument the tool does not have is a wrong call, not one to guess at.
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


ENV = Field(description="Target environment id, e.g. dev, staging, prod.")


class NoArgs(ToolArgs):
    pass


class EnvArgs(ToolArgs):
    env_id: EnvId = ENV


class DashboardTarget(EnvArgs):
    dashboard_id: DashboardId = Field(description="Dashboard id.")


# Query and body models: what ops reads from the query string or the JSON body.


class DashboardSearch(ToolArgs):
    query: SearchText | None = Field(default=None, description="Words of the title or slug.")
    owner: SearchText | None = Field(default=None, description="Owner's username or name.")
    tag: SearchText | None = Field(default=None, description="A tag the dashboards carry.")
    page: int = Field(default=0, ge=0, le=10_000)
    page_size: int = Field(default=25, ge=1, le=100)


class HealthQuery(ToolArgs):
    dashboard_ids: list[DashboardId] | None = Field(
        default=None, max_length=200, description="Only these dashboards (all if empty)."
    )
    force: bool = Field(
        default=False,
        description="Re-run every chart's query past Superset's cache (operators and admins only).",
    )


# Who may make a health check re-run every chart's query, past Superset's cache: one question
# of a viewer would otherwise put the whole of an environment's chart load on its databases.
FORCED_HEALTH_ROLE = "operator"


class MaintenanceQuery(ToolArgs):
    env_id: EnvId | None = Field(default=None, description="Only this environment.")


class ExploreQuery(ToolArgs):
    database_id: DatabaseId | None = Field(
        default=None, description="Database to look into (none: list databases)."
    )
    schema_name: SqlIdentifier | None = Field(
        default=None, alias="schema", description="Schema to list tables of."
    )
    table: SqlIdentifier | None = Field(default=None, description="Table to list columns of.")


class AuditQuery(ToolArgs):
    # Exactly one of these is given: ops audits one object at a time.
    ONE_OF: ClassVar[tuple[str, ...]] = ("dashboard_id", "dataset_id")

    dashboard_id: DashboardId | None = Field(default=None, description="Dashboard to audit.")
    dataset_id: ObjectId | None = Field(default=None, description="Dataset to audit.")


class BranchBody(ToolArgs):
    name: GitRef = Field(description="New branch name.")
    start: GitRef = Field(default="main", description="Branch to start from.")


# The most dashboards one card names by title (ops reads each from Superset).
TITLES_AT_ONCE = 20


class DashboardTitlesQuery(ToolArgs):
    dashboard_ids: list[DashboardId] = Field(
        min_length=1, max_length=TITLES_AT_ONCE, description="Dashboards to name."
    )


class CommitBody(ToolArgs):
    branch: GitRef = Field(description="Branch to commit on.")
    env_id: EnvId = Field(description="Environment whose dashboards are exported.")
    dashboard_ids: list[DashboardId] = Field(
        min_length=1, max_length=200, description="Dashboards whose export is committed."
    )
    message: str = Field(min_length=1, max_length=2000, description="Commit message.")


class DeployBody(ToolArgs):
    dashboard_id: DashboardId = Field(description="The dashboard's id in the source environment.")
    source_env: EnvId = Field(default="dev", description="Where the dashboard comes from.")


class MigrationBody(ToolArgs):
    source_env: EnvId = Field(description="Where the dashboards come from.")
    dashboard_ids: list[DashboardId] = Field(
        min_length=1, max_length=200, description="Dashboards to migrate."
    )
    database_mapping: dict[DatabaseName, DatabaseName] = Field(
        default_factory=dict, max_length=50, description="Source → target database names."
    )


class MaintenanceBody(ToolArgs):
    reason: Title = Field(description="Why, shown to whoever is refused meanwhile.")


class SqlStatement(ToolArgs):
    database_id: DatabaseId = Field(description="Superset database id.")
    sql: str = Field(min_length=1, max_length=100_000, description="One SQL statement.")
    schema_name: SqlIdentifier | None = Field(default=None, alias="schema", description="Schema.")


class SqlBody(SqlStatement):
    limit: int = Field(default=100, ge=1, le=10_000, description="Most rows returned.")


class DashboardBody(ToolArgs):
    title: Title = Field(description="Dashboard title.")
    slug: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{1,255}$", description="URL slug.")
    published: bool = False


class CopyBody(ToolArgs):
    title: Title = Field(description="Title of the copy.")
    duplicate_charts: bool = Field(default=False, description="Copy the charts too, not only the layout.")


class DatasetBody(ToolArgs):
    database_id: DatabaseId = Field(description="Superset database id.")
    table_name: SqlIdentifier = Field(description="Table to register.")
    schema_name: SqlIdentifier | None = Field(default=None, alias="schema", description="Schema.")


class FormatBody(ToolArgs):
    sql: str = Field(min_length=1, max_length=100_000, description="SQL to format.")
    dialect: str = Field(default="postgres", pattern=r"^[a-z0-9]{1,20}$", description="SQL dialect.")


# The tools' arguments: a query or body model with the path's values added.


class SearchArgs(EnvArgs, DashboardSearch):
    pass


class HealthArgs(EnvArgs, HealthQuery):
    pass


class TaskArgs(ToolArgs):
    task_id: uuid.UUID = Field(description="The task id ops returned.")


class DeployArgs(EnvArgs, DeployBody):
    pass


class MigrationArgs(EnvArgs, MigrationBody):
    pass


class MaintenanceArgs(EnvArgs, MaintenanceBody):
    pass


class SqlArgs(EnvArgs, SqlBody):
    pass


class SqlStatementArgs(EnvArgs, SqlStatement):
    pass


class DashboardTitlesArgs(EnvArgs, DashboardTitlesQuery):
    pass


class ExploreArgs(EnvArgs, ExploreQuery):
    pass


class AuditArgs(EnvArgs, AuditQuery):
    pass


class CreateDashboardArgs(EnvArgs, DashboardBody):
    pass


class CopyArgs(DashboardTarget, CopyBody):
    pass


class DatasetArgs(EnvArgs, DatasetBody):
    pass


_PATH_FIELD = re.compile(r"{(\w+)}")


@dataclass(frozen=True)
class Endpoint:
    """Where ops performs a tool: its method and path template (``{field}`` taken from the
    arguments), and which model the rest of the arguments form — the query string of a GET,
    the JSON body otherwise."""

    method: str
    path: str
    args: type[ToolArgs]
    rest: type[ToolArgs] | None = None

    @property
    def path_fields(self) -> tuple[str, ...]:
        return tuple(_PATH_FIELD.findall(self.path))

    def request(self, args: ToolArgs) -> tuple[str, dict[str, Any] | None, dict[str, Any] | None]:
        """(path, query params, JSON body) of the call, from arguments already validated."""
        path = _PATH_FIELD.sub(lambda match: quote(str(getattr(args, match[1])), safe=""), self.path)
        if self.rest is None:
            return path, None, None
        values = {name: getattr(args, name) for name in self.rest.model_fields}
        rest = self.rest.model_validate(values).model_dump(mode="json", by_alias=True, exclude_none=True)
        return (path, rest, None) if self.method == "GET" else (path, None, rest)


ENV_PATH = "/api/envs/{env_id}"
DASHBOARD_PATH = ENV_PATH + "/dashboards/{dashboard_id}"

# Not a tool: how the gate asks ops whether a statement only reads, in the target's dialect.
SQL_SHAPE = Endpoint("POST", ENV_PATH + "/sql/shape", SqlStatementArgs, SqlStatement)
# Not a tool: how the gate names the dashboards a card is about (a confirmation names its object).
DASHBOARD_TITLES = Endpoint("GET", ENV_PATH + "/dashboards/titles", DashboardTitlesArgs, DashboardTitlesQuery)

# The fields that name an environment: each must be a configured one.
ENV_FIELDS = ("env_id", "source_env")
