/** The /agent page's chat state, in one class the components only render (data model §5). It
 * talks to the agent through a `ChatTransport`, folds each turn's stream into a `TurnView`, and
 * owns what the person can do next: send, stop, confirm or reject, retry, switch environment. */

import { isEnvId, isObjectId, isObjectType, MAX_NAME, MAX_ROUTE } from "../context.ts";
import type { Focus } from "../embed.ts";
import { translate, type Lang } from "../i18n.ts";
import { ApiError, TASK_ENDED, type TasksApi } from "./api.ts";
import { emptyTurn, ended, foldTurn, isRunning } from "./turn";
import type { Action, ChatJob, ChatTransport } from "./transport";
import type { Alternative, ConfirmRequest, Problem, SessionTokens, TurnView, UIContext } from "./types";

export const SUPPORTED_EXTENSIONS = ["pdf", "xlsx", "csv", "json", "png", "jpeg", "jpg"] as const;
export const MAX_FILE_BYTES = 10 * 1024 * 1024;
export const RECONNECT_ATTEMPTS = 5;
export const RECONNECT_DELAY_MS = 5_000;
export const DANGEROUS_COUNTDOWN_SECONDS = 5;

export type Connection = "disconnected" | "connecting" | "connected" | "reconnecting" | "lost";

export interface ChatEntry {
  id: string;
  role: "user" | "assistant";
  text: string;
  files: string[];
  /** The assistant's turn as streamed; null for the person's own messages. */
  view: TurnView | null;
  /** Stopped by the person before the answer was complete. */
  partial: boolean;
}

export interface ModelDeps {
  transport: ChatTransport;
  newId?: () => string;
  sleep?: (ms: number) => Promise<void>;
  /** One tick per second of the dangerous-confirm countdown. */
  tick?: (callback: () => void) => () => void;
  /** After every turn, however it ended (the sidebar refreshes its list). */
  onTurnEnd?: () => void;
  /** The person's tokens: kept fresh before each turn, renewed once when the agent refuses
   * one; when the session is over the page signs in anew, keeping `draft`. */
  session?: SessionTokens;
  /** Where the person's last chosen environment is kept between visits (the browser's
   * localStorage on the page; none in unit tests unless given). */
  memory?: Pick<Storage, "getItem" | "setItem"> | null;
  /** Where a started task's progress is read, so its end shows without being asked (none:
   * the chip alone). */
  tasks?: TasksApi | null;
  /** Where the conversation's kept history is read: before a message whose stream was lost is
   * sent again by itself, whether the agent took it (none: it is not sent again by itself). */
  history?: ((conversationId: string) => Promise<ChatEntry[]>) | null;
}

// A started task is read soon (most end within seconds: a deploy, a backup, a query), then less
// often: one that runs for minutes is read every 3 s. The person sees an end within half a
// second of it for the first 1.5 s, within a second until 3.5 s.
export const TASK_POLL_MS = [500, 500, 500, 1000, 1000, 2000, 3000] as const;
const pollPause = (read: number): number => TASK_POLL_MS[Math.min(read, TASK_POLL_MS.length - 1)];
const TASK_READ_FAILURES = 5;

/** The agent's error code for a token it does not accept. */
const UNAUTHORIZED = "UNAUTHORIZED";
const ARCHIVED = "CONVERSATION_ARCHIVED";
// Failures that may pass by themselves: the same message, sent again, may well go through.
const RETRYABLE = new Set(["BUSY", "RATE_LIMITED", "CONVO_UNAVAILABLE", "OPS_UNAVAILABLE", "LLM_UNAVAILABLE", "LLM_MALFORMED", "NOT_READY"]);
// Of those, the refusals given before anything of the command ran, while a part restarts or a
// dead pod's lease lapses: the page sends the command again by itself after a pause. A confirm
// sent again runs its card at most once (the agent names the card's call and digest).
const PASSING = new Set(["BUSY", "CONVO_UNAVAILABLE", "OPS_UNAVAILABLE", "NOT_READY"]);
/** The pauses before each new try: about half a minute in all (a lease's TTL, a restart). */
export const RESEND_DELAYS_MS = [1_000, 2_000, 4_000, 8_000, 15_000] as const;

export type FileRejection = { file: string; reason: "unsupportedFile" | "fileTooLarge" };
export type QueuedMessage = { id: string; text: string; files: File[] };

const defaultTick = (callback: () => void): (() => void) => {
  const timer = setInterval(callback, 1000);
  return () => clearInterval(timer);
};

export class AgentChatModel {
  connection: Connection = $state("disconnected");
  streaming: boolean = $state(false);
  conversationId: string = $state("");
  messages: ChatEntry[] = $state([]);
  pendingConfirm: ConfirmRequest | null = $state(null);
  editedArgs: Record<string, unknown> = $state({});
  #productionEnvs: Set<string> = $state(new Set());
  /** Arguments whose edited text is not a value of their kind (JSON that does not parse). */
  invalidArgs: Record<string, true> = $state({});
  permissionAlternatives: Alternative[] | null = $state(null);
  error: Problem | null = $state(null);
  uiContext: UIContext | null = $state(null);
  dangerousCountdown: number = $state(0);
  _activeEnvId: string | null = $state(null);
  username: string | null = $state(null);
  /** The open conversation is answering in another tab or window right now. */
  activeElsewhere: boolean = $state(false);
  /** The open conversation is archived: it is read, not continued, until it is restored. */
  archived: boolean = $state(false);
  /** What the person is typing: the page keeps it when their session ends. */
  draft: string = $state("");
  /** The page's language: the agent answers in it when a message has no language of its own. */
  lang: "ru" | "en" = $state("ru");
  /** Messages sent while an answer streams: shown as waiting, sent in order once it has ended
   * (and any card it asked about is answered). Never dropped. */
  queued: QueuedMessage[] = $state([]);
  /** The last command failed in a way that passes by itself: it is sent again after a pause
   * (the n-th try of `of`); the person sees a pause, not a failure, and may stop it. */
  resending: { attempt: number; of: number } | null = $state(null);

  readonly activeEnv: string | null = $derived(this._activeEnvId ?? this.uiContext?.envId ?? null);
  /** Production: as the pending card says (the agent decided it from ops' configuration), else
   * the selected environment as ops lists it, or by its name. */
  readonly isProdContext: boolean = $derived(
    this.pendingConfirm !== null
      ? this.pendingConfirm.production
      : this.#productionEnvs.has(this.activeEnv ?? "") || normaliseEnv(this.activeEnv) === "prod",
  );
  readonly showProdWarning: boolean = $derived(this.isProdContext);
  readonly contextPillLabel: string = $derived(contextLabel(this.uiContext, this.lang));
  readonly activeToolCalls: number = $derived(
    this.messages.reduce((count, entry) => count + (entry.view?.tools.filter(isRunning).length ?? 0), 0),
  );
  readonly dangerousCountdownActive: boolean = $derived(this.dangerousCountdown > 0);
  /** The answer under way has shown nothing yet (no word, no tool): the page says it is thinking. */
  readonly thinking: boolean = $derived.by(() => {
    const view = this.streaming ? this.messages.at(-1)?.view : null;
    return !!view && !view.text && view.tools.length === 0 && view.errors.length === 0 && view.state === null;
  });
  /** The last answer failed in a way that asking again may mend: a refusal that passes by
   * itself, or a read that timed out (asking again is safe; a write's fate is Superset's to say). */
  readonly askAgainOffered: boolean = $derived.by(() => {
    const view = this.messages.at(-1)?.view;
    if (!view) return false;
    return view.errors.some((problem) => RETRYABLE.has(problem.code)) || view.tools.some((card) => card.status === "timeout" && card.retryable);
  });
  readonly canConfirm: boolean = $derived(
    this.pendingConfirm !== null &&
      !this.streaming &&
      !this.dangerousCountdownActive &&
      Object.keys(this.invalidArgs).length === 0,
  );

  #transport: ChatTransport;
  #newId: () => string;
  #sleep: (ms: number) => Promise<void>;
  #tick: (callback: () => void) => () => void;
  #onTurnEnd: () => void;
  #session: SessionTokens;
  #token: string | null = null;
  #job: ChatJob | null = null;
  #cancelling = false;
  #endPause: (() => void) | null = null;
  #stopCountdown: (() => void) | null = null;
  #openings = 0; // conversations opened or begun: an archive closes only the one open when it began
  #lastRequest: { text: string; files: File[]; action: Action } | null = null;
  #memory: Pick<Storage, "getItem" | "setItem"> | null;
  #tasks: TasksApi | null;
  #history: ((conversationId: string) => Promise<ChatEntry[]>) | null;

  constructor(deps: ModelDeps) {
    this.#transport = deps.transport;
    this.#newId = deps.newId ?? (() => crypto.randomUUID());
    this.#sleep = deps.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
    this.#tick = deps.tick ?? defaultTick;
    this.#onTurnEnd = deps.onTurnEnd ?? (() => {});
    this.#session = deps.session ?? { current: async () => null, renew: async () => null, ended: () => {} };
    this.#memory = deps.memory ?? null;
    this.#tasks = deps.tasks ?? null;
    this.#history = deps.history ?? null;
    this.conversationId = this.#newId();
  }

  /** Connect with the person's token: up to 5 attempts 5 s apart, then `lost` (retry offered). */
  async connect(token: string, username: string | null = null): Promise<boolean> {
    this.#token = token;
    this.username = username;
    for (let attempt = 1; attempt <= RECONNECT_ATTEMPTS; attempt++) {
      this.connection = attempt === 1 ? "connecting" : "reconnecting";
      try {
        await this.#transport.connect(token);
        this.connection = "connected";
        this.error = null;
        return true;
      } catch {
        if (attempt < RECONNECT_ATTEMPTS) await this.#sleep(RECONNECT_DELAY_MS);
      }
    }
    this.connection = "lost";
    this.error = { code: "NETWORK", message: "connectionLost" };
    return false;
  }

  /** Files the page refuses before anything is sent (type or size), with the reason. */
  static rejectFiles(files: readonly File[]): FileRejection[] {
    return files.flatMap((file): FileRejection[] => {
      const extension = file.name.split(".").pop()?.toLowerCase() ?? "";
      if (!(SUPPORTED_EXTENSIONS as readonly string[]).includes(extension)) {
        return [{ file: file.name, reason: "unsupportedFile" }];
      }
      return file.size > MAX_FILE_BYTES ? [{ file: file.name, reason: "fileTooLarge" }] : [];
    });
  }

  async send(text: string, files: File[] = []): Promise<void> {
    if (!text.trim() && files.length === 0) return;
    if (this.archived) return; // the page offers "restore" instead of the composer
    if (AgentChatModel.rejectFiles(files).length > 0) return;
    if (this.streaming) {
      this.queued.push({ id: this.#newId(), text, files });
      return;
    }
    this.permissionAlternatives = null;
    this.messages.push({
      id: this.#newId(),
      role: "user",
      text,
      files: files.map((file) => file.name),
      view: null,
      partial: false,
    });
    await this.#run({ text, files, action: "send" });
    await this.#sendQueued();
  }

  /** Ask the last message again: after a failure that said trying again may help. */
  async askAgain(): Promise<void> {
    const asked = this.messages.findLast((entry) => entry.role === "user");
    if (asked && !this.streaming) await this.send(asked.text);
  }

  /** Take a waiting message back (it goes back into the box to edit). */
  unqueue(id: string): QueuedMessage | null {
    const index = this.queued.findIndex((message) => message.id === id);
    return index < 0 ? null : (this.queued.splice(index, 1)[0] ?? null);
  }

  async #sendQueued(): Promise<void> {
    const next = this.queued[0];
    if (!next || this.streaming || this.archived || this.pendingConfirm !== null || this.connection !== "connected") return;
    this.queued.shift();
    await this.send(next.text, next.files);
  }

  /** Confirm the card shown: its call id and digest name exactly what the person saw (a card
   * changed since, or another tab's, is refused by the agent), with the edited arguments. */
  async confirm(): Promise<void> {
    if (!this.canConfirm || this.pendingConfirm === null) return;
    await this.#resume("confirm", answerTo(this.pendingConfirm, this.editedArgs));
  }

  async reject(): Promise<void> {
    if (this.pendingConfirm === null || this.streaming) return;
    await this.#resume("reject", answerTo(this.pendingConfirm, {}));
  }

  /** Stop the answer: the text so far stays, marked as stopped. */
  async cancel(): Promise<void> {
    this.#endPause?.();
    if (!this.#job) return;
    this.#cancelling = true;
    await this.#job.cancel();
  }

  /** After a lost connection: connect again and repeat what failed. */
  async retry(): Promise<void> {
    if (!this.#token || !(await this.connect(this.#token, this.username))) return;
    const last = this.#lastRequest;
    if (last && this.messages.at(-1)?.role === "assistant" && this.messages.at(-1)?.view?.state === null) {
      this.messages.pop(); // the answer that never came
      await this.#run(last);
    }
    await this.#sendQueued();
  }

  newConversation(): void {
    if (this.streaming) return;
    this.#openings++;
    this.conversationId = this.#newId();
    this.messages = [];
    this.#clearPending();
    this.error = null;
    this.activeElsewhere = false;
    this.archived = false;
  }

  /** Open an existing conversation with its history (from convo); a confirmation it was left
   * waiting on is offered again (the checkpoint still holds the pause) — not in an archived one,
   * which is only read until it is restored. */
  openConversation(conversationId: string, history: ChatEntry[], activeElsewhere = false, archived = false): void {
    if (this.streaming) return;
    this.#openings++;
    this.conversationId = conversationId;
    this.messages = history;
    this.#clearPending();
    this.error = null;
    this.activeElsewhere = activeElsewhere;
    this.archived = archived;
    if (!archived) this.#settle(history.at(-1)?.view ?? null);
  }

  /** ``id`` is being archived (``archiving`` says whether convo did): archiving the open
   * conversation closes it and the page goes on in a new one. One the person opened while the
   * archive was under way stays open, read as archived: it was not open when they archived it. */
  async closeArchived(id: string, archiving: Promise<boolean>): Promise<void> {
    const opening = this.#openings;
    if (!(await archiving) || id !== this.conversationId) return;
    if (opening === this.#openings) this.newConversation();
    else this.archived = true;
  }

  /** The open conversation was restored: it takes messages again, the waiting ones first. */
  async reopened(): Promise<void> {
    this.archived = false;
    this.error = null;
    await this.#sendQueued();
  }

  /** What Superset shows around the drawer, in ``envId`` (the Superset the drawer is in): the
   * chat's context from now on, in that environment again even if another was chosen meanwhile —
   * the object's id means something there alone. */
  followFocus(focus: Focus, envId: string): void {
    this.uiContext = { ...focus, envId, contextVersion: 1 };
    this.updateActiveEnv(envId, false);
  }

  /** The environment the page works in; one the person chose is remembered as theirs. */
  updateActiveEnv(envId: string | null, chosen = true): void {
    const valid = envId !== null && isEnvId(envId) ? envId : null;
    this._activeEnvId = valid;
    if (this.uiContext) this.uiContext.envId = valid;
    if (chosen && valid !== null) this.#memory?.setItem(this.#envKey, valid);
  }

  get #envKey(): string {
    return `sstools.env.${this.username ?? ""}`;
  }

  /** Once ops has said which environments exist: an environment from the URL that is not one of
   * them is dropped (the agent would refuse every turn naming it), and an environment is always
   * selected and shown — the person's last one while it exists, else the first non-production one. */
  keepKnownEnvironment(known: readonly { id: string; production: boolean }[]): void {
    this.#productionEnvs = new Set(known.filter((env) => env.production).map((env) => env.id));
    if (this.activeEnv !== null && !known.some((env) => env.id === this.activeEnv)) this.updateActiveEnv(null);
    if (this.activeEnv !== null) return;
    const last = this.#memory?.getItem(this.#envKey) ?? null;
    const fallback = known.find((env) => !env.production)?.id ?? null;
    this.updateActiveEnv(known.some((env) => env.id === last) ? last : fallback, false);
  }

  dismissDenied(): void {
    this.permissionAlternatives = null;
  }

  /** An argument as typed in the card: numbers and booleans keep their type, lists and objects
   * are edited as JSON (one that does not parse holds the confirm back). */
  editArgumentText(name: string, raw: string, original: unknown): void {
    const { [name]: _previous, ...others } = this.invalidArgs;
    this.invalidArgs = others;
    if (typeof original === "object" && original !== null) {
      try {
        this.editArgument(name, JSON.parse(raw));
      } catch {
        this.invalidArgs = { ...others, [name]: true };
      }
    } else if (typeof original === "number" && raw.trim() !== "" && !Number.isNaN(Number(raw))) {
      this.editArgument(name, Number(raw));
    } else if (typeof original === "boolean" && (raw === "true" || raw === "false")) {
      this.editArgument(name, raw === "true");
    } else {
      this.editArgument(name, raw);
    }
  }

  editArgument(name: string, value: unknown): void {
    this.editedArgs = { ...this.editedArgs, [name]: value };
  }

  /** What the debug block shows (and copies as JSON). */
  debugSnapshot(): Record<string, unknown> {
    const last = this.messages.at(-1);
    return {
      conv_id: this.conversationId,
      pending_thread_id: this.pendingConfirm?.threadId ?? null,
      connection: this.connection,
      streaming: this.streaming,
      env: this.activeEnv,
      user: this.username,
      message_count: this.messages.length,
      last_message_id: last?.id ?? null,
      active_tool_calls: this.activeToolCalls,
      error: this.error,
    };
  }

  /** The agent refused the person's token and no renewed one could be had (signed out,
   * disabled, expired session): a message sent becomes the draft again, a card's answer is
   * simply not given (the card waits in the conversation), and the page signs in anew. */
  #sessionEnded(request: { text: string; action: Action }): void {
    const refused = this.messages.length - (request.action === "send" ? 2 : 1);
    this.messages.splice(refused);
    if (request.action === "send") this.draft = [request.text, this.draft].filter(Boolean).join("\n");
    this.#session.ended();
  }

  async #resume(action: Action, text: string): Promise<void> {
    this.#stopCountdownTimer();
    this.pendingConfirm = null;
    this.editedArgs = {};
    this.invalidArgs = {};
    await this.#run({ text, files: [], action });
    await this.#sendQueued();
  }

  async #run(request: { text: string; files: File[]; action: Action }, renewed = false, tried = 0): Promise<void> {
    const token = await this.#session.current();
    if (token !== null && token !== this.#token && !(await this.connect(token, this.username))) return;
    this.#lastRequest = request;
    const entry: ChatEntry = { id: this.#newId(), role: "assistant", text: "", files: [], view: emptyTurn(), partial: false };
    this.messages.push(entry);
    const answer = this.messages[this.messages.length - 1]; // the reactive proxy of `entry`
    let tokenRefused = false;
    this.streaming = true;
    this.error = null;
    this.#cancelling = false;
    try {
      this.#job = this.#transport.submit({
        ...request,
        conversationId: this.conversationId,
        envId: this.activeEnv ?? "",
        uiContext: JSON.stringify({ ...(this.uiContext ?? {}), lang: this.lang }),
      });
      for await (const event of this.#job) {
        if (event.kind === "data") {
          const view = foldTurn(event.messages);
          // a refused token is not shown: the turn is asked again, or the page signs in anew
          tokenRefused ||= view.errors.some((problem) => problem.code === UNAUTHORIZED);
          if (tokenRefused) continue;
          answer.view = view;
          answer.text = view.text;
        } else if (event.stage === "error" && !this.#cancelling) {
          // Gradio reports a lost or failed stream as a status error
          this.error = { code: "NETWORK", message: event.message || "connectionLost" };
          this.connection = "lost";
        }
      }
    } catch (failure) {
      if (!this.#cancelling) {
        this.error = { code: "NETWORK", message: failure instanceof Error ? failure.message : "connectionLost" };
        this.connection = "lost";
      }
    } finally {
      this.#job = null;
      this.streaming = false;
      this.#onTurnEnd();
    }
    if (tokenRefused) {
      // refused before anything of the turn ran: with a renewed token it is simply asked again
      const fresh = renewed ? null : await this.#session.renew(this.#token ?? "");
      if (fresh !== null && (await this.connect(fresh, this.username))) {
        this.messages.pop();
        await this.#run(request, true);
      } else {
        this.#sessionEnded(request);
      }
      return;
    }
    if (this.#cancelling) {
      // @gradio/client reports a cancel as a generic error: it is the cancel the person asked for
      answer.partial = true;
      if (answer.view) ended(answer.view, "cancelled");
      return;
    }
    if (tried < RESEND_DELAYS_MS.length && nothingRan(answer.view, this.error)) {
      const failed = answer.view;
      const problem = this.error;
      const lost = problem?.code === "NETWORK";
      answer.view = emptyTurn(); // a pause, not a failure: the answer is still awaited
      if (await this.#pause(tried)) {
        // A refusal came before anything of the command was kept; a lost stream may have been
        // lost after the agent took the message: then its kept answer is shown, not a second one.
        const kept = lost && request.action === "send" ? await this.#keptSince(request.text) : [];
        if (kept === null) {
          // whether it was taken cannot be told: the failure as it was, and the person decides
          answer.view = failed;
          this.error = problem;
        } else if (kept.length > 0) {
          this.messages = kept;
          this.#settle(kept.at(-1)?.view ?? null);
          return;
        } else {
          this.messages.pop();
          await this.#run(request, renewed, tried + 1);
          return;
        }
      } else {
        answer.view = failed; // stopped by the person: the failure is told as it was
      }
    }
    this.#settle(answer.view);
    if (answer.view?.state === "started" && answer.view.taskId) void this.#follow(answer, answer.view.taskId);
  }

  /** The conversation as kept, if the agent took the message just sent (the kept history ends
   * with it and holds as many messages as the page sent); empty if it did not (it may be sent
   * again); null when that cannot be read. */
  async #keptSince(text: string): Promise<ChatEntry[] | null> {
    if (!this.#history) return null;
    const sent = this.messages.filter((entry) => entry.role === "user").length;
    try {
      const kept = await this.#history(this.conversationId);
      const asked = kept.filter((entry) => entry.role === "user");
      // (the agent keeps a very long message cut at a sentence: what it kept begins the text)
      const last = asked.at(-1)?.text.trim();
      return asked.length >= sent && last !== undefined && text.trim().startsWith(last) ? kept : [];
    } catch (failure) {
      // a conversation convo does not know yet: its first message was not taken
      return failure instanceof ApiError && failure.status === 404 ? [] : null;
    }
  }

  /** The pause before the ``tried``+1-th try, connecting again if the stream was lost; false when
   * the person stopped it or the agent cannot be reached (the command ends as it failed). The
   * composer queues meanwhile, as while an answer streams. */
  async #pause(tried: number): Promise<boolean> {
    let stopped = false;
    const stop = new Promise<void>((resolve) => (this.#endPause = () => ((stopped = true), resolve())));
    this.resending = { attempt: tried + 1, of: RESEND_DELAYS_MS.length };
    this.streaming = true;
    const lost = this.connection === "lost";
    if (lost) this.connection = "reconnecting";
    try {
      await Promise.race([this.#sleep(RESEND_DELAYS_MS[tried] ?? 0), stop]);
      if (stopped) return false;
      return !lost || (await this.connect(this.#token ?? "", this.username));
    } finally {
      this.#endPause = null;
      this.resending = null;
      this.streaming = false;
      if (lost && stopped) this.connection = "lost";
    }
  }

  /** A started task, read until it ends (or cannot be read a few times in a row), soon at first
   * and then every few seconds: its progress and its end show in the answer that started it. */
  async #follow(answer: ChatEntry, taskId: string): Promise<void> {
    if (!this.#tasks || !answer.view) return;
    let failures = 0;
    for (let read = 0; failures < TASK_READ_FAILURES; read += 1) {
      await this.#sleep(pollPause(read));
      try {
        const progress = await this.#tasks.task(taskId);
        failures = 0;
        answer.view.task = progress;
        if (TASK_ENDED.has(progress.status)) return;
      } catch {
        failures += 1;
      }
    }
  }

  #settle(view: TurnView | null): void {
    if (!view) return;
    if (view.conversationId) this.conversationId = view.conversationId;
    // archived elsewhere (another tab): messages waiting stay queued until it is restored
    if (view.errors.some((problem) => problem.code === ARCHIVED)) this.archived = true;
    if (view.state === "needs_confirmation" && view.confirm) {
      this.pendingConfirm = view.confirm;
      this.editedArgs = {};
      this.invalidArgs = {};
      if (view.confirm.dangerous) this.#startCountdown();
    }
    if (view.denied) this.permissionAlternatives = view.denied.alternatives;
    if (view.errors.length > 0 && !this.error) this.error = view.errors[0];
  }

  #startCountdown(): void {
    this.#stopCountdownTimer();
    this.dangerousCountdown = DANGEROUS_COUNTDOWN_SECONDS;
    this.#stopCountdown = this.#tick(() => {
      this.dangerousCountdown -= 1;
      if (this.dangerousCountdown <= 0) this.#stopCountdownTimer();
    });
  }

  #stopCountdownTimer(): void {
    this.#stopCountdown?.();
    this.#stopCountdown = null;
    this.dangerousCountdown = 0;
  }

  #clearPending(): void {
    this.#stopCountdownTimer();
    this.pendingConfirm = null;
    this.editedArgs = {};
    this.invalidArgs = {};
    this.permissionAlternatives = null;
  }
}

/** The command failed before anything of it ran (no word, no tool, no card) in a way that passes
 * by itself: a refusal while a part restarts, or the stream lost before it said anything. */
function nothingRan(view: TurnView | null, error: Problem | null): boolean {
  if (!view || view.text || view.tools.length > 0 || view.confirm || view.denied) return false;
  if (view.errors.length === 0) return error?.code === "NETWORK" && view.state === null;
  return view.errors.every((problem) => PASSING.has(problem.code));
}

/** data model §2: "prod"/"production" → prod, "stag"/"test" → staging, "dev"/"local" → dev. */
export function normaliseEnv(envId: string | null | undefined): "prod" | "staging" | "dev" | null {
  const value = (envId ?? "").toLowerCase();
  if (value.includes("prod")) return "prod";
  if (value.includes("stag") || value.includes("test")) return "staging";
  if (value.includes("dev") || value.includes("local")) return "dev";
  return null;
}

function contextLabel(context: UIContext | null, lang: Lang): string {
  if (!context?.objectType) return "";
  const name = context.objectName ?? (context.objectId ? `#${context.objectId}` : "");
  const kind = translate(lang, `object_${context.objectType}`);
  return [kind, name, context.envId ? `@${context.envId}` : ""].filter(Boolean).join(" ");
}


/** UIContext from the page's URL parameters (data model §1); null when none names an object. An
 * envId that is not an environment id is left out: a link cannot plant one. */
export function uiContextFromUrl(url: URL): UIContext | null {
  const params = url.searchParams;
  const objectType = params.get("objectType");
  const given = params.get("envId");
  const envId = given !== null && isEnvId(given) ? given : null;
  if (!objectType && !envId) return null;
  const objectId = params.get("objectId");
  return {
    objectType: isObjectType(objectType) ? objectType : null,
    objectId: isObjectId(objectId) ? objectId : null,
    objectName: params.get("objectName")?.slice(0, MAX_NAME) ?? null,
    envId,
    route: (params.get("route") ?? url.pathname).slice(0, MAX_ROUTE),
    contextVersion: 1,
  };
}

/** A confirm's or reject's message: the card it answers, and the edited arguments. */
function answerTo(card: ConfirmRequest, args: Record<string, unknown>): string {
  return JSON.stringify({ call_id: card.callId, digest: card.digest, args });
}
