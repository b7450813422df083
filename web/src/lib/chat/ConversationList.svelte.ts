/** The sidebar's state: the person's conversations (or the archived ones), a page at a time,
 * searched by a word of a title or a message, kept fresh after each turn, with archive and
 * restore. */

import { ApiError } from "./api.ts";
import type { ConversationSummary, ConversationsApi } from "./conversations.ts";

export class ConversationList {
  items: ConversationSummary[] = $state([]);
  showArchived: boolean = $state(false);
  search: string = $state("");
  /** Where the next page starts; null when every conversation is shown. */
  next: string | null = $state(null);
  error: string | null = $state(null);
  #asked = 0; // answers to an older question (a search typed on since) are not shown

  constructor(private readonly api: ConversationsApi) {}

  /** The first page again, as the filter and search say now. */
  async refresh(): Promise<void> {
    await this.#load(null);
  }

  /** The next page, after those shown. */
  async more(): Promise<void> {
    if (this.next !== null) await this.#load(this.next);
  }

  async find(search: string): Promise<void> {
    this.search = search;
    await this.refresh();
  }

  async toggleArchived(): Promise<void> {
    this.showArchived = !this.showArchived;
    await this.refresh();
  }

  /** Whether it was archived; convo refuses while the conversation answers (`conversation_busy`). */
  async archive(id: string): Promise<boolean> {
    return this.#change(() => this.api.archive(id));
  }

  /** Whether it was restored. */
  async restore(id: string): Promise<boolean> {
    return this.#change(() => this.api.restore(id));
  }

  async #change(change: () => Promise<void>): Promise<boolean> {
    try {
      await change();
    } catch (failure) {
      this.error = failure instanceof ApiError ? (failure.code ?? failure.message) : String(failure);
      return false;
    }
    await this.refresh();
    return true;
  }

  async #load(cursor: string | null): Promise<void> {
    const asked = ++this.#asked;
    try {
      const page = await this.api.list(this.showArchived, this.search.trim(), cursor);
      if (asked !== this.#asked) return;
      this.items = cursor === null ? page.items : [...this.items, ...page.items];
      this.next = page.next;
      this.error = null;
    } catch (failure) {
      if (asked === this.#asked) this.error = failure instanceof Error ? failure.message : String(failure);
    }
  }
}
