"""An environment's outline: every database a person sees there, its tables, their columns and
the few values a low-cardinality text column holds — what the planner grounds a question in,
read by ops in one heavy read and parsed by the agent with these same models."""

from pydantic import BaseModel, Field

from sstools.common.tool_args import ENV_PATH, Endpoint, EnvArgs

# Not a tool: ops' route the agent reads the outline from (under superset_explore_database's policy).
OUTLINE = Endpoint("GET", ENV_PATH + "/outline", EnvArgs)

# What one outline holds at most: enough for a person's question to name, bounded so that one
# read cannot walk a warehouse.
OUTLINE_DATABASES = 10
OUTLINE_TABLES = 200
# A text column's values are listed only when it holds at most so many distinct ones.
OUTLINE_VALUES = 20


class OutlineColumn(BaseModel):
    name: str
    type: str | None
    # None: not a text column, more than OUTLINE_VALUES distinct values, or not read.
    values: list[str] | None = None


class OutlineTable(BaseModel):
    schema_name: str
    name: str
    columns: list[OutlineColumn]


class OutlineDatabase(BaseModel):
    id: int
    name: str
    backend: str | None
    tables: list[OutlineTable]


class EnvOutline(BaseModel):
    env_id: str
    databases: list[OutlineDatabase]
    # What was left out and why: a database or table that could not be read, a bound reached.
    notes: list[str] = Field(default_factory=list)
