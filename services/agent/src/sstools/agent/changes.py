"""What a confirmation card says will change, in the card's language: the object named (the
dashboards by title beside their id), where from and where to. The words are part of the card,
so part of its digest: a person confirms exactly the change they read."""

from collections.abc import Mapping, Sequence
from typing import Any

from sstools.agent.language import Lang, say
from sstools.agent.wording import Facts

# tool: (Russian, English); ``{what}`` is the dashboards named, the rest the call's arguments.
_CHANGES: Mapping[str, tuple[str, str]] = {
    "deploy_dashboard": (
        "Дашборд {what} из {source_env} будет импортирован в {env_id}: создан там или заменён вместе "
        "с его графиками и датасетами.",
        "Dashboard {what} from {source_env} is imported into {env_id}: created there, or replaced "
        "together with its charts and datasets.",
    ),
    "execute_migration": (
        "Дашборды {what} из {source_env} будут перенесены в {env_id}: созданы там или заменены вместе "
        "с графиками и датасетами.",
        "Dashboards {what} from {source_env} are migrated into {env_id}: created there, or replaced "
        "together with their charts and datasets.",
    ),
    "commit_changes": (
        "Выгрузка дашбордов {what} из {env_id} будет закоммичена в ветку {branch}.",
        "The export of dashboards {what} from {env_id} is committed to branch {branch}.",
    ),
    "create_branch": (
        "В репозитории выгрузок создаётся ветка {name} от {start}.",
        "Branch {name} is created from {start} in the exports repository.",
    ),
    "run_backup": (
        "Создаётся резервная копия {env_id}: архив в хранилище ops.",
        "A backup of {env_id} is made: an archive in ops' storage.",
    ),
    "run_llm_validation": (
        "Дашборд {what} в {env_id} проверяется LLM; отчёт сохраняется как задача.",
        "Dashboard {what} in {env_id} is reviewed by the LLM; the report is kept as a task.",
    ),
    "run_llm_documentation": (
        "Для дашборда {what} в {env_id} пишутся описания графиков; они сохраняются как задача.",
        "Chart descriptions of dashboard {what} in {env_id} are written and kept as a task.",
    ),
    "start_maintenance": (
        "В {env_id} начинаются регламентные работы: изменения там отклоняются до их окончания. "
        "Причина: {reason}.",
        "Maintenance starts in {env_id}: changes there are refused until it ends. Reason: {reason}.",
    ),
    "end_maintenance": (
        "Регламентные работы в {env_id} завершаются: изменения снова разрешены.",
        "Maintenance in {env_id} ends: changes are allowed again.",
    ),
    "superset_execute_sql": (
        "Запрос из аргументов выполняется в {env_id} и может изменить данные.",
        "The statement in the arguments runs in {env_id} and may change data.",
    ),
    "superset_create_dashboard": (
        "В {env_id} создаётся дашборд «{title}».",
        "Dashboard “{title}” is created in {env_id}.",
    ),
    "superset_copy_dashboard": (
        "В {env_id} создаётся копия дашборда {what} под названием «{title}».",
        "A copy of dashboard {what} titled “{title}” is created in {env_id}.",
    ),
    "superset_create_dataset": (
        "В {env_id} регистрируется датасет из таблицы {table_name}.",
        "A dataset of table {table_name} is registered in {env_id}.",
    ),
}


def dashboards_named(dashboards: Sequence[Mapping[str, Any]]) -> str:
    """ "«Sales Overview» (#1), #7": each by its title where it has one, always by its id."""
    return ", ".join(
        f"«{board['title']}» (#{board['id']})" if board.get("title") else f"#{board['id']}"
        for board in dashboards
    )


def change(
    tool_name: str, lang: Lang, args: Mapping[str, Any], dashboards: Sequence[Mapping[str, Any]]
) -> str:
    """What running ``tool_name`` with ``args`` changes; names and values fill the text as values only."""
    texts = _CHANGES.get(tool_name)
    if texts is None:
        return say(
            lang,
            f"Выполняется {tool_name} с аргументами ниже.",
            f"{tool_name} runs with the arguments below.",
        )
    return say(lang, *texts).format_map(Facts({**args, "what": dashboards_named(dashboards)}))
