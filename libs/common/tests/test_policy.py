"""Every tool × role × environment, against the design's table, written out independently."""

import pytest

from sstools.common.catalogue import Role, Tier, tool_names
from sstools.common.policy import RiskLevel, decide, normalise_env, resolve_env
from sstools.devstack.policy_table import POLICY_TABLE

ENVIRONMENTS = [None, "dev", "local-1", "staging", "test-eu", "prod", "production-eu", "sandbox"]


@pytest.mark.parametrize(
    ("given", "normalised"),
    [
        (None, None),
        ("", None),
        ("prod", "prod"),
        ("Production", "prod"),
        ("eu-prod-2", "prod"),
        ("staging", "staging"),
        ("stage", "staging"),
        ("test", "staging"),
        ("dev", "dev"),
        ("localhost", "dev"),
        ("sandbox", None),
        ("qa", None),
    ],
)
def test_environment_names_normalise(given: str | None, normalised: str | None) -> None:
    assert normalise_env(given) == normalised


def test_environment_resolution_order() -> None:
    assert resolve_env("prod", "dev", "staging") == "prod"
    assert resolve_env(None, "dev", "staging") == "dev"
    assert resolve_env(None, "", "staging") == "staging"
    assert resolve_env(None, None, None) is None


@pytest.mark.parametrize("env_id", ENVIRONMENTS)
@pytest.mark.parametrize("role", list(Role))
@pytest.mark.parametrize("tool_name", sorted(POLICY_TABLE))
def test_every_tool_role_and_environment_is_decided_as_the_table_says(
    tool_name: str, role: Role, env_id: str | None
) -> None:
    tier, lowest, lowest_in_prod = POLICY_TABLE[tool_name]
    in_prod = normalise_env(env_id) == "prod"
    expected_role = lowest_in_prod if in_prod else lowest
    expected_tier = Tier.DANGEROUS if in_prod and tier == Tier.WRITE else tier
    decision = decide(tool_name, env_id)
    assert decision.required_role == expected_role
    assert decision.tier == expected_tier
    assert decision.allows(role) is (role.rank >= expected_role.rank)
    assert decision.needs_confirmation is (expected_tier != Tier.READ)
    assert (
        decision.risk_level
        == {Tier.READ: RiskLevel.SAFE, Tier.WRITE: RiskLevel.GUARDED, Tier.DANGEROUS: RiskLevel.DANGEROUS}[
            expected_tier
        ]
    )


@pytest.mark.parametrize("env_id", ENVIRONMENTS)
def test_sql_that_changes_anything_is_dangerous_and_admin_only(env_id: str | None) -> None:
    read = decide("superset_execute_sql", env_id)
    write = decide("superset_execute_sql", env_id, mutating_sql=True)
    assert (read.tier, read.required_role) == (Tier.READ, Role.ANALYST)
    assert (write.tier, write.required_role, write.risk_level) == (
        Tier.DANGEROUS,
        Role.ADMIN,
        RiskLevel.DANGEROUS,
    )
    assert not write.allows(Role.OPERATOR)


def test_mutating_flag_changes_nothing_for_other_tools() -> None:
    for name in tool_names():
        if name != "superset_execute_sql":
            assert decide(name, "prod", mutating_sql=True) == decide(name, "prod")


def test_unknown_tool_is_refused() -> None:
    with pytest.raises(KeyError):
        decide("drop_everything")


@pytest.mark.parametrize(
    ("mutating", "tier", "required"),
    [(False, Tier.READ, Role.ANALYST), (True, Tier.DANGEROUS, Role.ADMIN)],
)
def test_sql_that_may_write_has_its_own_policy(mutating: bool, tier: Tier, required: Role) -> None:
    decision = decide("superset_execute_sql", "dev", mutating_sql=mutating)
    assert (decision.tier, decision.required_role) == (tier, required)


def test_other_tools_ignore_whether_sql_writes() -> None:
    assert decide("superset_format_sql", mutating_sql=True) == decide("superset_format_sql")


@pytest.mark.parametrize("env_id", ["live", "eu-main", "staging-mirror"])
def test_a_production_environment_is_prod_whatever_its_name(env_id: str) -> None:
    configured = decide("deploy_dashboard", env_id, production=True)
    assert configured == decide("deploy_dashboard", "prod")
    assert configured.production
    assert configured.tier is Tier.DANGEROUS
    assert configured.required_role is Role.ADMIN


def test_configuration_cannot_take_production_from_an_id_that_names_it() -> None:
    assert decide("deploy_dashboard", "production-eu", production=False) == decide("deploy_dashboard", "prod")
    assert not decide("deploy_dashboard", "live").production
