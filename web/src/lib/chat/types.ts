/** What the agent's /chat stream carries (README "The agent and ops"; data model §1–§4). The
 * events themselves are declared in Python (sstools.agent.events) and generated here. */

import type { ObjectType } from "../context.ts";
import type { Alternative, StateEvent, StreamEvent } from "../generated/contracts.ts";

/** One Gradio ChatMessage of a turn; `metadata.type` says which event it is. */
export interface WireMessage {
  role: string;
  content: string;
  metadata: StreamEvent;
}

export type TurnState = StateEvent["state"];

/** A background task the turn started, as last read from ops (deploy, migration, backup). */
export interface TaskProgress {
  status: string; // queued | running | success | failed
  progress: number;
  result: Record<string, unknown> | null;
  error: Record<string, unknown> | null;
}

export type ToolStatus = "running" | "retrying" | "ok" | "error" | "timeout" | "stopped";

export interface ToolCard {
  id: string;
  tool: string;
  status: ToolStatus;
  input: unknown;
  output: unknown;
  error: string | null;
  attempt: number | null;
  maxAttempts: number | null;
  /** tool_timeout: false for a write tool, whose outcome only Superset can tell. */
  retryable: boolean | null;
}

/** confirm_required v2 (data model §2). */
export interface ConfirmRequest {
  threadId: string;
  /** The paused call and the digest of what the card shows: a confirm names both. */
  callId: string;
  digest: string;
  production: boolean;
  toolName: string;
  toolArgs: Record<string, unknown>;
  risk: string;
  riskLevel: string;
  dangerous: boolean;
  envContext: string | null;
  prompt: string;
  /** The dashboards the call is about, named in the environment they are read from. */
  subject: { envId: string; dashboards: { id: number; title: string | null }[] } | null;
  /** What will change, in the card's language. */
  change: string;
}

export type { Alternative } from "../generated/contracts.ts";

/** permission_denied (data model §3). */
export interface PermissionDenied {
  toolName: string;
  requiredRole: string;
  userRole: string;
  envContext: string | null;
  alternatives: Alternative[];
}

export interface Problem {
  code: string;
  message: string;
}

/** Everything one turn's stream has said so far, folded. */
export interface TurnView {
  conversationId: string | null;
  model: string | null;
  routing: { tools: string[]; tier: string } | null;
  text: string;
  tools: ToolCard[];
  confirm: ConfirmRequest | null;
  denied: PermissionDenied | null;
  state: TurnState | null;
  taskId: string | null;
  /** The started task, followed to its end (none until first read). */
  task: TaskProgress | null;
  errors: Problem[];
  warnings: Problem[];
}

/** data model §1: where the person came from, read from the page's URL. */
export interface UIContext {
  objectType: ObjectType | null;
  objectId: string | null;
  objectName: string | null;
  envId: string | null;
  route: string;
  contextVersion: number;
}

/** The person's session as the page keeps it. */
export interface SessionTokens {
  /** A token good for a while (renewed when its end is near). */
  current(): Promise<string | null>;
  /** A token in place of one that was refused; null once the session is over. */
  renew(failed: string): Promise<string | null>;
  /** The session is over: the page signs in anew. */
  ended(): void;
}
