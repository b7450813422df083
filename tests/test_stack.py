"""`make run`'s supervisor end to end: embedded database, every service ready, data kept, clean stop."""

import asyncio
import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import psycopg
import pytest

from sstools.agent.ui.app import CHAT_PATH
from sstools.agent.ui.client import chat_client
from sstools.devstack import browser, monitoring, running
from sstools.devstack.demo import POSTGRES_DATABASE, VETCLINIC_DATABASE
from sstools.devstack.manifests import CHART, exported_series, queried_metrics, render
from sstools.devstack.running import RunningStack
from sstools.devstack.stack import (
    LOCAL_SSO_SWITCH,
    POSTGRES_DEMO,
    SETTINGS,
    ServiceAddress,
    addresses,
    is_ready,
    page_address,
)
from sstools.devstack.testing import framing_allowed, free_port, sign_in


@pytest.fixture
def stack_environment() -> dict[str, str]:
    return running.stack_environment()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "pg"


@pytest.fixture
def stacks(data_dir: Path, stack_environment: dict[str, str]) -> Iterator[Callable[[], RunningStack]]:
    """Starts stacks on the same data; whatever a failing test leaves running is killed after it."""
    running: list[RunningStack] = []
    superset_ports = f"dev={free_port()},prod={free_port()}"

    def start() -> RunningStack:
        running.append(RunningStack(data_dir, stack_environment, superset_ports))
        return running[-1]

    yield start
    for stack in running:
        stack.kill_leftovers()


# Two starts of the whole stack and the browser suite: minutes on a busy 2-core machine, each
# step bounded by its own wait (the banner, the e2e run), not by the suites' 300 s default.
@pytest.mark.timeout(1200)
def test_stack_runs_every_service_on_embedded_postgres_keeps_data_and_stops_clean(
    data_dir: Path, stack_environment: dict[str, str], stacks: Callable[[], RunningStack]
) -> None:
    database = f"postgresql://postgres@/sstools?host={data_dir}"
    demo = f"postgresql://postgres@/{POSTGRES_DEMO}?host={data_dir}"

    first = stacks()
    try:
        first.wait_until_ready()
        ready_at = time.monotonic()
        services = addresses(stack_environment)
        assert {service.name for service in services} == set(SETTINGS)
        assert all(is_ready(service) for service in services)
        started = first.record_started(data_dir)
        with psycopg.connect(database, autocommit=True) as connection:
            connection.execute("CREATE TABLE kept_between_runs (note text)")
            connection.execute("INSERT INTO kept_between_runs VALUES ('first run')")
            versions = connection.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_name LIKE 'alembic_version_%'"
            ).fetchone()
        assert versions == (2,)  # convo and ops were migrated before they started
        _seeded_broken_chart_is_reported(stack_environment, data_dir.parent)
        assert _postgres_demo_read(stack_environment, data_dir.parent, demo) == 6
        assert _vetclinic_pets(stack_environment, data_dir.parent) == {"dev": 300, "prod": 300}
        with psycopg.connect(demo) as connection:  # a person's own row in the demo
            connection.execute("INSERT INTO reports.monthly_revenue VALUES ('2026-04-01', 'East', 12.5)")
        _board_and_alerts_query_only_exported_metrics(services)
        asyncio.run(browser.add_analyst(database))
        _the_page_works_in_a_browser(stack_environment, data_dir.parent, database, first)
        _the_board_shows_what_the_stack_did(stack_environment, data_dir.parent, ready_at)
    finally:
        returncode = first.interrupt()
    assert returncode == 0, first.output
    assert len(started) >= len(SETTINGS) + 1
    assert [process.pid for process in started if _alive(process)] == []
    assert "embedded PostgreSQL stopped" in first.output

    second = stacks()
    try:
        second.wait_until_ready()
        with psycopg.connect(database) as connection:
            assert connection.execute("SELECT note FROM kept_between_runs").fetchall() == [("first run",)]
        assert _postgres_demo_read(stack_environment, data_dir.parent, demo) == 7  # kept, not made again
        # the clinics' demo is not seeded twice
        assert _vetclinic_pets(stack_environment, data_dir.parent) == {"dev": 300, "prod": 300}
        _a_killed_service_is_started_again(second, stack_environment)
        started = second.record_started(data_dir)
    finally:
        assert second.interrupt(hang_up_first=True) == 0
    assert [process.pid for process in started if _alive(process)] == []


@pytest.mark.timeout(1200)
def test_with_no_provider_people_sign_in_with_passwords_in_the_page_and_in_superset(
    data_dir: Path, stack_environment: dict[str, str], stacks: Callable[[], RunningStack], tmp_path: Path
) -> None:
    """`make run` with SSTOOLS_LOCAL_SSO=off: no sign-in provider; the agent's own accounts and
    Superset's passwords, and the browser suite passes all the same (its single sign-on cases,
    which need a provider, are the ones it skips)."""
    stack_environment[LOCAL_SSO_SWITCH] = "off"
    stack = stacks()
    try:
        stack.wait_until_ready()
        assert "Local SSO" not in stack.output
        database = f"postgresql://postgres@/sstools?host={data_dir}"
        asyncio.run(browser.add_analyst(database))
        suite = browser.run_suite(
            stack_environment, data_dir.parent, database, stack.supersets, tmp_path / "shots"
        )
        assert suite.returncode == 0, _failed(suite, stack)
        skipped = {name for name, outcome in suite.outcomes.items() if outcome != "passed"}
        assert skipped == {
            "signs in with the provider, with the role the person's group maps to, "
            "and a new group at the next sign-in",
            "in a drawer of a browser the provider does not know, says why and offers its button, "
            "never a password form",
            "refuses a hand-off carried in from another browser's sign-in, saying why, and signs no one in",
            "refuses a person in no mapped group, saying why",
        }, suite.outcomes
        assert suite.outcomes["offers the password form alone, and nothing of single sign-on"] == "passed"
    finally:
        returncode = stack.interrupt()
    assert returncode == 0, stack.output[-5000:]


def _a_killed_service_is_started_again(stack: RunningStack, environment: dict[str, str]) -> None:
    """`kill -9` of the router: the stack starts it again, as a cluster restarts a pod, and it is
    ready within 30 s; the rest of the stack never stopped."""
    (router,) = [address for address in addresses(environment) if address.name == "router"]
    (process,) = [
        process
        for process in stack.descendants()
        if process.cmdline()[1:2] and process.cmdline()[1].endswith("/sstools-router")
    ]
    process.kill()
    stack.wait_for("router exited (-9); restart 1 in 1 s", 30)
    killed = time.monotonic()
    while not is_ready(router) and time.monotonic() - killed < 30:
        time.sleep(0.2)
    assert is_ready(router), stack.output[-5000:]
    assert stack.process.poll() is None
    assert all(is_ready(service) for service in addresses(environment))


def _board_and_alerts_query_only_exported_metrics(services: list[ServiceAddress]) -> None:
    """Every series the Helm chart's Grafana board and alert rules query is one a running
    service exports (read from their /metrics, not from the code), or one named here as coming
    from elsewhere in a cluster."""
    external = {
        "up": "Prometheus itself, one per scrape target (SSToolsServiceDown)",
        "kube_job_status_failed": "kube-state-metrics (SSToolsMigrationFailed)",
    }
    exported = set().union(
        *(exported_series(httpx.get(service.metrics, timeout=10).text) for service in services)
    )
    queried = queried_metrics(documents=render(values_files=[CHART / "values-prod.yaml"]))
    unexported = {name: sorted(where) for name, where in queried.items() if name not in exported}
    assert {name: where for name, where in unexported.items() if name not in external} == {}
    assert set(external) <= set(queried)  # none listed that nothing queries any more
    assert not set(external) & exported  # nor one a service exports: it would be checked
    assert len(queried) >= 10


def _user_token(environment: dict[str, str], data_root: Path) -> str:
    """The admin made for this checkout signs in, as the page does: through the proxy."""
    return sign_in(page_address(environment).url, (data_root / "ops-admin-password").read_text().strip())


def _ops_headers(environment: dict[str, str], data_root: Path) -> dict[str, str]:
    """Ops as the agent calls it: its service token, and the admin's as the user."""
    ops = f"http://127.0.0.1:{environment['OPS_HTTP_PORT']}"
    secret = (data_root / "agent-ops-secret").read_text().strip()
    agent = httpx.post(
        f"{ops}/api/auth/service-token", json={"client_id": "agent", "client_secret": secret}, timeout=10
    )
    return {
        "Authorization": f"Bearer {agent.json()['access_token']}",
        "X-User-Authorization": f"Bearer {_user_token(environment, data_root)}",
    }


def _seeded_broken_chart_is_reported(environment: dict[str, str], data_root: Path) -> None:
    """Ask ops, as the agent would, for the health of the local dev Superset: the seeded broken
    chart, and it alone, must show; then the same question through the chat must name it."""
    ops = f"http://127.0.0.1:{environment['OPS_HTTP_PORT']}"
    headers = _ops_headers(environment, data_root)
    health = httpx.get(f"{ops}/api/envs/dev/health", headers=headers, timeout=60)
    assert health.status_code == 200, health.text
    broken = [problem["chart_name"] for problem in health.json()["broken_charts"]]
    assert broken == ["Legacy uptime"], health.text
    # And the same question through the chat, as the page asks it: through the reverse proxy,
    # on the page's own origin.
    page = page_address(environment)
    shell = httpx.get(f"{page.url}/agent", timeout=10)
    assert shell.status_code == 200
    assert "<title>SS-Tools Agent</title>" in shell.text
    chat = chat_client(
        f"{page.url}{CHAT_PATH}/", {"Authorization": f"Bearer {_user_token(environment, data_root)}"}
    )
    job = chat.submit("покажи дашборды с проблемами", "", "send", "dev", "", "", api_name="/chat")
    answer = "".join(str(message["content"]) for message in job.result(timeout=120))
    assert "Legacy uptime" in answer, answer


def _postgres_demo_read(environment: dict[str, str], data_root: Path, demo: str) -> int:
    """Both Supersets list the PostgreSQL demo once; a read of its second schema through ops' SQL
    route, as the agent sends it, answers what the database holds; returns its row count."""
    ops = f"http://127.0.0.1:{environment['OPS_HTTP_PORT']}"
    headers = _ops_headers(environment, data_root)
    ids = {}
    for env in ("dev", "prod"):
        listed = httpx.get(f"{ops}/api/envs/{env}/databases", headers=headers, timeout=30)
        assert listed.status_code == 200, listed.text
        found = [item["id"] for item in listed.json()["databases"] if item["name"] == POSTGRES_DATABASE]
        assert len(found) == 1, listed.text
        ids[env] = found[0]
    query = (
        "SELECT month::text AS month, region, revenue::float AS revenue FROM monthly_revenue ORDER BY 1, 2"
    )
    answer = httpx.post(
        f"{ops}/api/envs/dev/sql",
        json={"database_id": ids["dev"], "sql": query, "schema": "reports"},
        headers=headers,
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    with psycopg.connect(demo) as connection:
        rows = connection.execute(query.replace("FROM monthly_revenue", "FROM reports.monthly_revenue"))
        held = [dict(zip(("month", "region", "revenue"), row, strict=True)) for row in rows]
    assert answer.json()["rows"] == held
    return len(held)


def _vetclinic_pets(environment: dict[str, str], data_root: Path) -> dict[str, int]:
    """Both Supersets list the veterinary clinics' demo once; the pets each counts in it through
    ops' SQL route, as the agent sends it."""
    ops = f"http://127.0.0.1:{environment['OPS_HTTP_PORT']}"
    headers = _ops_headers(environment, data_root)
    counted = {}
    for env in ("dev", "prod"):
        listed = httpx.get(f"{ops}/api/envs/{env}/databases", headers=headers, timeout=30)
        assert listed.status_code == 200, listed.text
        found = [item["id"] for item in listed.json()["databases"] if item["name"] == VETCLINIC_DATABASE]
        assert len(found) == 1, listed.text
        query = {"database_id": found[0], "sql": "SELECT count(*) AS pets FROM public.pets"}
        answer = httpx.post(f"{ops}/api/envs/{env}/sql", json=query, headers=headers, timeout=60)
        assert answer.status_code == 200, answer.text
        counted[env] = answer.json()["rows"][0]["pets"]
    return counted


def _the_page_works_in_a_browser(
    environment: dict[str, str], data_root: Path, database: str, stack: RunningStack
) -> None:
    """web/e2e in Debian's Chromium against this stack's proxy and its Supersets (screenshots of
    each state kept in web/test-results/screenshots); then the dashboards the page and the drawer
    inside dev Superset deployed are in prod Superset."""
    ops = f"http://127.0.0.1:{environment['OPS_HTTP_PORT']}"
    supersets = stack.supersets

    def titles(env: str, headers: dict[str, str]) -> dict[int, str]:
        found = httpx.get(
            f"{ops}/api/envs/{env}/dashboards", headers=headers, params={"page_size": 100}, timeout=30
        )
        assert found.status_code == 200, found.text
        return {item["id"]: item["title"] for item in found.json()["dashboards"]}

    # the drawer's script is served, dev's Superset pages load it once signed in (the suite's drawer
    # tests open it there; its login page has none), and only the Supersets may frame the page
    page = page_address(environment).url
    assert httpx.get(f"{page}/drawer.js", timeout=30).status_code == 200
    tag = f'<script src="{page}/drawer.js" data-env="dev" defer></script>'
    assert tag not in httpx.get(f"{supersets['dev']}/login/", timeout=30).text
    policy = httpx.get(f"{page}/agent", timeout=30).headers["content-security-policy"]
    assert sorted(framing_allowed(policy)) == sorted(supersets.values())
    headers = _ops_headers(environment, data_root)
    deployed = {titles("dev", headers)[1], titles("dev", headers)[2]}  # the page's and the drawer's
    assert not deployed & set(titles("prod", headers).values())  # the deploys are what bring them
    suite = browser.run_suite(environment, data_root, database, supersets)
    assert suite.returncode == 0, _failed(suite, stack)
    headers = _ops_headers(environment, data_root)  # the suite outlasts a service token's life
    for _ in range(60):  # a deploy runs as a task
        if deployed <= set(titles("prod", headers).values()):
            break
        time.sleep(1)
    else:
        raise AssertionError(f"{deployed} never all reached prod: {titles('prod', headers)}")
    # each state web/e2e shoots, at both widths, and the second tab's own
    states = (
        *("01-login", "02-prod-context", "02-tool-cards", "03-confirm-card", "04-confirmed", "05-rejected"),
        *("06-exe-rejected", "07-pdf-answer", "07-debug", "08-english", "09-sidebar", "10-archived"),
        *("11-permission-denied", "12-stopped", "13-connection-lost", "14-session-ended", "15-queued"),
        *("16-drawer", "17-drawer-confirm", "18-idle"),
        *("19-sso-login", "20-sso-provider", "21-sso-signed-in", "22-sso-refused"),
        *("23-admin-people", "24-admin-audit", "25-admin-record", "26-admin-refused"),
        *("27-sso-foreign", "28-sso-foreign-kept"),
    )
    assert {path.name for path in browser.SCREENSHOTS.iterdir()} == {
        *(f"{state}-{width}.png" for state in states for width in ("desktop", "narrow")),
        "12-second-tab-desktop.png",
    }


BROKEN_BOARD = Path(__file__).parent / "fixtures" / "broken-board" / "grafana-dashboard.json"
# Board queries that may show nothing after the stack test's turns, and why: each counts a
# failure a healthy stack does not have.
MAY_SHOW_NOTHING = {
    "SC-008 router fallback rate / router unreachable (agent's own keyword tier)": "the router stays up",
    "Document parse errors / worker restart: {{reason}}": "no docparse worker dies",
    "Error rate per service / {{job}} HTTP 5xx": "no service answers 5xx",
    "Error rate per service / {{job}} gRPC server errors": "no gRPC call fails on the server",
    "Model server / errors: {{error_type}} /s": "the offline model does not fail",
    # a 404 for a dashboard Superset does not have is an answer (ok): only a 5xx or no answer is not
    "Superset calls per environment / {{env}} {{outcome}} /s": "every Superset answers",
}


def _the_board_shows_what_the_stack_did(
    environment: dict[str, str], data_root: Path, ready_at: float
) -> None:
    """Beside what the browser suite did (routes, confirmations, a denial, a PDF read):
    a tool that fails (a deploy of a dashboard dev does not have) and a file docparse cannot read,
    through the page's origin. Then, once
    Prometheus has scraped, every query of the chart's Grafana board, as Grafana sends it: none
    may be refused, and each shows something unless MAY_SHOW_NOTHING says why not. A board with
    a broken query and one that shows nothing is found wrong."""
    page = page_address(environment).url
    token = _user_token(environment, data_root)
    chat = chat_client(f"{page}{CHAT_PATH}/", {"Authorization": f"Bearer {token}"})

    def turn(text: str, conversation: str, action: str = "send", files: str = "") -> list[dict[str, Any]]:
        job = chat.submit(text, conversation, action, "dev", "", files, api_name="/chat")
        return [message.get("metadata") or {} for message in job.result(timeout=180)]

    # the router's two tiers, keywords and the embedding model, for every message (the default)
    assert {"type": "routing", "tier": "hybrid"} in [
        {key: event.get(key) for key in ("type", "tier")}
        for event in turn("покажи дашборды, графики и датасеты в dev", "")
    ]
    conversation = str(uuid.uuid4())  # a deploy of a dashboard dev does not have, confirmed
    (card,) = [
        event
        for event in turn("задеплой дашборд 987654 из dev в prod", conversation)
        if event.get("type") == "confirm_required"
    ]
    answer = json.dumps({"call_id": card["call_id"], "digest": card["digest"], "args": {}})
    assert [
        event["tool"] for event in turn(answer, conversation, "confirm") if event.get("type") == "tool_error"
    ] == ["deploy_dashboard"]
    conversation = str(uuid.uuid4())  # a "PDF" docparse cannot read
    upload = httpx.post(
        f"{page}/api/assistant/conversations/{conversation}/uploads",
        params={"name": "broken.pdf"},
        content=b"%PDF-1.7 not a document",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert upload.status_code == 201, upload.text
    events = turn("что в этом файле?", conversation, files=json.dumps([upload.json()["upload_id"]]))
    assert "UPLOAD_MALFORMED" in [event.get("code") for event in events], events

    prometheus = f"http://127.0.0.1:{environment['SSTOOLS_PROMETHEUS_PORT']}"
    time.sleep(2 * monitoring.SCRAPE_SECONDS + 1)
    window = int(time.monotonic() - ready_at) + 60
    evaluated = monitoring.evaluate(prometheus, monitoring.board_queries(), window)
    assert len(evaluated) >= 30
    (tiers,) = [result for result in evaluated if result.query.panel == "Router latency per tier (p99)"]
    assert len(tiers.values) == 1, tiers  # hybrid: the keyword tier alone answers only an empty message
    assert monitoring.board_problems(evaluated, MAY_SHOW_NOTHING) == []
    broken = monitoring.evaluate(prometheus, monitoring.board_queries(BROKEN_BOARD), window)
    problems = monitoring.board_problems(broken, {})
    assert [problem.split(":")[0] for problem in problems] == [
        "Does not parse / unbalanced",
        "Shows nothing / misspelt",
    ], problems


def _failed(suite: browser.SuiteRun, stack: RunningStack) -> str:
    """What the page showed and what the services logged meanwhile: the what and the why."""
    return f"{suite.output[-9000:]}\nwhat the services logged:\n{stack.problems()[-6000:]}"


def _alive(process: psutil.Process) -> bool:
    try:
        return bool(process.is_running() and process.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
