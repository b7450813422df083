/** The five jobs of the SC-006 task study done in the agent's page, as a person does them: a
 * request typed in the composer and sent with Enter, a confirmation card read and confirmed,
 * the answer read. Each job starts on the page opened from a bookmark, signed in (as the person
 * already is, on either side of the study), in dev, with an empty chat. */

import { readFile } from "node:fs/promises";
import type { Locator, Page } from "playwright-core";
import { expect } from "vitest";

import type { Person } from "./person.ts";

/** The page signed in through the stack's provider as ``who``; not part of any job. */
export async function signInToPage(page: Page, base: string, who: { username: string; password: string }): Promise<void> {
  await page.goto(`${base}/agent?envId=dev`);
  await page.waitForURL(/\/login/);
  await page.getByTestId("sso-sign-in").click();
  await page.waitForURL(/\/interaction\//);
  await page.locator("#username").fill(who.username);
  await page.locator("#password").fill(who.password);
  await page.locator('button[type="submit"]').click();
  await page.waitForURL(/\/agent/);
  await expect.poll(() => page.getByTestId("connection").getAttribute("data-state")).toBe("connected");
}

/** The page as the person opens it to work: from a bookmark, in dev, connected. */
async function openPage(person: Person, base: string): Promise<void> {
  await person.open(`${base}/agent?envId=dev`, "bookmark");
  await person.waitFor("the page connected", () =>
    expect.poll(() => person.page.getByTestId("connection").getAttribute("data-state")).toBe("connected"),
  );
}

/** ``request`` typed and sent; the newest answer once it has said how the turn ended. */
async function ask(person: Person, request: string): Promise<{ answer: Locator; state: string | null }> {
  const page = person.page;
  const answers = await page.getByTestId("assistant-message").count();
  await person.type(page.getByTestId("composer"), request, "composer");
  await person.press("Enter");
  const answer = page.getByTestId("assistant-message").nth(answers);
  const state = await person.waitFor("the answer", async () => {
    await answer.getByTestId("state-badge").waitFor({ timeout: 120_000 });
    return answer.getByTestId("state-badge").getAttribute("data-state");
  });
  return { answer, state };
}

/** The confirmation card read and confirmed, once its countdown lets it be; what the turn then
 * did, followed (as the page follows a task it started) until the page shows how it ended. */
async function confirm(person: Person): Promise<string | null> {
  const page = person.page;
  const button = page.getByTestId("confirm-card").getByTestId("confirm");
  await person.waitFor("the card's confirm button enabled", () => expect.poll(() => button.isEnabled(), { timeout: 30_000 }).toBe(true));
  await person.click(button, "confirm");
  return person.waitFor("how it ended", async () => {
    await expect.poll(() => page.getByTestId("confirm-card").count()).toBe(0);
    const badge = page.getByTestId("assistant-message").last().getByTestId("state-badge");
    await expect.poll(() => badge.getAttribute("data-state"), { timeout: 120_000 }).toMatch(/^(?!needs_confirmation$)/);
    if ((await badge.getAttribute("data-state")) !== "started") return badge.getAttribute("data-state");
    const chip = page.getByTestId("assistant-message").last().getByTestId("task-chip");
    await expect.poll(() => chip.getAttribute("data-status"), { timeout: 120_000 }).toMatch(/^(success|failed)$/);
    return chip.getAttribute("data-status");
  });
}

export interface ChatSite {
  base: string;
}

export async function deployInChat(person: Person, site: ChatSite, dashboard: string): Promise<Record<string, unknown>> {
  await openPage(person, site.base);
  const { state } = await ask(person, `задеплой дашборд ${dashboard} в prod`);
  expect(state).toBe("needs_confirmation");
  const task = await confirm(person);
  expect(task).toBe("success");
  return { task };
}

export async function findBrokenInChat(person: Person, site: ChatSite): Promise<Record<string, unknown>> {
  await openPage(person, site.base);
  const { answer, state } = await ask(person, "что сломано в дашбордах?");
  expect(state).toBe("issues_found");
  return { answer: (await answer.getByTestId("answer").textContent()) ?? "" };
}

export async function backUpAndMaintainInChat(person: Person, site: ChatSite): Promise<Record<string, unknown>> {
  await openPage(person, site.base);
  const backup = await ask(person, "сделай бэкап prod");
  expect(backup.state).toBe("needs_confirmation");
  const backedUp = await confirm(person);
  expect(backedUp).toBe("success");
  const maintenance = await ask(person, "начни техработы в prod");
  expect(maintenance.state).toBe("needs_confirmation");
  const started = await confirm(person);
  expect(started).toBe("success");
  return { backup: backedUp, maintenance: started };
}

export async function countAndExportInChat(person: Person, site: ChatSite, files: string): Promise<Record<string, unknown>> {
  await openPage(person, site.base);
  const { answer, state } = await ask(person, "сколько заказов в каждом статусе?");
  expect(state).toBe("success");
  const saved = await person.download(answer.getByTestId("export-csv"), "export CSV");
  const path = `${files}/chat-${saved.suggestedFilename()}`;
  await saved.saveAs(path);
  return { csv: await readFile(path, "utf8") };
}

export async function whoCanSeeInChat(person: Person, site: ChatSite, dashboard: string): Promise<Record<string, unknown>> {
  await openPage(person, site.base);
  const { answer, state } = await ask(person, `кто видит дашборд ${dashboard}?`);
  expect(state).toBe("success");
  return { answer: (await answer.getByTestId("answer").textContent()) ?? "" };
}
