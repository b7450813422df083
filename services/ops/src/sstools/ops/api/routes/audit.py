"""Ops' audit trail, for admins: what ops did and refused (tools' calls, tasks, account changes,
sign-ins), newest first.

    GET /api/admin/audit      a page: ?user= &action= &env= &outcome= &since= &until= &limit= &cursor=
    GET /api/admin/audit.csv  every record the same filters name, as CSV

What the agent decided about each command (the confirmations, the refusals before ops was
asked) is convo's trail: ``/api/assistant/audit``.
"""

import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field
from sqlalchemy.engine import RowMapping

from sstools.common.csv_export import csv_response
from sstools.common.paging import PAGE_MAX, Page, PageQuery, Period, every_row
from sstools.common.tool_args import EnvId
from sstools.ops.api.auth import Caller
from sstools.ops.api.context import OpsContext
from sstools.ops.store.audit import AuditFilter

AUDIT_PATH = "/api/admin/audit"


class AuditFilters(Period):
    """Which records (query parameters; each one left out matches all)."""

    user: str | None = Field(default=None, min_length=1, max_length=200)
    # a tool's name, authorize:<tool>, user.add, user.change, user.password, sign_in.sso, ...
    action: str | None = Field(default=None, pattern=r"^[a-z0-9_.:-]{1,100}$")
    env: EnvId | None = None
    outcome: str | None = Field(default=None, pattern=r"^[a-z_]{1,40}$")

    def wanted(self) -> AuditFilter:
        return AuditFilter(
            user=self.user,
            action=self.action,
            env=self.env,
            outcome=self.outcome,
            since=self.since,
            until=self.until,
        )


class AuditPageQuery(AuditFilters, PageQuery):
    pass


class AuditEntryOut(BaseModel):
    id: uuid.UUID
    at: datetime
    user: str
    # the service that called for the user (the agent), or empty: the user's own call
    service: str
    action: str
    env: str
    outcome: str
    detail: dict[str, Any]

    @classmethod
    def of(cls, row: RowMapping) -> "AuditEntryOut":
        return cls.model_validate({**row, "user": row["username"], "env": row["target_env"]})


class AuditPage(BaseModel):
    items: list[AuditEntryOut]
    next_cursor: str | None


CSV_COLUMNS = tuple(AuditEntryOut.model_fields)


def router(ctx: OpsContext, admin_only: object) -> APIRouter:
    api = APIRouter()

    @api.get(AUDIT_PATH)
    async def listing(
        caller: Annotated[Caller, admin_only], query: Annotated[AuditPageQuery, Query()]
    ) -> AuditPage:
        page = await ctx.audit.page(query.wanted(), limit=query.limit, cursor=query.cursor)
        return AuditPage(items=[AuditEntryOut.of(row) for row in page.items], next_cursor=page.next_cursor)

    @api.get(AUDIT_PATH + ".csv")
    async def csv(
        caller: Annotated[Caller, admin_only], query: Annotated[AuditFilters, Query()]
    ) -> StreamingResponse:
        wanted = query.wanted()

        async def page(cursor: str | None) -> Page:
            return await ctx.audit.page(wanted, limit=PAGE_MAX, cursor=cursor)

        entries = (AuditEntryOut.of(row) async for row in every_row(page))
        return csv_response("ops-audit.csv", CSV_COLUMNS, entries)

    return api
