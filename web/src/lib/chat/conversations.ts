/** The person's conversations in convo's REST API (same origin, their JWT): the sidebar's list,
 * a conversation's history as chat entries, archive and restore, and the multi-tab gate. */

import type { ChatEntry } from "./AgentChatModel.svelte.ts";
import { ended, foldTurn } from "./turn.ts";
import type { SessionApi } from "./api.ts";
import type { StreamEvent } from "../generated/contracts.ts";
import type { WireMessage } from "./types.ts";

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
  /** The answer's events as they streamed, tokens and tool outputs left out. */
  metadata: { events?: StreamEvent[] };
  partial: boolean;
}

/** One page of the list, and where the next one starts (null: this was the last). */
export interface ConversationPage {
  items: ConversationSummary[];
  next: string | null;
}

export interface ConversationsApi {
  /** A page of the person's conversations, newest first; ``search`` a word of a title or a
   * message; ``cursor`` where the page starts (null: the first). */
  list(archived: boolean, search?: string, cursor?: string | null): Promise<ConversationPage>;
  history(id: string): Promise<ChatEntry[]>;
  archive(id: string): Promise<void>;
  restore(id: string): Promise<void>;
  /** Whether another tab or pod is answering in it right now. */
  active(id: string): Promise<boolean>;
}

const BASE = "/api/assistant/conversations";
const PAGE_SIZE = 30;

export class ConvoRestApi implements ConversationsApi {
  constructor(private readonly api: SessionApi) {}

  async list(archived: boolean, search = "", cursor: string | null = null): Promise<ConversationPage> {
    const query = new URLSearchParams({ archived: String(archived), limit: String(PAGE_SIZE) });
    if (search) query.set("q", search);
    if (cursor) query.set("cursor", cursor);
    const page = await this.api.json<{ items: ConversationSummary[]; next_cursor: string | null }>(`${BASE}?${query}`);
    return { items: page.items, next: page.next_cursor };
  }

  async history(id: string): Promise<ChatEntry[]> {
    const page = await this.api.json<{ items: StoredMessage[] }>(`${BASE}/${id}/history?limit=500`);
    return historyEntries(page.items);
  }

  async archive(id: string): Promise<void> {
    await this.api.json(`${BASE}/${id}`, { method: "DELETE" });
  }

  async restore(id: string): Promise<void> {
    await this.api.json(`${BASE}/${id}/restore`, { method: "POST" });
  }

  async active(id: string): Promise<boolean> {
    return (await this.api.json<{ active: boolean }>(`/api/agent/conversations/${id}/active`)).active;
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
    ended(view, item.partial ? "cancelled" : undefined); // what was kept is over: nothing spins
    return { id: item.id, role: "assistant", text: view.text, files: [], view, partial: item.partial };
  });
}
