"""The hook through which ops acts in Superset as a person (services/ops/superset), in the
session's real dev Superset: it takes exactly a token ops signed for that person, for this
environment, for a minute, and makes that person Superset's current user; anything else is
refused, and nothing else Superset accepts changes."""

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from sstools.common.tokens import TokenType, superset_audience
from sstools.devstack.demo import ANALYST_USER, PASSWORD_ENV, client
from sstools.devstack.keys import ISSUER, SIGNING_KEY, forged_token
from sstools.devstack.superset import Instance
from sstools.ops.superset.client import PERSON_TOKEN_PREFIX, rison

DASHBOARDS = "/api/v1/dashboard/"


def person_token(
    username: str,
    *,
    env_id: str = "dev",
    token_type: TokenType = TokenType.SUPERSET,
    ttl: timedelta = timedelta(seconds=60),
    now: datetime | None = None,
) -> str:
    return ISSUER.issue(username, token_type=token_type, audience=superset_audience(env_id), ttl=ttl, now=now)


def _forged(kid: str | None = None) -> str:
    return forged_token("root", token_type=TokenType.SUPERSET, audience=superset_audience("dev"), kid=kid)


async def _as(
    instance: Instance, token: str, path: str = DASHBOARDS, prefix: str = PERSON_TOKEN_PREFIX
) -> httpx.Response:
    async with httpx.AsyncClient(base_url=instance.url, timeout=30) as http:
        return await http.get(path, headers={"Authorization": f"Bearer {prefix}{token}"})


SEEDED = ("Sales Overview", "Orders and Events", "Legacy KPIs")


def _titled(title: str) -> dict[str, Any]:
    """One seeded dashboard by its title (the session's other tests add many more)."""
    return {"filters": [{"col": "dashboard_title", "opr": "eq", "value": title}]}


def _titles(reply: httpx.Response) -> set[str]:
    assert reply.status_code == 200, reply.text
    payload: dict[str, Any] = reply.json()
    return {item["dashboard_title"] for item in payload["result"]}


async def test_a_person_token_acts_as_that_person_with_their_superset_permissions(
    supersets: dict[str, Instance],
) -> None:
    dev = supersets["dev"]

    async def seen_by(username: str) -> set[str]:
        found: set[str] = set()
        for title in SEEDED:
            found |= _titles(
                await _as(dev, person_token(username), f"{DASHBOARDS}?q={rison(_titled(title))}")
            )
        return found

    assert await seen_by("root") == set(SEEDED)
    # alice may read the sales dataset alone: the dashboards over other tables are not hers
    assert await seen_by(ANALYST_USER) == {"Sales Overview"}
    me = await _as(dev, person_token(ANALYST_USER), "/api/v1/me/")
    assert me.status_code == 200, me.text
    assert me.json()["result"]["username"] == ANALYST_USER


@pytest.mark.parametrize(
    ("case", "token"),
    [
        ("another environment's token", lambda: person_token("root", env_id="prod")),
        ("a user token of ops'", lambda: person_token("root", token_type=TokenType.USER)),
        ("a key ops does not hold", lambda: _forged()),
        ("a key ops does not hold, under ops' kid", lambda: _forged(SIGNING_KEY.kid)),
        ("an expired token", lambda: person_token("root", now=datetime.now(UTC) - timedelta(minutes=5))),
        ("a token that lives an hour", lambda: person_token("root", ttl=timedelta(hours=1))),
        ("another case of an admin's name", lambda: person_token("Root")),
        ("a name Superset does not know", lambda: person_token("nobody-here")),
        ("no token at all", lambda: ""),
    ],
)
async def test_anything_but_a_valid_person_token_is_refused(
    supersets: dict[str, Instance], case: str, token: Any
) -> None:
    reply = await _as(supersets["dev"], token())
    assert reply.status_code == 401, f"{case}: {reply.status_code} {reply.text[:300]}"


async def test_a_person_token_without_the_prefix_is_no_superset_jwt(supersets: dict[str, Instance]) -> None:
    reply = await _as(supersets["dev"], person_token("root"), prefix="")
    assert reply.status_code in (401, 422), reply.text
    assert reply.status_code != 200


async def test_the_service_account_signs_in_as_before(supersets: dict[str, Instance]) -> None:
    admin = client(supersets["dev"], PASSWORD_ENV)
    try:
        # each by its title: the tests' own dashboards push the demo's off a first page
        for title in ("Sales Overview", "Orders and Events"):
            filters = [{"col": "dashboard_title", "opr": "eq", "value": title}]
            listed = await admin.get(DASHBOARDS, q={"filters": filters})
            assert [item["dashboard_title"] for item in listed["result"]] == [title]
    finally:
        await admin.aclose()
