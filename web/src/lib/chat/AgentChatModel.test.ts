import { describe, expect, it } from "vitest";
import { isEnvId } from "../context";
import { AgentChatModel, normaliseEnv, RECONNECT_ATTEMPTS, RESEND_DELAYS_MS, TASK_POLL_MS, uiContextFromUrl } from "./AgentChatModel.svelte";
import type { ChatEntry } from "./AgentChatModel.svelte";
import { ApiError } from "./api";
import { ConversationList } from "./ConversationList.svelte";
import { historyEntries } from "./conversations";
import type { ChatEvent, ChatJob, ChatRequest, ChatTransport } from "./transport";
import type { StreamEvent, StreamEventType } from "../generated/contracts";
import type { WireMessage } from "./types";

// the events as the tests script them: each test writes only the fields it reads
const message = (type: StreamEventType, content = "", extra: Record<string, unknown> = {}): WireMessage => ({
  role: "assistant",
  content,
  metadata: { type, ...extra } as StreamEvent,
});
const data = (...messages: WireMessage[]): ChatEvent => ({ kind: "data", messages });
const complete: ChatEvent = { kind: "status", stage: "complete", message: "" };

/** A transport answering each submit with the next scripted stream; a stream may hold at a
 * gate until the test opens it (to cancel mid-stream), then end as ``after`` says (else as a
 * cancelled one does). */
class ScriptedTransport implements ChatTransport {
  requests: ChatRequest[] = [];
  connectFailures = 0;
  connects = 0;
  cancelled = 0;
  constructor(
    private readonly streams: Array<ChatEvent[] | { before: ChatEvent[]; gate: Promise<void>; after?: ChatEvent[] }>,
  ) {}

  async connect(): Promise<void> {
    this.connects += 1;
    if (this.connects <= this.connectFailures) throw new Error("ECONNREFUSED");
  }

  submit(request: ChatRequest): ChatJob {
    this.requests.push(request);
    const script = this.streams.shift() ?? [complete];
    const transport = this;
    let cancel: () => void = () => {};
    const cancelled = new Promise<void>((resolve) => (cancel = resolve));
    return {
      async cancel() {
        transport.cancelled += 1;
        cancel();
      },
      async *[Symbol.asyncIterator]() {
        if (Array.isArray(script)) {
          yield* script;
          return;
        }
        yield* script.before;
        await Promise.race([script.gate, cancelled]);
        if (script.after) {
          yield* script.after;
          return;
        }
        // what @gradio/client does after a cancel: a generic error status
        yield { kind: "status", stage: "error", message: "Connection errored out." } satisfies ChatEvent;
      },
    };
  }
}

function model(transport: ChatTransport, ticks: Array<() => void> = []) {
  let id = 0;
  return new AgentChatModel({
    transport,
    newId: () => `id-${++id}`,
    sleep: async () => {},
    tick: (callback) => {
      ticks.push(callback);
      return () => ticks.splice(ticks.indexOf(callback), 1);
    },
  });
}

/** A model that reads the conversation's kept history from ``history``. */
function keeping(transport: ChatTransport, history: (conversationId: string) => Promise<ChatEntry[]>) {
  let id = 0;
  return new AgentChatModel({ transport, newId: () => `id-${++id}`, sleep: async () => {}, history });
}

const KNOWN = [
  { id: "dev", production: false },
  { id: "prod", production: true },
];

const confirmCard = (dangerous: boolean) =>
  message("confirm_required", "⚠️", {
    thread_id: "conv-1",
    call_id: "call-7",
    digest: "d".repeat(64),
    production: true,
    tool_name: "deploy_dashboard",
    tool_args: { dashboard_id: 42, env_id: "prod" },
    risk: "write",
    risk_level: dangerous ? "dangerous" : "guarded",
    dangerous,
    env_context: "prod",
    prompt: "⚠️ Изменение данных в production",
    subject: { env_id: "dev", dashboards: [{ id: 42, title: "Sales Overview" }] },
    change: "Дашборд «Sales Overview» (#42) из dev будет импортирован в prod.",
  });

describe("AgentChatModel", () => {
  it("streams an answer token by token and resolves its tool cards", async () => {
    const transport = new ScriptedTransport([
      [
        data(message("conversation", "", { conversation_id: "conv-1", model: "offline" })),
        data(
          message("conversation", "", { conversation_id: "conv-1", model: "offline" }),
          message("tool_start", "", { tool: "search_dashboards", run_id: "r1", input: { env_id: "dev" } }),
        ),
        data(
          message("conversation", "", { conversation_id: "conv-1", model: "offline" }),
          message("tool_start", "", { tool: "search_dashboards", run_id: "r1", input: { env_id: "dev" } }),
          message("tool_end", "", { tool: "search_dashboards", run_id: "r1", output: { count: 2 } }),
          message("token", "Нашёл "),
        ),
        data(
          message("conversation", "", { conversation_id: "conv-1", model: "offline" }),
          message("tool_start", "", { tool: "search_dashboards", run_id: "r1", input: { env_id: "dev" } }),
          message("tool_end", "", { tool: "search_dashboards", run_id: "r1", output: { count: 2 } }),
          message("token", "Нашёл 2 дашборда"),
          message("state", "success", { state: "success" }),
        ),
        complete,
      ],
    ]);
    const chat = model(transport);
    await chat.connect("token", "root");
    await chat.send("покажи дашборды");

    const [mine, answer] = chat.messages;
    expect(mine).toMatchObject({ role: "user", text: "покажи дашборды" });
    expect(answer.text).toBe("Нашёл 2 дашборда");
    expect(answer.view?.state).toBe("success");
    expect(answer.view?.tools).toEqual([
      expect.objectContaining({ tool: "search_dashboards", status: "ok", output: { count: 2 } }),
    ]);
    expect(chat.streaming).toBe(false);
    expect(chat.conversationId).toBe("conv-1");
    expect(transport.requests[0]).toMatchObject({ text: "покажи дашборды", action: "send", conversationId: "id-1" });
  });

  it("pauses on confirm_required and resumes with confirm, carrying edited arguments", async () => {
    const transport = new ScriptedTransport([
      [data(confirmCard(false), message("state", "needs_confirmation", { state: "needs_confirmation" })), complete],
      [data(message("tool_start", "", { tool: "deploy_dashboard" }), message("state", "", { state: "started", task_id: "t-9" })), complete],
    ]);
    const chat = model(transport);
    await chat.connect("token");
    await chat.send("deploy dashboard 42 to prod");
    expect(chat.pendingConfirm).toMatchObject({
      toolName: "deploy_dashboard",
      envContext: "prod",
      subject: { envId: "dev", dashboards: [{ id: 42, title: "Sales Overview" }] },
      change: "Дашборд «Sales Overview» (#42) из dev будет импортирован в prod.",
    });
    expect(chat.showProdWarning).toBe(true);
    expect(chat.canConfirm).toBe(true);

    chat.editArgumentText("dashboard_id", "43", 42);
    await chat.confirm();
    expect(transport.requests[1]).toMatchObject({ action: "confirm" });
    expect(JSON.parse(transport.requests[1].text)).toEqual({
      call_id: "call-7",
      digest: "d".repeat(64),
      args: { dashboard_id: 43 },
    });
    expect(chat.pendingConfirm).toBeNull();
    expect(chat.messages.at(-1)?.view).toMatchObject({ state: "started", taskId: "t-9" });
  });

  it("edits lists and objects as JSON, and holds the confirm while one does not parse", async () => {
    const transport = new ScriptedTransport([
      [data(confirmCard(false), message("state", "", { state: "needs_confirmation" })), complete],
      [data(message("state", "", { state: "success" })), complete],
    ]);
    const chat = model(transport);
    await chat.connect("token");
    await chat.send("migrate");
    chat.editArgumentText("database_mapping", '{"1": ', { "1": 2 });
    expect(chat.canConfirm).toBe(false);
    chat.editArgumentText("database_mapping", '{"1": 5}', { "1": 2 });
    chat.editArgumentText("tags", '["a", "b"]', ["a"]);
    chat.editArgumentText("published", "true", false);
    expect(chat.canConfirm).toBe(true);
    await chat.confirm();
    expect(JSON.parse(transport.requests[1].text).args).toEqual({
      database_mapping: { "1": 5 },
      tags: ["a", "b"],
      published: true,
    });
  });

  it("warns of production as the card says, whatever the environment's name", async () => {
    const transport = new ScriptedTransport([
      [data(confirmCard(false), message("state", "", { state: "needs_confirmation" })), complete],
    ]);
    const chat = model(transport);
    chat.keepKnownEnvironment([
      { id: "live", production: true },
      { id: "dev", production: false },
    ]);
    chat.updateActiveEnv("live");
    expect(chat.showProdWarning).toBe(true);
    chat.updateActiveEnv("dev");
    expect(chat.showProdWarning).toBe(false);
    await chat.connect("token");
    await chat.send("deploy");
    expect(chat.showProdWarning).toBe(true); // the card: production
  });

  it("holds a dangerous confirm behind a countdown", async () => {
    const ticks: Array<() => void> = [];
    const transport = new ScriptedTransport([
      [data(confirmCard(true), message("state", "", { state: "needs_confirmation" })), complete],
    ]);
    const chat = model(transport, ticks);
    await chat.connect("token");
    await chat.send("удали всё");
    expect(chat.dangerousCountdownActive).toBe(true);
    expect(chat.canConfirm).toBe(false);
    await chat.confirm(); // ignored while counting down
    expect(transport.requests).toHaveLength(1);
    for (let second = 0; second < 4; second++) ticks[0]();
    expect(chat.dangerousCountdownActive).toBe(true); // five seconds: one still to go
    expect(chat.canConfirm).toBe(false);
    ticks[0]();
    expect(chat.dangerousCountdownActive).toBe(false);
    expect(chat.canConfirm).toBe(true);
    expect(ticks).toHaveLength(0); // the timer is stopped
  });

  it("rejects a pending action with a reject submit", async () => {
    const transport = new ScriptedTransport([
      [data(confirmCard(false), message("state", "", { state: "needs_confirmation" })), complete],
      [data(message("token", "Отменено."), message("state", "", { state: "success" })), complete],
    ]);
    const chat = model(transport);
    await chat.connect("token");
    await chat.send("deploy dashboard 42 to prod");
    await chat.reject();
    expect(transport.requests.map((request) => request.action)).toEqual(["send", "reject"]);
    expect(chat.pendingConfirm).toBeNull();
  });

  it("keeps the partial text when the person stops the answer, and treats Gradio's error as the cancel", async () => {
    let open: () => void = () => {};
    const gate = new Promise<void>((resolve) => (open = resolve));
    const started = message("tool_start", "", { tool: "get_health_summary", run_id: "r1", input: {} });
    const transport = new ScriptedTransport([
      { before: [data(started, message("token", "Начинаю отвечать"))], gate },
    ]);
    const chat = model(transport);
    await chat.connect("token");
    const sending = chat.send("расскажи подробно");
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(chat.streaming).toBe(true);
    await chat.cancel();
    await sending;
    open();
    const answer = chat.messages.at(-1);
    expect(answer).toMatchObject({ text: "Начинаю отвечать", partial: true });
    expect(answer?.view?.state).toBe("cancelled");
    expect(answer?.view?.tools.map((card) => card.status)).toEqual(["stopped"]); // nothing spins on
    expect(chat.error).toBeNull();
    expect(chat.connection).toBe("connected");
    expect(transport.cancelled).toBe(1);
  });

  it("keeps a message sent while an answer streams, shows it waiting, and sends it when the answer ends", async () => {
    let open: () => void = () => {};
    const gate = new Promise<void>((resolve) => (open = resolve));
    const done = [data(message("token", "Готово"), message("state", "success", { state: "success" })), complete];
    const transport = new ScriptedTransport([{ before: [data(message("token", "Отвечаю"))], gate, after: done }, done]);
    const chat = model(transport);
    await chat.connect("token");
    const first = chat.send("покажи дашборды");
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(chat.streaming).toBe(true);
    await chat.send("а что сломано?");
    await chat.send("и в prod?");
    expect(chat.queued.map((waiting) => waiting.text)).toEqual(["а что сломано?", "и в prod?"]);
    expect(transport.requests.map((request) => request.text)).toEqual(["покажи дашборды"]); // nothing sent yet
    open();
    await first;
    expect(chat.queued).toEqual([]);
    expect(transport.requests.map((request) => request.text)).toEqual(["покажи дашборды", "а что сломано?", "и в prod?"]);
    expect(chat.messages.filter((entry) => entry.role === "user").map((entry) => entry.text)).toEqual([
      "покажи дашборды",
      "а что сломано?",
      "и в prod?",
    ]);
  });

  it("holds a waiting message while a card waits for its answer, and takes one back on request", async () => {
    let open: () => void = () => {};
    const gate = new Promise<void>((resolve) => (open = resolve));
    const paused = [data(confirmCard(false), message("state", "needs_confirmation", { state: "needs_confirmation" })), complete];
    const done = [data(message("state", "success", { state: "success" })), complete];
    const transport = new ScriptedTransport([{ before: [], gate, after: paused }, done, done]);
    const chat = model(transport);
    await chat.connect("token");
    const first = chat.send("deploy dashboard 42 to prod");
    await new Promise((resolve) => setTimeout(resolve, 0));
    await chat.send("потом покажи дашборды");
    await chat.send("и это тоже");
    const second = chat.queued[1];
    expect(second && chat.unqueue(second.id)?.text).toBe("и это тоже");
    open();
    await first;
    expect(chat.pendingConfirm).not.toBeNull();
    expect(chat.queued.map((waiting) => waiting.text)).toEqual(["потом покажи дашборды"]); // not into the card's way
    await chat.reject();
    expect(transport.requests.map((request) => request.action)).toEqual(["send", "reject", "send"]);
    expect(chat.queued).toEqual([]);
  });

  it("says it is thinking until the answer shows something, and asks again after a failure that may pass", async () => {
    let open: () => void = () => {};
    const gate = new Promise<void>((resolve) => (open = resolve));
    // the model's endpoint failed: the turn had begun, so the page does not send it again by itself
    const failed = [data(message("error", "модель недоступна", { code: "LLM_UNAVAILABLE" }), message("state", "", { state: "failed" })), complete];
    const answered = [data(message("token", "Готово"), message("state", "", { state: "success" })), complete];
    const transport = new ScriptedTransport([{ before: [], gate, after: failed }, answered]);
    const chat = model(transport);
    await chat.connect("token");
    const first = chat.send("покажи дашборды");
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(chat.thinking).toBe(true);
    open();
    await first;
    expect(chat.thinking).toBe(false);
    expect(chat.messages.at(-1)?.view?.errors.map((problem) => problem.code)).toEqual(["LLM_UNAVAILABLE"]);
    expect(chat.askAgainOffered).toBe(true);
    expect(transport.requests).toHaveLength(1);
    await chat.askAgain();
    expect(transport.requests.map((request) => request.text)).toEqual(["покажи дашборды", "покажи дашборды"]);
    expect(chat.messages.at(-1)?.text).toBe("Готово");
  });

  it("sends a command refused while a part restarts again by itself, after growing pauses: a pause, not a failure", async () => {
    const refused = (code: string) => [data(message("error", code, { code }), message("state", "", { state: "failed" })), complete];
    const answered = [data(message("token", "Нашёл 2 дашборда"), message("state", "", { state: "success" })), complete];
    const transport = new ScriptedTransport([refused("CONVO_UNAVAILABLE"), refused("BUSY"), refused("NOT_READY"), answered]);
    const slept: number[] = [];
    const seen: Array<{ resending: unknown; thinking: boolean; errors: number }> = [];
    const chat: AgentChatModel = new AgentChatModel({
      transport,
      sleep: async (ms) => {
        slept.push(ms);
        seen.push({ resending: chat.resending, thinking: chat.thinking, errors: chat.messages.at(-1)?.view?.errors.length ?? -1 });
      },
    });
    await chat.connect("token");
    await chat.send("покажи дашборды");
    expect(slept).toEqual(RESEND_DELAYS_MS.slice(0, 3));
    // while paused the answer is awaited (no error shown) and the person may stop it
    expect(seen).toEqual([1, 2, 3].map((attempt) => ({ resending: { attempt, of: 5 }, thinking: true, errors: 0 })));
    expect(transport.requests.map((request) => request.text)).toEqual(Array(4).fill("покажи дашборды"));
    expect(chat.messages.map((entry) => entry.text)).toEqual(["покажи дашборды", "Нашёл 2 дашборда"]);
    expect([chat.error, chat.resending, chat.streaming]).toEqual([null, null, false]);
  });

  it("sends a confirm again the same way, and gives up after the last pause with the failure told", async () => {
    const busy = [data(message("error", "busy", { code: "BUSY" }), message("state", "", { state: "failed" })), complete];
    const card = [data(confirmCard(false), message("state", "", { state: "needs_confirmation" })), complete];
    const transport = new ScriptedTransport([card, ...Array(RESEND_DELAYS_MS.length + 1).fill(busy)]);
    const chat = model(transport);
    await chat.connect("token");
    await chat.send("задеплой дашборд 42 в prod");
    await chat.confirm();
    const confirms = transport.requests.filter((request) => request.action === "confirm");
    expect(confirms).toHaveLength(RESEND_DELAYS_MS.length + 1);
    expect(new Set(confirms.map((request) => request.text)).size).toBe(1); // the same card, the same digest
    expect(chat.messages.at(-1)?.view?.errors.map((problem) => problem.code)).toEqual(["BUSY"]);
    expect(chat.askAgainOffered).toBe(true);
  });

  it("does not send again by itself what began to run, nor what a stop ended", async () => {
    const begun = [
      data(message("tool_start", "", { tool: "search_dashboards", run_id: "r1" }), message("error", "convo", { code: "CONVO_UNAVAILABLE" })),
      complete,
    ];
    const busy = [data(message("error", "busy", { code: "BUSY" }), message("state", "", { state: "failed" })), complete];
    const transport = new ScriptedTransport([begun, busy]);
    let stop: () => void = () => {};
    const chat: AgentChatModel = new AgentChatModel({
      transport,
      sleep: () => new Promise<void>((resolve) => ((stop = resolve), void chat.cancel())),
    });
    await chat.connect("token");
    await chat.send("покажи дашборды");
    expect(transport.requests).toHaveLength(1);
    await chat.send("ещё раз");
    stop();
    expect(transport.requests).toHaveLength(2); // stopped during its pause: not sent a third time
    expect(chat.messages.at(-1)?.view?.errors.map((problem) => problem.code)).toEqual(["BUSY"]);
    expect([chat.resending, chat.streaming]).toEqual([null, false]);
  });

  it("connects again and sends again a command whose stream was lost before it said anything", async () => {
    const lost: ChatEvent[] = [{ kind: "status", stage: "error", message: "Connection errored out." }];
    const answered = [data(message("token", "Ответ"), message("state", "", { state: "success" })), complete];
    const transport = new ScriptedTransport([lost, answered]);
    const asked: string[] = [];
    const chat = keeping(transport, async (id) => {
      asked.push(id);
      throw new ApiError("GET", `/api/assistant/conversations/${id}/history`, 404); // not taken: none yet
    });
    await chat.connect("token");
    await chat.send("вопрос");
    expect(asked).toEqual([chat.conversationId]); // whether it was taken, asked before sending again
    expect(transport.connects).toBe(2);
    expect(chat.messages.map((entry) => entry.text)).toEqual(["вопрос", "Ответ"]);
    expect([chat.connection, chat.error]).toEqual(["connected", null]);
  });

  it("does not send again a message the agent took before its stream was lost: its kept answer shows", async () => {
    const lost: ChatEvent[] = [
      data(message("conversation", "", { conversation_id: "conv-1", model: "offline" })),
      { kind: "status", stage: "error", message: "Connection errored out." },
    ];
    const transport = new ScriptedTransport([lost]);
    const kept = historyEntries([
      { id: "m1", role: "user", content: "вопрос", metadata: {}, partial: false },
      { id: "m2", role: "assistant", content: "Отв", metadata: {}, partial: true },
    ]);
    const chat = keeping(transport, async () => kept);
    await chat.connect("token");
    await chat.send("вопрос");
    expect(transport.requests).toHaveLength(1); // taken once: not sent a second time
    expect(chat.messages.map((entry) => [entry.role, entry.text, entry.partial])).toEqual([
      ["user", "вопрос", false],
      ["assistant", "Отв", true],
    ]);
    expect([chat.streaming, chat.resending]).toEqual([false, null]);
  });

  it("sends again a lost message the conversation does not hold yet, even one like a message before it", async () => {
    const answered = [data(message("token", "Ответ"), message("state", "", { state: "success" })), complete];
    const lost: ChatEvent[] = [{ kind: "status", stage: "error", message: "Connection errored out." }];
    const transport = new ScriptedTransport([answered, lost, answered]);
    const kept = historyEntries([
      { id: "m1", role: "user", content: "вопрос", metadata: {}, partial: false },
      { id: "m2", role: "assistant", content: "Ответ", metadata: {}, partial: false },
    ]);
    const chat = keeping(transport, async () => kept);
    await chat.connect("token");
    await chat.send("вопрос");
    await chat.send("вопрос"); // asked again, in the same words: the first is all convo holds
    expect(transport.requests).toHaveLength(3);
    expect(chat.messages.map((entry) => entry.text)).toEqual(["вопрос", "Ответ", "вопрос", "Ответ"]);
  });

  it("does not send again by itself when whether the agent took the message cannot be told", async () => {
    const lost: ChatEvent[] = [{ kind: "status", stage: "error", message: "Connection errored out." }];
    const transport = new ScriptedTransport([lost]);
    const chat = keeping(transport, async (id) => {
      throw new ApiError("GET", `/api/assistant/conversations/${id}/history`, 503);
    });
    await chat.connect("token");
    await chat.send("вопрос");
    expect(transport.requests).toHaveLength(1);
    expect(chat.error?.code).toBe("NETWORK"); // the failure as it was: Retry is the person's
    expect(chat.messages.map((entry) => entry.role)).toEqual(["user", "assistant"]);
  });

  it("says the connection is lost when the agent cannot be reached again, and Retry still sends the message", async () => {
    const lost: ChatEvent[] = [{ kind: "status", stage: "error", message: "Connection errored out." }];
    const answered = [data(message("token", "Ответ"), message("state", "", { state: "success" })), complete];
    const transport = new ScriptedTransport([lost, answered]);
    const chat = model(transport);
    await chat.connect("token");
    transport.connectFailures = 1 + RECONNECT_ATTEMPTS; // the agent stays away through the pause
    await chat.send("вопрос");
    expect([chat.connection, chat.error?.code, chat.streaming]).toEqual(["lost", "NETWORK", false]);
    expect(transport.requests).toHaveLength(1);
    expect(chat.messages.map((entry) => entry.role)).toEqual(["user", "assistant"]);
    await chat.retry();
    expect(chat.messages.map((entry) => entry.text)).toEqual(["вопрос", "Ответ"]);
  });

  it("offers to ask again after a read that timed out, not after a write whose fate is unknown", async () => {
    const timedOut = (tool: string, retryable: boolean) => [
      data(
        message("tool_start", "", { tool, run_id: "r1" }),
        message("tool_timeout", "no answer in 30 s", { tool, retryable, is_write_tool: !retryable }),
        message("state", "", { state: "failed" }),
      ),
      complete,
    ];
    const transport = new ScriptedTransport([timedOut("superset_execute_sql", true), timedOut("deploy_dashboard", false)]);
    const chat = model(transport);
    await chat.connect("token");
    await chat.send("сколько заказов?");
    expect(chat.messages.at(-1)?.view?.tools.map((card) => card.status)).toEqual(["timeout"]);
    expect(chat.askAgainOffered).toBe(true);
    await chat.send("задеплой дашборд 1 в prod");
    expect(chat.askAgainOffered).toBe(false); // Superset must be checked before a write goes again
  });

  type TaskRead = { status: string; progress: number; result: Record<string, unknown> | null; error: null };

  /** A message that starts task ``taskId``, the task read as ``read`` answers (the n-th read; a
   * throw is a failed read) until ``last`` reads were made; the ids asked and the pauses slept. */
  async function followed(taskId: string, read: (n: number) => TaskRead, last: number) {
    const started = [data(message("state", "", { state: "started", task_id: taskId })), complete];
    const asked: string[] = [];
    const pauses: number[] = [];
    let ended: () => void = () => {};
    const finished = new Promise<void>((resolve) => (ended = resolve));
    const chat = new AgentChatModel({
      transport: new ScriptedTransport([started]),
      sleep: async (ms) => void pauses.push(ms),
      tasks: {
        async task(id: string) {
          asked.push(id);
          if (asked.length === last) setTimeout(ended, 0);
          if (asked.length > last) throw new Error("read after the end");
          return read(asked.length);
        },
      },
    });
    await chat.connect("token");
    await chat.send("сделай бэкап prod");
    await finished;
    await new Promise((resolve) => setTimeout(resolve, 10)); // a read after the last would come now
    return { chat, asked, pauses };
  }

  it("follows a started task to its end, without being asked", async () => {
    const reads: TaskRead[] = [
      { status: "running", progress: 40, result: null, error: null },
      { status: "running", progress: 80, result: null, error: null },
      { status: "success", progress: 100, result: { deployed: 42 }, error: null },
    ];
    const { chat, asked, pauses } = await followed("t-1", (n) => reads[n - 1], reads.length);
    expect(asked).toEqual(["t-1", "t-1", "t-1"]); // and no read after it ended
    expect(pauses).toEqual([500, 500, 500]); // read soon: most tasks end within seconds
    expect(chat.messages.at(-1)?.view?.task).toEqual({ status: "success", progress: 100, result: { deployed: 42 }, error: null });
  });

  it("reads a long task less often, every 3 s at most, and gives up after five failed reads", async () => {
    const running = (n: number): TaskRead => {
      if (n > 10) throw new Error("ops unreachable");
      return { status: "running", progress: n, result: null, error: null };
    };
    const { chat, asked, pauses } = await followed("t-2", running, 15);
    expect(pauses).toEqual([...TASK_POLL_MS, ...Array(15 - TASK_POLL_MS.length).fill(3000)]);
    expect(asked).toHaveLength(15); // ten read, then five failures in a row: no sixth
    expect(chat.messages.at(-1)?.view?.task?.progress).toBe(10);
  });

  it("shows a permission-denied card with its alternatives until closed", async () => {
    const transport = new ScriptedTransport([
      [
        data(
          message("permission_denied", "", {
            tool_name: "deploy_dashboard",
            required_role: "admin",
            user_role: "analyst",
            alternatives: [{ action: "get_health_summary", prompt: "Запросить отчёт о состоянии" }],
          }),
          message("state", "", { state: "denied" }),
        ),
        complete,
      ],
    ]);
    const chat = model(transport);
    await chat.connect("token");
    await chat.send("задеплой дашборд 1 в prod");
    expect(chat.permissionAlternatives).toEqual([{ action: "get_health_summary", prompt: "Запросить отчёт о состоянии" }]);
    expect(chat.pendingConfirm).toBeNull();
    chat.dismissDenied();
    expect(chat.permissionAlternatives).toBeNull();
  });

  it("tries to connect five times five seconds apart, then says the connection is lost; retry resends", async () => {
    const slept: number[] = [];
    const transport = new ScriptedTransport([[data(message("state", "", { state: "success" })), complete]]);
    transport.connectFailures = 5;
    const chat = new AgentChatModel({ transport, sleep: async (ms) => void slept.push(ms) });
    expect(await chat.connect("token")).toBe(false);
    expect(transport.connects).toBe(5);
    expect(slept).toEqual([5_000, 5_000, 5_000, 5_000]);
    expect(chat.connection).toBe("lost");
    expect(chat.error?.code).toBe("NETWORK");
    expect(await chat.connect("token")).toBe(true);
    expect(chat.connection).toBe("connected");
  });

  it("detects a stream lost mid-answer and offers a retry that sends the message again", async () => {
    const transport = new ScriptedTransport([
      [data(message("token", "Отв")), { kind: "status", stage: "error", message: "Connection errored out." }],
      [data(message("token", "Ответ"), message("state", "", { state: "success" })), complete],
    ]);
    const chat = model(transport);
    await chat.connect("token");
    await chat.send("вопрос");
    expect(chat.connection).toBe("lost");
    expect(chat.error?.code).toBe("NETWORK");
    await chat.retry();
    expect(transport.requests.map((request) => request.text)).toEqual(["вопрос", "вопрос"]);
    expect(chat.messages.map((entry) => entry.text)).toEqual(["вопрос", "Ответ"]);
    expect(chat.error).toBeNull();
  });

  it("refuses unsupported and oversized files in the page", () => {
    const file = (name: string, size = 10) => new File([new Uint8Array(size)], name);
    const limit = 10 * 1024 * 1024; // 10 MB, convo's and docparse's limit too
    expect(
      AgentChatModel.rejectFiles([file("tool.exe"), file("report.pdf"), file("big.xlsx", limit + 1), file("full.csv", limit)]),
    ).toEqual([
      { file: "tool.exe", reason: "unsupportedFile" },
      { file: "big.xlsx", reason: "fileTooLarge" },
    ]);
  });

  it("reads UIContext from the URL and keeps the environment selector in step with it", () => {
    const transport = new ScriptedTransport([]);
    const chat = model(transport);
    chat.uiContext = uiContextFromUrl(
      new URL("https://example.test/agent?objectType=dashboard&objectId=42&objectName=Sales&envId=dev"),
    );
    expect(chat.contextPillLabel).toBe("дашборд Sales @dev");
    chat.lang = "en";
    expect(chat.contextPillLabel).toBe("dashboard Sales @dev");
    expect(chat.isProdContext).toBe(false);
    chat.updateActiveEnv("prod");
    expect(chat.uiContext?.envId).toBe("prod");
    expect(chat.isProdContext).toBe(true);
    chat.updateActiveEnv("production-eu");
    expect(chat.showProdWarning).toBe(true);
    chat.updateActiveEnv("staging");
    expect(chat.showProdWarning).toBe(false);
    expect([normaliseEnv("production"), normaliseEnv("test"), normaliseEnv("local"), normaliseEnv("qa")]).toEqual([
      "prod",
      "staging",
      "dev",
      null,
    ]);
    expect(uiContextFromUrl(new URL("https://example.test/agent"))).toBeNull();
    expect(uiContextFromUrl(new URL("https://example.test/agent?objectType=robot&objectId=x&envId=dev"))).toMatchObject({
      objectType: null,
      objectId: null,
    });
    // an id the agent would refuse every turn for (19 digits) is left out, as a malformed one is
    expect(uiContextFromUrl(new URL(`https://example.test/agent?objectType=dashboard&objectId=${"1".repeat(19)}`))?.objectId).toBeNull();
  });

  it("follows what the Superset around the drawer shows, in that Superset's environment", () => {
    const transport = new ScriptedTransport([]);
    const chat = model(transport);
    chat.lang = "en";
    chat.uiContext = uiContextFromUrl(new URL("https://example.test/agent?embedded=1&envId=dev"));
    chat.followFocus({ objectType: "dashboard", objectId: "3", objectName: "Legacy KPIs", route: "/superset/dashboard/3/" }, "dev");
    expect(chat.contextPillLabel).toBe("dashboard Legacy KPIs @dev");
    chat.updateActiveEnv("prod"); // the person looks at prod for a while
    chat.followFocus({ objectType: "sqllab", objectId: null, objectName: null, route: "/sqllab/" }, "dev");
    expect([chat.contextPillLabel, chat.activeEnv]).toEqual(["SQL Lab @dev", "dev"]); // the new object is dev's
    chat.followFocus({ objectType: null, objectId: null, objectName: null, route: "/dashboard/list/" }, "dev");
    expect(chat.contextPillLabel).toBe("");
  });

  it("refuses environment ids a link could plant, and forgets one ops does not have", () => {
    const planted = ["prod/maintenance/end#", "prod#x", "prod?x=1", "prod%2Fend", "..", "../prod", "a b", "PROD", "p".repeat(200)];
    for (const envId of planted) {
      const url = new URL("https://example.test/agent?objectType=dashboard&objectId=1");
      url.searchParams.set("envId", envId);
      expect(uiContextFromUrl(url)?.envId, envId).toBeNull();
      expect(isEnvId(envId), envId).toBe(false);
    }
    const chat = model(new ScriptedTransport([]));
    chat.uiContext = uiContextFromUrl(new URL("https://example.test/agent?objectType=dashboard&objectId=1&envId=nowhere"));
    expect(chat.activeEnv).toBe("nowhere");
    chat.keepKnownEnvironment(KNOWN);
    expect(chat.activeEnv).toBe("dev"); // dropped, and the default shown in its place
    chat.updateActiveEnv("prod/maintenance/end#");
    expect(chat.activeEnv).toBeNull();
    chat.updateActiveEnv("prod");
    chat.keepKnownEnvironment(KNOWN);
    expect(chat.activeEnv).toBe("prod");
  });

  it("always shows an environment: the person's last choice while it exists, else the first non-production one", () => {
    const kept = new Map<string, string>();
    const memory = { getItem: (key: string) => kept.get(key) ?? null, setItem: (key: string, value: string) => void kept.set(key, value) };
    const first = new AgentChatModel({ transport: new ScriptedTransport([]), memory });
    first.username = "anna";
    first.keepKnownEnvironment(KNOWN);
    expect(first.activeEnv).toBe("dev");
    expect(kept.size).toBe(0); // a default is not a choice
    first.updateActiveEnv("prod");
    const next = new AgentChatModel({ transport: new ScriptedTransport([]), memory });
    next.username = "anna";
    next.keepKnownEnvironment(KNOWN);
    expect(next.activeEnv).toBe("prod");
    const other = new AgentChatModel({ transport: new ScriptedTransport([]), memory });
    other.username = "oleg"; // another person's choice is not theirs
    other.keepKnownEnvironment(KNOWN);
    expect(other.activeEnv).toBe("dev");
    const gone = new AgentChatModel({ transport: new ScriptedTransport([]), memory });
    gone.username = "anna";
    gone.keepKnownEnvironment([{ id: "staging", production: false }]); // prod no longer configured
    expect(gone.activeEnv).toBe("staging");
  });

  it("tells the agent the page's language with every message", async () => {
    const transport = new ScriptedTransport([[complete]]);
    const chat = model(transport);
    chat.lang = "en";
    await chat.send("SELECT 1");
    expect(JSON.parse(transport.requests[0].uiContext)).toEqual({ lang: "en" });
  });

  it("gives a debug snapshot that survives JSON and a new conversation that starts clean", async () => {
    const transport = new ScriptedTransport([
      [data(confirmCard(false), message("state", "", { state: "needs_confirmation" })), complete],
    ]);
    const chat = model(transport);
    await chat.connect("token", "root");
    await chat.send("deploy dashboard 42 to prod");
    const snapshot = JSON.parse(JSON.stringify(chat.debugSnapshot()));
    expect(snapshot).toMatchObject({
      conv_id: "id-1",
      pending_thread_id: "conv-1",
      connection: "connected",
      streaming: false,
      user: "root",
      message_count: 2,
      active_tool_calls: 0,
      error: null,
    });
    chat.newConversation();
    expect(chat.messages).toEqual([]);
    expect(chat.pendingConfirm).toBeNull();
    expect(chat.conversationId).not.toBe("id-1");
  });
});

describe("a session that ended", () => {
  const refusedToken = (): ChatEvent[] => [
    data(message("error", "token has expired", { code: "UNAUTHORIZED" }), message("state", "", { state: "failed" })),
    complete,
  ];

  /** A model whose session renews into `renewals` (then into nothing), and current() into `current`. */
  function withSessionEnd(transport: ChatTransport, renewals: string[] = [], current: string | null = null) {
    let id = 0;
    const ended: number[] = [];
    const renewed: string[] = [];
    const chat = new AgentChatModel({
      transport,
      newId: () => `id-${++id}`,
      sleep: async () => {},
      session: {
        current: async () => current,
        renew: async (failed) => (renewed.push(failed), renewals.shift() ?? null),
        ended: () => ended.push(chat.messages.length),
      },
    });
    return { chat, ended, renewed };
  }

  const answered = [data(message("token", "Готово."), message("state", "", { state: "success" })), complete];

  it("renews a refused token once and asks again, the person none the wiser", async () => {
    const transport = new ScriptedTransport([refusedToken(), answered]);
    const { chat, ended, renewed } = withSessionEnd(transport, ["fresh-token"]);
    await chat.connect("old-token");
    await chat.send("покажи дашборды");
    expect(renewed).toEqual(["old-token"]);
    expect(transport.requests.map((request) => request.text)).toEqual(["покажи дашборды", "покажи дашборды"]);
    expect(chat.messages.map((entry) => entry.role)).toEqual(["user", "assistant"]);
    expect(chat.messages[1].view?.state).toBe("success");
    expect(ended).toEqual([]);
  });

  it("ends the session when the renewed token is refused too (no second renewal, no loop)", async () => {
    const transport = new ScriptedTransport([refusedToken(), refusedToken()]);
    const { chat, ended, renewed } = withSessionEnd(transport, ["fresh-token", "never-asked"]);
    await chat.connect("old-token");
    await chat.send("покажи дашборды");
    expect(renewed).toEqual(["old-token"]);
    expect(ended).toEqual([0]);
    expect(chat.draft).toBe("покажи дашборды");
  });

  it("connects with a fresher token before a turn, so that no turn outlives its token", async () => {
    const transport = new ScriptedTransport([answered]);
    const { chat } = withSessionEnd(transport, [], "renewed-ahead");
    await chat.connect("old-token");
    await chat.send("покажи дашборды");
    expect(transport.connects).toBe(2);
    expect(chat.messages[1].view?.state).toBe("success");
  });

  it("gives a refused message back as the draft, before the page is told", async () => {
    const { chat, ended } = withSessionEnd(new ScriptedTransport([refusedToken()]));
    await chat.connect("expired-token");
    chat.draft = "и ещё вот это";
    await chat.send("покажи дашборды");
    expect(ended).toEqual([0]); // told once, with the refused message already out of the chat
    expect(chat.messages).toEqual([]);
    expect(chat.draft).toBe("покажи дашборды\nи ещё вот это");
  });

  it("drops only the answer to a card when the confirm is refused: the card waits in the conversation", async () => {
    const transport = new ScriptedTransport([
      [data(confirmCard(false), message("state", "", { state: "needs_confirmation" })), complete],
      refusedToken(),
    ]);
    const { chat, ended } = withSessionEnd(transport);
    await chat.connect("token");
    await chat.send("deploy dashboard 42 to prod");
    await chat.confirm();
    expect(ended).toEqual([2]);
    expect(chat.messages.map((entry) => entry.role)).toEqual(["user", "assistant"]);
    expect(chat.draft).toBe("");
  });

  it("is not another error: a busy conversation keeps the turn and the session", async () => {
    const busy = [data(message("error", "busy", { code: "BUSY" }), message("state", "", { state: "failed" })), complete];
    const { chat, ended } = withSessionEnd(new ScriptedTransport([busy]));
    await chat.connect("token");
    await chat.send("покажи дашборды");
    expect(ended).toEqual([]);
    expect(chat.messages).toHaveLength(2);
  });
});

describe("conversations", () => {
  it("turns stored messages into chat entries, and a reopened pause is offered for confirmation again", async () => {
    const entries = historyEntries([
      { id: "m1", role: "user", content: "deploy dashboard 42 to prod", metadata: {}, partial: false },
      {
        id: "m2",
        role: "assistant",
        content: "",
        metadata: {
          events: [
            { type: "tool_start", tool: "search_dashboards", run_id: "r1", input: {} },
            { type: "tool_end", tool: "search_dashboards", run_id: "r1" },
            confirmCard(false).metadata,
            { type: "state", state: "needs_confirmation" },
          ],
        },
        partial: false,
      },
    ]);
    expect(entries.map((entry) => entry.role)).toEqual(["user", "assistant"]);
    expect(entries[1].view?.tools).toEqual([expect.objectContaining({ tool: "search_dashboards", status: "ok" })]);

    const transport = new ScriptedTransport([[data(message("state", "", { state: "started" })), complete]]);
    const chat = model(transport);
    await chat.connect("token");
    chat.openConversation("conv-9", entries, true);
    expect(chat.conversationId).toBe("conv-9");
    expect(chat.activeElsewhere).toBe(true);
    expect(chat.pendingConfirm?.toolName).toBe("deploy_dashboard");
    await chat.confirm();
    expect(transport.requests[0]).toMatchObject({ action: "confirm", conversationId: "conv-9" });
  });

  it("reads an archived conversation without offering its card or sending, until it is restored", async () => {
    const entries = historyEntries([
      { id: "m1", role: "user", content: "deploy dashboard 42 to prod", metadata: {}, partial: false },
      {
        id: "m2",
        role: "assistant",
        content: "",
        metadata: { events: [confirmCard(false).metadata, { type: "state", state: "needs_confirmation" }] },
        partial: false,
      },
    ]);
    const transport = new ScriptedTransport([[data(message("state", "", { state: "success" })), complete]]);
    const chat = model(transport);
    await chat.connect("token");
    chat.openConversation("conv-9", entries, false, true);
    expect(chat.archived).toBe(true);
    expect(chat.pendingConfirm).toBeNull(); // a confirm would be refused: none is offered
    await chat.send("and now?");
    expect(transport.requests).toEqual([]);
    expect(chat.messages).toHaveLength(2);
    await chat.reopened();
    await chat.send("and now?");
    expect(transport.requests).toEqual([expect.objectContaining({ action: "send", conversationId: "conv-9" })]);
    chat.newConversation();
    expect(chat.archived).toBe(false);
  });

  it("learns from a refused turn that the conversation was archived elsewhere, and keeps what waits", async () => {
    const refused = message("error", "Беседа в архиве.", { code: "CONVERSATION_ARCHIVED" });
    let open: () => void = () => {};
    const gate = new Promise<void>((resolve) => (open = resolve));
    const transport = new ScriptedTransport([
      { before: [], gate, after: [data(refused, message("state", "", { state: "failed" })), complete] },
      [data(message("state", "", { state: "success" })), complete],
    ]);
    const chat = model(transport);
    await chat.connect("token");
    const first = chat.send("покажи дашборды");
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(chat.streaming).toBe(true);
    await chat.send("и ещё одно"); // typed while the first one streams: it waits
    open();
    await first;
    expect(chat.archived).toBe(true);
    expect(chat.error?.code).toBe("CONVERSATION_ARCHIVED");
    expect(chat.queued.map((waiting) => waiting.text)).toEqual(["и ещё одно"]);
    expect(transport.requests).toHaveLength(1);
    await chat.reopened();
    expect(transport.requests.map((request) => request.text)).toEqual(["покажи дашборды", "и ещё одно"]);
  });

  it("marks a stopped answer from history as cancelled and partial, its unanswered call stopped", async () => {
    const started: StreamEvent = { type: "tool_start", tool: "get_health_summary", run_id: "r1", input: {} };
    const [entry, unfinished] = historyEntries([
      { id: "m1", role: "assistant", content: "Начинаю", metadata: { events: [started] }, partial: true },
      { id: "m2", role: "assistant", content: "", metadata: { events: [started] }, partial: false },
    ]);
    expect(entry).toMatchObject({ text: "Начинаю", partial: true });
    expect(entry.view?.state).toBe("cancelled");
    // reopened, no card of a finished conversation spins, whatever it kept
    expect([entry, unfinished].map((item) => item.view?.tools[0]?.status)).toEqual(["stopped", "stopped"]);
  });

  it("keeps the sidebar's list, archived filter, archive and restore in step with convo", async () => {
    const stored = [
      { id: "a", title: "первый", message_count: 2, is_archived: false, updated_at: "2026-11-30T10:00:00Z", last_message_at: null },
    ];
    const calls: string[] = [];
    const api = {
      list: async (archived: boolean) => (
        calls.push(`list:${archived}`), { items: stored.filter((item) => item.is_archived === archived), next: null }
      ),
      history: async () => [],
      archive: async (id: string) => void (calls.push(`archive:${id}`), (stored[0].is_archived = true)),
      restore: async (id: string) => void (calls.push(`restore:${id}`), (stored[0].is_archived = false)),
      active: async () => false,
    };
    const list = new ConversationList(api);
    await list.refresh();
    expect(list.items.map((item) => item.id)).toEqual(["a"]);
    await list.archive("a");
    expect(list.items).toEqual([]);
    await list.toggleArchived();
    expect(list.showArchived).toBe(true);
    expect(list.items.map((item) => item.id)).toEqual(["a"]);
    await list.restore("a");
    expect(list.items).toEqual([]);
    expect(calls).toEqual(["list:false", "archive:a", "list:false", "list:true", "restore:a", "list:true"]);
  });

  it("closes the conversation archived while open, not one opened from the archive before convo answered", async () => {
    const chat = model(new ScriptedTransport([]));
    chat.openConversation("a", []);
    await chat.closeArchived("a", Promise.resolve(true));
    expect(chat.conversationId).not.toBe("a"); // archived while open: the page goes on in a new one
    expect(chat.archived).toBe(false);

    let answer: (archived: boolean) => void = () => {};
    const archiving = chat.closeArchived("a", new Promise<boolean>((resolve) => (answer = resolve)));
    chat.openConversation("a", [], false, true); // opened from the archive list while convo archives it
    answer(true);
    await archiving;
    expect([chat.conversationId, chat.archived]).toEqual(["a", true]);

    chat.openConversation("b", []);
    const stale = chat.closeArchived("b", new Promise<boolean>((resolve) => (answer = resolve)));
    chat.openConversation("b", []); // opened again from a list not yet refreshed: read as archived once it is
    answer(true);
    await stale;
    expect([chat.conversationId, chat.archived]).toEqual(["b", true]);
    await chat.closeArchived("b", Promise.resolve(false)); // refused: nothing changes
    expect(chat.conversationId).toBe("b");
  });

  it("says why an archive was refused and keeps the list as it was", async () => {
    const busy = new ApiError("DELETE", "/api/assistant/conversations/a", 409, { code: "conversation_busy" });
    const api = {
      list: async () => ({ items: [], next: null }),
      history: async () => [],
      archive: async () => Promise.reject(busy),
      restore: async () => {},
      active: async () => true,
    };
    const list = new ConversationList(api);
    expect(await list.archive("a")).toBe(false);
    expect(list.error).toBe("conversation_busy");
    expect(await list.restore("a")).toBe(true);
  });

  it("pages through the list and searches it, an older answer never shown over a newer one", async () => {
    const summary = (id: string) => ({ id, title: id, message_count: 1, is_archived: false, updated_at: "2026-12-01T10:00:00Z", last_message_at: null });
    const asked: Array<[string, string | null]> = [];
    let release: () => void = () => {};
    const slow = new Promise<void>((resolve) => (release = resolve));
    const api = {
      list: async (_archived: boolean, search = "", cursor: string | null = null) => {
        asked.push([search, cursor]);
        if (search === "старый") await slow; // answered after the newer search
        if (search) return { items: [summary(`found-${search}`)], next: null };
        return cursor === null ? { items: [summary("a"), summary("b")], next: "page-2" } : { items: [summary("c")], next: null };
      },
      history: async () => [],
      archive: async () => {},
      restore: async () => {},
      active: async () => false,
    };
    const list = new ConversationList(api);
    await list.refresh();
    expect([list.items.map((item) => item.id), list.next]).toEqual([["a", "b"], "page-2"]);
    await list.more();
    expect([list.items.map((item) => item.id), list.next]).toEqual([["a", "b", "c"], null]);
    const older = list.find("старый");
    await list.find("новый");
    release();
    await older;
    expect(list.items.map((item) => item.id)).toEqual(["found-новый"]);
    expect(asked).toEqual([["", null], ["", "page-2"], ["старый", null], ["новый", null]]);
  });

  it("tells the sidebar when a turn ends", async () => {
    let ended = 0;
    const transport = new ScriptedTransport([[data(message("state", "", { state: "success" })), complete]]);
    const chat = new AgentChatModel({ transport, sleep: async () => {}, onTurnEnd: () => void (ended += 1) });
    await chat.connect("token");
    await chat.send("привет");
    expect(ended).toBe(1);
  });
});
