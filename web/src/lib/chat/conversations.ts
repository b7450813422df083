/** The person's conversations in convo's REST API (same origin, their JWT): the sidebar's list,
 * a conversation's history as chat entries, archive and restore, and the multi-tab gate. */

import type { ChatEntry } from "./AgentChatModel.svelte.ts";
import { foldTurn } from "./turn.ts";
import type { SessionTokens, WireMessage } from "./types.ts";

export interface ConversationSummary {
  id: string;
  title: string;
  message_count: number;
  is_archived: boolean;
  updated_at: string;
  last_message_at: string | null;
}

interface StoredMessage {
  id: string;
  role: string;
  content: string;
  metadata: { events?: Record<string, unknown>[] };
  partial: boolean;
}

export interface ConversationsApi {
  list(archived: boolean): Promise<ConversationSummary[]>;
  history(id: string): Promise<ChatEntry[]>;
  archive(id: string): Promise<void>;
  restore(id: string): Promise<void>;
  /** Whether another tab or pod is answering in it right now. */
  active(id: string): Promise<boolean>;
}

const BASE = "/api/assistant/conversations";

export class ConvoRestApi implements ConversationsApi {
  constructor(private readonly session: SessionTokens) {}

  async list(archived: boolean): Promise<ConversationSummary[]> {
    const page = await this.#json<{ items: ConversationSummary[] }>(`${BASE}?archived=${archived}&limit=100`);
    return page.items;
  }

  async history(id: string): Promise<ChatEntry[]> {
    const page = await this.#json<{ items: StoredMessage[] }>(`${BASE}/${id}/history?limit=500`);
    return historyEntries(page.items);
  }

  async archive(id: string): Promise<void> {
    await this.#json(`${BASE}/${id}`, { method: "DELETE" });
  }

  async restore(id: string): Promise<void> {
    await this.#json(`${BASE}/${id}/restore`, { method: "POST" });
  }

  async active(id: string): Promise<boolean> {
    return (await this.#json<{ active: boolean }>(`/api/agent/conversations/${id}/active`)).active;
  }

  /** A refused token is renewed once and the call made again; refused again, the session is over. */
  async #json<T>(path: string, init: RequestInit = {}): Promise<T> {
    let token = await this.session.current();
    let response = await this.#fetch(path, init, token);
    if (response.status === 401 && token !== null) {
      token = await this.session.renew(token);
      if (token !== null) response = await this.#fetch(path, init, token);
    }
    if (response.status === 401) this.session.ended();
    if (!response.ok) throw new Error(`${init.method ?? "GET"} ${path}: ${response.status}`);
    return (await response.json()) as T;
  }

  #fetch(path: string, init: RequestInit, token: string | null): Promise<Response> {
    return fetch(path, { ...init, headers: { Authorization: `Bearer ${token ?? ""}` } });
  }
}

/** Stored messages as the chat shows them: an answer's kept events (tool cards, cards, state)
 * folded as when they streamed, its text as its tokens. */
export function historyEntries(items: readonly StoredMessage[]): ChatEntry[] {
  return items.map((item) => {
    if (item.role !== "assistant") {
      return { id: item.id, role: "user", text: item.content, files: [], view: null, partial: false };
    }
    const events: WireMessage[] = (item.metadata.events ?? []).map((metadata) => ({
      role: "assistant",
      content: "",
      metadata,
    }));
    const view = foldTurn([...events, { role: "assistant", content: item.content, metadata: { type: "token" } }]);
    if (item.partial && view.state === null) view.state = "cancelled";
    return { id: item.id, role: "assistant", text: view.text, files: [], view, partial: item.partial };
  });
}
