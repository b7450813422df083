/** A turn's messages, as the agent streams them (each data event carries the whole list so far),
 * folded into what the page shows. Pure: the model calls it on every event. The events' shapes
 * are the generated contracts (../generated/contracts.ts); what arrives is still read with care. */

import type {
  ConfirmRequiredEvent,
  PermissionDeniedEvent,
  StreamEvent,
  ToolEndEvent,
  ToolErrorEvent,
  ToolRetryEvent,
  ToolStartEvent,
  ToolTimeoutEvent,
} from "../generated/contracts.ts";
import { TURN_STATES } from "../generated/contracts.ts";
import type { ConfirmRequest, PermissionDenied, Problem, ToolCard, TurnState, TurnView, WireMessage } from "./types";

type ToolEvent = ToolStartEvent | ToolEndEvent | ToolErrorEvent | ToolRetryEvent | ToolTimeoutEvent;
const STATES: ReadonlySet<string> = new Set(TURN_STATES);

export function emptyTurn(): TurnView {
  return {
    conversationId: null,
    model: null,
    routing: null,
    text: "",
    tools: [],
    confirm: null,
    denied: null,
    state: null,
    taskId: null,
    task: null,
    errors: [],
    warnings: [],
  };
}

/** A tool call still under way (its card spins; the debug block counts it). */
export const isRunning = (card: ToolCard): boolean => card.status === "running" || card.status === "retrying";

/** A turn that has ended (with ``state`` when it said none itself: stopped by the person): no
 * card of it spins any more — a call that never answered is shown stopped, not running. */
export function ended(view: TurnView, state?: TurnState): TurnView {
  if (state && view.state === null) view.state = state;
  for (const card of view.tools) if (isRunning(card)) card.status = "stopped";
  return view;
}

const text = (value: unknown): string => (typeof value === "string" ? value : "");
const orNull = (value: unknown): string | null => (typeof value === "string" && value ? value : null);

const runId = (meta: ToolEvent): string => ("run_id" in meta ? text(meta.run_id) : "");

function card(meta: ToolEvent, fallbackId: string): ToolCard {
  return {
    id: runId(meta) || fallbackId,
    tool: text(meta.tool),
    status: "running",
    input: ("input" in meta && meta.input) || null,
    output: null,
    error: null,
    attempt: null,
    maxAttempts: null,
    retryable: null,
  };
}

/** The card an event belongs to: by run id, else the last card of its tool; a card of its own
 * when it came without a tool_start. */
function cardOf(tools: ToolCard[], meta: ToolEvent, fallbackId: string): ToolCard {
  const id = runId(meta);
  const found =
    (id ? tools.find((item) => item.id === id) : undefined) ??
    [...tools].reverse().find((item) => item.tool === text(meta.tool));
  if (found) return found;
  const added = card(meta, fallbackId);
  tools.push(added);
  return added;
}

export function foldTurn(messages: readonly WireMessage[]): TurnView {
  const view = emptyTurn();
  messages.forEach((message, index) => {
    const meta = message.metadata ?? ({} as Partial<StreamEvent>);
    switch (meta.type) {
      case "conversation":
        view.conversationId = orNull(meta.conversation_id);
        view.model = orNull(meta.model);
        break;
      case "routing":
        view.routing = { tools: Array.isArray(meta.tools) ? meta.tools : [], tier: text(meta.tier) };
        break;
      case "token":
        view.text += message.content;
        break;
      case "tool_start":
        view.tools.push(card(meta, `tool-${index}`));
        break;
      case "tool_end":
      case "tool_error": {
        const done = cardOf(view.tools, meta, `tool-${index}`);
        done.status = meta.type === "tool_end" ? "ok" : "error";
        done.output = meta.type === "tool_end" ? (meta.output ?? null) : null;
        done.error = meta.type === "tool_error" ? message.content || text(meta.error?.message) : null;
        break;
      }
      case "tool_retry": {
        const target = cardOf(view.tools, meta, `tool-${index}`);
        target.status = "retrying";
        target.attempt = typeof meta.attempt === "number" ? meta.attempt : null;
        target.maxAttempts = typeof meta.max_attempts === "number" ? meta.max_attempts : null;
        break;
      }
      case "tool_timeout": {
        const target = cardOf(view.tools, meta, `tool-${index}`);
        target.status = "timeout";
        target.error = text(meta.message) || message.content;
        target.retryable = meta.retryable === true;
        break;
      }
      case "confirm_required":
        view.confirm = confirmOf(meta);
        break;
      case "permission_denied":
        view.denied = deniedOf(meta);
        break;
      case "warning":
        view.warnings.push(problemOf(meta, message));
        break;
      case "error":
        view.errors.push(problemOf(meta, message));
        break;
      case "state":
        if (STATES.has(text(meta.state))) view.state = meta.state;
        view.taskId = orNull(meta.task_id) ?? view.taskId;
        break;
    }
  });
  return view.state === null ? view : ended(view);
}

function confirmOf(meta: ConfirmRequiredEvent): ConfirmRequest {
  return {
    threadId: text(meta.thread_id),
    callId: text(meta.call_id),
    digest: text(meta.digest),
    production: meta.production === true,
    toolName: text(meta.tool_name),
    toolArgs: meta.tool_args ?? {},
    risk: text(meta.risk),
    riskLevel: text(meta.risk_level),
    dangerous: meta.dangerous === true,
    envContext: orNull(meta.env_context),
    prompt: text(meta.prompt),
    subject: subjectOf(meta.subject),
    change: text(meta.change),
  };
}

function subjectOf(subject: ConfirmRequiredEvent["subject"]): ConfirmRequest["subject"] {
  if (typeof subject !== "object" || subject === null) return null;
  const { env_id: envId, dashboards } = subject;
  if (typeof envId !== "string" || !Array.isArray(dashboards)) return null;
  return {
    envId,
    dashboards: dashboards.map((board) => ({
      id: Number(board.id),
      title: typeof board.title === "string" ? board.title : null,
    })),
  };
}

function deniedOf(meta: PermissionDeniedEvent): PermissionDenied {
  return {
    toolName: text(meta.tool_name),
    requiredRole: text(meta.required_role),
    userRole: text(meta.user_role),
    envContext: orNull(meta.env_context),
    alternatives: (meta.alternatives ?? []).filter((item) => item.action && item.prompt),
  };
}

function problemOf(meta: { code: string; message?: string }, message: WireMessage): Problem {
  return { code: text(meta.code) || "ERROR", message: text(meta.message) || message.content };
}
