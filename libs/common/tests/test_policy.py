"""The policy (sstools.common.policy): environment normalisation and production detection, and
every tool × role × environment decision, against the design's table written out independently
(sstools.devstack.policy_table), never against decide() itself."""

import pytest

from sstools.common.catalogue import Role, Tier, tool_names
from sstools.common.policy import Decision, RiskLevel, decide, is_production, normalise_env, resolve_env
from sstools.devstack.policy_table import ADM, OP, POLICY_TABLE, A, D, R, allowed

# An environment id and the kind it normalises to, by hand.
ENVIRONMENTS: dict[str | None, str | None] = {
    None: None,
    "dev": "dev",
    "local-1": "dev",
    "staging": "staging",
    "test-eu": "staging",
    "prod": "prod",
    "production-eu": "prod",
    "sandbox": None,
}
# DESIGN.md: the risk level of a confirmation, by the call's tier.
RISK = {Tier.READ: RiskLevel.SAFE, Tier.WRITE: RiskLevel.GUARDED, Tier.DANGEROUS: RiskLevel.DANGEROUS}


def _expected(tool_name: str, env: str | None) -> Decision:
    """The decision the design's table gives for ``tool_name`` on an environment of kind ``env``."""
    tier, lowest, lowest_in_prod = POLICY_TABLE[tool_name]
    prod = env == "prod"
    tier = Tier.DANGEROUS if prod and tier == Tier.WRITE else tier
    return Decision(
        tool=tool_name,
        env=env,
        tier=tier,
        risk_level=RISK[tier],
        required_role=lowest_in_prod if prod else lowest,
        needs_confirmation=tier != Tier.READ,
    )


@pytest.mark.parametrize(
    ("given", "normalised"),
    [
        (None, None),
        ("", None),
        ("prod", "prod"),
        ("Production", "prod"),
        ("PROD", "prod"),
        ("eu-prod-2", "prod"),
        ("prod-test", "prod"),  # a name that says prod is prod, whatever else it says
        ("staging", "staging"),
        ("Stage", "staging"),
        ("test", "staging"),
        ("TEST-2", "staging"),
        ("dev-test", "staging"),  # staging is the stricter of the two
        ("dev", "dev"),
        ("DEV", "dev"),
        ("localhost", "dev"),
        ("Local", "dev"),
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
    assert resolve_env() is None


@pytest.mark.parametrize(
    ("env_id", "configured", "production"),
    [
        ("prod", None, True),
        ("eu-Production", None, True),
        ("live", None, False),
        ("staging", None, False),
        (None, None, False),
        ("live", True, True),
        (None, True, True),
        ("staging", False, False),
        ("prod", False, True),  # configuration cannot take production from an id that names it
    ],
)
def test_an_environment_is_production_when_configured_so_or_named_so(
    env_id: str | None, configured: bool | None, production: bool
) -> None:
    found = is_production(env_id) if configured is None else is_production(env_id, configured)
    assert found is production


@pytest.mark.parametrize("env_id", ENVIRONMENTS)
@pytest.mark.parametrize("tool_name", sorted(POLICY_TABLE))
def test_every_tool_role_and_environment_is_decided_as_the_table_says(
    tool_name: str, env_id: str | None
) -> None:
    env = ENVIRONMENTS[env_id]
    decision = decide(tool_name, env_id)
    assert decision == _expected(tool_name, env)
    assert decision.production is (env == "prod")
    allows = {role: decision.allows(role) for role in Role}
    assert allows == {role: allowed(tool_name, role, prod=env == "prod") for role in Role}


@pytest.mark.parametrize("env_id", ENVIRONMENTS)
def test_sql_that_changes_anything_is_dangerous_and_admin_only(env_id: str | None) -> None:
    env = ENVIRONMENTS[env_id]
    read = decide("superset_execute_sql", env_id)
    write = decide("superset_execute_sql", env_id, mutating_sql=True)
    assert read == Decision("superset_execute_sql", env, R, RiskLevel.SAFE, A, needs_confirmation=False)
    assert write == Decision(
        "superset_execute_sql", env, D, RiskLevel.DANGEROUS, ADM, needs_confirmation=True
    )
    assert [role for role in Role if write.allows(role)] == [ADM]


@pytest.mark.parametrize("tool_name", sorted(set(POLICY_TABLE) - {"superset_execute_sql"}))
@pytest.mark.parametrize("env_id", ["prod", "dev", None])
def test_whether_sql_writes_changes_nothing_for_other_tools(tool_name: str, env_id: str | None) -> None:
    assert decide(tool_name, env_id, mutating_sql=True) == _expected(tool_name, ENVIRONMENTS[env_id])


def test_the_table_covers_every_tool_of_the_catalogue() -> None:
    assert sorted(tool_names()) == sorted(POLICY_TABLE)


def test_unknown_tool_is_refused() -> None:
    with pytest.raises(KeyError):
        decide("drop_everything")


@pytest.mark.parametrize("env_id", ["live", "eu-main", "staging-mirror", None])
@pytest.mark.parametrize("tool_name", ["deploy_dashboard", "create_branch", "superset_audit_permissions"])
def test_a_production_environment_is_prod_whatever_its_name(env_id: str | None, tool_name: str) -> None:
    configured = decide(tool_name, env_id, production=True)
    assert configured == _expected(tool_name, "prod")
    assert configured.production


def test_configured_production_raises_a_write_to_dangerous_and_to_the_prod_role() -> None:
    # by hand: create_branch is (write, operator, operator); in prod a write is dangerous
    assert decide("create_branch", "live", production=True) == Decision(
        "create_branch", "prod", D, RiskLevel.DANGEROUS, OP, needs_confirmation=True
    )
    assert decide("superset_create_dashboard", "eu-main", production=True).required_role is OP
    assert decide("superset_create_dashboard", "eu-main").required_role is A


def test_configuration_cannot_take_production_from_an_id_that_names_it() -> None:
    assert decide("deploy_dashboard", "production-eu", production=False) == Decision(
        "deploy_dashboard", "prod", D, RiskLevel.DANGEROUS, ADM, needs_confirmation=True
    )
    assert decide("deploy_dashboard", "live") == Decision(
        "deploy_dashboard", None, D, RiskLevel.DANGEROUS, OP, needs_confirmation=True
    )
    assert not decide("deploy_dashboard", "live").production
