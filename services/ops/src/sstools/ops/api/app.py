"""The ops REST application: routers for each area, and typed errors as JSON.

A tool another installed package declares (the catalogue's ``sstools.tools`` entry points) is
served by the router its package gives in the ``sstools.ops_routes`` group: a function taking
the context and the guard, as each area's ``router`` here does."""

from importlib.metadata import entry_points

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse

from sstools.common.paging import BadCursor
from sstools.ops.api.auth import admin_only, dependencies
from sstools.ops.api.context import OpsContext
from sstools.ops.api.guard import Guard
from sstools.ops.api.routes import accounts, audit, identity, operations, single_sign_on, superset
from sstools.ops.errors import OperationError


async def _operation_error(request: Request, error: Exception) -> JSONResponse:
    """A typed failure (Superset down, not found, under maintenance...) as ``{"detail": {code, ...}}``,
    the same shape as every other refusal; never a stack trace."""
    assert isinstance(error, OperationError)
    return JSONResponse({"detail": error.body()}, status_code=error.status)


async def _bad_cursor(request: Request, error: Exception) -> JSONResponse:
    return JSONResponse({"detail": {"code": "bad_cursor", "message": str(error)}}, status_code=422)


def build_app(ctx: OpsContext) -> FastAPI:
    app = FastAPI(title="SS-Tools operations", version="0.1.0")
    user_only, agent_for_user = dependencies(ctx.authenticator)
    guard = Guard(ctx.audit, agent_for_user, ctx.supersets.environments, ctx.confirmations, ctx.heavy_reads)
    app.include_router(identity.router(ctx, guard, user_only, agent_for_user))
    app.include_router(single_sign_on.router(ctx))
    admins = admin_only(user_only)
    app.include_router(accounts.router(ctx, admins))
    app.include_router(audit.router(ctx, admins))
    app.include_router(superset.router(ctx, guard))
    app.include_router(operations.router(ctx, guard, user_only))
    for point in entry_points(group="sstools.ops_routes"):
        routes = point.load()(ctx, guard)
        if not isinstance(routes, APIRouter):
            raise TypeError(f"entry point {point.name!r} of sstools.ops_routes gave no APIRouter: {routes!r}")
        app.include_router(routes)
    app.add_exception_handler(OperationError, _operation_error)
    app.add_exception_handler(BadCursor, _bad_cursor)
    return app
