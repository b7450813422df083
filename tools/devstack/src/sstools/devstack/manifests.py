"""The Helm chart rendered and checked as a cluster's API server would check it, offline: every
built-in kind strictly against Kubernetes' own schemas (kubernetes-validate, unknown fields and
kinds fail), the Prometheus Operator's kinds against models generated from that operator's CRDs
(a field the CRD does not know fails too). Plus the metric names the chart's Grafana board and
alert rules query, for a test to compare with what the services export."""

import json
import re
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml
from cloudcoil.models.prometheus_operator.v1 import PrometheusRule, ServiceMonitor
from pydantic import BaseModel, ValidationError

from sstools.devstack.helm import helm_binary
from sstools.devstack.paths import REPO_ROOT

CHART = REPO_ROOT / "helm" / "sstools-agent"
KUBERNETES_VERSION = "1.33.0"
OPERATOR_KINDS: dict[tuple[str, str], type[BaseModel]] = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): ServiceMonitor,
    ("monitoring.coreos.com/v1", "PrometheusRule"): PrometheusRule,
}
# What ``helm template`` tells the chart the cluster serves: the Prometheus Operator's kinds, as
# in the clusters the production values are for (the PrometheusRule renders only where they are).
OPERATOR_API_VERSIONS = tuple(f"{api_version}/{kind}" for api_version, kind in OPERATOR_KINDS)
DASHBOARD = "files/grafana-dashboard.json"
# PromQL, read just far enough to find the series a query selects: strings, label matchers,
# ranges and the label lists of by/without/on/ignoring/group_* go first; what is left that is a
# name, not called as a function and not a keyword, is a series.
_PROMQL_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_PROMQL_BRACKETS = re.compile(r"\{[^{}]*\}|\[[^\[\]]*\]")
_PROMQL_LABEL_LIST = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_PROMQL_NAME = re.compile(r"(?<![\w.:])([a-zA-Z_:][\w:]*)(?![\w:])(?!\s*\()")
_PROMQL_KEYWORDS = {"and", "or", "unless", "bool", "offset", "group_left", "group_right", "inf", "nan"}


class HelmFailed(Exception):
    """helm said no: what it printed is the message (lint reports on stdout, errors on stderr)."""


def helm(*arguments: str) -> str:
    result = subprocess.run([str(helm_binary()), *arguments], capture_output=True, text=True)
    if result.returncode != 0:
        raise HelmFailed("\n".join(part.strip() for part in (result.stdout, result.stderr) if part.strip()))
    return result.stdout


def value_arguments(values_files: Iterable[Path], set_values: Mapping[str, str]) -> list[str]:
    arguments = [argument for path in values_files for argument in ("--values", str(path))]
    return arguments + [argument for item in set_values.items() for argument in ("--set", "=".join(item))]


def lint(
    chart: Path = CHART, values_files: Iterable[Path] = (), set_values: Mapping[str, str] | None = None
) -> str:
    return helm("lint", "--strict", str(chart), *value_arguments(values_files, set_values or {}))


def render(
    chart: Path = CHART,
    values_files: Iterable[Path] = (),
    set_values: Mapping[str, str] | None = None,
    release: str = "sstools",
    api_versions: Iterable[str] = OPERATOR_API_VERSIONS,
) -> list[dict[str, Any]]:
    """``helm template``'s documents, parsed (empty ones dropped), for a cluster that serves
    ``api_versions`` besides the built-in ones."""
    capabilities = [argument for version in api_versions for argument in ("--api-versions", version)]
    output = helm(
        "template", release, str(chart), *capabilities, *value_arguments(values_files, set_values or {})
    )
    return [document for document in yaml.safe_load_all(output) if document]


def problems(document: Mapping[str, Any]) -> list[str]:
    """What a cluster would refuse in ``document``; empty when it is valid."""
    name = f"{document.get('kind')}/{document.get('metadata', {}).get('name')}"
    model = OPERATOR_KINDS.get((str(document.get("apiVersion")), str(document.get("kind"))))
    if model is not None:
        try:
            parsed = model.model_validate(document)
        except ValidationError as error:
            return [f"{name}: {error}"]
        kept = parsed.model_dump(mode="json", by_alias=True, exclude_unset=True)
        return [f"{name}: {path} is not in the CRD's schema" for path in _dropped(document, kept)]
    try:
        kubernetes_validate.validate(dict(document), KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.SchemaNotFoundError:
        return [f"{name}: no schema for {document.get('apiVersion')} {document.get('kind')}"]
    except kubernetes_validate.ValidationError as error:
        where = ".".join(str(part) for part in error.path)
        return [f"{name}: {where}: {error.message}"]
    return []


def _dropped(given: Any, kept: Any, path: str = "") -> list[str]:
    """Where ``kept`` (the model's reading) lost or changed what ``given`` said."""
    if isinstance(given, dict) and isinstance(kept, dict):
        return [
            found
            for key, value in given.items()
            for found in (
                _dropped(value, kept[key], f"{path}.{key}") if key in kept else [f"{path}.{key}".lstrip(".")]
            )
        ]
    if isinstance(given, list) and isinstance(kept, list) and len(given) == len(kept):
        return [
            found
            for index, pair in enumerate(zip(given, kept, strict=True))
            for found in _dropped(*pair, f"{path}[{index}]")
        ]
    return [] if given == kept else [path.lstrip(".") or "(document)"]


def queried_metrics(chart: Path = CHART, documents: Iterable[Mapping[str, Any]] = ()) -> dict[str, set[str]]:
    """Each series name the Grafana board and the rendered alert rules query → where (panel or
    alert)."""
    board = json.loads((chart / DASHBOARD).read_text())
    queries: list[tuple[str, str]] = [
        (f"panel {panel['title']!r}", target["expr"])
        for panel in board["panels"]
        for target in panel["targets"]
    ]
    for document in documents:
        if document.get("kind") == "PrometheusRule":
            queries += [
                (f"alert {rule['alert']}", rule["expr"])
                for group in document["spec"]["groups"]
                for rule in group["rules"]
            ]
    found: dict[str, set[str]] = {}
    for where, expression in queries:
        for name in series_names(expression):
            found.setdefault(name, set()).add(where)
    return found


def series_names(expression: str) -> set[str]:
    """The series a PromQL expression selects: ``rate(a_total{code="5.."}[5m]) / on (job) up``
    selects ``a_total`` and ``up``."""
    bare = _PROMQL_LABEL_LIST.sub(" ", _PROMQL_BRACKETS.sub(" ", _PROMQL_STRING.sub('""', expression)))
    return {name for name in _PROMQL_NAME.findall(bare) if name.lower() not in _PROMQL_KEYWORDS}


def exported_series(exposition: str) -> set[str]:
    """Every series name a /metrics page offers, including those of labelled families that have
    no sample yet (their ``# TYPE`` line is there from the start)."""
    names: set[str] = set()
    for line in exposition.splitlines():
        if line.startswith("# TYPE "):
            _, _, family, kind = line.split(maxsplit=3)
            names.add(family)
            if kind == "histogram":
                names |= {f"{family}_bucket", f"{family}_sum", f"{family}_count"}
            if kind == "counter" and not family.endswith("_total"):
                names.add(f"{family}_total")
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names
