"""The tool catalogue: every tool's name, risk policy, RU+EN descriptions and keyword rules.

Declared once, here, and read everywhere: the router embeds the descriptions and matches the
keywords, the agent's ``@tool`` functions take their descriptions, the agent's guard and ops'
RBAC take the policies. Keyword phrases are written as a person would type them; the router
reduces them to word stems, so one form covers its inflections ("дашборд" covers "дашбордов").
"""

from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum


class Tier(StrEnum):
    READ = "read"
    WRITE = "write"
    DANGEROUS = "dangerous"


class Role(StrEnum):
    VIEWER = "viewer"
    ANALYST = "analyst"
    OPERATOR = "operator"
    ADMIN = "admin"

    @property
    def rank(self) -> int:
        return list(Role).index(self)

    def at_least(self, other: "Role") -> bool:
        return self.rank >= other.rank


@dataclass(frozen=True)
class Policy:
    tier: Tier
    min_role: Role
    # The lowest role when the target environment normalises to prod.
    min_role_prod: Role


@dataclass(frozen=True)
class ToolSpec:
    name: str
    policy: Policy
    description_en: str
    description_ru: str
    keywords_en: tuple[str, ...]
    keywords_ru: tuple[str, ...]
    # Only superset_execute_sql: the policy for anything but one read-only statement.
    mutating_sql_policy: Policy | None = field(default=None)
    # A call that makes Superset or a database do real work (every chart's query, a statement,
    # a schema's walk): ops counts it against the person's budget of such calls per minute.
    heavy: bool = False

    @property
    def keywords(self) -> tuple[str, ...]:
        return self.keywords_en + self.keywords_ru

    @property
    def may_change(self) -> bool:
        """Whether a call may change something (and so may need a confirmation): a tool above
        the read tier, or one whose SQL may write."""
        return self.policy.tier is not Tier.READ or self.mutating_sql_policy is not None


def _policy(tier: Tier, role: Role, prod_role: Role | None = None) -> Policy:
    return Policy(tier, role, prod_role or role)


R, W, D = Tier.READ, Tier.WRITE, Tier.DANGEROUS
VIEWER, ANALYST, OPERATOR, ADMIN = Role.VIEWER, Role.ANALYST, Role.OPERATOR, Role.ADMIN

ALWAYS_OFFERED = "show_capabilities"

TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "show_capabilities",
        _policy(R, VIEWER),
        "Explain what this assistant can do: the tools it has and example requests.",
        "Рассказать, что умеет ассистент: какие у него инструменты и примеры запросов.",
        ("what can you do", "capabilities", "help", "tools", "tool", "abilities", "features", "how to use"),
        (
            "что умеешь",
            "что ты умеешь",
            "что можешь",
            "возможности",
            "помощь",
            "помоги",
            "инструменты",
            "функции",
            "доступные",
            "доступно",
            "команды",
            "справка",
        ),
    ),
    ToolSpec(
        "search_dashboards",
        _policy(R, VIEWER),
        "Find Superset dashboards by title, slug, owner or tag and list them with ids and links.",
        "Найти дашборды Superset по названию, slug, владельцу или тегу и показать их список с id и ссылками.",
        ("dashboard", "dashboards", "find dashboard", "search", "board", "boards", "report", "reports"),
        (
            "дашборд",
            "дашборды",
            "даш",
            "дашик",
            "борд",
            "панель",
            "панели",
            "отчёт",
            "отчеты",
            "найди",
            "найти",
            "поиск",
            "покажи дашборды",
            "список дашбордов",
        ),
    ),
    ToolSpec(
        "get_health_summary",
        _policy(R, VIEWER),
        "Summarise dashboard health in an environment: broken charts, failing queries and validation "
        "problems.",
        "Сводка здоровья дашбордов в окружении: сломанные чарты, падающие запросы и проблемы валидации.",
        (
            "health",
            "broken",
            "errors",
            "error",
            "failing",
            "problems",
            "issues",
            "not working",
            "doesn't work",
            "validation problems",
            "what is wrong",
            "status of dashboards",
            "down",
        ),
        (
            "здоровье",
            "состояние",
            "сломан",
            "сломались",
            "ошибки",
            "ошибка",
            "проблемы",
            "проблема",
            "не работает",
            "не грузится",
            "не открывается",
            "падает",
            "упал",
            "валидации",
            "что не так",
            "битые",
            "поломки",
            "отвалилось",
            "отвалился",
            "чё там с",
            "что там с",
        ),
        heavy=True,
    ),
    ToolSpec(
        "list_environments",
        _policy(R, VIEWER),
        "List the Superset environments (dev, staging, prod) the agent can reach, with URLs and status.",
        "Показать окружения Superset (dev, staging, prod), доступные агенту, с адресами и статусом.",
        ("environments", "environment", "env", "envs", "instances", "stands", "which environments"),
        ("окружения", "окружение", "среды", "среда", "стенды", "стенд", "инстансы", "энвы"),
    ),
    ToolSpec(
        "get_task_status",
        _policy(R, VIEWER),
        "Report the status and progress of a background task (deploy, migration, backup) by its id.",
        "Показать статус и прогресс фоновой задачи (деплой, миграция, бэкап) по её id.",
        ("task", "task status", "job", "progress", "is it done", "finished", "running task"),
        (
            "задача",
            "задачи",
            "таск",
            "статус задачи",
            "прогресс",
            "выполнилась",
            "завершилась",
            "готово ли",
            "джоба",
        ),
    ),
    ToolSpec(
        "list_llm_providers",
        _policy(R, VIEWER),
        "List the configured LLM providers and models the platform can use.",
        "Показать настроенных LLM-провайдеров и модели, которые может использовать платформа.",
        ("llm providers", "providers", "models", "llm models", "which llm", "openai", "llm list"),
        ("провайдеры", "провайдер llm", "модели", "какие модели", "какие llm", "список llm", "нейросети"),
    ),
    ToolSpec(
        "get_llm_status",
        _policy(R, VIEWER),
        "Check whether the LLM provider is reachable and healthy: availability, latency, quota.",
        "Проверить, доступен ли LLM-провайдер и в каком он состоянии: доступность, задержка, квота.",
        (
            "llm status",
            "llm health",
            "is the llm up",
            "llm down",
            "llm available",
            "quota",
            "latency",
            "ai down",
            "ai is down",
            "ai thing",
        ),
        (
            "статус llm",
            "состояние llm",
            "llm работает",
            "llm доступен",
            "llm лежит",
            "квота",
            "задержка",
            "нейросеть работает",
        ),
    ),
    ToolSpec(
        "create_branch",
        _policy(W, OPERATOR),
        "Create a git branch in the dashboards repository for versioned changes.",
        "Создать git-ветку в репозитории дашбордов для версионируемых изменений.",
        ("branch", "create branch", "new branch", "git branch", "feature branch"),
        ("ветка", "ветку", "создай ветку", "новая ветка", "бранч", "git ветка"),
    ),
    ToolSpec(
        "commit_changes",
        _policy(D, OPERATOR),
        "Commit the exported dashboard changes to the git repository with a message.",
        "Закоммитить выгруженные изменения дашбордов в git-репозиторий с сообщением.",
        ("commit", "commit changes", "save to git", "push", "git commit"),
        ("коммит", "закоммить", "закоммитить", "закомить", "сохрани в git", "запушь", "пуш", "зафиксируй"),
    ),
    ToolSpec(
        "deploy_dashboard",
        _policy(D, OPERATOR, ADMIN),
        "Deploy a dashboard to a target environment, for example promote it from staging to prod.",
        "Задеплоить дашборд в целевое окружение, например выкатить его со staging в prod.",
        ("deploy", "deployment", "promote", "release", "ship", "publish", "roll out", "push to prod"),
        (
            "деплой",
            "задеплой",
            "задеплоить",
            "задеплоить",
            "выкати",
            "выкатить",
            "выкатка",
            "релиз",
            "зарелизь",
            "опубликуй",
            "опубликовать",
            "раскатить",
            "раскатай",
            "закинь на прод",
            "деплоить",
        ),
    ),
    ToolSpec(
        "execute_migration",
        _policy(D, OPERATOR, ADMIN),
        "Migrate dashboards, datasets and database connections from one environment to another.",
        "Перенести дашборды, датасеты и подключения к базам из одного окружения в другое.",
        (
            "migrate",
            "migration",
            "move dashboards",
            "transfer",
            "copy to staging",
            "sync environments",
            "port",
            "move",
        ),
        (
            "миграция",
            "мигрируй",
            "мигрировать",
            "перенеси",
            "перенести",
            "перенос",
            "переезд",
            "синхронизируй окружения",
            "смигрируй",
        ),
    ),
    ToolSpec(
        "run_backup",
        _policy(W, OPERATOR),
        "Back up the dashboards and metadata of an environment to backup storage.",
        "Сделать резервную копию дашбордов и метаданных окружения в хранилище бэкапов.",
        ("backup", "back up", "snapshot", "save a copy", "archive dashboards"),
        (
            "бэкап",
            "бекап",
            "бэкапни",
            "забэкапь",
            "резервная копия",
            "резервную копию",
            "резервное копирование",
            "снапшот",
            "сохрани копию",
        ),
    ),
    ToolSpec(
        "run_llm_validation",
        # It keeps its report as an ops task: a write, however harmless the report.
        _policy(W, ANALYST, OPERATOR),
        "Use an LLM to validate a dashboard: find broken logic, bad charts and data issues; stores a report.",
        "Проверить дашборд с помощью LLM: найти ошибки логики, плохие чарты и проблемы данных; сохраняет "
        "отчёт.",
        (
            "validate",
            "validation",
            "review dashboard",
            "check dashboard",
            "audit dashboard",
            "lint",
            "verify",
        ),
        (
            "валидация",
            "валидируй",
            "провалидируй",
            "проверь дашборд",
            "проверка дашборда",
            "ревью",
            "проверить дашборд",
            "проверь",
            "проверка",
        ),
    ),
    ToolSpec(
        "run_llm_documentation",
        _policy(W, ANALYST, OPERATOR),
        "Use an LLM to write documentation and descriptions for a dashboard or dataset and save them "
        "into Superset.",
        "Написать с помощью LLM документацию и описания для дашборда или датасета и сохранить их в Superset.",
        ("document", "documentation", "docs", "describe", "description", "write descriptions"),
        (
            "документация",
            "документацию",
            "задокументируй",
            "документировать",
            "описание",
            "описания",
            "опиши",
            "описать",
            "доку",
            "доки",
        ),
    ),
    ToolSpec(
        "list_maintenance_events",
        _policy(R, VIEWER),
        "List scheduled, running and past maintenance windows of the environments.",
        "Показать запланированные, текущие и прошедшие окна обслуживания окружений.",
        (
            "maintenance",
            "maintenance windows",
            "maintenance events",
            "scheduled maintenance",
            "downtime",
            "scheduled windows",
            "windows",
        ),
        (
            "обслуживание",
            "техработы",
            "технические работы",
            "регламентные работы",
            "окно обслуживания",
            "окна обслуживания",
            "даунтайм",
        ),
    ),
    ToolSpec(
        "start_maintenance",
        _policy(D, OPERATOR, ADMIN),
        "Start a maintenance window: put an environment into maintenance mode and notify its users.",
        "Начать окно обслуживания: перевести окружение в режим обслуживания и уведомить пользователей.",
        ("start maintenance", "begin maintenance", "maintenance mode", "enable maintenance", "take down"),
        (
            "начни обслуживание",
            "начать обслуживание",
            "начни техработы",
            "включи режим обслуживания",
            "режим обслуживания",
            "запусти техработы",
            "начать техработы",
            "включи режим техработ",
            "режим техработ",
            "начинай техработы",
        ),
    ),
    ToolSpec(
        "end_maintenance",
        _policy(D, OPERATOR, ADMIN),
        "End a maintenance window and bring the environment back to normal operation.",
        "Завершить окно обслуживания и вернуть окружение в обычный режим работы.",
        (
            "end maintenance",
            "stop maintenance",
            "finish maintenance",
            "exit maintenance",
            "disable maintenance",
        ),
        (
            "заверши обслуживание",
            "завершить обслуживание",
            "закончи техработы",
            "выключи режим обслуживания",
            "останови обслуживание",
            "завершить техработы",
            "закончить обслуживание",
            "сними режим обслуживания",
            "сними техработы",
            "вырубай режим обслуживания",
            "выключи техработы",
            "заканчивай техработы",
            "заканчивай обслуживание",
        ),
    ),
    ToolSpec(
        "superset_execute_sql",
        _policy(R, ANALYST),
        "Run an SQL query against a database through Superset SQL Lab and return the rows.",
        "Выполнить SQL-запрос к базе данных через Superset SQL Lab и вернуть строки.",
        ("sql", "query", "run query", "execute sql", "select", "sql lab", "run sql"),
        ("sql", "запрос", "выполни запрос", "выполни sql", "селект", "скуль", "sql lab", "запусти запрос"),
        mutating_sql_policy=_policy(D, ADMIN),
        heavy=True,
    ),
    ToolSpec(
        "superset_explore_database",
        _policy(R, ANALYST),
        "Explore a database connected to Superset: list its schemas, tables and columns.",
        "Изучить базу данных, подключённую к Superset: показать схемы, таблицы и колонки.",
        ("database", "schema", "schemas", "tables", "table", "columns", "explore database", "db"),
        ("база", "базы данных", "бд", "схема", "схемы", "таблицы", "таблица", "колонки", "столбцы", "поля"),
        heavy=True,
    ),
    ToolSpec(
        "superset_audit_permissions",
        _policy(R, OPERATOR, ADMIN),
        "Audit Superset roles, users and permissions: who can see or change which dashboards and data.",
        "Проверить роли, пользователей и права в Superset: кто может видеть или менять какие дашборды "
        "и данные.",
        (
            "permissions",
            "permission",
            "access",
            "roles",
            "role",
            "rbac",
            "who has access",
            "grants",
            "users",
            "who can",
        ),
        (
            "права",
            "права доступа",
            "доступ",
            "роли",
            "роль",
            "пермишены",
            "у кого есть доступ",
            "пользователи",
            "разрешения",
            "аудит прав",
            "кто может",
            "кто имеет",
        ),
    ),
    ToolSpec(
        "superset_create_dashboard",
        _policy(W, ANALYST, OPERATOR),
        "Create a new, empty or templated dashboard in Superset.",
        "Создать новый дашборд в Superset, пустой или по шаблону.",
        ("create dashboard", "new dashboard", "make a dashboard", "build a dashboard", "add dashboard"),
        (
            "создай дашборд",
            "создать дашборд",
            "новый дашборд",
            "сделай дашборд",
            "заведи дашборд",
            "как создать дашборд",
        ),
    ),
    ToolSpec(
        "superset_copy_dashboard",
        _policy(W, ANALYST, OPERATOR),
        "Copy an existing dashboard, with its charts, under a new title.",
        "Скопировать существующий дашборд вместе с чартами под новым названием.",
        ("copy", "copy dashboard", "duplicate", "clone", "fork dashboard"),
        (
            "копия",
            "скопируй",
            "скопировать",
            "копировать",
            "дублируй",
            "продублируй",
            "клонируй",
            "клонни",
            "клон",
            "дубликат",
        ),
    ),
    ToolSpec(
        "superset_create_dataset",
        _policy(W, ANALYST, OPERATOR),
        "Create a Superset dataset from a database table so charts can use it.",
        "Создать в Superset датасет из таблицы базы данных, чтобы его могли использовать чарты.",
        ("dataset", "create dataset", "new dataset", "datasets", "register table"),
        ("датасет", "датасеты", "создай датасет", "набор данных", "новый датасет", "дата сет"),
    ),
    ToolSpec(
        "superset_format_sql",
        _policy(R, VIEWER),
        "Format an SQL query for readability without running it.",
        "Отформатировать SQL-запрос для читаемости, не выполняя его.",
        ("format sql", "format", "prettify", "beautify", "pretty print", "indent sql"),
        ("отформатируй", "форматирование", "форматировать", "причеши", "красиво оформи", "выровняй"),
    ),
)

# What the agent suggests instead when a person's role may not run a tool: read tools on the
# same subject (the guard keeps those the role may run, else offers show_capabilities).
ALTERNATIVES: dict[str, tuple[str, ...]] = {
    "deploy_dashboard": ("get_health_summary", "search_dashboards"),
    "execute_migration": ("get_health_summary", "list_environments"),
    "commit_changes": ("search_dashboards", "get_task_status"),
    "create_branch": ("search_dashboards", "list_environments"),
    "run_backup": ("list_environments", "get_task_status"),
    "start_maintenance": ("list_maintenance_events", "list_environments"),
    "end_maintenance": ("list_maintenance_events", "list_environments"),
    "superset_execute_sql": ("superset_format_sql", "superset_explore_database"),
    "superset_explore_database": ("search_dashboards", "superset_format_sql"),
    "superset_audit_permissions": ("list_environments", "show_capabilities"),
    "superset_create_dashboard": ("search_dashboards", "get_health_summary"),
    "superset_copy_dashboard": ("search_dashboards", "get_health_summary"),
    "superset_create_dataset": ("superset_explore_database", "search_dashboards"),
    "run_llm_validation": ("get_health_summary", "list_llm_providers"),
    "run_llm_documentation": ("get_health_summary", "list_llm_providers"),
}

# One request a person could type to run each tool, in Russian and in English (shown with
# alternatives and capabilities, in the page's language).
EXAMPLE_PROMPTS: dict[str, tuple[str, str]] = {
    "show_capabilities": ("Что ты умеешь?", "What can you do?"),
    "search_dashboards": ("Покажи дашборды", "Show the dashboards"),
    "get_health_summary": ("Что сломано в дашбордах?", "What is broken in the dashboards?"),
    "list_environments": ("Какие есть окружения?", "Which environments are there?"),
    "get_task_status": ("Какой статус у моей задачи?", "What is the status of my task?"),
    "list_llm_providers": ("Какие LLM-провайдеры настроены?", "Which LLM providers are configured?"),
    "get_llm_status": ("Работает ли LLM?", "Is the LLM working?"),
    "create_branch": ("Создай ветку для дашборда", "Create a branch for a dashboard"),
    "commit_changes": ("Закоммить изменения дашборда", "Commit the dashboard's changes"),
    "deploy_dashboard": ("Задеплой дашборд в prod", "Deploy a dashboard to prod"),
    "execute_migration": ("Перенеси дашборд из dev в prod", "Migrate a dashboard from dev to prod"),
    "run_backup": ("Сделай бэкап dev", "Back up dev"),
    "run_llm_validation": ("Проверь дашборд с помощью LLM", "Check a dashboard with the LLM"),
    "run_llm_documentation": ("Опиши чарты дашборда", "Describe a dashboard's charts"),
    "list_maintenance_events": (
        "Какие сейчас идут регламентные работы?",
        "Which maintenance windows are running?",
    ),
    "start_maintenance": ("Начни регламентные работы в prod", "Start maintenance in prod"),
    "end_maintenance": ("Заверши регламентные работы в prod", "End maintenance in prod"),
    "superset_execute_sql": ("Выполни SELECT count(*) FROM sales", "Run SELECT count(*) FROM sales"),
    "superset_explore_database": ("Какие таблицы есть в базе?", "Which tables does the database have?"),
    "superset_audit_permissions": ("Покажи права пользователей", "Show users' permissions"),
    "superset_create_dashboard": ("Создай дашборд «Продажи»", "Create a dashboard “Sales”"),
    "superset_copy_dashboard": ("Скопируй дашборд 12", "Copy dashboard 12"),
    "superset_create_dataset": ("Создай датасет из таблицы sales", "Create a dataset from the sales table"),
    "superset_format_sql": ("Отформатируй SQL-запрос", "Format an SQL query"),
}

# What an empty chat offers to ask, best first: each one the person's role may run.
IDLE_EXAMPLES = (
    "get_health_summary",
    "search_dashboards",
    "superset_execute_sql",
    "deploy_dashboard",
    "superset_audit_permissions",
    "show_capabilities",
)


def tool(name: str) -> ToolSpec:
    """The spec of one tool; ``KeyError`` for a name that is not in the catalogue."""
    return _BY_NAME[name]


def tool_names() -> Iterator[str]:
    return (spec.name for spec in TOOLS)


_BY_NAME = {spec.name: spec for spec in TOOLS}
