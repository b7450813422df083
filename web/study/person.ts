/** A person at the browser, as the SC-006 task study drives one: every click, key and typed
 * string goes through here and is written down, with how long the person waited for the screen
 * they needed. bench/tasks.py turns the log into the keystroke-level model's estimate (the
 * operators' times live there, once); nothing here judges or times the person's own actions. */

import type { Download, Locator, Page } from "playwright-core";

export type Action =
  | { op: "click"; target: string }
  /** pointing without a click: a row's actions appear only under the pointer */
  | { op: "hover"; target: string }
  | { op: "type"; target: string; text: string }
  | { op: "key"; key: string }
  /** a file picked in the system's dialog: a double click on it */
  | { op: "file"; target: string }
  /** the mouse wheel turned over a list longer than its box, ``px`` pixels (down when positive):
   * Superset 6.1's long pick lists that cannot be searched are read this way */
  | { op: "scroll"; target: string; px: number }
  /** the person waits for the screen to show ``what`` */
  | { op: "wait"; what: string; ms: number };

export class Person {
  readonly actions: Action[] = [];

  constructor(public page: Page) {}

  async click(target: Locator, name: string): Promise<void> {
    await target.click();
    this.actions.push({ op: "click", target: name });
  }

  async hover(target: Locator, name: string): Promise<void> {
    await target.hover();
    this.actions.push({ op: "hover", target: name });
  }

  /** ``text`` typed key by key into ``target``, clicked first unless it has the focus already. */
  async type(target: Locator, text: string, name: string): Promise<void> {
    const focused = await target.evaluate((element) => element.contains(document.activeElement));
    if (!focused) await this.click(target, name);
    await target.pressSequentially(text);
    this.actions.push({ op: "type", target: name, text });
  }

  /** One key or chord (``Enter``, ``Control+Enter``), pressed where the focus is. */
  async press(key: string): Promise<void> {
    await this.page.keyboard.press(key);
    this.actions.push({ op: "key", key });
  }

  /** Clicks ``opener`` and picks ``path`` in the file dialog it opens. */
  async chooseFile(opener: Locator, path: string, name: string): Promise<void> {
    const [chooser] = await Promise.all([this.page.waitForEvent("filechooser"), this.click(opener, name)]);
    await chooser.setFiles(path);
    this.actions.push({ op: "file", target: name });
  }

  /** Turns the mouse wheel by ``px`` pixels (down when positive) with the pointer over ``target``,
   * which it is moved to first unless it is there already. */
  async scroll(target: Locator, px: number, name: string): Promise<void> {
    await target.hover();
    await this.page.mouse.wheel(0, px);
    this.actions.push({ op: "scroll", target: name, px });
  }

  /** Clicks ``target`` and waits for the file it saves. */
  async download(target: Locator, name: string): Promise<Download> {
    const [saved] = await Promise.all([this.page.waitForEvent("download", { timeout: 60_000 }), this.click(target, name)]);
    await saved.path(); // written to the end
    return saved;
  }

  /** Waits, as the person does, until ``until`` resolves: the screen shows ``what``. */
  async waitFor<T>(what: string, until: () => Promise<T>): Promise<T> {
    const started = performance.now();
    const seen = await until();
    this.actions.push({ op: "wait", what, ms: Math.round(performance.now() - started) });
    return seen;
  }

  /** Opens ``url`` as from a bookmark: one click. */
  async open(url: string, name: string): Promise<void> {
    await this.page.goto(url);
    this.actions.push({ op: "click", target: name });
  }
}
