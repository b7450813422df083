"""What a person is told when something did not happen: its cause and their next step, short, in
their language. One table for the agent's own refusals (upper-case codes), ops' and the gate's
(lower-case) and the documents docparse turned away; the technical words stay beside the text as
the event's ``detail``, for the debug view and the logs."""

from collections.abc import Mapping
from typing import Any

from sstools.agent.language import Lang, say

_RETRY_SHORTLY = ("Повторите чуть позже.", "Try again shortly.")

# code: (Russian, English); ``{name}`` fills in a fact the event carries.
_EXPLAINED: Mapping[str, tuple[str, str]] = {
    # the agent's own
    "NOT_READY": (
        "Ассистент ещё запускается. Повторите через минуту.",
        "The assistant is still starting. Try again in a minute.",
    ),
    "BUSY": (
        "Беседа ещё отвечает на другое сообщение (здесь или в другой вкладке). Дождитесь или остановите.",
        "The conversation is still answering another message (here or in another tab). Wait, or stop it.",
    ),
    "RATE_LIMITED": (
        "Слишком много сообщений подряд. Повторите через {retry_after} с.",
        "Too many messages in a row. Try again in {retry_after} s.",
    ),
    "CONVO_UNAVAILABLE": (
        "История бесед сейчас недоступна, сообщение не отправлено. " + _RETRY_SHORTLY[0],
        "Conversation history is unavailable, so nothing was sent. " + _RETRY_SHORTLY[1],
    ),
    "OPS_UNAVAILABLE": (
        "Сервис операций не отвечает: ваша роль не проверена, ничего не выполнено. " + _RETRY_SHORTLY[0],
        "The operations service does not answer: your role was not checked and nothing ran. "
        + _RETRY_SHORTLY[1],
    ),
    "UNAUTHORIZED": (
        "Сессия недействительна или истекла. Войдите снова.",
        "Your session is not valid or has expired. Sign in again.",
    ),
    "CONFIRMATION_PENDING": (
        "Сначала подтвердите или отклоните ожидающее действие.",
        "Confirm or reject the action that is waiting first.",
    ),
    "CONFIRMATION_MISMATCH": (
        "Эта карточка уже не та, что ждёт ответа. Ответьте на показанную сейчас.",
        "This card is no longer the one waiting. Answer the card shown now.",
    ),
    "CONFIRMATION_UNBOUND": (
        "Ответ не указывает, какую карточку он подтверждает. Нажмите кнопку на самой карточке.",
        "The answer does not name the card it answers. Use the buttons on the card itself.",
    ),
    "NOTHING_PENDING": (
        "Ничего не ждёт подтверждения: действие уже подтверждено или отклонено.",
        "Nothing is waiting for confirmation: it was already confirmed or rejected.",
    ),
    "CHECKPOINT_EXPIRED": (
        "Ожидавшее действие больше не хранится. Отправьте запрос заново.",
        "The action that was waiting is no longer kept. Send the request again.",
    ),
    "CONVERSATION_ARCHIVED": (
        "Беседа в архиве. Восстановите её, чтобы продолжить, или начните новую.",
        "This conversation is archived. Restore it to continue, or start a new one.",
    ),
    "UPLOAD_NOT_FOUND": (
        "Прикреплённый файл не найден среди ваших загрузок (или его срок истёк). Загрузите его снова.",
        "An attached file is not among your uploads (or it expired). Upload it again.",
    ),
    "PAYLOAD_TOO_LARGE": (
        "Слишком много или слишком большое: сократите сообщение или число файлов.",
        "Too much at once: shorten the message or attach fewer files.",
    ),
    "INVALID_CONVERSATION_ID": (
        "Беседа не распознана. Откройте её из списка или начните новую.",
        "The conversation is not recognised. Open it from the list, or start a new one.",
    ),
    "INVALID_UI_CONTEXT": (
        "Страница прислала непонятный контекст. Обновите её.",
        "The page sent a context that could not be read. Reload it.",
    ),
    "INVALID_ENVIRONMENT": (
        "Окружения «{env_id}» нет. Спросите «какие есть окружения?».",
        "There is no environment “{env_id}”. Ask “which environments are there?”.",
    ),
    "INVALID_ARGUMENTS": (
        "Изменённые параметры не подходят: {detail}",
        "The edited values are not valid: {detail}",
    ),
    "LLM_UNAVAILABLE": (
        "Языковая модель не отвечает. " + _RETRY_SHORTLY[0],
        "The language model does not answer. " + _RETRY_SHORTLY[1],
    ),
    "LLM_MALFORMED": (
        "Ответ языковой модели не удалось прочитать. Повторите или скажите иначе.",
        "The language model's answer could not be read. Try again, or say it differently.",
    ),
    "TOO_MANY_STEPS": (
        "Запрос занял больше шагов, чем разрешено за один ход; остановлено. Уточните, что именно нужно.",
        "The request took more steps than one turn may; it was stopped. Say more precisely what you need.",
    ),
    "UNKNOWN_TOOL": (
        "Модель попросила действие, которого нет; ничего не выполнено. Скажите иначе.",
        "The model asked for an action that does not exist; nothing ran. Say it differently.",
    ),
    "ONE_CHANGE_AT_A_TIME": (
        "Изменения выполняются по одному: сначала это, остальное попросите следом.",
        "Changes run one at a time: this one first, ask for the rest after it.",
    ),
    # documents docparse turned away (``UPLOAD_`` and its code)
    "UPLOAD_UNSUPPORTED_TYPE": (
        "Файл {file} не прочитать: такой тип не поддерживается ({supported}).",
        "{file} cannot be read: its type is not supported ({supported}).",
    ),
    "UPLOAD_TYPE_MISMATCH": (
        "Содержимое файла {file} не совпадает с его расширением. Сохраните его в нужном формате.",
        "{file}'s content does not match its extension. Save it in the right format.",
    ),
    "UPLOAD_TOO_LARGE": (
        "Файл {file} слишком большой. Приложите часть.",
        "{file} is too large. Attach a part of it.",
    ),
    "UPLOAD_MALFORMED": ("Файл {file} повреждён и не читается.", "{file} is damaged and cannot be read."),
    "UPLOAD_ENCRYPTED": (
        "Файл {file} защищён паролем. Снимите защиту.",
        "{file} is password-protected. Remove the password.",
    ),
    "UPLOAD_TIMEOUT": (
        "Файл {file} читался слишком долго. Приложите его часть.",
        "{file} took too long to read. Attach a part of it.",
    ),
    "UPLOAD_UNAVAILABLE": (
        "Файл {file} сейчас не прочитать; сообщение ушло без него.",
        "{file} cannot be read right now; the message went on without it.",
    ),
    # ops' and the gate's
    "rejected": (
        "Отменено: вы отклонили действие, ничего не выполнено.",
        "Cancelled: you rejected it, nothing was run.",
    ),
    "permission_denied": (
        "Недостаточно прав для этого действия. Попросите администратора или выберите действие по вашей роли.",
        "Your role may not do this. Ask an administrator, or pick something your role allows.",
    ),
    "task_not_found": (
        "Задачи с таким id нет. Проверьте id: его называет ответ на запуск задачи.",
        "There is no task with that id. Check it: the answer that started the task names it.",
    ),
    "not_found": (
        "Такого объекта нет. Проверьте id или название (можно спросить «покажи дашборды»).",
        "No such object. Check the id or name (try “show dashboards”).",
    ),
    "sql_interrupted": (
        "Запрос прервался: ops перезапустился, пока он выполнялся. Он мог изменить данные, поэтому "
        "повторно не запускался: проверьте данные, прежде чем просить снова.",
        "The statement was interrupted: ops restarted while it ran. It may have changed data, so it "
        "was not run again: look at the data before asking again.",
    ),
    "sql_not_read_only": (
        "Запрос изменяет данные и требует подтверждения администратора.",
        "The statement changes data and needs an administrator's confirmation.",
    ),
    "invalid_arguments": (
        "Не хватает или неверны данные запроса. Уточните, что и где сделать.",
        "Something in the request is missing or wrong. Say what to do and where.",
    ),
    "tool_timeout": (
        "Ответа нет слишком долго: выполнено ли действие, неизвестно. Проверьте Superset, потом повторяйте.",
        "No answer in time: whether it ran is unknown. Check Superset before trying again.",
    ),
    "tool_timeout_retryable": (
        "Ответа нет вовремя. Спросить снова безопасно.",
        "No answer in time. Asking again is safe.",
    ),
    "superset_unavailable": (
        "Superset сейчас не отвечает. " + _RETRY_SHORTLY[0],
        "Superset does not answer right now. " + _RETRY_SHORTLY[1],
    ),
    "read_budget_exceeded": (
        "Слишком много тяжёлых запросов за минуту (проверки здоровья, SQL, обзор базы). "
        "Повторите через {retry_after} с.",
        "Too many heavy requests this minute (health checks, SQL, database exploration). "
        "Try again in {retry_after} s.",
    ),
    "maintenance": (
        "Окружение на обслуживании: изменения сейчас запрещены.",
        "The environment is under maintenance: changes are refused for now.",
    ),
}


class Facts(dict[str, Any]):
    """A fact the event does not carry reads as a dash, never as a KeyError."""

    def __missing__(self, key: str) -> str:
        return "—"


def explained(code: str, lang: Lang, facts: Mapping[str, Any] | None = None) -> str | None:
    """The words for ``code`` (or, for ops' lower-case codes, a known one it contains:
    ``superset_unavailable_dev``), or None when there are none."""
    facts = facts or {}
    if code == "tool_timeout" and facts.get("retryable"):  # a read: asking again is safe
        code = "tool_timeout_retryable"
    texts = _EXPLAINED.get(code) or next(
        (texts for key, texts in _EXPLAINED.items() if key.islower() and key in code), None
    )
    if texts is None:
        return None
    return say(lang, *texts).format_map(Facts(facts))
