"""DESIGN.md's policy table, written out by hand for the tests: what the catalogue, ops' RBAC and
the agent's gate are checked against, so that none of them is checked against itself."""

from sstools.common.catalogue import Role, Tier

R, W, D = Tier.READ, Tier.WRITE, Tier.DANGEROUS
V, A, OP, ADM = Role.VIEWER, Role.ANALYST, Role.OPERATOR, Role.ADMIN
RANKS = {V: 0, A: 1, OP: 2, ADM: 3}

# DESIGN.md, "Policy table": tool -> (tier, lowest role, lowest role when the target is prod)
POLICY_TABLE = {
    "show_capabilities": (R, V, V),
    "search_dashboards": (R, V, V),
    "get_health_summary": (R, V, V),
    "list_environments": (R, V, V),
    "get_task_status": (R, V, V),
    "list_llm_providers": (R, V, V),
    "get_llm_status": (R, V, V),
    "list_maintenance_events": (R, V, V),
    "superset_format_sql": (R, V, V),
    "superset_explore_database": (R, A, A),
    "superset_execute_sql": (R, A, A),
    "superset_audit_permissions": (R, OP, ADM),
    "superset_create_dashboard": (W, A, OP),
    "superset_copy_dashboard": (W, A, OP),
    "superset_create_dataset": (W, A, OP),
    "run_llm_documentation": (W, A, OP),
    # DESIGN: read only if it answers inline with no task row; it keeps its report as a task.
    "run_llm_validation": (W, A, OP),
    "create_branch": (W, OP, OP),
    "run_backup": (W, OP, OP),
    "commit_changes": (D, OP, OP),
    "start_maintenance": (D, OP, ADM),
    "end_maintenance": (D, OP, ADM),
    "deploy_dashboard": (D, OP, ADM),
    "execute_migration": (D, OP, ADM),
}


def allowed(tool_name: str, role: Role, *, prod: bool) -> bool:
    """Whether the table lets ``role`` call ``tool_name`` (on a prod target when ``prod``)."""
    _, lowest, lowest_in_prod = POLICY_TABLE[tool_name]
    return RANKS[role] >= RANKS[lowest_in_prod if prod else lowest]


# DESIGN.md: superset_execute_sql with anything but one read-only statement (tier, lowest role,
# lowest role when the target is prod).
MUTATING_SQL = (D, ADM, ADM)
