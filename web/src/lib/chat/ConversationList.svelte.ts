/** The sidebar's state: the person's conversations (or the archived ones), kept fresh after
 * each turn, with archive and restore. */

import type { ConversationSummary, ConversationsApi } from "./conversations.ts";

export class ConversationList {
  items: ConversationSummary[] = $state([]);
  showArchived: boolean = $state(false);
  error: string | null = $state(null);

  constructor(private readonly api: ConversationsApi) {}

  async refresh(): Promise<void> {
    try {
      this.items = await this.api.list(this.showArchived);
      this.error = null;
    } catch (failure) {
      this.error = failure instanceof Error ? failure.message : String(failure);
    }
  }

  async toggleArchived(): Promise<void> {
    this.showArchived = !this.showArchived;
    await this.refresh();
  }

  async archive(id: string): Promise<void> {
    await this.api.archive(id);
    await this.refresh();
  }

  async restore(id: string): Promise<void> {
    await this.api.restore(id);
    await this.refresh();
  }
}
