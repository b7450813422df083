"""What a request asks, read from its words: the tools it wants, in the order its verbs say
(negated ones set aside), and the values the words give — environments as configured, ids,
object names, SQL inline or described, a task id, a title or reason.

Nothing here calls anything: names are resolved to ids by the planner's steps, through the read
tools. Russian and English, typos of the common words and slang included; stems rather than word
lists where Russian inflects.
"""

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sstools.agent.context import KIND_WORDS, Environment, env_aliases
from sstools.agent.planner.spelling import one_typo, speller
from sstools.agent.sqltext import split_sql
from sstools.common.catalogue import tool as tool_spec

_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)
# an apostrophe inside a word ("what's", "dev's") opens and closes nothing
_QUOTED = re.compile(r"(?<!\w)[«\"“”'`]([^«»\"“”'`]{1,200})[»\"“”'`](?!\w)")
_TOKEN = re.compile(r"[\w'-]+|->|→|[,.;:!?()—–]", re.UNICODE)
_DASHBOARD_WORD = (
    r"(?:dash\w*|dahsboard\w*|dashbord\w*|board\w*|дашб\w*|дэшб\w*|дашик\w*|даш\b|борд\w*|панел\w*"
    r"|доск[аиуе]\b)"
)
_ID_AFTER_WORD = re.compile(rf"(?:{_DASHBOARD_WORD}|#|\bid)\s*(?:#|№|id|номер)?\s*(\d{{1,9}})\b", re.I)
_BARE_NUMBER = re.compile(r"(?<![\w.#-])(\d{1,9})(?![\w.%-])")

_FROM = {"from", "из", "с", "со", "off"}
_TO = {"to", "into", "onto", "в", "во", "на", "->", "→", "in", "on", "at", "for", "для"}

NEGATION = re.compile(
    r"(?:\bне\b|\bнет\b|\bdon'?t\b|\bdo\s+not\b|\bdoesn'?t\b|\bnever\b|\bno\s+need\s+to\b|\bне\s+надо\b"
    r"|\bне\s+нужно\b|\bwithout\b|\bбез\b|\binstead\s+of\b|\bвместо\b|\bnot\b|\bотмена\b|\bотмени\w*"
    r"|\bskip\b|\bscrap\b|\bforget\b|\bпропусти\w*|\bзабей\b|\bотбой\b)",
    re.I,
)
# A negation reaches over at most this many words, and never past a clause break.
_NEGATION_REACH = 3
_REFUSED_AFTER = re.compile(
    r"\W*(?:[\w-]+\W+){0,2}?(?:не\s+надо|не\s+нуж(?:ен|н)\w*|не\s+требу\w*|не\s+будем|not\s+needed|isn'?t\s+needed"
    r"|не\s+(?:за|вы|с|про|от)?\w*(?:ай|яй|уй|ей)\b)",
    re.I,
)
# Where one request of a message ends and the next begins.
_CLAUSES = re.compile(r"[,;.!?—–]|\b(?:and|then|и|затем|потом)\b", re.I)
_CLAUSE_BREAK = re.compile(r"[,.;:!?—–]|\b(?:but|just|only|instead|а|но|просто|только|лучше)\b", re.I)

_MAINTENANCE = (
    r"(?:maint\w*|mainten\w*|downtime|обслужив\w*|техработ\w*|тех\.?\s*работ\w*|регламентн\w*|мейнтенанс\w*"
    r"|ме[йи]нт\w*)"
)
_START = (
    r"(?:start\w*|begin|open|enable|turn\s+on|put|switch|schedule|включ\w*|начн\w*|начат\w*|запуст\w*"
    r"|откр\w*|объяв\w*|постав\w*|перевед\w*|введи|вкл|кин\w*|отправ\w*|go\s+into|enter)"
)
_END = (
    r"(?:end|ends|ending|stop\w*|finish\w*|close|disable|turn\s+off|lift|exit|nuke|kill|cancel\w*"
    r"|заверш\w*|законч\w*|заканчива\w*|останов\w*|сним\w*|выключ\w*|выйд\w*|выход\w*|прекрат\w*"
    r"|отключ\w*|убер\w*|выведи)"
)
_NEAR = r"\W+(?:[\w'-]+\W+){0,5}?"
ENDING = re.compile(rf"\b{_END}", re.I)

# The tools a request may want, most specific first: the first one the words name (and do not
# negate) leads; the router's order decides among the rest.
INTENTS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (tool, re.compile(pattern, re.I))
    for tool, pattern in (
        (
            "get_task_status",
            r"\btask\b|\bзадач\w*|\bтаск\w*|\bjob\b|\b(?:done|finished|ready|complete)\s+yet\b"
            rf"|(?:готов|закончил|завершил|прош[её]л)\w*\s+ли|{_UUID.pattern}",
        ),
        ("end_maintenance", rf"{_END}{_NEAR}{_MAINTENANCE}|{_MAINTENANCE}\w*{_NEAR}(?:{_END}|off)\b"),
        (
            "start_maintenance",
            rf"{_START}{_NEAR}{_MAINTENANCE}|{_MAINTENANCE}\w*\W+(?:mode\W+)?(?:on|start)\b",
        ),
        ("list_maintenance_events", rf"{_MAINTENANCE}|\bwindows?\b|окн[оа]\w*"),
        (
            "run_backup",
            r"back\s*-?\s*up\w*|бэкап\w*|бекап\w*|резервн\w*\s+коп\w*|snapshot\w*|снапшот\w*|слеп(?:ок|ка)\b"
            r"|коп\w*\s+(?:всего\s+)?(?:прод|дев|стейдж|окружени)\w*"
            r"|\bcop(?:y|ies)\s+of\s+(?:the\s+)?(?:whole\s+|entire\s+)?(?:dev|prod|stag|environment|env)\w*",
        ),
        (
            "superset_copy_dashboard",
            r"\bcop(?:y|ies)\b|duplicat\w*|\bclone\b|копи[юяи]\w*|скопир\w*|дублик\w*|дублир\w*|клонир\w*",
        ),
        (
            "execute_migration",
            r"migrat\w*|мигр\w*|with\s+(?:the\s+|its\s+|their\s+|all\s+)?(?:the\s+)?datasets"
            r"|(?:вместе\s+)?со?\s+(?:всеми\s+|его\s+|их\s+|своими\s+)?датасет\w*"
            r"|database\s+mapping|маппинг\w*|\bмапп?\w*|подключени\w*\s+к\s+баз\w*",
        ),
        (
            "deploy_dashboard",
            r"deplo\w*|depoly\w*|dpeloy\w*|promot\w*|\bship\b|\bpush\b|roll\s*out|деплой\w*|депло\w*"
            r"|выкат\w*|раскат\w*|опублик\w*|перенес\w*|перенос\w*|разверн\w*|развер\w*|перекин\w*"
            r"|закин\w*|катни|закат(?:ай|и|ить)\w*|накат\w*",
        ),
        (
            "run_llm_validation",
            r"\bvalidat(?:e|ing)\b|valdiat\w*|\bvalidation\s+(?:of|for|on)\b|\brun\s+(?:a\s+)?validation"
            r"|\blint\b|\breview\b|провалидир\w*|валидируй\w*|отвалидир\w*|валидаци[юя]\b|провер\w*\s+валидн\w*"
            r"|провер\w*\W+(?:[\w-]+\W+){0,5}(?:через|с\s+помощью)\s+(?:llm|ллм|ии|нейросет\w*)"
            # an AI asked to go over a dashboard
            r"|(?:нейросет\w*|\bии\b|\bai\b|\bllm\b|ллм)\W+(?:[\w-]+\W+){0,3}"
            r"(?:пройд\w*|просмотр\w*|go\s+over|look\s+over|look\s+into|dig|analy[sz]\w*|разбер\w*|проанализ\w*)"
            r"|нейросетев\w*\s+(?:ревизи|провер|анализ|аудит)\w*",
        ),
        (
            "run_llm_documentation",
            r"\bdocument(?:ing|ation\s+for)?\b(?!s)|задокументир\w*"
            r"|(?:write|generate|create|add|fill\s+in)\s+(?:up\s+)?(?:the\s+)?(?:missing\s+)?descriptions"
            r"|документир\w*|документаци\w*|\bdocs\b|\bдок[уи]\b|опиши\b|описани\w*|annotat\w*|аннотир\w*",
        ),
        (
            "superset_format_sql",
            r"\bformat\w*|beautif\w*|prettif\w*|\bpretty\b|отформат\w*|формат\w*|причеш\w*|\btidy\b"
            r"|clean\s+up|\breadable\b|читаем\w*",
        ),
        (
            "superset_create_dataset",
            rf"(?:create|register|add|make|new|создай|создать|зарегистр\w*|добав\w*|заведи|сделай){_NEAR}"
            r"(?:dataset|датасет\w*|набор\w*\s+данных)|\bas\s+(?:a\s+|the\s+)?dataset\b",
        ),
        (
            "superset_create_dashboard",
            rf"(?:creat\w*|make|build|new|set\s+up|spin\s+up|создай|создать|сделай|заведи|нов\w+){_NEAR}{_DASHBOARD_WORD}",
        ),
        ("commit_changes", r"\bcommit\w*|коммит\w*|закоммит\w*"),
        ("create_branch", r"\bbranch\w*|ветк\w*|ветку"),
        (
            "superset_audit_permissions",
            r"permission\w*|\baccess\b|who\s+(?:can|has|may|is\s+allowed|are\s+allowed)|\bправ[ао]?\b|права\b|доступ\w*"
            r"|кто\s+(?:может|видит|имеет)|\baudit\w*|аудит\w*|\brbac\b",
        ),
        (
            "get_health_summary",
            r"health\w*|helth\w*|broken(?!\s+down)|\bwrong\b|\berrors?\b|fail\w*|not\s+working"
            r"|doesn'?t\s+work|(?<!broken\s)(?<!break\s)\bdown\b(?!\s+by\b)|\bstatus\s+of\b|everything\s+(?:ok|fine)|\bhealthy\b"
            r"|здоров\w*|слома\w*|ошибк\w*|ошибок|проблем\w*|не\s+работа\w*|чекни|упал\w*|пада\w*"
            r"|бит(?:ые|ых|ый)|работает\s+ли|состояни\w*|вс[её]\s+(?:ок|норм|в\s+порядке)|отвал\w*"
            # a question of how something is: "Is Sales Overview ok?", "how's it doing", "Sales
            # Overview на проде в порядке?" (yet "ok" or "ну норм" alone is a reply, not a question)
            r"|^\W*(?:is|are)\b.*\b(?:ok|okay|fine|alright|all\s+right|working|alive)\W*$"
            rf"|\bhow(?:'s|\s+is|\s+are)\b{_NEAR}doing\b"
            r"|(?<![\w-])(?:[a-z0-9][\w-]*|дашб\w*|борд\w*|он[аио]?|они)(?:\s+\S+){0,2}?\s+(?:в\s+порядке|норм\w*|жив\w*|работает)\W*$",
        ),
    )
)
SQL_TOOL = "superset_execute_sql"
_COUNT = re.compile(r"how\s+many|\bcount\b|сколько|скока|number\s+of", re.I)
# A question about rows that the planner can write as SQL.
_DESCRIBED_SQL = re.compile(
    rf"{_COUNT.pattern}|\brows?\b|\brecords?\b|строк\w*|записей|запис\w*"
    r"|\btop\s+\d+|\blast\s+\d+|\bfirst\s+\d+|последн\w*\s+\d+|перв\w*\s+\d+|(?<!\d)\d+\s+(?:последн|перв)\w*"
    r"|\bdelete\b|\bremove\b|удали\w*|\btruncate\b|очист\w*|\bdrop\b|\bexecute\b|\brun\s+(?:a\s+)?(?:query|sql)"
    r"|выполни\w*|запрос\w*|\btotal\b|\bsum\b|\baverage\b|\bavg\b|\bdistinct\b|сумм\w*|средн\w*"
    r"|уникальн\w*|больше\s+всего|the\s+most\b|посчита\w*|подсчита\w*|calculate",
    re.I,
)
_HIGHEST = r"biggest|largest|highest|most\s+expensive|крупн\w*|сам\w+\s+(?:больш|дорог|крупн)\w*"
_LOWEST = r"smallest|lowest|cheapest|сам\w+\s+(?:мал|дешев|маленьк)\w*"
_EXTREME = re.compile(rf"\b(?P<high>{_HIGHEST})\b|\b(?:{_LOWEST})\b", re.I)
_ROWS_DESCRIBED = re.compile(
    r"\b(?:by|per|по|в\s+разрезе)\s+(?-i:[a-zа-яё_])\w*|денег|деньг|выручк\w*|revenue|помесячн\w*|monthly|names\s+of"
    r"|\b(?:in|during|за|в)\s+(?:19|20)\d\d\b"
    rf"|{_EXTREME.pattern}",
    re.I,
)
_RUN_SQL_WORDS = re.compile(
    r"\brun\b|execut\w*|выполни\w*|запусти\w*|прогони\w*|\bsql\b|query|запрос\w*", re.I
)
_EXPLORE = re.compile(
    r"\btables?\b|columns?|schemas?|таблиц\w*|колонк\w*|столбц\w*|схем\w*|структур\w*|explore|databases?|баз\w*\s+данных|\bбазы\b",
    re.I,
)
_ENVIRONMENTS = re.compile(
    r"(?:which|what|list|show|какие|список|покажи|перечисли)\W+(?:[\w-]+\W+){0,2}"
    r"(?:environments|envs|окружени\w*|стенд\w*|сред\b|среды|instances?|инстанс\w*)"
    r"|^\W*(?:environments|envs|окружения|стенды)\W*$"
    r"|(?:is\s+there|do\s+we\s+have|есть\s+ли)\W+(?:[\w-]+\W+){0,3}(?:staging|стейдж\w*|environment|окружени\w*)"
    r"|(?:стейдж\w*|staging|окружени\w*|environments?)\W+(?:[\w-]+\W+){0,4}(?:есть|exists?)\b",
    re.I,
)
_LLM_PROVIDERS = re.compile(
    r"llm\s+providers?|провайдер\w*\s+(?:llm|моделей)|\bproviders\b|провайдеры|\b(?:ai|llm|language)\s+models?\b"
    r"|\bmodels?\b.{0,30}\b(?:hooked|connected|configured|available)|(?:какие|which)\s+(?:llm|модел\w*|нейросет\w*)",
    re.I,
)
_LLM_STATUS = re.compile(
    r"\b(?:llm|ллм|language\s+model|модел\w*|(?:ai|ии)\s+provider\w*)\b[^,;.?!]{0,30}"
    r"(?:status|статус|работает|доступн|alive|(?<!set\s)up\b|healthy|respond\w*|reachable|отвечает|отвеча\w+\s+ли)"
    r"|(?:status|статус)\W+(?:of\s+)?(?:the\s+)?(?:llm|модел)|(?:жив\w*|работает|доступн\w*|отвечает)\s+ли\s+(?:\w+\s+)?(?:llm|ллм|модел\w*|провайдер\w*)",
    re.I,
)
_CAPABILITIES = re.compile(
    r"что\s+(?:ты\s+)?(?:\w+\s+)?(?:умеешь|умееш|можешь|умеет)|w\w{1,3}t\s+(?:can|do)\s+(?:you|u)\s+do"
    r"|\bwhat\b.{0,40}\b(?:can|could)\s+(?:you|u)\s+(?:do|help)\b|what\s+are\s+you\s+able"
    r"|чем\s+(?:ты\s+)?(?:\w+\s+)?(?:можешь\s+)?помо\w+"
    r"|capabilit\w*|возможност\w*|what\s+tools|какие\b.{0,30}\b(?:инструмент|команд)\w*"
    r"|how\s+(?:do\s+i|to)\s+use|^\W*(?:help|помощь|справка|помоги|хелп)\W*$",
    re.I,
)
_SEARCH = re.compile(
    rf"{_DASHBOARD_WORD}|\breports?\b|отч[её]т\w*|\bfind\b|\bsearch\b|\blist\b|\bshow\b|найди|покажи|поиск|список|\bwhich\b",
    re.I,
)
_THANKS_AND_GREETINGS = (
    r"thanks?|thank\s+you|thx|спасибо|спс|благодарю|hi|hello|hey|привет|здравствуй\w*|добр\w+\s+\w+"
    r"|good\s+(?:morning|afternoon|evening)"
)
_NOUNS = {"superset_explore_database": _EXPLORE, "search_dashboards": _SEARCH}
_SMALL_TALK = re.compile(
    rf"^(?:\W*(?:{_THANKS_AND_GREETINGS}|ok|okay|ок|окей|хорошо|понятно|great|cool|супер|отлично"
    r"|how\s+are\s+you|как\s+(?:дела|настроение|ты|жизнь)|lol|haha|ха-?ха|ахах\w*|nice|ясно|клас+"
    r"|what'?s\s+up)\W*)+$",
    re.I,
)
# "спасибо, это помогло": thanks or a greeting first, and nothing asked after it
_SMALL_TALK_FIRST = re.compile(rf"^\W*(?:{_THANKS_AND_GREETINGS})\b", re.I)
_PRONOUN = re.compile(
    r"\b(?:it|its|this|that|this\s+one|him|them|его|него|нему|ним|нём|нем|этот|этого|этому|этом|эту|её|ее"
    r"|тот|того|он|она|оно)\b",
    re.I,
)
_SEARCH_FILTER = re.compile(
    r"(?:\btag(?:ged)?\b|тег\w*|с\s+тегом|меткой)\s+[«\"']?([\w-]+)"
    r"|(?:owned\s+by|owner|belong\w*\s+to|принадлеж\w*|владел\w*|чьи|автор\w*)\s+[«\"']?([\w.@-]+)"
    r"|(?:slug)\s+[«\"']?([\w-]+)",
    re.I,
)
_TITLE = re.compile(
    r"(?:called|named|titled|title|call\s+it|name\s+it|\bas|названием|назови\w*|название\w*|под\s+именем"
    r"|именем|с\s+именем)\s*[:«\"“']?\s*([^«»\"“”'\n]{1,120}?)[»\"”']?"
    r"(?=\s*(?:$|[,.;!?]|\s(?:in|on|from|to|with|slug|в|на|из)\s))",
    re.I,
)
_REASON = re.compile(
    r"(?:because|reason|for|since|причин\w*|потому\s+что|из-за|для|так\s+как)\W+(.{3,200}?)\s*$", re.I
)
# A sentence's words that are never part of an object's name.
_NAME_STOP = {
    "with",
    "about",
    "that",
    "which",
    "плз",
    "плиз",
    "пжл",
    "pls",
    "plz",
    "from",
    "to",
    "into",
    "onto",
    "in",
    "on",
    "at",
    "for",
    "of",
    "the",
    "a",
    "an",
    "and",
    "please",
    "из",
    "в",
    "во",
    "на",
    "с",
    "со",
    "для",
    "по",
    "и",
    "пожалуйста",
    "пж",
    "please,",
    "now",
    "сейчас",
    "env",
    "environment",
    "окружение",
    "окружении",
    "окружения",
    "dashboard",
    "дашборд",
    "дашборда",
    "it",
    "его",
    "over",
    "is",
    "are",
    "was",
    "were",
    "has",
    "have",
}
# How a dashboard is, not what it is called, after the word "dashboard": in lower case, or in
# any case as the question's last word ("is this dashboard healthy?", "is this dashboard OK?",
# "этот дашборд здоров?"; yet "the Working Capital dashboard", "dashboard OK Metrics").
_STATE_WORDS = {
    "healthy",
    "ok",
    "okay",
    "fine",
    "alright",
    "broken",
    "working",
    "doing",
    "alive",
    "health",
    "status",
    "state",
    "здоров",
    "здоровый",
    "исправен",
    "работает",
    "сломан",
}
# The same, inflected: a lower-case Russian word of state after "дашборд(ы)" ("дашборды сломаны",
# "дашборды не работают") says how they are; a name in those words is written capitalised or quoted.
_STATE_FORMS = re.compile(r"(?:сломан|исправн|здоров|работа(?:ет|ют|л)|упал|пада[ею])\w*")
_PUNCTUATION = ",.;:!?()—–"
_ARTICLES = {"the", "a", "an", "my", "our", "this", "that", "мой", "наш", "этот"}
_TABLE_WORDS = re.compile(r"(?:table|таблиц\w*|from|из)\s+[«\"'`]?([A-Za-z_][\w.]*)", re.I)
_TABLE_BEFORE = re.compile(r"\b([A-Za-z_][\w]*)\s+(?:table|таблиц\w*)\b", re.I)
_TABLE_IN = re.compile(r"\b(?:in|в|во)\s+([a-z_][a-z0-9_]*)\b")  # "это в events": a lower-case name
_LIMIT = re.compile(
    r"\b(?:top|топ|last|first|последн\w*|перв\w*|покажи|show)[\s-]+(\d{1,4})\b"
    r"|\b(\d{1,4})\s+(?:последн|перв|rows|строк|записей|записи)\w*"
    rf"|\b(\d{{1,4}})\s+(?:{_HIGHEST}|{_LOWEST})",
    re.I,
)
_LATEST = re.compile(r"\blast\b|\blatest\b|\bnewest\b|\brecent\w*|последн\w*|свеж\w*|нов\w+", re.I)
_DELETE = re.compile(r"\bdelete\b|\bremove\b|удали\w*|\btruncate\b|очист\w*|\bwipe\b", re.I)
_DROP = re.compile(r"\bdrop\b|удали\w*\s+таблиц\w*", re.I)
_STATUS_VALUE = re.compile(r"(?:status|статус\w*|state)\s+[«\"']?([\w-]+)", re.I)
_MAP = r"(?:map\w*|мапп?\w*|замапп?\w*|сопостав\w*)"
_A_DATABASE = r"(?:the\s+)?(?:database|db|базу|бд)"
# "map warehouse to analytics", "базу warehouse маппь на analytics"
_MAPPED = re.compile(
    rf"\b(?:{_MAP}\s+(?:{_A_DATABASE}\s+)?|{_A_DATABASE}\s+(?=[\w.-]+\s+{_MAP}))([\w.-]+)\s+(?:{_MAP}\s+)?"
    r"(?:to|onto|на|в|->|→)\s+([\w.-]+)",
    re.I,
)
_SCHEMA_NAMED = re.compile(
    r"(?:schema|схем[аеуы])\s+[«\"'`]?([A-Za-z_]\w*)|(?<![\w-])([A-Za-z_]\w*)\s+schema\b", re.I
)
_DATABASE_NAMED = re.compile(
    r"(?:database|db|базе|базы|база|бд)\s+[«\"']?([\w.-]+)|(?<![\w-])([\w-]+)\s+(?:database|db)\b", re.I
)


@dataclass(frozen=True)
class Request:
    """One message's reading."""

    words: str  # the message without its SQL
    intents: tuple[str, ...]  # tools its words name, first the one that leads
    negated: frozenset[str]
    # changes asked after the leading change, each in a clause of its own ("back up prod, then
    # start maintenance"): made in order once the one before succeeded, each on its own card
    then: tuple[str, ...]
    target_env: str | None
    source_env: str | None
    dashboard_ids: tuple[int, ...]
    dashboard_name: str | None
    refers_back: bool  # "it", "this dashboard": an object named before, or the one on the page
    sql: str | None
    table: str | None
    database_name: str | None
    schema: str | None  # "in the billing schema", "в схеме billing"
    database_mapping: tuple[tuple[str, str], ...]  # source → target database names
    task_id: str | None
    title: str | None
    reason: str | None
    search_query: str | None
    tag: str | None
    owner: str | None
    small_talk: bool
    limit: int | None = None
    unknown_env: str | None = None
    dialect: str | None = None
    colon_value: str | None = None
    quoted: tuple[str, ...] = field(default=())
    branch: str | None = None
    slug: str | None = None
    with_charts: bool = False
    published: bool | None = None
    uncached: bool = False  # "skipping the cache": computed afresh

    @property
    def intent(self) -> str | None:
        return self.intents[0] if self.intents else None


def _normalised(text: str) -> str:
    return text.replace("ё", "е").replace("Ё", "Е")


def _negated(words: str, start: int, end: int | None = None) -> bool:
    """Whether a negation stands within reach before ``start`` in the same clause, or one that
    refuses what was just named follows right after ``end`` ("бэкап не надо")."""
    if end is not None and _REFUSED_AFTER.match(words[end : end + 40]):
        return True
    before = words[:start]
    cut = max((match.end() for match in _CLAUSE_BREAK.finditer(before)), default=0)
    clause = before[cut:]
    tail = " ".join(clause.split()[-_NEGATION_REACH:])
    # "не … ли" asks whether, it does not negate
    return bool(NEGATION.search(tail)) and not re.search(r"\bли\b", words[start : start + 40])


def _in_question(words: str, start: int, end: int) -> bool:
    """Whether the sentence around ``start``–``end`` asks: it ends with "?" or holds "ли"."""
    opened = max((found.end() for found in re.finditer(r"[.!?]", words[:start])), default=0)
    closing = re.search(r"[.!?]|$", words[end:])
    sentence = words[opened : end + (closing.end() if closing else 0)]
    return sentence.rstrip().endswith("?") or re.search(r"\bли\b", sentence) is not None


def asks_anything(words: str) -> bool:
    """Whether the words ask for something: a tool named by more than its object's noun."""
    return any(tool not in _NOUNS for tool in read_intents(words, None).named)


@dataclass(frozen=True)
class Intents:
    named: tuple[str, ...]  # the one asked first leads (by clause, in precedence order within one)
    negated: frozenset[str]  # named only to be negated
    at: Mapping[str, int]  # where the words name each tool (the match that counts)


def read_intents(words: str, sql: str | None) -> Intents:
    """The tools the words name, and those they name only to negate."""
    named: list[str] = []
    negated: set[str] = set()
    at: dict[str, int] = {}

    def consider(tool: str, pattern: re.Pattern[str]) -> None:
        matches = list(pattern.finditer(words))
        if not matches:
            return
        # the first match no negation reaches (each is looked at only until one is found); a
        # question about how things are asks it whatever it negates ("ничего не упало?")
        asks = not tool_spec(tool).may_change
        affirmed = next(
            (
                match
                for match in matches
                if (asks and _in_question(words, match.start(), match.end()))
                or not _negated(words, match.start(), match.end())
            ),
            None,
        )
        if affirmed is None:
            negated.add(tool)
        elif tool not in named:
            named.append(tool)
            at[tool] = affirmed.start()

    if _CAPABILITIES.search(words) and not NEGATION.search(words):
        named.append("show_capabilities")
    consider("list_environments", _ENVIRONMENTS)
    consider("get_llm_status", _LLM_STATUS)  # before a dashboard's health: "is the LLM healthy?"
    for tool, pattern in INTENTS:
        if tool == "superset_format_sql" and sql is None:
            continue
        consider(tool, pattern)
    if sql is not None:
        # the statement runs when nothing else is asked of it, or a word not negated says to run it
        runs = (run for run in _RUN_SQL_WORDS.finditer(words) if not _negated(words, run.start(), run.end()))
        run = next(runs, None)
        if "superset_format_sql" not in named or run is not None:
            named.append(SQL_TOOL)
            at[SQL_TOOL] = run.start() if run else len(words)
    elif _DESCRIBED_SQL.search(words):
        consider(SQL_TOOL, _DESCRIBED_SQL)
    consider("list_llm_providers", _LLM_PROVIDERS)
    named.sort(key=lambda tool: _clause_at(words, at.get(tool, 0)))
    # only tasks have ids of this shape: one asks about its task, whatever else the message names
    if _UUID.search(words) and "get_task_status" in named:
        named.insert(0, named.pop(named.index("get_task_status")))
    if SQL_TOOL not in named and not re.search(_DASHBOARD_WORD, words, re.I):
        # rows by something, their money, the biggest, a period: when nothing else is asked
        consider(SQL_TOOL, _ROWS_DESCRIBED)
    # nouns more than requests ("dashboard", "table"): they lead only when nothing else is asked
    for tool, pattern in _NOUNS.items():
        consider(tool, pattern)
    return Intents(tuple(named), frozenset(negated), at)


def unknown_env(tokens: Sequence[str], aliases: Mapping[str, str]) -> str | None:
    """A word that names a kind of environment none of the configured ones is ("на стейджинг"
    where there is no staging)."""
    for token in tokens:
        lowered = token.lower()
        if lowered in _ALL_KIND_WORDS and lowered not in aliases and lowered not in ("stage", "develop"):
            return token
    return None


def _negated_env(tokens: Sequence[str], index: int) -> bool:
    """Whether a negation stands right before an environment's name ("don't touch prod")."""
    before = " ".join(tokens[max(0, index - 2) : index]).lower()
    return bool(re.search(r"(?:\b(?:except|not|без|кроме)|(?:don'?t|не)\s+(?:touch|трогай\w*))$", before))


def read_envs(tokens: Sequence[str], aliases: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(target, source) named by the words: "from dev to prod", "из дев в прод", "на проде"."""
    mentions: list[tuple[str, str | None]] = []  # env, "from" | "to" | None
    for index, token in enumerate(tokens):
        lowered = token.lower().removesuffix("'s")
        env = (
            aliases.get(lowered) or aliases.get(lowered.split("-")[0])
            if "-" in lowered
            else aliases.get(lowered)
        )
        if env is None or _negated_env(tokens, index):  # "don't touch prod" names no environment
            continue
        before = tokens[index - 1].lower() if index else ""
        hint = "from" if before in _FROM else "to" if before in _TO else None
        if not mentions or mentions[-1][0] != env:
            mentions.append((env, hint))
    if not mentions:
        return None, None
    source = next((env for env, hint in mentions if hint == "from"), None)
    targets = [env for env, hint in mentions if hint != "from"]
    if source is None and len(mentions) > 1 and mentions[0][1] is None:
        source = mentions[0][0]
        targets = [env for env, _ in mentions[1:]]
    return (targets[-1] if targets else None), source


# How far from the word "dashboard" its name is looked for: longer than any title people type,
# and short enough that a message repeating the word costs a read of each, not of the whole.
_NAME_REACH = 500


def _name_before(words: str, match: re.Match[str]) -> str | None:
    """ "the <Name> dashboard": the capitalised words right before the word."""
    before = words[max(0, match.start() - _NAME_REACH) : match.start()]
    found = re.search(r"((?:[A-Z0-9][\w&'-]*\s+(?:(?:and|of|&|для|и)\s+)?)+)$", before)
    if not found:  # a slug: "the sales-overview dashboard"
        slug = re.search(r"\b([a-z0-9]+(?:[-_][a-z0-9]+)+)\s+$", before)
        return slug.group(1) if slug else None
    name = found.group(1).strip()
    parts = name.split()
    if parts and _char_before(before, found.start()) in ("", ".", "!", "?") and _imperative(parts[0]):
        parts.pop(0)  # "Verify dashboard status": the verb is not the name
    while parts and parts[0].lower() in _ARTICLES | _NAME_STOP:
        parts.pop(0)
    return " ".join(parts) or None


# Words before "dashboards" that say which or how many, not what about.
_NOT_TOPICS = (
    _ARTICLES
    | _NAME_STOP
    | {
        *("all", "any", "some", "other", "which", "what", "many", "those", "these", "your", "their", "every"),
        *("show", "list", "find", "search", "look", "get", "give", "see", "up", "me", "us", "new", "old"),
        *("published", "draft", "recent", "latest", "certified", "favorite", "favourite", "existing"),
        *("more", "most", "few", "several", "two", "three", "how", "are", "is", "do", "does", "have"),
    }
)


def _topic_before(words: str, match: re.Match[str]) -> str | None:
    """ "the sales dashboards": the one plain word before an English plural, as a search text."""
    found = re.search(r"\b([a-z][a-z-]{2,40})\s+$", words[max(0, match.start() - 60) : match.start()])
    word = found.group(1) if found else None
    if word is None or word in _NOT_TOPICS or word in _STATE_WORDS or word in _ALL_KIND_WORDS:
        return None
    return word


def _script(token: str) -> str:
    return "cyrillic" if re.search(r"[а-яА-Я]", token) else "latin"


def _name_after(words: str, match: re.Match[str]) -> str | None:
    """ "дашборд <Name> из dev": the words after it, up to a preposition, an environment
    or a change of alphabet (a Latin name, then Russian words)."""
    tokens = _TOKEN.findall(words[match.end() : match.end() + _NAME_REACH])
    # the question's last word, if it is in reach ("is this dashboard OK?")
    in_reach = match.end() + _NAME_REACH >= len(words)
    words_at = [index for index, token in enumerate(tokens) if token not in _PUNCTUATION]
    last_word = words_at[-1] if in_reach and words_at else -1
    picked: list[str] = []
    for index, token in enumerate(tokens):
        lowered = token.lower()
        following = tokens[index + 1] if index + 1 < len(tokens) else ""
        if picked and lowered in _CONNECTORS and following[:1].isupper():
            picked.append(token)  # "Orders and Events"
            continue
        if picked and _script(token) != _script(picked[0]):
            break
        if (
            token in _PUNCTUATION
            or token in _STATE_WORDS
            or (index == last_word and lowered in _STATE_WORDS)
            or _state_form(token)
            or (token == "не" and _state_form(following))
            or lowered in _NAME_STOP
            or lowered in _ALL_KIND_WORDS
        ):
            if picked:
                break
            if lowered in _ARTICLES or lowered in ("called", "named", "titled", "dashboard", "дашборд"):
                continue
            return None
        picked.append(token)
    name = " ".join(picked).strip()
    return name or None


def _state_form(token: str) -> bool:
    return token.islower() and _STATE_FORMS.fullmatch(token) is not None


_CONNECTORS = {"and", "of", "&", "и"}
_ALL_KIND_WORDS = frozenset(word for words in KIND_WORDS.values() for word in words)
_TITLE_CASE_RUN = re.compile(r"(?<![\w'])([A-Z][\w'-]*(?:\s+(?:(?:and|of|&)\s+)?[A-Z0-9][\w'-]*)*)")


def read_dashboard_name(words: str, quoted: Sequence[str], env_words: Iterable[str]) -> str | None:
    """The dashboard a message names without its id, as well as its words show it."""
    if quoted:
        return quoted[0].strip()
    excluded = {word.lower() for word in env_words} | _ALL_KIND_WORDS
    for match in re.finditer(_DASHBOARD_WORD, words, re.I):
        # "the sales dashboards": a name comes before the English plural, not after it
        plural = match.group(0).lower().endswith("s") and _script(match.group(0)) == "latin"
        after = None if plural else _name_after(words, match)
        for name in (after, _name_before(words, match), _topic_before(words, match) if plural else None):
            if name and name.lower() not in excluded and not name.isdigit() and not _PRONOUN.fullmatch(name):
                return name
    names = []
    russian = re.search(r"[а-яё]", words, re.I) is not None
    for run in _TITLE_CASE_RUN.finditer(words):
        name = run.group(1).strip()
        # "Deploy Sales Overview": the verb is not the name. A Russian sentence's verbs are
        # Russian, so there a name may lead ("Sales Overview в порядке?") unless it is a tool's verb.
        if _char_before(words, run.start()) in ("", ".", "!", "?") and not (
            russian and not _imperative(name.split()[0])
        ):
            name = " ".join(name.split()[1:])
        parts = [part for part in name.split() if part.upper() not in _ACRONYMS]
        name = " ".join(parts)
        if name and name.lower() not in excluded and parts[0].lower() not in excluded:
            names.append(name)
    if names:
        return max(names, key=len)
    # "ship ops-weekly to prod": a slug, as the title it is made from
    slugs = [
        slug
        for slug in _SLUG_WORD.findall(_SLUG.sub(" ", words))  # a new dashboard's own slug is not a name
        if not excluded & set(slug.split("-")) and slug not in _HYPHENATED_WORDS
    ]
    return slugs[0].replace("-", " ") if slugs else None


_HYPHENATED_WORDS = {
    *("follow-up", "re-run", "rerun", "built-in", "up-to-date", "e-mail", "check-in", "roll-out", "log-in"),
    *("sign-in", "opt-in", "drill-down", "drop-down", "real-time", "read-only", "non-prod", "pre-prod"),
}
_SLUG_WORD = re.compile(r"(?<![\w/@.-])([a-z][a-z0-9]*(?:-[a-z0-9]+)+)(?![\w/@.-])")


# Verbs a request starts with that name no tool of their own.
_IMPERATIVES = {
    *("check", "show", "find", "run", "open", "give", "tell", "get", "look", "list", "see", "verify"),
    *("inspect", "test", "fix", "make", "please", "can", "could", "would", "let", "help", "pull"),
}


def _imperative(word: str) -> bool:
    return word.lower() in _IMPERATIVES or bool(read_intents(word, None).named)


def _char_before(words: str, index: int) -> str:
    """The last character before ``index`` that is not a space ("" at the message's start)."""
    while index > 0 and words[index - 1].isspace():
        index -= 1
    return words[index - 1] if index > 0 else ""


# Capitals that are not names: abbreviations, and "I".
_ACRONYMS = {"LLM", "SQL", "API", "ID", "UI", "BI", "OK", "ETL", "DB", "AI", "I"}


def _sql_and_tail(text: str, aliases: Mapping[str, str]) -> tuple[str, str, str | None]:
    """The message's words and its SQL, with what trails the statement ("… on prod please",
    "— run it on dev", "на проде") given back to the words; and the words before the statement."""
    before, sql = split_sql(text)
    if sql is None:
        return before, before, None
    names = "|".join(re.escape(word) for word in sorted(aliases, key=len, reverse=True))
    trailing = re.search(
        r"(?:\s*[—–]\s+.*|\s*,\s+[^\s,]*[а-яА-Я].*|\s+(?:please|pls|plz|пожалуйста|плиз)\W*"
        + (rf"|\s+(?:on|in|at|на|в|во)\s+(?:{names})\b.*" if names else "")
        + r")$",
        sql,
        re.I | re.S,
    )
    words = before
    if trailing:
        words, sql = f"{before} {trailing.group(0)}", sql[: trailing.start()].strip().rstrip(";").strip()
    return words, before, sql or None


def read_request(text: str, environments: Sequence[Environment]) -> Request:
    """The reading of one message."""
    aliases = env_aliases(environments)
    words, before_sql, sql = _sql_and_tail(_normalised(text), aliases)
    words = speller(_NOUNS_SPELLED).text(words)
    refused_table = None
    if sql is not None and NEGATION.search(" ".join(before_sql.split()[-_NEGATION_REACH:])):
        # a statement the message says not to run: its table is what the rest of the message
        # is about.
        refused_table = _first_group(
            re.search(r"\b(?:from|into|update|table)\s+([A-Za-z_][\w.]*)", sql, re.I)
        )
        sql = None
    quoted = tuple(item.strip() for item in _QUOTED.findall(words) if item.strip())
    plain = _QUOTED.sub(" ", words)
    tokens = _TOKEN.findall(plain)
    target, source = read_envs(tokens, aliases)
    env_words = [env.id for env in environments] + [env.name for env in environments]
    dashboard_ids = tuple(int(found) for found in _ID_AFTER_WORD.findall(plain))
    if not dashboard_ids and not _UUID.search(plain):
        dashboard_ids = tuple(int(found) for found in _BARE_NUMBER.findall(plain))
    task = _UUID.search(text)
    titled = _TITLE.search(words)
    title = _first_group(titled)
    # A title given to something new is not the name of the object it is made from.
    named_from = words[: titled.start()] + words[titled.end() :] if titled else words
    name_quotes = tuple(item for item in quoted if item != title)
    search_filter = _SEARCH_FILTER.search(plain)
    limit = _LIMIT.search(plain)
    branch = _BRANCH.search(words)
    message = _MESSAGE.search(words)
    dashboard_name = read_dashboard_name(named_from, name_quotes, env_words)
    # a dashboard's title asks for nothing ("deploy the Backup report dashboard"): its words are
    # read as a name's, of no meaning ("Sales Overview в порядке?" still asks about a name);
    # unless nothing else would be asked: a name read where none is ("run the LLM-validation")
    asked = plain.replace(dashboard_name, _meaningless(dashboard_name)) if dashboard_name else plain
    intents = read_intents(asked, sql)
    if not intents.named:
        asked, intents = plain, read_intents(plain, sql)
    named = _described_sql_first(intents.named, plain, sql)
    reason = _REASON.search(plain)  # at the same place in both: the name keeps its length
    return Request(
        words=words,
        intents=named,
        negated=intents.negated,
        then=_changes_after(named, intents.at, asked, reason.start(1) if reason else len(asked)),
        target_env=target,
        source_env=source,
        dashboard_ids=dashboard_ids if not task else (),
        dashboard_name=dashboard_name,
        refers_back=bool(_PRONOUN.search(plain)),
        sql=sql,
        table=read_table(plain) or refused_table,
        database_name=_first_group(_DATABASE_NAMED.search(plain)),
        schema=_first_group(_SCHEMA_NAMED.search(plain)),
        database_mapping=tuple(_MAPPED.findall(plain)),
        task_id=task.group(0).lower() if task else None,
        title=title or (quoted[0] if quoted else None),
        reason=_first_group(message) or _first_group(reason),
        search_query=search_filter.group(3) if search_filter else None,
        tag=search_filter.group(1) if search_filter else None,
        owner=search_filter.group(2) if search_filter else None,
        small_talk=bool(_SMALL_TALK.match(plain) or (not named and _SMALL_TALK_FIRST.match(plain))),
        limit=int(next(group for group in limit.groups() if group)) if limit else None,
        quoted=quoted,
        branch=_branch_name(branch),
        slug=_first_group(_SLUG.search(words)),
        with_charts=bool(_WITH_CHARTS.search(words)),
        uncached=bool(_UNCACHED.search(words)),
        published=False if _UNPUBLISHED.search(words) else True if _PUBLISHED.search(words) else None,
        unknown_env=unknown_env(tokens, aliases),
        dialect=_first_group(_DIALECT.search(words)),
        colon_value=_first_group(re.search(r":\s*([^,.;:!?]{1,120})", plain)),
    )


def _meaningless(name: str) -> str:
    """``name`` with every letter of its words one that spells nothing, in the same script."""
    return re.sub(r"\w", lambda letter: "x" if letter.group().isascii() else "ы", name)


def _changes_after(
    intents: tuple[str, ...], at: Mapping[str, int], words: str, reason_at: int
) -> tuple[str, ...]:
    """The changes asked after a leading change: each the verb a later clause starts with (a
    backup of staging; afterwards a deploy of Weekly Board to it), not a word further into a clause
    (a commit's target branch creates none), nor in the reason given. A statement is never one of
    them: it is asked for alone."""
    if not intents or not tool_spec(intents[0]).may_change or intents[0] not in at:
        return ()
    then: list[str] = []
    clause = _clause_at(words, at[intents[0]])
    for tool in intents[1:]:
        start = at.get(tool)
        if start is None or start >= reason_at or tool == SQL_TOOL or not tool_spec(tool).may_change:
            continue
        word = _word_start(words, start)  # "за|деплой": from the whole word
        breaks = list(_CLAUSES.finditer(words[:word]))
        opens = breaks and not words[breaks[-1].end() : word].strip(" ,;.!?—–")
        if opens and len(breaks) > clause:
            then.append(tool)
            clause = len(breaks)
    return tuple(then)


def _clause_at(words: str, position: int) -> int:
    """The clause of ``words`` that ``position`` is in, counted from 0."""
    return len(_CLAUSES.findall(words[:position]))


def _word_start(words: str, at: int) -> int:
    """Where the word holding ``at`` starts, read back from it: a pattern anchored at the end of
    ``words[:at]`` would be tried from every character of a long run before it."""
    while at and (words[at - 1].isalnum() or words[at - 1] in "_-"):  # re's \w, and a dash
        at -= 1
    return at


def _branch_name(found: re.Match[str] | None) -> str | None:
    name = (_first_group(found) or "").rstrip("./")
    return name if name and name.lower() not in _NAME_STOP else None


def _described_sql_first(intents: tuple[str, ...], words: str, sql: str | None) -> tuple[str, ...]:
    """A count, sum or top of a table's rows leads over the words that also name another tool
    (the table, an error kind)."""
    asks_rows = (
        _COUNT.search(words)
        or _AGGREGATE.search(words)
        or _DISTINCT.search(words)
        or _MONEY.search(words)
        or _MOST.search(words)
    )
    if (
        sql is None
        and SQL_TOOL in intents
        and asks_rows
        and _DESCRIBED_SQL.search(words)
        and read_table(words)
    ):
        return (SQL_TOOL, *(intent for intent in intents if intent != SQL_TOOL))
    return intents


_BRANCH = re.compile(
    r"(?:branch|ветк\w*)\s+(?:called\s+|named\s+)?[«\"'`]?([A-Za-z0-9][\w./-]*)"
    r"|\b(?:to|onto|into|в|на)\s+([A-Za-z0-9][\w.-]*/[\w./-]*[\w])",  # a name with a slash is a branch's
    re.I,
)
_MESSAGE = re.compile(
    r"(?:message|сообщени\w*)\s*:?\s*[«\"“'`]([^«»\"“”'`]{1,500})[»\"”'`]|(?:message|сообщени\w*)\s*:\s*(.{1,500}?)\s*$",
    re.I,
)
_DIALECT = re.compile(
    r"\b([a-z0-9]{2,20})\s+dialect|dialect\s*:?\s*([a-z0-9]{2,20})|диалект\w*\s+([a-z0-9]{2,20})"
    r"|\b(?:под|для|for|as|in)\s+(sqlite|postgres(?:ql)?|mysql|tsql|oracle|bigquery|snowflake|clickhouse"
    r"|trino|presto|duckdb|redshift|hive|spark|databricks|athena)\b",
    re.I,
)
_SLUG = re.compile(r"\bslug\s*:?\s*[«\"'`]?([A-Za-z0-9_-]{1,255})", re.I)
_UNPUBLISHED = re.compile(r"unpublish\w*|not\s+published|неопубликован\w*|черновик\w*|\bdraft\b", re.I)
_PUBLISHED = re.compile(r"\bpublish(?:ed)?\b|опубликованн\w*|опубликуй\w*|опубликовать", re.I)
_UNCACHED = re.compile(
    r"(?:skip\w*|bypass\w*|ignor\w*|without|no|past)\s+(?:the\s+)?cache\w*|\bforce\w*|\bfresh\b"
    r"|(?:без|мимо|игнорир\w*|минуя|сброс\w*)\s+к[эе]ш\w*|принудительн\w*|заново",
    re.I,
)
_WITH_CHARTS = re.compile(
    r"with\s+(?:the\s+|its\s+|all\s+)?charts|including\s+(?:the\s+)?charts|charts\s+included"
    r"|(?:вместе\s+)?с\s+(?:чартами|графиками)|включая\s+(?:чарты|графики)"
    r"|(?:и\s+)?(?:чарты|графики)\s+тоже|charts\s+(?:too|as\s+well)|also\s+the\s+charts",
    re.I,
)


def _first_group(match: re.Match[str] | None) -> str | None:
    if match is None:
        return None
    return next((group.strip() for group in match.groups() if group and group.strip()), None)


# Russian (and plural English) words for the tables people ask about, as the table is likely
# called; the planner matches them against the tables the database really has.
TABLE_SYNONYMS = {
    "заказ": "orders",
    "продаж": "sales",
    "событ": "events",
    "пользовател": "users",
    "клиент": "customers",
    "товар": "products",
    "платеж": "payments",
    "счет": "invoices",
    "сотрудник": "employees",
    "продан": "sales",
    "аккаунт": "accounts",
    "инвойс": "invoices",
    "order": "orders",
    "sale": "sales",
    "event": "events",
    "user": "users",
    "customer": "customers",
    "product": "products",
    "payment": "payments",
    "invoice": "invoices",
    "account": "accounts",
    "sold": "sales",
}


# The nouns of rows as they are spelt: a stem, and an English one in the plural too ("tikcets").
_NOUNS_SPELLED = tuple(
    form for stem in TABLE_SYNONYMS for form in ((stem, f"{stem}s") if stem.isascii() else (stem,))
)


def read_table(words: str) -> str | None:
    """The table a message is about: named beside the word "table", after from/из, or the noun
    of its rows ("сколько заказов" → orders)."""
    for pattern in (_TABLE_BEFORE, _TABLE_WORDS, _TABLE_IN):
        for match in pattern.finditer(words):
            name = match.group(1).rstrip(".")
            if (
                name.lower() not in _NAME_STOP
                and name.lower() not in _ALL_KIND_WORDS
                and name.lower() not in ("the", "a")
            ):
                return name
    lowered = words.lower()
    for stem, table in TABLE_SYNONYMS.items():
        if re.search(rf"\b{stem}\w*", lowered):
            return table
    # a name written as tables are ("weekly_usage"), not as a key ("user_id")
    return next((name for name in _SNAKE_NAME.findall(words) if not _is_key(name)), None)


_SNAKE_NAME = re.compile(r"(?<![\w.])([a-z][a-z0-9]*_[a-z0-9_]*[a-z0-9])(?![\w.])")


# Russian words for the columns and values people ask about, as a table likely names them.
_COLUMN_WORDS = {
    "регион": "region",
    "продукт": "product",
    "товар": "product",
    "клиент": "customer",
    "покупател": "customer",
    "статус": "status",
    "тип": "kind",
    "тариф": "plan",
    "вид": "kind",
    "пользовател": "user_id",
    "аккаунт": "account",
    "сумм": "amount",
    "выручк": "amount",
    "денег": "amount",
    "деньг": "amount",
}
# Russian stems of the states and kinds rows are filtered by, as tables usually store them; one
# becomes a condition only on a column whose data holds it (:func:`values_probe`).
_VALUE_WORDS = {
    "отмен": ("cancelled", "canceled"),
    "неоплач": ("unpaid",),
    "оплач": ("paid",),
    "отправл": ("shipped",),
    "доставл": ("delivered",),
    "новы": ("new",),
    "логин": ("login",),
    "просмотр": ("view",),
    "экспорт": ("export",),
    "ошибк": ("error",),
    "просроч": ("overdue",),
    "бесплатн": ("free",),
    "активн": ("active",),
    "закрыт": ("closed",),
    "открыт": ("open",),
    "возврат": ("refunded", "returned"),
    "ожида": ("pending",),
}
GROUP_BY = re.compile(
    r"\b(?:by|per|по|в\s+разрезе|(?:for|на|в|у)\s+(?:each|кажд\w*)|each)\s+(?:the\s+)?([a-zа-я_]+)", re.I
)
_DISTINCT = re.compile(r"\b(?:distinct|unique|different|уникальн\w*|разн\w*)\s+([a-zа-я_]+)", re.I)
_AGGREGATE = re.compile(
    r"\b(?P<op>total|sum|average|avg|mean|max(?:imum)?|min(?:imum)?|сумм\w*|средн\w*|максимал\w*|минимал\w*)"
    r"(?:\s+(?:of|the|order|по|of\s+the))*\s+(?P<column>[a-zа-я_]+)",
    re.I,
)
_OPS = {
    "total": "SUM",
    "sum": "SUM",
    "сумм": "SUM",
    "average": "AVG",
    "avg": "AVG",
    "mean": "AVG",
    "средн": "AVG",
    "max": "MAX",
    "максимал": "MAX",
    "min": "MIN",
    "минимал": "MIN",
}
_TYPE_VALUE = re.compile(r"(?:типа|of\s+type|kind|type)\s+[«\"']?([a-z_]+)", re.I)
_USER = re.compile(r"(?:user|пользовател\w*)\s+(?:id\s+)?(\d+)", re.I)
_MOST = re.compile(r"больше\s+всего|the\s+most|\bmost\b|\btop\b|\bтоп\b", re.I)
_MONEY = re.compile(r"денег|деньг|выручк|потрат\w*|money|revenue|amount|earn|spen[dt]\w*", re.I)


def column_of(word: str) -> str:
    """A word of the question as the column it likely names ("customers" → customer)."""
    lowered = word.lower()
    for stem, column in _COLUMN_WORDS.items():
        if lowered.startswith(stem):
            return column
    plural = lowered.endswith("s") and len(lowered) > 3 and not lowered.endswith(("ss", "us", "is"))
    return lowered[:-1] if plural else lowered


def conditions_in(words: str) -> list[str]:
    """Conditions the words write with their column: "status paid", "of type login", "user 7"."""
    found: list[str] = []
    if (status := _STATUS_VALUE.search(words)) and status.group(1).isidentifier():
        found.append(f"status = '{status.group(1).lower()}'")
    if kind := _TYPE_VALUE.search(words):
        found.append(f"kind = '{kind.group(1).lower()}'")
    if user := _USER.search(words):
        found.append(f"user_id = {int(user.group(1))}")
    return found


def value_words(words: str) -> list[str]:
    """Words of a question that may be values a column holds: its plain Latin words, and what a
    Russian state's stem stands for ("закрытых" → closed)."""
    found = [word for word in _VALUE.findall(words) if word.casefold() not in _NOT_VALUES]
    lowered = words.casefold()
    found += [
        value for stem, values in _VALUE_WORDS.items() if re.search(rf"\b{stem}", lowered) for value in values
    ]
    return list(dict.fromkeys(found))


# A question's values are looked up in at most so many text columns, so many values each.
_PROBED_COLUMNS = 8
_PROBED_VALUES = 50
PROBED_ROWS = _PROBED_COLUMNS * _PROBED_VALUES
_SHORTEST_MISSPELT = 5


def values_probe(words: str, table: str, columns: Sequence[Mapping[str, Any]]) -> str | None:
    """A read of the values the table's text columns hold, when the question has words that may
    be some of them ("urgent tickets", "the Mobile team"); None when it has none."""
    names = [str(column.get("name")) for column in columns if _IDENTIFIER.fullmatch(str(column.get("name")))]
    texts = [
        str(column["name"])
        for column in columns
        if str(column.get("name")) in names
        and _TEXT_TYPE.search(str(column.get("type") or ""))
        and not _is_key(str(column["name"]))
        and not _DATE_NAME.search(str(column["name"]))  # a date kept as text names no state
    ][:_PROBED_COLUMNS]
    candidates = [word for word in value_words(words) if _column(word, names) is None and word != table]
    if not texts or not candidates:
        return None
    return " UNION ALL ".join(
        f"SELECT '{name}' AS column_name, {name} AS column_value"
        f" FROM (SELECT DISTINCT {name} FROM {table} LIMIT {_PROBED_VALUES}) AS values_{index}"
        for index, name in enumerate(texts)
    )


def probed_values(result: Mapping[str, Any]) -> dict[str, list[str]]:
    """A probe's rows as the values each column holds. A cell is the database's to choose, not
    ours to trust: only a column named as an identifier and a plain value (letters, digits, "_",
    "-", no quote or backslash) is kept, so nothing read can change the statement it goes into."""
    held: dict[str, list[str]] = {}
    for row in result.get("rows") or []:
        if not isinstance(row, Mapping):
            continue
        column, value = row.get("column_name"), row.get("column_value")
        plain = isinstance(value, str) and _VALUE.fullmatch(value) is not None
        if isinstance(column, str) and _IDENTIFIER.fullmatch(column) and plain:
            held.setdefault(column, []).append(str(value))
    return held


def _as_held(value: str, values: Sequence[str]) -> str | None:
    """``value`` as the data writes it: the same but for case, else one typo away."""
    same = [held for held in values if held.casefold() == value.casefold()]
    near = [
        held
        for held in values
        if len(held) >= _SHORTEST_MISSPELT and one_typo(held.casefold(), value.casefold())
    ]
    found = same or near
    return found[0] if len(found) == 1 else None


def _spelt_as_held(condition: str, held: Mapping[str, Sequence[str]]) -> str:
    """A condition the words wrote ("status closd"), with its value as the column's data has it."""
    column, _, written = condition.partition(" = ")
    if column in held and written.startswith("'") and (value := _as_held(written.strip("'"), held[column])):
        return f"{column} = '{value}'"
    return condition


def values_held(words: str, held: Mapping[str, Sequence[str]]) -> list[str]:
    """Conditions for the question's words that are values of a column, as the data writes them;
    a value two columns hold goes to the one the words name, else to neither."""
    found: dict[str, str] = {}
    written = re.findall(r"[\w-]+", words)
    for word in value_words(words):
        # "tickets": ticket; "urgnet": one typo from a value of five letters or more
        holding = {
            column: value
            for column, values in held.items()
            if (value := _as_held(word, values) or _as_held(word.removesuffix("s"), values))
        }
        named = {
            column: value for column, value in holding.items() if any(_column(w, [column]) for w in written)
        }
        chosen = named if len(holding) > 1 else holding
        if len(chosen) == 1:
            ((column, value),) = chosen.items()
            found.setdefault(column, value)
    return [f"{column} = '{value}'" for column, value in found.items()]


_FIRST_TABLE = re.compile(r"\b(?:from|join|into|update)\s+[\"`]?([A-Za-z_][\w.]*)", re.I)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def first_table(sql: str | None) -> str | None:
    """The first table a statement reads or writes."""
    return _first_group(_FIRST_TABLE.search(sql or ""))


def table_named_in(
    request: Request, tables: Sequence[str], statement: str | None = None, earlier: str | None = None
) -> str | None:
    """Which of a schema's real ``tables`` the request is about: the one its statement reads,
    the one its words name beside "table", else any word of it (or the table its noun stands
    for) that is one of them, in the singular or plural; else the one the conversation was
    about (``earlier``: "how many of them failed?")."""
    # A name is the database's to choose, not ours to trust: only a plain identifier is written into SQL.
    known = {name.casefold(): name for name in tables if _IDENTIFIER.fullmatch(name)}
    candidates = [first_table(statement or request.sql), request.table]
    candidates += _IDENTIFIER.findall(request.words)
    lowered = request.words.casefold()
    candidates += [table for stem, table in TABLE_SYNONYMS.items() if re.search(rf"\b{stem}", lowered)]
    plain = re.findall(r"[A-Za-z]+", request.words)
    candidates += [f"{first}_{second}" for first, second in itertools.pairwise(plain)]  # "weekly usage"
    candidates.append(earlier)
    for candidate in candidates:
        if not candidate:
            continue
        name = candidate.rpartition(".")[2].casefold()
        for form in (name, f"{name}s", name.removesuffix("s")):
            if form in known and form not in _NAME_STOP:
                return known[form]
    misspelt = [  # "tikcets": one typo from a real table's name
        known[table]
        for word in plain
        for table in known
        if len(table) >= _SHORTEST_MISSPELT and one_typo(table, word.casefold())
    ]
    return misspelt[0] if len(set(misspelt)) == 1 else None


_NUMERIC_TYPE = re.compile(r"int|real|float|double|numeric|decimal|number|money", re.I)
_FRACTION_TYPE = re.compile(r"real|float|double|numeric|decimal|money", re.I)


_TEXT_TYPE = re.compile(r"char|text|string|enum", re.I)
_VALUE = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,40}")
_LEADS_VALUE = {"the", "a", "an", "on", "in", "at", "for", "with", "на", "в", "во", "с", "со"}
_NOT_VALUES = _LEADS_VALUE | {
    *("by", "per", "of", "and", "or", "from", "to", "each", "every", "all", "any", "is", "are", "was"),
    *("how", "many", "much", "which", "what", "who", "where", "group", "order", "count", "sum", "total"),
    *("avg", "average", "max", "min", "distinct", "unique", "top", "most", "last", "first", "still"),
    *("select", "table", "rows", "row", "their", "its", "this", "that", "there", "than", "not", "no"),
    *("it", "them", "they", "we", "our", "you", "me", "my", "now", "same", "again", "also", "too", "then"),
    *("please", "about", "instead", "right", "ever", "only", "just", "show", "list", "give", "tell", "get"),
    *("sql", "query", "run", "do", "does", "did", "have", "has", "had", "be", "been", "were", "so", "far"),
    *_ALL_KIND_WORDS,
}


def _values_beside(words: str, columns: Sequence[Mapping[str, Any]]) -> list[str]:
    """A value written beside its text column's name: before it after an article or in capitals
    ("on the enterprise plan", "in the South region"), after it in capitals or after a Russian
    word for the column ("region West", "в статусе paid"). Only plain words become values."""
    texts = [str(column["name"]) for column in columns if _TEXT_TYPE.search(str(column.get("type") or ""))]
    everything = [str(column.get("name")) for column in columns]
    tokens = re.findall(r"[\w-]+", words)
    found: dict[str, str] = {}

    def value(token: str) -> bool:
        return (
            _VALUE.fullmatch(token) is not None
            and token.lower() not in _NOT_VALUES
            and _column(token, everything) is None
        )

    for index, token in enumerate(tokens):
        column = _column(token, texts)
        if column is None or column in found or _is_key(column):
            continue
        before = tokens[index - 1] if index else ""
        lead = tokens[index - 2].lower() if index > 1 else ""
        after = tokens[index + 1] if index + 1 < len(tokens) else ""
        if value(before) and (before[0].isupper() or lead in _LEADS_VALUE):
            found[column] = before
        elif value(after) and (after[0].isupper() or _script(token) == "cyrillic"):
            found[column] = after
    return [f"{column} = '{written}'" for column, written in found.items()]


def _column(word: str, columns: Sequence[str]) -> str | None:
    """The real column a word of the question names: as written, as its usual column name
    ("customers" → customer), or the column it begins ("user" → user_id)."""
    known = {name.casefold(): name for name in columns}
    for candidate in dict.fromkeys((column_of(word), word.casefold())):
        if candidate in known:
            return known[candidate]
        started = [name for folded, name in known.items() if folded.startswith(f"{candidate}_")]
        if len(candidate) >= 3 and len(started) == 1:
            return started[0]
    return None


def _measure_column(columns: Sequence[Mapping[str, Any]]) -> str | None:
    """The column a sum or average means when the words name none ("средний чек", "revenue"):
    the first fractional one, else the first whole-number one that is not an id."""
    numbers = [
        column
        for column in columns
        if _NUMERIC_TYPE.search(str(column.get("type") or "")) and not _is_key(str(column.get("name")))
    ]
    fractions = [column for column in numbers if _FRACTION_TYPE.search(str(column.get("type") or ""))]
    chosen = fractions or numbers
    return str(chosen[0]["name"]) if chosen else None


def _is_key(name: str) -> bool:
    lowered = name.casefold()
    return lowered == "id" or lowered.endswith("_id")


_MONTHS = (
    (r"jan\w*|январ\w*", 1),
    (r"feb\w*|феврал\w*", 2),
    (r"mar(?:ch)?|март\w*", 3),
    (r"apr\w*|апрел\w*", 4),
    (r"may|ма[йяе]", 5),
    (r"june?|июн\w*", 6),
    (r"july?|июл\w*", 7),
    (r"aug\w*|август\w*", 8),
    (r"sep\w*|сентябр\w*", 9),
    (r"oct\w*|октябр\w*", 10),
    (r"nov\w*|ноябр\w*", 11),
    (r"dec\w*|декабр\w*", 12),
)
_MONTH_YEAR = re.compile(
    r"\b(?:"
    + "|".join(f"(?P<m{number}>{pattern})" for pattern, number in _MONTHS)
    + r")\s+(?P<year>(?:19|20)\d\d)\b",
    re.I,
)
_YEAR_MONTH = re.compile(r"\b(?P<year>(?:19|20)\d\d)-(?P<month>0?[1-9]|1[0-2])\b(?!-)")
_YEAR = re.compile(r"\b(?:in|during|for|за|в)\s+(?P<year>(?:19|20)\d\d)\b", re.I)
_DATE_NAME = re.compile(r"^(?:day|date|at|time|created|updated)$|_(?:at|date|day|time|on)$", re.I)
_DATE_TYPE = re.compile(r"date|time", re.I)


def _period(words: str) -> tuple[str, str] | None:
    """The month or year a question is limited to, as [first day, first day after)."""
    if found := _MONTH_YEAR.search(words):
        month = next(number for _, number in _MONTHS if found.group(f"m{number}"))
        year = int(found.group("year"))
    elif found := _YEAR_MONTH.search(words):
        year, month = int(found.group("year")), int(found.group("month"))
    elif found := _YEAR.search(words):
        year = int(found.group("year"))
        return f"{year}-01-01", f"{year + 1}-01-01"
    else:
        return None
    after = (year + 1, 1) if month == 12 else (year, month + 1)
    return f"{year}-{month:02d}-01", f"{after[0]}-{after[1]:02d}-01"


def _date_column(columns: Sequence[Mapping[str, Any]]) -> str | None:
    """The column that says when a row happened: one of a date type, else one named so."""
    typed = [column for column in columns if _DATE_TYPE.search(str(column.get("type") or ""))]
    named = [column for column in columns if _DATE_NAME.search(str(column.get("name")))]
    return str((typed or named)[0]["name"]) if typed or named else None


_EACH_MONTH = re.compile(
    r"\b(?:by|per|each|every)\s+month\b|\bmonthly\b|month\s+by\s+month|помесячн\w*|по\s+месяц\w*"
    r"|(?:в|за|на)\s+кажд\w+\s+месяц\w*",
    re.I,
)
_EACH_DAY = re.compile(
    r"\b(?:by|per|each|every)\s+day\b|\bdaily\b|day\s+by\s+day|по\s+дн(?:ям|ю)|ежедневн\w*|посуточн\w*"
    r"|(?:в|за|на)\s+кажд\w+\s+д(?:ень|ня)",
    re.I,
)


def _period_of(column: str, unit: str, backend: str | None) -> str:
    """A date column cut to its month or day, in the database's own SQL."""
    if backend == "sqlite":
        return f"strftime('%Y-%m', {column})" if unit == "month" else f"date({column})"
    if backend in ("mysql", "mariadb"):
        return f"DATE_FORMAT({column}, '%Y-%m')" if unit == "month" else f"DATE({column})"
    return f"date_trunc('{unit}', {column})"


def described_sql(
    request: Request,
    table: str,
    columns: Sequence[Mapping[str, Any]],
    held: Mapping[str, Sequence[str]] | None = None,
    backend: str | None = None,
) -> str:
    """The statement a question about rows asks for, over a table and its real columns: a count
    (of distinct values), a sum or average (by a column), the top or latest rows. A word that names
    no column of the table is left out, never guessed into the statement."""
    words = request.words
    columns = [column for column in columns if _IDENTIFIER.fullmatch(str(column.get("name")))]
    names = [str(column.get("name")) for column in columns]
    if _DROP.search(words) and re.search(r"table|таблиц", words, re.I):
        return f"DROP TABLE {table}"
    if _DELETE.search(words):
        return f"DELETE FROM {table}"
    # the values read are kept only for this table's real columns, as plain values (probed_values)
    held = {column: values for column, values in (held or {}).items() if column in names}
    conditions = [
        _spelt_as_held(condition, held)
        for condition in conditions_in(words)
        if condition.split(" ")[0] in names
    ]
    for condition in [*values_held(words, held), *_values_beside(words, columns)]:
        if not any(known.split(" ")[0] == condition.split(" ")[0] for known in conditions):
            conditions.append(condition)
    if (period := _period(words)) and (dated := _date_column(columns)):
        conditions.append(f"{dated} >= '{period[0]}' AND {dated} < '{period[1]}'")
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    aggregate = _AGGREGATE.search(words)
    measured = None
    if aggregate is not None:
        op = next(value for key, value in _OPS.items() if aggregate.group("op").lower().startswith(key))
        measured = _column(aggregate.group("column"), names) or _measure_column(columns)
    elif _MONEY.search(words):
        op, measured = "SUM", _measure_column(columns)
    measure = f"{op}({measured})" if measured else None
    if measure is None and _MOST.search(words) and not _EXTREME.search(words):  # "ordered most": most rows
        measure = "COUNT(*)"
    unit = "month" if _EACH_MONTH.search(words) else "day" if _EACH_DAY.search(words) else None
    if unit and (dated := _date_column(columns)):  # "per month": rows counted or summed by period
        cut = _period_of(dated, unit, backend)
        return f"SELECT {cut} AS {unit}, {measure or 'COUNT(*)'} FROM {table}{where} GROUP BY 1 ORDER BY 1"
    # the first "by …" that names a real column ("select по invoices … в разрезе status": status)
    grouped = next(
        (column for group in GROUP_BY.finditer(words) if (column := _column(group.group(1), names))), None
    )
    # rows are grouped by what they are counted for, never by the id or the number summed ("by total value")
    grouped = (
        None if grouped is not None and grouped.casefold() in ("id", str(measured).casefold()) else grouped
    )
    if (distinct := _DISTINCT.search(words)) and (column := _column(distinct.group(1), names)):
        return f"SELECT COUNT(DISTINCT {column}) FROM {table}{where}"
    if measure and (grouped or _MOST.search(words)):
        subject = grouped or next(
            (
                found
                for word in re.findall(r"[a-zа-я_]+", words.lower())
                if (found := _column(word, names)) and found.casefold() != "id" and found not in measure
            ),
            None,
        )
        if subject:
            top = f" LIMIT {request.limit}" if request.limit else ""
            return (
                f"SELECT {subject}, {measure} AS value FROM {table}{where} GROUP BY {subject}"
                f" ORDER BY value DESC{top}"
            )
    if measure:
        return f"SELECT {measure} FROM {table}{where}"
    if _COUNT.search(words) or grouped:
        if grouped:
            return f"SELECT {grouped}, COUNT(*) FROM {table}{where} GROUP BY {grouped}"
        return f"SELECT COUNT(*) FROM {table}{where}"
    if (extreme := _EXTREME.search(words)) and (ranked := _measure_column(columns)):
        order = "DESC" if extreme.group("high") else "ASC"
        return f"SELECT * FROM {table}{where} ORDER BY {ranked} {order} LIMIT {request.limit or 1}"
    latest = next((name for name in ("id", *names) if name in names), None) if _LATEST.search(words) else None
    order = f" ORDER BY {latest} DESC" if latest else ""
    return f"SELECT * FROM {table}{where}{order} LIMIT {request.limit or 10}"
