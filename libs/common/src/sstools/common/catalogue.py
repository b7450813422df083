"""The tool catalogue: each tool declared once, as one unit, and read everywhere.

A tool's declaration holds its name, risk policy, RU+EN descriptions and keywords, its arguments
and the ops endpoint that performs it, a request a person could type for it, the read tools
offered instead when a role may not run it, what its confirmation card says will change, and how
its result is answered. The router embeds the descriptions and matches the keywords; the agent
binds the arguments to its tools and validates calls with them; its gate, cards and denials, the
built-in planner and its answers read the rest; ops takes the same argument models and paths for
its routes and the same policies for its RBAC. Keyword phrases are written as a person would
type them; the router reduces them to word stems, so one form covers its inflections
("дашборд" covers "дашбордов").

A tool may also come from another installed package: an entry point in the ``sstools.tools``
group names its :class:`ToolSpec` (README, "Adding a tool").
"""

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from importlib.metadata import entry_points

from sstools.common.tool_args import (
    DASHBOARD_PATH,
    ENV_PATH,
    AuditArgs,
    AuditQuery,
    BranchBody,
    CommitBody,
    CopyArgs,
    CopyBody,
    CreateDashboardArgs,
    DashboardBody,
    DashboardSearch,
    DashboardTarget,
    DatasetArgs,
    DatasetBody,
    DeployArgs,
    DeployBody,
    Endpoint,
    EnvArgs,
    ExploreArgs,
    ExploreQuery,
    FormatBody,
    HealthArgs,
    HealthQuery,
    MaintenanceArgs,
    MaintenanceBody,
    MaintenanceQuery,
    MigrationArgs,
    MigrationBody,
    NoArgs,
    SearchArgs,
    SqlArgs,
    SqlBody,
    TaskArgs,
    ToolArgs,
)


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
class Answer:
    """How a tool's result is put to the person when no model words it (the built-in planner).

    ``view`` names the agent's view of the result: ``made`` (the object made, named after
    ``ru``/``en``: "created dashboard"), ``rows`` (the result's list as a table of ``columns``)
    or one of the views of a result shape a built-in tool returns (``dashboards``, ``health``, …).
    A tool with no answer is shown as its result's fields; a task it starts, as that task."""

    view: str
    ru: str = ""
    en: str = ""
    columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class Frame:
    """How a person's words fill the tool's arguments when no model reads them (the built-in
    planner). Arguments of a typed kind — an environment, a dashboard, a database, a table, SQL, a
    task id — are read by their type from the words and the live system; what is declared here is
    the rest: the words after which an argument's free text stands (``texts``, Russian and English
    phrases), the words that switch an argument on (``flags``), and what a required text is when
    the words say nothing of it (``defaults``)."""

    texts: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    flags: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # A required text the words do not give: (Russian, English), the card shows it to change.
    defaults: Mapping[str, tuple[str, str]] = field(default_factory=dict)


def made(ru: str, en: str) -> Answer:
    return Answer("made", ru, en)


def rows(*columns: str) -> Answer:
    return Answer("rows", columns=columns)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    policy: Policy
    description_en: str
    description_ru: str
    keywords_en: tuple[str, ...]
    keywords_ru: tuple[str, ...]
    # One request a person could type for it, in Russian and in English (shown with alternatives
    # and capabilities, in the page's language).
    example: tuple[str, str]
    # Where ops performs it and its arguments; none: the agent answers it itself.
    endpoint: Endpoint | None = None
    # Read tools on the same subject, suggested when a person's role may not run it (the guard
    # keeps those the role may run, else offers show_capabilities).
    alternatives: tuple[str, ...] = ()
    # What its confirmation card says will change (Russian, English): ``{what}`` is the
    # dashboards named, any other ``{field}`` the call's argument.
    change: tuple[str, str] | None = None
    answer: Answer | None = None
    # Only superset_execute_sql: the policy for anything but one read-only statement.
    mutating_sql_policy: Policy | None = field(default=None)
    # A call that makes Superset or a database do real work (every chart's query, a statement,
    # a schema's walk): ops counts it against the person's budget of such calls per minute.
    heavy: bool = False
    # The kind of ops task a call goes on as when it outlives ops' wait for it: the task's
    # result is then what the call would have answered.
    followed_as: str | None = None
    frame: Frame = field(default_factory=Frame)

    @property
    def keywords(self) -> tuple[str, ...]:
        return self.keywords_en + self.keywords_ru

    @property
    def args(self) -> type[ToolArgs]:
        return self.endpoint.args if self.endpoint is not None else NoArgs

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
# What a question about a dashboard named and nothing else asks: how it is ("is Sales ok?").
ASKED_OF_A_DASHBOARD = "get_health_summary"
# The ops tasks a slow read goes on as when it runs longer than ops' wait for it.
SQL_TASK = "sql"
HEALTH_TASK = "health"

BUILT_IN: tuple[ToolSpec, ...] = (
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
        example=(
            "Что ты умеешь?",
            "What can you do?",
        ),
        answer=Answer("capabilities"),
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
        frame=Frame(
            texts={
                "query": (
                    "titled",
                    "named",
                    "called",
                    "containing",
                    "about",
                    "with the word",
                    "названием",
                    "называется",
                    "про",
                    "содержащие",
                    "со словом",
                    "со словами",
                ),
                "owner": (
                    "owned by",
                    "owner",
                    "belonging to",
                    "владелец",
                    "владельца",
                    "владельцем",
                    "принадлежащие",
                    "принадлежат",
                ),
                "tag": ("tag", "tagged", "тег", "тегом", "тэг", "тэгом", "меткой"),
            }
        ),
        endpoint=Endpoint("GET", ENV_PATH + "/dashboards", SearchArgs, DashboardSearch),
        example=(
            "Покажи дашборды",
            "Show the dashboards",
        ),
        answer=Answer("dashboards"),
    ),
    ToolSpec(
        "get_health_summary",
        _policy(R, VIEWER),
        "Summarise dashboard health in an environment: broken charts, failing queries and validation "
        "problems.",
        "Сводка здоровья дашбордов в окружении: сломанные чарты, падающие запросы и проблемы валидации.",
        (
            "health",
            "healthy",
            "alive",
            "in order",
            "all good",
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
            "в порядке",
            "живой",
            "жив ли",
            "норм ли",
            "всё ок",
            "как там",
            "глючит",
            "здоров",
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
        followed_as=HEALTH_TASK,
        frame=Frame(
            flags={
                "force": (
                    "force",
                    "fresh",
                    "bypass cache",
                    "without cache",
                    "skip the cache",
                    "no cache",
                    "re-run",
                    "rerun",
                    "мимо кэша",
                    "без кэша",
                    "принудительно",
                    "заново",
                )
            }
        ),
        endpoint=Endpoint("GET", ENV_PATH + "/health", HealthArgs, HealthQuery),
        example=(
            "Что сломано в дашбордах?",
            "What is broken in the dashboards?",
        ),
        answer=Answer("health"),
    ),
    ToolSpec(
        "list_environments",
        _policy(R, VIEWER),
        "List the Superset environments (dev, staging, prod) the agent can reach, with URLs and status.",
        "Показать окружения Superset (dev, staging, prod), доступные агенту, с адресами и статусом.",
        ("environments", "environment", "env", "envs", "instances", "stands", "which environments"),
        ("окружения", "окружение", "среды", "среда", "стенды", "стенд", "инстансы", "энвы"),
        endpoint=Endpoint("GET", "/api/environments", NoArgs),
        example=(
            "Какие есть окружения?",
            "Which environments are there?",
        ),
        answer=Answer("environments"),
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
        endpoint=Endpoint("GET", "/api/tasks/{task_id}", TaskArgs),
        example=(
            "Какой статус у моей задачи?",
            "What is the status of my task?",
        ),
    ),
    ToolSpec(
        "list_llm_providers",
        _policy(R, VIEWER),
        "List the configured LLM providers and models the platform can use.",
        "Показать настроенных LLM-провайдеров и модели, которые может использовать платформа.",
        ("llm providers", "providers", "models", "llm models", "which llm", "openai", "llm list"),
        ("провайдеры", "провайдер llm", "модели", "какие модели", "какие llm", "список llm", "нейросети"),
        endpoint=Endpoint("GET", "/api/llm/providers", NoArgs),
        example=(
            "Какие LLM-провайдеры настроены?",
            "Which LLM providers are configured?",
        ),
        answer=rows("id", "kind", "model", "default"),
    ),
    ToolSpec(
        "get_llm_status",
        _policy(R, VIEWER),
        "Check whether the LLM provider is reachable and healthy: availability, latency, quota.",
        "Проверить, доступен ли LLM-провайдер и в каком он состоянии: доступность, задержка, квота.",
        (
            "llm status",
            "is the llm alive",
            "llm responding",
            "llm health",
            "is the llm up",
            "llm down",
            "llm available",
            "quota",
            "latency",
            "ai down",
            "ai is down",
            "ai thing",
            "provider up",
            "provider alive",
            "provider healthy",
            "provider reachable",
            "provider responding",
            "llm reachable",
        ),
        (
            "статус llm",
            "жива ли llm",
            "llm жива",
            "llm отвечает",
            "состояние llm",
            "llm работает",
            "llm доступен",
            "llm лежит",
            "квота",
            "задержка",
            "нейросеть работает",
            "провайдер отвечает",
            "провайдер жив",
            "провайдер доступен",
        ),
        endpoint=Endpoint("GET", "/api/llm/status", NoArgs),
        example=(
            "Работает ли LLM?",
            "Is the LLM working?",
        ),
    ),
    ToolSpec(
        "create_branch",
        _policy(W, OPERATOR),
        "Create a git branch in the dashboards repository for versioned changes.",
        "Создать git-ветку в репозитории дашбордов для версионируемых изменений.",
        ("branch", "create branch", "new branch", "git branch", "feature branch"),
        (
            "ветка",
            "ветку",
            "создай ветку",
            "сделай ветку",
            "заведи ветку",
            "новая ветка",
            "бранч",
            "git ветка",
        ),
        frame=Frame(
            texts={
                "name": ("branch", "named", "called", "ветку", "ветка", "названием", "бранч"),
                "start": ("from", "off", "от", "из", "на основе"),
            }
        ),
        endpoint=Endpoint("POST", "/api/git/branches", BranchBody, BranchBody),
        example=(
            "Создай ветку для дашборда",
            "Create a branch for a dashboard",
        ),
        alternatives=("search_dashboards", "list_environments"),
        change=(
            "В репозитории выгрузок создаётся ветка {name} от {start}.",
            "Branch {name} is created from {start} in the exports repository.",
        ),
        answer=made("создана ветка", "created branch"),
    ),
    ToolSpec(
        "commit_changes",
        _policy(D, OPERATOR),
        "Commit the exported dashboard changes to the git repository with a message.",
        "Закоммитить выгруженные изменения дашбордов в git-репозиторий с сообщением.",
        ("commit", "commit changes", "save to git", "push", "git commit"),
        ("коммит", "закоммить", "закоммитить", "закомить", "сохрани в git", "запушь", "пуш", "зафиксируй"),
        frame=Frame(
            texts={
                "message": ("message", "with message", "сообщением", "комментарием", "описанием"),
                "branch": ("branch", "to branch", "on branch", "ветку", "ветке", "в ветку"),
            }
        ),
        endpoint=Endpoint("POST", "/api/git/commits", CommitBody, CommitBody),
        example=(
            "Закоммить изменения дашборда",
            "Commit the dashboard's changes",
        ),
        alternatives=("search_dashboards", "get_task_status"),
        change=(
            "Выгрузка дашбордов {what} из {env_id} будет закоммичена в ветку {branch}.",
            "The export of dashboards {what} from {env_id} is committed to branch {branch}.",
        ),
        answer=made("сделан коммит", "committed"),
    ),
    ToolSpec(
        "deploy_dashboard",
        _policy(D, OPERATOR, ADMIN),
        "Deploy a dashboard to a target environment, for example promote it from staging to prod.",
        "Задеплоить дашборд в целевое окружение, например выкатить его со staging в prod.",
        (
            "deploy",
            "deployment",
            "promote",
            "release",
            "ship",
            "publish",
            "roll out",
            "push to prod",
            "push to production",
        ),
        (
            "деплой",
            "выкатывай",
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
            "разверни",
            "развернуть",
            "накати",
            "накатить",
            "деплоить",
        ),
        endpoint=Endpoint("POST", ENV_PATH + "/deployments", DeployArgs, DeployBody),
        example=(
            "Задеплой дашборд в prod",
            "Deploy a dashboard to prod",
        ),
        alternatives=("get_health_summary", "search_dashboards"),
        change=(
            "Дашборд {what} из {source_env} будет импортирован в {env_id}: создан там или заменён "
            "вместе с его графиками и датасетами.",
            "Dashboard {what} from {source_env} is imported into {env_id}: created there, or replaced "
            "together with its charts and datasets.",
        ),
    ),
    ToolSpec(
        "execute_migration",
        _policy(D, OPERATOR, ADMIN),
        "Migrate dashboards, datasets and database connections from one environment to another.",
        "Перенести дашборды, датасеты и подключения к базам из одного окружения в другое.",
        (
            "migrate",
            "move over",
            "bring over",
            "carry over",
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
            "перетащи",
            "перетащить",
            "мигрируй",
            "мигрировать",
            "перенеси",
            "перенести",
            "перенос",
            "переезд",
            "синхронизируй окружения",
            "смигрируй",
        ),
        frame=Frame(
            texts={"database_mapping": ("map", "mapping", "замапь", "сопоставь", "маппинг", "мапинг")}
        ),
        endpoint=Endpoint("POST", ENV_PATH + "/migrations", MigrationArgs, MigrationBody),
        example=(
            "Перенеси дашборд из dev в prod",
            "Migrate a dashboard from dev to prod",
        ),
        alternatives=("get_health_summary", "list_environments"),
        change=(
            "Дашборды {what} из {source_env} будут перенесены в {env_id}: созданы там или заменены "
            "вместе с графиками и датасетами.",
            "Dashboards {what} from {source_env} are migrated into {env_id}: created there, or "
            "replaced together with their charts and datasets.",
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
            "слепок",
            "сохрани копию",
        ),
        endpoint=Endpoint("POST", ENV_PATH + "/backups", EnvArgs),
        example=(
            "Сделай бэкап dev",
            "Back up dev",
        ),
        alternatives=("list_environments", "get_task_status"),
        change=(
            "Создаётся резервная копия {env_id}: архив в хранилище ops.",
            "A backup of {env_id} is made: an archive in ops' storage.",
        ),
        answer=made("сделан бэкап", "backed up"),
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
            "via llm",
            "with the llm",
            "llm check",
            "llm review",
            "ai review",
            "sanity check",
            "chart logic",
            "validation",
            "review dashboard",
            "check dashboard",
            "audit dashboard",
            "lint",
            "verify",
        ),
        (
            "валидация",
            "через llm",
            "через нейросеть",
            "проверка логики",
            "нейросетевая проверка",
            "логика графиков",
            "валидируй",
            "провалидируй",
            "проверь дашборд",
            "проверка дашборда",
            "ревью",
            "проверить дашборд",
        ),
        endpoint=Endpoint("POST", DASHBOARD_PATH + "/validation", DashboardTarget),
        example=(
            "Проверь дашборд с помощью LLM",
            "Check a dashboard with the LLM",
        ),
        alternatives=("get_health_summary", "list_llm_providers"),
        change=(
            "Дашборд {what} в {env_id} проверяется LLM; отчёт сохраняется как задача.",
            "Dashboard {what} in {env_id} is reviewed by the LLM; the report is kept as a task.",
        ),
    ),
    ToolSpec(
        "run_llm_documentation",
        _policy(W, ANALYST, OPERATOR),
        "Use an LLM to write documentation and descriptions for a dashboard or dataset and save them "
        "into Superset.",
        "Написать с помощью LLM документацию и описания для дашборда или датасета и сохранить их в Superset.",
        ("document", "documentation", "docs", "describe", "description", "write descriptions", "annotate"),
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
        endpoint=Endpoint("POST", DASHBOARD_PATH + "/documentation", DashboardTarget),
        example=(
            "Опиши чарты дашборда",
            "Describe a dashboard's charts",
        ),
        alternatives=("get_health_summary", "list_llm_providers"),
        change=(
            "Для дашборда {what} в {env_id} пишутся описания графиков; они сохраняются как задача.",
            "Chart descriptions of dashboard {what} in {env_id} are written and kept as a task.",
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
            "scheduled",
            "downtime",
            "scheduled windows",
            "windows",
        ),
        (
            "обслуживание",
            "техобслуживание",
            "мейнтенанс",
            "техработы",
            "запланировано",
            "технические работы",
            "регламентные работы",
            "окно обслуживания",
            "окна обслуживания",
            "даунтайм",
        ),
        endpoint=Endpoint("GET", "/api/maintenance", MaintenanceQuery, MaintenanceQuery),
        example=(
            "Какие сейчас идут регламентные работы?",
            "Which maintenance windows are running?",
        ),
        answer=Answer("windows"),
    ),
    ToolSpec(
        "start_maintenance",
        _policy(D, OPERATOR, ADMIN),
        "Start a maintenance window: put an environment into maintenance mode and notify its users.",
        "Начать окно обслуживания: перевести окружение в режим обслуживания и уведомить пользователей.",
        (
            "start maintenance",
            "begin maintenance",
            "maintenance mode",
            "enable maintenance",
            "take down",
            "into maintenance",
            "schedule maintenance",
            "start downtime",
            "turn on maintenance",
        ),
        (
            "начни обслуживание",
            "в режим обслуживания",
            "переведи в обслуживание",
            "на обслуживание",
            "на техобслуживание",
            "в мейнтенанс",
            "закрой на обслуживание",
            "объяви техработы",
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
        frame=Frame(
            texts={
                "reason": (
                    "because of",
                    "because",
                    "reason",
                    "due to",
                    "for",
                    "причина",
                    "по причине",
                    "из-за",
                    "потому что",
                    "так как",
                    "для",
                )
            },
            defaults={"reason": ("Плановые работы", "Planned maintenance")},
        ),
        endpoint=Endpoint("POST", ENV_PATH + "/maintenance", MaintenanceArgs, MaintenanceBody),
        example=(
            "Начни регламентные работы в prod",
            "Start maintenance in prod",
        ),
        alternatives=("list_maintenance_events", "list_environments"),
        change=(
            "В {env_id} начинаются регламентные работы: изменения там отклоняются до их окончания. "
            "Причина: {reason}.",
            "Maintenance starts in {env_id}: changes there are refused until it ends. Reason: {reason}.",
        ),
        answer=Answer("windows"),
    ),
    ToolSpec(
        "end_maintenance",
        _policy(D, OPERATOR, ADMIN),
        "End a maintenance window and bring the environment back to normal operation.",
        "Завершить окно обслуживания и вернуть окружение в обычный режим работы.",
        (
            "end maintenance",
            "lift maintenance",
            "maintenance is over",
            "maintenance over",
            "back online",
            "out of maintenance",
            "end downtime",
            "turn off maintenance",
            "stop maintenance",
            "finish maintenance",
            "exit maintenance",
            "disable maintenance",
            "kill maintenance",
            "nuke maintenance",
        ),
        (
            "заверши обслуживание",
            "сними обслуживание",
            "сними техобслуживание",
            "сними с обслуживания",
            "сними с техобслуживания",
            "выведи из техобслуживания",
            "выведи из обслуживания",
            "верни в работу",
            "обслуживание закончено",
            "техработы закончены",
            "отключи режим обслуживания",
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
        endpoint=Endpoint("POST", ENV_PATH + "/maintenance/end", EnvArgs),
        example=(
            "Заверши регламентные работы в prod",
            "End maintenance in prod",
        ),
        alternatives=("list_maintenance_events", "list_environments"),
        change=(
            "Регламентные работы в {env_id} завершаются: изменения снова разрешены.",
            "Maintenance in {env_id} ends: changes are allowed again.",
        ),
        answer=Answer("windows"),
    ),
    ToolSpec(
        "superset_execute_sql",
        _policy(R, ANALYST),
        "Run an SQL query against a database through Superset SQL Lab and return the rows.",
        "Выполнить SQL-запрос к базе данных через Superset SQL Lab и вернуть строки.",
        ("sql", "query", "run query", "execute sql", "select", "sql lab", "run sql", "execute"),
        (
            "sql",
            "запрос",
            "выполни запрос",
            "выполни sql",
            "селект",
            "скуль",
            "sql lab",
            "запусти запрос",
            "выполни",
            "выполняй",
        ),
        mutating_sql_policy=_policy(D, ADMIN),
        heavy=True,
        followed_as=SQL_TASK,
        endpoint=Endpoint("POST", ENV_PATH + "/sql", SqlArgs, SqlBody),
        example=(
            "Выполни SELECT count(*) FROM sales",
            "Run SELECT count(*) FROM sales",
        ),
        alternatives=("superset_format_sql", "superset_explore_database"),
        change=(
            "Запрос из аргументов выполняется в {env_id} и может изменить данные.",
            "The statement in the arguments runs in {env_id} and may change data.",
        ),
        answer=Answer("sql"),
    ),
    ToolSpec(
        "superset_explore_database",
        _policy(R, ANALYST),
        "Explore a database connected to Superset: list its schemas, tables and columns.",
        "Изучить базу данных, подключённую к Superset: показать схемы, таблицы и колонки.",
        ("database", "schema", "schemas", "tables", "table", "columns", "explore database", "db"),
        ("база", "базы данных", "бд", "схема", "схемы", "таблицы", "таблица", "колонки", "столбцы", "поля"),
        heavy=True,
        endpoint=Endpoint("GET", ENV_PATH + "/databases", ExploreArgs, ExploreQuery),
        example=(
            "Какие таблицы есть в базе?",
            "Which tables does the database have?",
        ),
        alternatives=("search_dashboards", "superset_format_sql"),
        answer=Answer("catalogue"),
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
            "who is allowed",
            "allowed to edit",
            "edit rights",
            "view rights",
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
            "имеет доступ",
        ),
        endpoint=Endpoint("GET", ENV_PATH + "/permissions", AuditArgs, AuditQuery),
        example=(
            "Покажи права пользователей",
            "Show users' permissions",
        ),
        alternatives=("list_environments", "show_capabilities"),
        answer=Answer("access"),
    ),
    ToolSpec(
        "superset_create_dashboard",
        _policy(W, ANALYST, OPERATOR),
        "Create a new, empty or templated dashboard in Superset.",
        "Создать новый дашборд в Superset, пустой или по шаблону.",
        (
            "create dashboard",
            "new dashboard",
            "make a dashboard",
            "build a dashboard",
            "add dashboard",
            "new board",
        ),
        (
            "создай дашборд",
            "новую доску",
            "заведи доску",
            "создай доску",
            "создать дашборд",
            "новый дашборд",
            "сделай дашборд",
            "заведи дашборд",
            "как создать дашборд",
        ),
        frame=Frame(
            texts={
                "title": (
                    "called",
                    "named",
                    "titled",
                    "title",
                    "названием",
                    "под названием",
                    "назови",
                    "именем",
                ),
                "slug": ("slug",),
            },
            flags={"published": ("published", "publish it", "опубликованный", "опубликуй", "опубликованным")},
        ),
        endpoint=Endpoint("POST", ENV_PATH + "/dashboards", CreateDashboardArgs, DashboardBody),
        example=(
            "Создай дашборд «Продажи»",
            "Create a dashboard “Sales”",
        ),
        alternatives=("search_dashboards", "get_health_summary"),
        change=(
            "В {env_id} создаётся дашборд «{title}».",
            "Dashboard “{title}” is created in {env_id}.",
        ),
        answer=made("создан дашборд", "created dashboard"),
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
        frame=Frame(
            texts={
                "title": (
                    "call it",
                    "name it",
                    "назови его",
                    "as",
                    "called",
                    "named",
                    "titled",
                    "под названием",
                    "названием",
                    "как",
                    "назови",
                )
            },
            flags={
                "duplicate_charts": (
                    "with charts",
                    "with its charts",
                    "charts too",
                    "с чартами",
                    "вместе с чартами",
                    "с графиками",
                    "charts included",
                    "including charts",
                    "и чарты",
                )
            },
            defaults={"title": ("Копия дашборда", "Copy of the dashboard")},
        ),
        endpoint=Endpoint("POST", DASHBOARD_PATH + "/copy", CopyArgs, CopyBody),
        example=(
            "Скопируй дашборд 12",
            "Copy dashboard 12",
        ),
        alternatives=("search_dashboards", "get_health_summary"),
        change=(
            "В {env_id} создаётся копия дашборда {what} под названием «{title}».",
            "A copy of dashboard {what} titled “{title}” is created in {env_id}.",
        ),
        answer=made("создана копия", "created the copy"),
    ),
    ToolSpec(
        "superset_create_dataset",
        _policy(W, ANALYST, OPERATOR),
        "Create a Superset dataset from a database table so charts can use it.",
        "Создать в Superset датасет из таблицы базы данных, чтобы его могли использовать чарты.",
        ("dataset", "create dataset", "new dataset", "datasets", "register table"),
        ("датасет", "датасеты", "создай датасет", "набор данных", "новый датасет", "дата сет"),
        endpoint=Endpoint("POST", ENV_PATH + "/datasets", DatasetArgs, DatasetBody),
        example=(
            "Создай датасет из таблицы sales",
            "Create a dataset from the sales table",
        ),
        alternatives=("superset_explore_database", "search_dashboards"),
        change=(
            "В {env_id} регистрируется датасет из таблицы {table_name}.",
            "A dataset of table {table_name} is registered in {env_id}.",
        ),
        answer=made("создан датасет", "created dataset"),
    ),
    ToolSpec(
        "superset_format_sql",
        _policy(R, VIEWER),
        "Format an SQL query for readability without running it.",
        "Отформатировать SQL-запрос для читаемости, не выполняя его.",
        ("format sql", "format", "prettify", "beautify", "pretty print", "indent sql", "tidy up"),
        ("отформатируй", "форматирование", "форматировать", "причеши", "красиво оформи", "выровняй"),
        frame=Frame(texts={"dialect": ("dialect", "диалект", "for", "для", "as", "как")}),
        endpoint=Endpoint("POST", "/api/sql/format", FormatBody, FormatBody),
        example=(
            "Отформатируй SQL-запрос",
            "Format an SQL query",
        ),
        answer=Answer("code"),
    ),
)

# What an empty chat offers to ask, best first: each one the person's role may run.
IDLE_EXAMPLES = (
    "get_health_summary",
    "search_dashboards",
    "superset_execute_sql",
    "deploy_dashboard",
    "superset_audit_permissions",
    "show_capabilities",
)


def _installed() -> tuple[ToolSpec, ...]:
    """Tools other installed packages declare, through ``sstools.tools`` entry points."""
    found = []
    for point in entry_points(group="sstools.tools"):
        spec = point.load()
        if not isinstance(spec, ToolSpec):
            raise TypeError(f"entry point {point.name!r} of sstools.tools is not a ToolSpec: {spec!r}")
        found.append(spec)
    return tuple(sorted(found, key=lambda spec: spec.name))


TOOLS: tuple[ToolSpec, ...] = BUILT_IN + _installed()


def tool(name: str) -> ToolSpec:
    """The spec of one tool; ``KeyError`` for a name that is not in the catalogue."""
    return _BY_NAME[name]


def tool_names() -> Iterator[str]:
    return (spec.name for spec in TOOLS)


_BY_NAME = {spec.name: spec for spec in TOOLS}
if len(_BY_NAME) != len(TOOLS):
    raise ValueError("two tools of the catalogue share a name")

# Read from the declarations: where ops performs each tool, each tool's arguments, what each
# offers instead, what a person could type for each.
ENDPOINTS: Mapping[str, Endpoint] = {spec.name: spec.endpoint for spec in TOOLS if spec.endpoint}
ARGS: Mapping[str, type[ToolArgs]] = {spec.name: spec.args for spec in TOOLS}
ALTERNATIVES: Mapping[str, tuple[str, ...]] = {
    spec.name: spec.alternatives for spec in TOOLS if spec.alternatives
}
EXAMPLE_PROMPTS: Mapping[str, tuple[str, str]] = {spec.name: spec.example for spec in TOOLS}
