"""The images built and run, and the chart's own manifests running them (issue 20).

Every image is built with podman (`make images`: podman and its base image set up where missing).
Then the whole stack runs as plain containers on the host's network: each as its image's user
(uid 10001, never root) on a read-only root filesystem, migrated by its own image's `migrate`,
answering /healthz, /readyz and gRPC health, its HEALTHCHECK healthy. Then the README's cluster
install runs as written (issue 35) and the release it asks for, with what values-single-host.yaml
adds for one host, runs under `podman kube play` — its migration Job, its Deployments, their env,
secret references and security contexts as rendered — and the admin its Secret names signs in, and
one chat turn that lists dashboards and one confirmed deploy go through those containers to real
Superset.
"""

import json
import os
import secrets
import time
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from gradio_client import Client

from sstools.agent.ui.app import CHAT_PATH
from sstools.agent.ui.client import chat_client
from sstools.devstack import containers, images, install, kubeplay
from sstools.devstack.containers import Container
from sstools.devstack.demo import PASSWORD_ENV, client, environments
from sstools.devstack.keys import PRIVATE_KEY, PUBLIC_KEYS, PublishedKeys
from sstools.devstack.manifests import CHART
from sstools.devstack.running import free_listeners
from sstools.devstack.stack import SETTINGS, ServiceAddress, addresses, is_ready, page_address, peer_addresses
from sstools.devstack.superset import Instance
from sstools.devstack.testing import framing_allowed, sign_in
from sstools.ops.superset import dashboards

pytestmark = pytest.mark.timeout(1500)  # the first build of six images on a fresh machine
UID = "10001"
READY_SECONDS = 180.0  # the router's model loads before its /readyz says 200


@pytest.fixture(scope="module")
def built() -> dict[str, float]:
    return images.build_images()


def _secrets(database_url: str) -> dict[str, str]:
    """The secret variables, as the chart's Secret would hold them."""
    client_secret = secrets.token_urlsafe(24)
    return {
        "DATABASE_URL": database_url,
        "JWT_PRIVATE_KEY": PRIVATE_KEY,
        "JWT_PUBLIC_KEYS": PUBLIC_KEYS,
        "CONFIRMATION_SECRET": secrets.token_urlsafe(32),
        "AGENT_OPS_CLIENT_SECRET": client_secret,
        "OPS_SERVICE_CLIENTS": f"agent:{client_secret}",
        "OPS_ADMIN_PASSWORD": secrets.token_urlsafe(16),
        PASSWORD_ENV: os.environ[PASSWORD_ENV],
    }


def _wait(check: Callable[[], bool], what: str, explain: Callable[[], str]) -> None:
    deadline = time.monotonic() + READY_SECONDS
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached after {READY_SECONDS:.0f} s\n{explain()}")
        time.sleep(0.5)


def _logs(running: dict[str, Container]) -> str:
    return "\n".join(f"--- {name}\n{container.logs()[-3000:]}" for name, container in running.items())


@pytest.fixture
def container_names() -> Iterator[dict[str, Container]]:
    """Containers a test started, removed after it whatever happened."""
    started: dict[str, Container] = {}
    yield started
    for container in started.values():
        container.remove()


def test_every_image_runs_as_its_non_root_user_on_a_read_only_root_and_reports_healthy(
    built: dict[str, float],
    fresh_database_url: str,
    supersets: dict[str, Instance],
    container_names: dict[str, Container],
) -> None:
    assert set(built) == set(images.IMAGES)
    given = {
        **free_listeners(),
        **_secrets(fresh_database_url),
        "ENVIRONMENTS": environments(supersets, PASSWORD_ENV),
        # the image's state folder is read-only here (the chart mounts a volume there)
        "OPS_BACKUP_DIR": "/tmp/ops/backups",
        "OPS_GIT_REPO": "/tmp/ops/exports",
    }
    given.update(peer_addresses(given))
    for name in ("convo", "ops", "agent"):  # the migrations, as the chart's Job runs them
        containers.run_to_end(name, containers.service_environment(name, given), ["migrate"])
    run = uuid.uuid4().hex[:8]
    for name in images.IMAGES:
        extra = [PASSWORD_ENV] if name == "ops" else ["WEB_PORT"] if name == "web" else []
        environment = containers.service_environment(name, given, extra)
        container_names[name] = containers.start(name, f"sstools-test-{name}-{run}", environment)

    services: list[ServiceAddress] = addresses(given)
    assert {service.name for service in services} == set(SETTINGS)
    for service in services:
        _wait(partial(is_ready, service), f"{service.name} ready", lambda: _logs(container_names))
    _wait(page_address(given).ready, "the page served", lambda: _logs(container_names))
    for service in services:  # /healthz too, beside the /readyz and gRPC health is_ready asked
        assert (
            httpx.get(f"http://127.0.0.1:{service.ports['metrics_port']}/healthz", timeout=30).status_code
            == 200
        )

    for name, container in container_names.items():
        details = container.inspect()
        assert details["Config"]["User"] == f"{UID}:{UID}", name  # from the image: nobody asked
        assert details["HostConfig"]["ReadonlyRootfs"] is True, name
        assert container.exec("id", "-u").stdout.strip() == UID, name
        written = container.exec("touch", "/usr/local/lib/written")
        assert written.returncode != 0, name
        assert "Read-only file system" in written.stderr, (name, written)
        assert container.healthy(), (name, container.logs()[-3000:])
        assert container.running(), name


def _turn(chat: Client, text: str, conversation: str, action: str = "send") -> list[dict[str, Any]]:
    """One turn's messages, as the API client receives them."""
    job = chat.submit(text, conversation, action, "dev", "", "", api_name="/chat")
    return list(job.result(timeout=180))


def _of(messages: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [
        message["metadata"] for message in messages if (message.get("metadata") or {}).get("type") == kind
    ]


def _single_host_values(folder: Path, ports: dict[str, str]) -> Path:
    """What one host adds to the operator's values, as values-single-host.yaml says (the host
    network, loopback peers, one pod of each), with free ports; the Secret stays the operator's."""
    values: dict[str, Any] = yaml.safe_load((CHART / "values-single-host.yaml").read_text())
    del values["secrets"]
    values["web"]["ports"] = {"http": int(ports["WEB_PORT"])}
    for name, settings_class in SETTINGS.items():
        listeners = [field for field in settings_class.model_fields if field.endswith("_port")]
        values[name]["ports"] = {
            field.removesuffix("_port"): int(ports[f"{name.upper()}_{field.upper()}"]) for field in listeners
        }
    path = folder / "values-this-host.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


async def test_the_documented_install_runs_under_podman_and_a_person_signs_in_and_deploys(
    built: dict[str, float],
    fresh_database_url: str,
    supersets: dict[str, Instance],
    published_keys: PublishedKeys,
    tmp_path: Path,
) -> None:
    """The README's cluster steps as written (sstools.devstack.install), its my-values.yaml naming
    this host's Supersets, played by podman: the admin the Secret names signs in, and a chat turn
    lists dashboards and a confirmed deploy reaches prod through those containers (the Supersets
    trusting the key the steps made, as they read it from that ops)."""
    ports = free_listeners()
    operator = {
        "DATABASE_URL": fresh_database_url,
        "ADMIN_PASSWORD": secrets.token_urlsafe(16),
        "SUPERSET_PASSWORD": os.environ[PASSWORD_ENV],
    }
    ours = install.my_values(install.README.read_text(), environments(supersets, PASSWORD_ENV))
    (tmp_path / install.MY_VALUES).write_text(yaml.safe_dump(ours))
    documented = install.run_steps(tmp_path, operator)
    documents = documented.rendered([_single_host_values(tmp_path, ports)])
    assert install.what_would_not_work(documented, documents) == []
    ((secret, keys),) = documented.secrets.items()
    fullname = f"{documented.release.name}-sstools-agent"

    dev = client(supersets["dev"], PASSWORD_ENV)
    prod = client(supersets["prod"], PASSWORD_ENV)
    try:
        title = f"Shipped {uuid.uuid4().hex[:8]}"
        dashboard_id = (await dashboards.create(dev, title, None, True)).id
        ops_keys = f"http://127.0.0.1:{ports['OPS_HTTP_PORT']}/.well-known/jwks.json"
        with kubeplay.played(documents, secret, keys) as played, published_keys.following(ops_keys):

            def explain() -> str:
                return "\n".join(
                    f"--- {container.name}\n{container.logs()[-3000:]}"
                    for name in played.pods
                    for container in played.containers(name)
                )

            for service in addresses(ports):
                _wait(partial(is_ready, service), f"{service.name} ready", explain)
            _wait(page_address(ports).ready, "the page served", explain)
            # the image serves the drawer, and the page under its strict CSP: only this host's
            # Supersets (their browser_url, as the chart read them from ENVIRONMENTS) may frame it
            async with httpx.AsyncClient(base_url=page_address(ports).url) as page:
                drawer = await page.get("/drawer.js")
                policy = (await page.get("/agent")).headers["content-security-policy"]
            assert drawer.text.startswith("(function(){")
            assert sorted(framing_allowed(policy)) == sorted(instance.url for instance in supersets.values())
            # the Deployments' pods, one container each, as rendered: non-root, read-only root
            assert sorted(played.pods) == sorted(f"{fullname}-{name}" for name in [*images.IMAGES, "migrate"])
            for name in played.pods:
                for container in played.containers(name):
                    if name.endswith("-migrate"):
                        continue  # ran to its end before the services started
                    assert container.inspect()["HostConfig"]["ReadonlyRootfs"] is True, container.name
                    assert container.exec("id", "-u").stdout.strip() == UID, container.name

            # as the README says: `admin`, with the password the Secret holds (at ops itself: the
            # ingress that routes the page's origin to it is a cluster's)
            token = sign_in(f"http://127.0.0.1:{ports['OPS_HTTP_PORT']}", operator["ADMIN_PASSWORD"])
            chat = chat_client(
                f"http://127.0.0.1:{ports['AGENT_HTTP_PORT']}{CHAT_PATH}/",
                {"Authorization": f"Bearer {token}"},
            )
            listed = _turn(chat, "покажи дашборды в dev", str(uuid.uuid4()))
            assert [event["tool"] for event in _of(listed, "tool_start")] == ["search_dashboards"], listed
            assert title in json.dumps(listed, ensure_ascii=False)

            conversation = str(uuid.uuid4())
            paused = _turn(chat, f"задеплой дашборд {dashboard_id} из dev в prod", conversation)
            (card,) = _of(paused, "confirm_required")
            assert card["tool_args"] == {"dashboard_id": dashboard_id, "env_id": "prod", "source_env": "dev"}
            assert (await dashboards.search(prod, text=title)).count == 0
            answer = json.dumps({"call_id": card["call_id"], "digest": card["digest"], "args": {}})
            confirmed = _turn(chat, answer, conversation, action="confirm")
            assert [event["tool"] for event in _of(confirmed, "tool_start")] == ["deploy_dashboard"], (
                confirmed
            )
            assert _of(confirmed, "state")[-1]["state"] == "success", confirmed
            assert (await dashboards.search(prod, text=title)).count == 1

            # `helm test`: the chart's test Pod, in the agent's image with its settings, passes
            # every step against this release
            (run,) = played.helm_test()
            assert run.name == f"{fullname}-test"
            assert run.exit_code == 0, run.log
            steps = [line.split(":")[0] for line in run.log.splitlines() if line.startswith("OK ")]
            assert steps == ["OK      sign in", "OK      list environments", "OK      route a question"], (
                run.log
            )
            assert "sign in: admin, role admin, with a password" in run.log, run.log
    finally:
        await dev.aclose()
        await prod.aclose()
