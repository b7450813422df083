"""`python -m sstools.router route`: route JSON lines from stdin, one JSON line out for each.

`python -m sstools.router warm` loads the model and stores the catalogue's vectors, so an image
built with it starts ready at once.

Input lines carry a "q" field; output lines are {"q", "tools", "tier", "ms", "degraded"}. The
router runs in this process (the same code the service runs, configured by the same ROUTER_*
variables), or, with --target HOST:PORT, a running router service answers — to a caller with a
service token from ops (POST /api/auth/service-token), given in SSTOOLS_SERVICE_TOKEN.
"""

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any, TextIO

import grpc

from sstools.common.grpc_auth import bearer
from sstools.common.runtime import load_settings
from sstools.router.settings import RouterSettings
from sstools.router.v1 import router_pb2, router_pb2_grpc
from sstools.router.warmup import build_router

RouteFunction = Callable[[str], dict[str, Any]]


def in_process() -> RouteFunction:
    router = build_router(load_settings(RouterSettings)).router

    def route(query: str) -> dict[str, Any]:
        result = router.route(query)
        return {"tools": result.names, "tier": result.tier.value, "degraded": result.degraded}

    return route


SERVICE_TOKEN_VARIABLE = "SSTOOLS_SERVICE_TOKEN"


def through_server(target: str, service_token: str) -> RouteFunction:
    stub = router_pb2_grpc.RouterServiceStub(grpc.insecure_channel(target))

    def route(query: str) -> dict[str, Any]:
        reply = stub.Route(
            router_pb2.RouteRequest(query=query), timeout=30, metadata=(bearer(service_token),)
        )
        tier = router_pb2.RouteTier.Name(reply.tier).removeprefix("ROUTE_TIER_").lower()
        return {"tools": [tool.name for tool in reply.tools], "tier": tier, "degraded": reply.degraded}

    return route


def run(lines: Iterable[str], route: RouteFunction, output: TextIO) -> int:
    """Route every line; a line that is not a JSON object with a string "q" gets an error line."""
    failures = 0
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            query = json.loads(line)["q"]
            if not isinstance(query, str):
                raise TypeError("q must be a string")
        except (ValueError, KeyError, TypeError) as error:
            failures += 1
            output.write(json.dumps({"line": number, "error": f"bad input line: {error!r}"}) + "\n")
            continue
        started = time.perf_counter()
        answer = route(query)
        elapsed = round((time.perf_counter() - started) * 1000, 3)
        output.write(json.dumps({"q": query, **answer, "ms": elapsed}, ensure_ascii=False) + "\n")
        output.flush()
    return failures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m sstools.router",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    route = commands.add_parser("route", help="route JSON lines from stdin")
    route.add_argument("--target", help="HOST:PORT of a running router; default: route in this process")
    commands.add_parser("warm", help="load the model and store the catalogue's vectors (for image builds)")
    args = parser.parse_args(argv)
    if args.command == "warm":
        settings = load_settings(RouterSettings)
        built = build_router(settings)
        if built.load_seconds is None:
            raise SystemExit(f"embedding model {settings.embedding_model!r} did not load")
        print(
            json.dumps(
                {
                    "model": settings.embedding_model,
                    "vector_dir": str(settings.vector_dir),
                    "seconds": round(built.load_seconds, 3),
                }
            )
        )
        return
    if args.target and not os.environ.get(SERVICE_TOKEN_VARIABLE):
        raise SystemExit(f"--target needs a service token from ops in {SERVICE_TOKEN_VARIABLE}")
    route_function = (
        through_server(args.target, os.environ[SERVICE_TOKEN_VARIABLE]) if args.target else in_process()
    )
    failures = run(sys.stdin, route_function, sys.stdout)
    raise SystemExit(1 if failures else 0)
