/** Every string of the page, in Russian and English. */

export type Lang = "ru" | "en";

const STRINGS = {
  title: { ru: "SS-Tools Агент", en: "SS-Tools Agent" },
  login: { ru: "Войти", en: "Sign in" },
  logout: { ru: "Выйти", en: "Sign out" },
  signedInAs: { ru: "Вы вошли как", en: "Signed in as" },
  username: { ru: "Имя пользователя", en: "Username" },
  password: { ru: "Пароль", en: "Password" },
  loginFailed: { ru: "Неверное имя или пароль", en: "Wrong username or password" },
  loginWait: { ru: "Слишком много попыток входа. Повторите через", en: "Too many sign-in attempts. Try again in" },
  secondsShort: { ru: "с", en: "s" },
  ssoSignIn: { ru: "Войти через", en: "Sign in with" },
  ssoOr: { ru: "или по паролю", en: "or with a password" },
  ssoSilentFailed: {
    ru: "Войти без пароля не вышло: в этом браузере вы не вошли в единый вход. Войдите через него — в новом окне.",
    en: "Could not sign you in silently: this browser is not signed in to single sign-on. Sign in with it — in a new window.",
  },
  ssoAgain: { ru: "Я вошёл — попробовать снова", en: "I have signed in — try again" },
  sso_oidc_denied: { ru: "Поставщик входа отказал во входе.", en: "The sign-in provider refused the sign-in." },
  sso_oidc_unmapped: {
    ru: "Ваши группы не дают доступа к агенту. Обратитесь к администратору.",
    en: "None of your groups gives access to the agent. Ask an administrator.",
  },
  sso_oidc_user_disabled: { ru: "Ваша учётная запись отключена.", en: "Your account is disabled." },
  sso_oidc_last_admin: {
    ru: "Вход снял бы права с последнего администратора: обратитесь к администратору.",
    en: "This sign-in would take the rights of the last administrator: ask an administrator.",
  },
  sso_oidc_name_taken: {
    ru: "Имя, которое даёт поставщик входа, уже занято другой учётной записью. Обратитесь к администратору: он свяжет их.",
    en: "The name your sign-in provider gives is taken by another account. Ask an administrator to link them.",
  },
  sso_oidc_handoff_foreign: {
    ru: "Этот вход был начат в другом браузере, поэтому он не использован. Войдите здесь сами.",
    en: "This sign-in was started in another browser, so it was not used. Sign in here yourself.",
  },
  sso_oidc_handoff_invalid: {
    ru: "Ссылка входа уже использована или устарела. Войдите ещё раз.",
    en: "This sign-in link was already used or has expired. Sign in again.",
  },
  // the same refusals where someone is signed in already: nothing changed for them
  ssoKept_oidc_handoff_foreign: {
    ru: "Вход, начатый в другом браузере, не использован: вы по-прежнему вошли как раньше.",
    en: "A sign-in started in another browser was not used: you are still signed in as before.",
  },
  ssoKept_oidc_handoff_invalid: {
    ru: "Ссылка входа уже использована или устарела, она не использована: вы по-прежнему вошли как раньше.",
    en: "A sign-in link that was already used or has expired was not used: you are still signed in as before.",
  },
  ssoKept_failed: {
    ru: "Единый вход не удался: вы по-прежнему вошли как раньше.",
    en: "Single sign-on failed: you are still signed in as before.",
  },
  sso_handoff_other_person: {
    ru: "Пришёл вход под другим именем — он не использован: вы по-прежнему вошли как раньше. Чтобы войти другим человеком, сначала выйдите.",
    en: "A sign-in as someone else arrived; it was not used, and you are still signed in as before. To sign in as another person, sign out first.",
  },
  sso_failed: { ru: "Единый вход не удался. Попробуйте ещё раз.", en: "Single sign-on failed. Try again." },
  sessionEnded: {
    ru: "Сеанс завершён — войдите снова. Неотправленное сообщение сохранено.",
    en: "Your session has ended — sign in again. Your unsent message is kept.",
  },
  placeholder: { ru: "Спросите агента…", en: "Ask the agent…" },
  send: { ru: "Отправить", en: "Send" },
  stop: { ru: "Стоп", en: "Stop" },
  attach: { ru: "Прикрепить файл", en: "Attach a file" },
  file: { ru: "Файл", en: "File" },
  newChat: { ru: "Новый диалог", en: "New conversation" },
  confirm: { ru: "Подтвердить", en: "Confirm" },
  reject: { ru: "Отклонить", en: "Reject" },
  close: { ru: "Закрыть", en: "Close" },
  retry: { ru: "Повторить", en: "Retry" },
  askAgain: { ru: "Спросить снова", en: "Ask again" },
  thinking: { ru: "Думаю…", en: "Thinking…" },
  resending: { ru: "Пауза — пробую ещё раз", en: "Paused — trying again" },
  idle: {
    ru: "Спросите о дашбордах, их здоровье, деплое, SQL или правах — по-русски или по-английски. Например:",
    en: "Ask about dashboards, their health, deploys, SQL or permissions — in English or Russian. For example:",
  },
  confirmTitle: { ru: "Требуется подтверждение", en: "Confirmation required" },
  prodWarning: { ru: "Внимание: production", en: "Caution: production" },
  countdown: { ru: "Подтверждение доступно через", en: "Confirm is enabled in" },
  environment: { ru: "Окружение", en: "Environment" },
  risk: { ru: "Риск", en: "Risk" },
  dashboards: { ru: "Дашборды", en: "Dashboards" },
  route: { ru: "Откуда → куда", en: "From → to" },
  arguments: { ru: "Аргументы", en: "Arguments" },
  deniedTitle: { ru: "Недостаточно прав", en: "Permission denied" },
  deniedBody: { ru: "требует роль", en: "needs the role" },
  youAre: { ru: "у вас", en: "you are" },
  input: { ru: "Вход", en: "Input" },
  result: { ru: "Результат", en: "Result" },
  task: { ru: "Задача", en: "Task" },
  taskRunning: { ru: "выполняется", en: "running" },
  taskDone: { ru: "выполнена", en: "done" },
  taskFailed: { ru: "не удалась", en: "failed" },
  rowsCut: { ru: "показаны не все строки: результат обрезан по лимиту", en: "not every row is shown: the result was cut at its limit" },
  partial: { ru: "прервано", en: "stopped" },
  answeredBy: { ru: "отвечала модель", en: "answered by" },
  connectionLost: { ru: "Связь с агентом потеряна", en: "Lost the connection to the agent" },
  listFailed: { ru: "Не удалось загрузить диалоги", en: "Could not load the conversations" },
  reconnecting: { ru: "Переподключение…", en: "Reconnecting…" },
  unsupportedFile: {
    ru: "Неподдерживаемый тип файла. Поддерживаются: PDF, XLSX, CSV, JSON, PNG, JPEG",
    en: "Unsupported file type. Supported: PDF, XLSX, CSV, JSON, PNG, JPEG",
  },
  fileTooLarge: { ru: "Файл больше 10 МБ", en: "The file is larger than 10 MB" },
  conversations: { ru: "Диалоги", en: "Conversations" },
  searchConversations: { ru: "Поиск по диалогам", en: "Search conversations" },
  moreConversations: { ru: "Показать ещё", en: "Show more" },
  nothingFound: { ru: "Ничего не найдено", en: "Nothing found" },
  archivedFilter: { ru: "Архив", en: "Archived" },
  archive: { ru: "В архив", en: "Archive" },
  restore: { ru: "Вернуть", en: "Restore" },
  archivedBanner: { ru: "Диалог в архиве: его можно читать, но не продолжать.", en: "This conversation is archived: it can be read, not continued." },
  restoreToContinue: { ru: "Вернуть и продолжить", en: "Restore to continue" },
  archiveBusy: {
    ru: "Диалог ещё отвечает: отправьте в архив, когда ответ закончится",
    en: "The conversation is still answering: archive it once the answer ends",
  },
  untitled: { ru: "Без названия", en: "Untitled" },
  messagesCount: { ru: "сообщ.", en: "msgs" },
  activeElsewhere: {
    ru: "Этот диалог сейчас отвечает в другой вкладке",
    en: "This conversation is answering in another tab",
  },
  debug: { ru: "Отладка", en: "Debug" },
  copyJson: { ru: "Копировать JSON", en: "Copy as JSON" },
  context: { ru: "Контекст", en: "Context" },
  object_dashboard: { ru: "дашборд", en: "dashboard" },
  object_chart: { ru: "график", en: "chart" },
  object_sqllab: { ru: "SQL Lab", en: "SQL Lab" },
  object_dataset: { ru: "датасет", en: "dataset" },
  object_migration: { ru: "миграция", en: "migration" },
  state_needs_clarification: { ru: "нужно уточнение", en: "needs clarification" },
  state_denied: { ru: "отказано", en: "denied" },
  state_needs_confirmation: { ru: "ждёт подтверждения", en: "needs confirmation" },
  state_started: { ru: "запущено", en: "started" },
  state_success: { ru: "готово", en: "success" },
  state_failed: { ru: "ошибка", en: "failed" },
  state_cancelled: { ru: "отменено", en: "cancelled" },
  state_issues_found: { ru: "найдены проблемы", en: "issues found" },
  queued: { ru: "ждёт: отправится, когда закончится ответ", en: "waiting: sent when the answer ends" },
  queuedAfterCard: {
    ru: "ждёт: отправится после ответа на карточку",
    en: "waiting: sent once the card is answered",
  },
  edit: { ru: "Изменить", en: "Edit" },
  connection_disconnected: { ru: "не подключено", en: "disconnected" },
  connection_connecting: { ru: "подключение…", en: "connecting…" },
  connection_connected: { ru: "подключено", en: "connected" },
  connection_reconnecting: { ru: "переподключение…", en: "reconnecting…" },
  connection_lost: { ru: "связь потеряна", en: "connection lost" },
  // the admin console (/agent/admin)
  adminConsole: { ru: "Администрирование", en: "Admin console" },
  backToChat: { ru: "К чату", en: "Back to the chat" },
  adminOnly: {
    ru: "Эта страница — только для администраторов. Ваша роль:",
    en: "This page is for admins only. Your role:",
  },
  tabPeople: { ru: "Люди", en: "People" },
  tabAgentAudit: { ru: "Аудит агента", en: "Agent audit" },
  tabOpsAudit: { ru: "Журнал ops", en: "Ops trail" },
  searchPeople: { ru: "Поиск по имени", en: "Search by name" },
  role: { ru: "Роль", en: "Role" },
  role_viewer: { ru: "наблюдатель", en: "viewer" },
  role_analyst: { ru: "аналитик", en: "analyst" },
  role_operator: { ru: "оператор", en: "operator" },
  role_admin: { ru: "администратор", en: "admin" },
  anyRole: { ru: "все роли", en: "any role" },
  status: { ru: "Статус", en: "Status" },
  anyStatus: { ru: "все", en: "all" },
  statusActive: { ru: "активен", en: "active" },
  statusDisabled: { ru: "отключён", en: "disabled" },
  onlyActive: { ru: "только активные", en: "active only" },
  onlyDisabled: { ru: "только отключённые", en: "disabled only" },
  peopleTotal: { ru: "Найдено", en: "Found" },
  more: { ru: "Показать ещё", en: "Show more" },
  disable: { ru: "Отключить", en: "Disable" },
  enable: { ru: "Включить", en: "Enable" },
  confirmDisable: {
    ru: "Отключить? Все сеансы этого человека завершатся.",
    en: "Disable? Every session of this person ends.",
  },
  yesDisable: { ru: "Да, отключить", en: "Yes, disable" },
  cancel: { ru: "Отмена", en: "Cancel" },
  lastSignIn: { ru: "Последний вход", en: "Last sign-in" },
  neverSignedIn: { ru: "не входил(а)", en: "never" },
  signIn_password: { ru: "по паролю", en: "password" },
  signIn_sso: { ru: "единый вход", en: "single sign-on" },
  fromAddress: { ru: "с адреса", en: "from" },
  viaGroup: { ru: "роль дала группа", en: "role from group" },
  defaultRole: { ru: "роль по умолчанию", en: "the default role" },
  resetPassword: { ru: "Сменить пароль", en: "Reset password" },
  newPassword: { ru: "Новый пароль", en: "New password" },
  passwordAgain: { ru: "Пароль ещё раз", en: "Password again" },
  save: { ru: "Сохранить", en: "Save" },
  ssoOnly: { ru: "только единый вход", en: "single sign-on only" },
  ssoLink: { ru: "Единый вход", en: "Single sign-on" },
  ssoSubject: { ru: "Субъект (sub) у поставщика", en: "Subject (sub) at the provider" },
  ssoLinkDo: { ru: "Связать", en: "Link" },
  ssoUnlink: { ru: "Отвязать", en: "Unlink" },
  ssoNotLinked: { ru: "не связан", en: "not linked" },
  ssoLinked: {
    ru: "Связано: единый вход этого субъекта — эта учётная запись.",
    en: "Linked: this subject's single sign-ons are this account.",
  },
  ssoUnlinked: { ru: "Связь снята.", en: "Unlinked." },
  passwordChanged: {
    ru: "Пароль изменён; сеансы этого человека завершены.",
    en: "Password changed; their sessions have ended.",
  },
  saved: { ru: "Сохранено", en: "Saved" },
  addPerson: { ru: "Добавить человека", en: "Add a person" },
  add: { ru: "Добавить", en: "Add" },
  added: { ru: "Добавлен(а):", en: "Added:" },
  auditLogged: {
    ru: "Каждое изменение записывается в журнал ops.",
    en: "Every change is written to ops' audit trail.",
  },
  adminErr_user_exists: { ru: "Такое имя уже занято.", en: "That username is taken." },
  adminErr_user_not_found: { ru: "Такого человека нет.", en: "There is no such person." },
  adminErr_last_admin: {
    ru: "Последнего активного администратора нельзя отключить или лишить роли.",
    en: "The last active admin cannot be disabled or demoted.",
  },
  adminErr_sso_only: {
    ru: "Эта учётная запись входит только через единый вход: пароль ей не задать.",
    en: "This account signs in with single sign-on only: it cannot be given a password.",
  },
  adminErr_subject_linked: {
    ru: "Этот субъект уже связан с другой учётной записью.",
    en: "That subject is already linked to another account.",
  },
  adminErr_sso_off: { ru: "Единый вход не настроен.", en: "Single sign-on is not configured." },
  adminErr_permission_denied: { ru: "Это может только администратор.", en: "Only an admin may do this." },
  adminErr_record_not_found: { ru: "Такой записи нет.", en: "There is no such record." },
  adminErr_password_short: { ru: "Пароль — не короче 12 символов.", en: "A password has at least 12 characters." },
  adminErr_password_mismatch: { ru: "Пароли не совпадают.", en: "The passwords differ." },
  adminErr_username: {
    ru: "Имя — от 1 до 200 символов, без пробелов и «/».",
    en: "A username has 1 to 200 characters, with no spaces or “/”.",
  },
  adminErr_unknown_tool: { ru: "Такого инструмента нет.", en: "There is no tool of that name." },
  adminErr_unknown_env: { ru: "Такого окружения нет.", en: "There is no such environment." },
  adminErr_period: { ru: "Начало периода должно быть раньше конца.", en: "The start must be before the end." },
  adminErr_invalid: { ru: "Проверьте введённые значения.", en: "Check what was entered." },
  adminErr_failed: { ru: "Не получилось. Попробуйте ещё раз.", en: "That did not work. Try again." },
  auditPerson: { ru: "Человек", en: "Person" },
  auditTool: { ru: "Инструмент", en: "Tool" },
  auditDecision: { ru: "Решение", en: "Decision" },
  auditCalls: { ru: "Все вызовы команды", en: "Every call of the command" },
  auditOutcome: { ru: "Итог", en: "Outcome" },
  auditAction: { ru: "Действие", en: "Action" },
  auditService: { ru: "Сервис", en: "Service" },
  auditDetail: { ru: "Подробности", en: "Detail" },
  auditFrom: { ru: "С", en: "From" },
  auditTo: { ru: "По", en: "To" },
  auditTime: { ru: "Время", en: "Time" },
  auditAny: { ru: "любое", en: "any" },
  auditShow: { ru: "Показать", en: "Show" },
  auditClear: { ru: "Сбросить", en: "Clear" },
  auditEmpty: { ru: "Записей нет", en: "No records" },
  auditRecord: { ru: "Запись аудита", en: "Audit record" },
  auditConversation: { ru: "Диалог", en: "Conversation" },
  auditThread: { ru: "Поток", en: "Thread" },
  auditLatency: { ru: "Длительность", en: "Duration" },
  exportCsv: { ru: "Выгрузить CSV", en: "Export CSV" },
  decision_allowed: { ru: "разрешено", en: "allowed" },
  decision_denied: { ru: "запрещено ролью", en: "denied" },
  decision_refused: { ru: "отклонено до запуска", en: "refused" },
  decision_needs_confirmation: { ru: "ждёт подтверждения", en: "needs confirmation" },
  decision_confirmed: { ru: "подтверждено", en: "confirmed" },
  decision_rejected: { ru: "отклонено человеком", en: "rejected" },
} as const;

export type StringKey = keyof typeof STRINGS;

export function translate(lang: Lang, key: StringKey): string {
  return STRINGS[key][lang];
}

/** A role's name in `lang` (`admin` → "администратор"); a role the page does not know, as ops
 * named it. */
export function roleLabel(lang: Lang, role: string): string {
  const key = `role_${role}`;
  return Object.hasOwn(STRINGS, key) ? translate(lang, key as StringKey) : role;
}

export const LANGS: readonly Lang[] = ["ru", "en"];

const CHOSEN_KEY = "sstools.lang";

/** The page's language: the one the person chose in this browser (kept across sign-in and
 * reload), else the browser's first of Russian or English, else Russian. */
export function preferredLang(
  storage: Pick<Storage, "getItem"> = localStorage,
  languages: readonly string[] = navigator.languages,
): Lang {
  const chosen = storage.getItem(CHOSEN_KEY);
  if (chosen === "ru" || chosen === "en") return chosen;
  for (const language of languages) {
    const primary = language.toLowerCase().split("-")[0];
    if (primary === "ru" || primary === "en") return primary;
  }
  return "ru";
}

/** The person's choice, kept for the next page of this browser. */
export function chooseLang(lang: Lang, storage: Pick<Storage, "setItem"> = localStorage): Lang {
  storage.setItem(CHOSEN_KEY, lang);
  return lang;
}
