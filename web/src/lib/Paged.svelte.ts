/** A listing the admin console shows a page at a time ("more" adds the next), as its filters say
 * at the moment it is asked: people, the agent's audit, ops' trail. */

import type { Listing } from "./admin.ts";

export class Paged<T> {
  items: T[] = $state([]);
  /** Where the next page starts; null when every item is shown. */
  next: string | null = $state(null);
  /** How many match in all, where the API says. */
  total: number | null = $state(null);
  /** Why the last page could not be read (shown in words by the component), or null. */
  error: unknown = $state(null);
  loading: boolean = $state(false);
  #asked = 0; // an answer to an older question (filters changed since) is not shown

  constructor(private readonly load: (cursor: string | null) => Promise<Listing<T>>) {}

  /** The first page, as the filters say now. */
  refresh(): Promise<void> {
    return this.#load(null);
  }

  /** The next page, after those shown. */
  async more(): Promise<void> {
    if (this.next !== null) await this.#load(this.next);
  }

  /** One item replaced where it is (after a change the API answered). */
  replace(matches: (item: T) => boolean, changed: (item: T) => T): void {
    this.items = this.items.map((item) => (matches(item) ? changed(item) : item));
  }

  async #load(cursor: string | null): Promise<void> {
    const asked = ++this.#asked;
    this.loading = true;
    try {
      const page = await this.load(cursor);
      if (asked !== this.#asked) return;
      this.items = cursor === null ? page.items : [...this.items, ...page.items];
      this.next = page.next_cursor;
      this.total = page.total ?? null;
      this.error = null;
    } catch (failure) {
      if (asked === this.#asked) this.error = failure;
    } finally {
      if (asked === this.#asked) this.loading = false;
    }
  }
}
