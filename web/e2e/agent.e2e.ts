/** The /agent page as a person uses it, in Debian's Chromium driven by playwright-core, against
 * the running stack: E2E_BASE_URL (the proxy's origin), E2E_USERNAME and E2E_PASSWORD (an admin),
 * E2E_SCREENSHOTS (where each state is saved, at desktop and narrow widths), E2E_SIGNING_KEY (the
 * stack's token key, to make a session that ends mid-test). */

import { createHash, createPrivateKey, createPublicKey, randomUUID, sign } from "node:crypto";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

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

let browser: Browser;
let page: Page;

async function shoot(name: string): Promise<void> {
  for (const [width, size] of Object.entries(WIDTHS)) {
    await page.setViewportSize(size);
    await page.screenshot({ path: join(SCREENSHOTS, `${name}-${width}.png`), fullPage: true });
    // Nothing (a long id, the header) widens the page past the screen: no sideways scrolling.
    expect(await page.evaluate(() => document.documentElement.scrollWidth), name).toBeLessThanOrEqual(size.width);
  }
  await page.setViewportSize(WIDTHS.desktop);
}

async function ask(text: string): Promise<void> {
  const answers = await page.getByTestId("assistant-message").count();
  await page.getByTestId("composer").fill(text);
  await page.getByTestId("composer").press("Enter");
  await expect.poll(() => page.getByTestId("assistant-message").count()).toBe(answers + 1);
}

/** The newest answer's final state, once its stream has ended, with its text for messages. */
async function lastState(): Promise<{ state: string | null; text: string }> {
  const last = page.getByTestId("assistant-message").last();
  await last.getByTestId("state-badge").waitFor({ timeout: 120_000 });
  return { state: await last.getByTestId("state-badge").getAttribute("data-state"), text: (await last.textContent()) ?? "" };
}

async function expectState(...states: string[]): Promise<void> {
  const { state, text } = await lastState();
  expect(states, text).toContain(state);
}

beforeAll(async () => {
  mkdirSync(SCREENSHOTS, { recursive: true });
  browser = await chromium.launch({
    executablePath: process.env.E2E_CHROMIUM ?? "/usr/bin/chromium",
    // Offline machine: no background calls home, no sandbox as root in CI.
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  // A context of its own (not browser.newPage's): a second tab opens in it, as a person's would.
  page = await (await browser.newContext({ viewport: WIDTHS.desktop })).newPage();
});

afterAll(async () => {
  await browser?.close();
});

describe("the /agent page", () => {
  it("signs in and connects", async () => {
    // UIContext from the URL: the page opened from dev's "Sales Overview" dashboard
    await page.goto(`${BASE_URL}/agent?objectType=dashboard&objectId=1&objectName=Sales%20Overview&envId=dev`);
    await page.waitForURL(/\/login/);
    await shoot("01-login");
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
    await page.locator('input[name="username"]').fill(required("E2E_USERNAME"));
    await page.locator('input[name="password"]').fill(required("E2E_PASSWORD"));
    await page.locator('button[type="submit"]').click();
    await page.waitForURL(/\/agent/);
    await expect.poll(() => page.getByTestId("connection").textContent()).toBe("connected");
    expect(await page.getByTestId("context-pill").textContent()).toContain("dashboard Sales Overview @dev");
  });

  it("keeps the environment selector in step with the context, and warns on prod", async () => {
    const select = page.getByTestId("env-select");
    await expect.poll(() => select.inputValue()).toBe("dev");
    expect(await page.getByTestId("prod-flag").count()).toBe(0);
    await select.selectOption("prod");
    await page.getByTestId("prod-flag").waitFor();
    expect(await page.getByTestId("context-pill").textContent()).toContain("@prod");
    await shoot("02-prod-context");
    await select.selectOption("dev");
    expect(await page.getByTestId("prod-flag").count()).toBe(0);
  });

  it("asks for dashboards with validation problems and sees the tool cards resolve", async () => {
    await ask("покажи дашборды с проблемами валидации");
    await expectState("success");
    const cards = page.getByTestId("assistant-message").last().getByTestId("tool-card");
    const tools = await cards.evaluateAll((nodes) => nodes.map((node) => [node.dataset.tool, node.dataset.status]));
    expect(tools.map(([tool]) => tool)).toEqual(expect.arrayContaining(["search_dashboards", "get_health_summary"]));
    expect(tools.every(([, status]) => status === "ok")).toBe(true);
    await cards.first().locator("summary").click(); // input and result expand
    await shoot("02-tool-cards");
  });

  it("pauses a prod deploy on a confirmation card, and confirming runs it", async () => {
    await ask("задеплой дашборд 1 в prod");
    await expectState("needs_confirmation");
    const card = page.getByTestId("confirm-card");
    await expect.poll(() => card.getByTestId("confirm-env").textContent()).toBe("prod");
    expect(await page.getByTestId("prod-warning").isVisible()).toBe(true);
    await shoot("03-confirm-card");
    await card.getByTestId("confirm").click({ timeout: 15_000 }); // enabled once any countdown ends
    await expectState("started", "success");
    await shoot("04-confirmed");
  });

  it("rejecting a pending deploy runs nothing", async () => {
    await ask("задеплой дашборд 1 в prod");
    await expectState("needs_confirmation");
    await page.getByTestId("confirm-card").getByTestId("reject").click();
    await expectState("success");
    expect(await page.getByTestId("confirm-card").count()).toBe(0);
    const last = page.getByTestId("assistant-message").last();
    expect(await last.getByTestId("tool-card").count()).toBe(0);
    await shoot("05-rejected");
  });

  it("refuses an .exe in the page, naming what is supported", async () => {
    const uploads: string[] = [];
    const seeUpload = (request: { url(): string }) => {
      if (request.url().includes("/uploads")) uploads.push(request.url());
    };
    page.on("request", seeUpload);
    await page.getByTestId("file-input").setInputFiles({ name: "setup.exe", mimeType: "application/octet-stream", buffer: Buffer.from("MZ") });
    const refusal = page.getByTestId("file-rejected");
    await refusal.waitFor();
    expect(await refusal.textContent()).toContain("PDF, XLSX, CSV, JSON, PNG, JPEG");
    page.off("request", seeUpload);
    expect(uploads).toEqual([]); // refused in the page: nothing is uploaded
    await shoot("06-exe-rejected");
  });

  it("reads an attached PDF and answers from it", async () => {
    await page.getByTestId("file-input").setInputFiles(required("E2E_PDF"));
    await page.getByTestId("attached").waitFor();
    // the file goes to convo under the person's token; the message names the id convo issued
    const uploaded = page.waitForResponse((response) => response.url().includes("/uploads?name=") && response.request().method() === "POST");
    await ask("что в этом документе?");
    const upload = await uploaded;
    expect(upload.status()).toBe(201);
    expect((await upload.request().allHeaders())["authorization"]).toMatch(/^Bearer /);
    // (the body is not read here: Chromium may have dropped it once the stream started)
    expect(new URL(upload.url()).searchParams.get("name")).toBe("квартальный-отчёт.pdf");
    await expectState("success");
    const answer = await page.getByTestId("assistant-message").last().getByTestId("answer").textContent();
    expect(answer).toContain("задержка поставок в регионе Сибирь");
    expect(await page.getByTestId("user-message").last().textContent()).toContain("квартальный-отчёт.pdf");
    await shoot("07-pdf-answer");
  });

  it("stops an answer halfway, keeps the partial text, and a second tab is told the conversation is busy", async () => {
    const conversationId = (await page.getByTestId("debug-json").evaluate((node) => JSON.parse(node.textContent ?? "{}"))).conv_id;
    const second = await page.context().newPage(); // a tab has its own session storage: it signs in
    try {
      await second.goto(`${BASE_URL}/login`);
      await second.locator('input[name="username"]').fill(required("E2E_USERNAME"));
      await second.locator('input[name="password"]').fill(required("E2E_PASSWORD"));
      await second.locator('button[type="submit"]').click();
      const listed = second.locator(`[data-testid="conversation"][data-id="${conversationId}"] .open`);
      await listed.waitFor();

      // The same question was answered in full earlier in this conversation (its first answer).
      const full = (await page.getByTestId("assistant-message").first().getByTestId("answer").textContent()) ?? "";
      expect(full).toContain("Legacy uptime");

      // The stack paces the offline model, so this answer streams for seconds.
      await ask("покажи дашборды с проблемами валидации");
      const last = page.getByTestId("assistant-message").last();
      await last.getByTestId("tool-card").first().waitFor(); // the turn is under way at the agent
      await listed.click();
      await second.getByTestId("active-elsewhere").waitFor();
      const answer = last.getByTestId("answer");
      await expect.poll(async () => ((await answer.count()) ? ((await answer.textContent()) ?? "").length : 0)).toBeGreaterThan(0);
      await page.getByTestId("stop").click(); // at the first words: the rest is still to come
      await expectState("cancelled");
      await last.getByTestId("partial").waitFor();
      const kept = (await answer.textContent()) ?? "";
      await new Promise((resolve) => setTimeout(resolve, 1500));
      expect(await answer.textContent()).toBe(kept); // nothing arrives after the stop
      expect(kept.trim().length).toBeGreaterThan(0);
      expect(full.startsWith(kept.trim())).toBe(true);
      expect(kept.trim().length).toBeLessThan(full.trim().length); // cut short
      await second.screenshot({ path: join(SCREENSHOTS, "12-second-tab-desktop.png"), fullPage: true });
      await shoot("12-stopped");

      // The stopped turn freed the conversation, and what was kept is its history, marked partial.
      await listed.click();
      const reopened = second.getByTestId("assistant-message").last();
      await reopened.getByTestId("partial").waitFor();
      expect(await second.getByTestId("active-elsewhere").count()).toBe(0);
      expect((await reopened.getByTestId("answer").textContent()) ?? "").toContain(kept.trim().split(/\s+/).slice(0, 3).join(" "));
    } finally {
      await second.close();
    }
  });

  it("a lost network shows the connection banner, and Retry asks again", async () => {
    await page.context().setOffline(true);
    try {
      await ask("покажи дашборды в dev");
      await page.getByTestId("connection-banner").waitFor();
      await page.getByTestId("list-error").waitFor(); // the sidebar could not refresh either
      await shoot("13-connection-lost");
    } finally {
      await page.context().setOffline(false);
    }
    await page.getByTestId("retry").click();
    await expectState("success");
    expect(await page.getByTestId("connection-banner").count()).toBe(0);
    expect(await page.getByTestId("connection").textContent()).toBe("connected");
    await expect.poll(() => page.getByTestId("list-error").count()).toBe(0);
  });

  it("copies the debug block as valid JSON", async () => {
    await page.getByTestId("debug").locator("summary").click();
    const snapshot = JSON.parse((await page.getByTestId("debug-json").textContent()) ?? "");
    expect(snapshot).toMatchObject({ connection: "connected", streaming: false, active_tool_calls: 0 });
    expect(snapshot.message_count).toBeGreaterThanOrEqual(6);
    await shoot("07-debug");
  });

  it("switches between Russian and English", async () => {
    expect(await page.getByTestId("send").textContent()).toBe("Отправить");
    await page.getByTestId("lang-en").click();
    expect(await page.getByTestId("send").textContent()).toBe("Send");
    await shoot("08-english");
    await page.getByTestId("lang-ru").click();
  });

  it("after a reload the conversation is in the sidebar and opens with its history", async () => {
    await page.reload();
    await expect.poll(() => page.getByTestId("connection").textContent()).toBe("connected");
    const item = page.getByTestId("conversation").first();
    await item.waitFor();
    expect(await item.locator(".open").textContent()).toContain("покажи дашборды");
    await item.locator(".open").click();
    await expect.poll(() => page.getByTestId("assistant-message").count()).toBeGreaterThanOrEqual(4);
    expect(await page.getByTestId("tool-card").count()).toBeGreaterThan(0);
    await shoot("09-sidebar");
  });

  it("archives a conversation and restores it from the archive filter", async () => {
    const id = await page.getByTestId("conversation").first().getAttribute("data-id");
    const listed = () => page.locator(`[data-testid="conversation"][data-id="${id}"]`).count();
    await page.getByTestId("conversation").first().getByTestId("archive").click();
    await expect.poll(listed).toBe(0);
    await page.getByTestId("archived-filter").check();
    await expect.poll(listed).toBe(1);
    await shoot("10-archived");
    await page.locator(`[data-testid="conversation"][data-id="${id}"]`).getByTestId("restore").click();
    await expect.poll(listed).toBe(0);
    await page.getByTestId("archived-filter").uncheck();
    await expect.poll(listed).toBe(1);
  });

  it("an access token that ends mid-conversation is renewed without the person noticing", async () => {
    type Kept = { token: string; refreshToken: string; expiresAt: number };
    const kept = () => page.evaluate(() => JSON.parse(sessionStorage.getItem("sstools.session") ?? "{}") as Kept);
    const before = await kept();
    const ends = Math.floor(Date.now() / 1000) + 15;
    const short = tokenEnding(required("E2E_USERNAME"), ends);
    // said to last an hour, so that the page does not renew it ahead: the agent refuses it first
    const session = { ...before, token: short, expiresAt: Date.now() + 3_600_000 };
    await page.evaluate((replaced) => sessionStorage.setItem("sstools.session", JSON.stringify(replaced)), session);
    await page.reload();
    await expect.poll(() => page.getByTestId("connection").textContent()).toBe("connected");
    await new Promise((resolve) => setTimeout(resolve, (ends + 1) * 1000 - Date.now()));
    await ask("покажи дашборды с проблемами валидации");
    await expectState("success");
    expect(page.url()).toContain("/agent");
    const after = await kept();
    expect(after.token).not.toBe(short);
    expect(after.refreshToken).not.toBe(before.refreshToken); // used up by the renewal
  });

  it("when the session ends mid-conversation it returns to sign-in and the unsent message waits there", async () => {
    // A real token of ops' key that ends in a few seconds, and no refresh token: a session ops
    // will not renew, as after a sign-out elsewhere or a disabled account.
    const ends = Math.floor(Date.now() / 1000) + 15;
    const session = { token: tokenEnding(required("E2E_USERNAME"), ends), username: required("E2E_USERNAME") };
    await page.evaluate((kept) => sessionStorage.setItem("sstools.session", JSON.stringify(kept)), session);
    await page.reload();
    await expect.poll(() => page.getByTestId("connection").textContent()).toBe("connected");
    const conversationId = async () => JSON.parse((await page.getByTestId("debug-json").textContent()) ?? "{}").conv_id;
    const conversation = await conversationId();
    const text = "покажи дашборды с проблемами валидации, пожалуйста";
    await page.getByTestId("composer").fill(text);
    await new Promise((resolve) => setTimeout(resolve, (ends + 1) * 1000 - Date.now())); // it has ended meanwhile
    await page.getByTestId("composer").press("Enter");
    await page.waitForURL(/\/login/);
    expect(await page.getByTestId("session-ended").textContent()).toContain("Неотправленное сообщение сохранено");
    await shoot("14-session-ended");
    await page.locator('input[name="username"]').fill(required("E2E_USERNAME"));
    await page.locator('input[name="password"]').fill(required("E2E_PASSWORD"));
    await page.locator('button[type="submit"]').click();
    await page.waitForURL(/\/agent/);
    await expect.poll(() => page.getByTestId("composer").inputValue()).toBe(text);
    expect(await conversationId()).toBe(conversation); // where it was being written
    await ask(text); // and it goes, now
    await expectState("success");
  });

  it("an analyst asking for a prod deploy gets the permission-denied card, with alternatives, and closes it", async () => {
    const admin = page;
    const context = await browser.newContext({ viewport: WIDTHS.desktop });
    page = await context.newPage();
    try {
      await page.goto(`${BASE_URL}/login?envId=dev`);
      await page.locator('input[name="username"]').fill(required("E2E_ANALYST_USERNAME"));
      await page.locator('input[name="password"]').fill(required("E2E_ANALYST_PASSWORD"));
      await page.locator('button[type="submit"]').click();
      await expect.poll(() => page.getByTestId("connection").textContent()).toBe("connected");
      await ask("задеплой дашборд 1 в prod");
      await expectState("denied");
      const card = page.getByTestId("denied-card");
      // the tool, the role it needs, and the analyst's own role, as the agent sent them
      expect(await card.locator("code").allTextContents()).toEqual(["deploy_dashboard"]);
      expect(await card.locator("strong").allTextContents()).toEqual(["admin", "analyst"]);
      expect(await card.getByTestId("alternative").count()).toBe(2); // health summary, dashboard search
      expect(await page.getByTestId("confirm-card").count()).toBe(0);
      await shoot("11-permission-denied");
      await card.getByTestId("close-denied").click();
      expect(await page.getByTestId("denied-card").count()).toBe(0);

      // An alternative is one click: its prompt is asked as the next message.
      await ask("задеплой дашборд 1 в prod");
      await expectState("denied");
      const alternative = page.getByTestId("denied-card").getByTestId("alternative").first();
      const prompt = (await alternative.textContent()) ?? "";
      const asked = await page.getByTestId("user-message").count();
      await alternative.click();
      await expect.poll(() => page.getByTestId("user-message").count()).toBe(asked + 1);
      expect(await page.getByTestId("user-message").last().textContent()).toContain(prompt.trim());
      await expectState("success");
      expect(await page.getByTestId("denied-card").count()).toBe(0);
    } finally {
      await context.close();
      page = admin;
    }
  });
});
