/** The five jobs of the SC-006 task study done by hand in Apache Superset 6.1's own UI, as a
 * competent admin does them: the shortest route through Superset's menus, lists and dialogs, every
 * click, key and wait through the study's Person (person.ts), and every job checked done. Each job
 * starts on a Superset's welcome page opened from a bookmark; no other address is ever typed, no
 * API is called for the job, nothing on the page is changed behind the person's back. Reading what
 * the screen shows (a list's rows, a chart's error) is the person's reading, done with locators.
 *
 * What Superset 6.1 makes a person do here, found by trying it (see each job):
 * - the dashboard bundle names its database by dev's uuid. Prod's import finds no database with
 *   that uuid, then takes prod's database of the same name ("examples") and overwrites it with the
 *   bundle's: prod's database gets dev's uuid and dev's connection settings (URI included), with
 *   no question asked. The charts work (here both point at one SQLite file); nothing in the UI
 *   says what happened to prod's database.
 * - List Roles cannot show a role's permissions by name (the edit dialog shows ids and "There was
 *   an error loading permissions.") nor search its Permissions filter (apache/superset#39967,
 *   #40293: the provider's API refuses the filters the page sends); the filter's list, read by
 *   scrolling, is the one way left to see which roles hold a permission. */

import { mkdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import type { Locator, Page } from "playwright-core";

import type { Person } from "./person.ts";

export interface Supersets {
  dev: string;
  prod: string;
}

/** Every wait for Superset: a cold Superset on a busy 2-core machine takes many seconds. */
const LONG = 60_000;
const SIGN_IN_TIMEOUT = 120_000;
/** A fast spin of the wheel back up a list, read no more on the way: about ten notches. */
const WHEEL_TURN = 1000;
const DEPLOYED = "Sales Overview";
const COUNT_SQL = "SELECT status, COUNT(*) AS orders FROM orders GROUP BY status";
const EXAMPLES = "examples";

// ---------------------------------------------------------------- sign-in (not part of a job)

/** ``url``'s Superset signed in through the stack's identity provider as adam (Admin in both);
 * not part of any job, not recorded. A browser the provider knows already comes straight back. */
export async function signInToSuperset(
  page: Page,
  url: string,
  who: { username: string; password: string } = { username: "adam", password: "adam-demo" },
): Promise<void> {
  await page.goto(`${url}/login/`, { timeout: SIGN_IN_TIMEOUT });
  await page.getByText(/sign in with sso/i).click({ timeout: SIGN_IN_TIMEOUT });
  await page.waitForURL((address) => /\/interaction\/|\/superset\/welcome/.test(address.pathname), {
    waitUntil: "commit",
    timeout: SIGN_IN_TIMEOUT,
  });
  if (/\/interaction\//.test(new URL(page.url()).pathname)) {
    await page.locator("#username").fill(who.username);
    await page.locator("#password").fill(who.password);
    await page.locator('button[type="submit"]').click();
  }
  await page.waitForURL(/\/superset\/welcome/, { waitUntil: "commit", timeout: SIGN_IN_TIMEOUT });
}

// ---------------------------------------------------------------- what the screen shows

/** Polls ``read`` until it returns something other than undefined, or fails after ``timeout``. */
async function until<T>(what: string, read: () => Promise<T | undefined>, timeout = LONG): Promise<T> {
  const deadline = Date.now() + timeout;
  for (;;) {
    const seen = await read();
    if (seen !== undefined) return seen;
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what} after ${timeout} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** An entry of the top bar's menu (Dashboards, Charts, Datasets). */
function topEntry(page: Page, name: string): Locator {
  return page.locator('[data-test="navbar-top"]').getByRole("button", { name, exact: true });
}

/** The job's Superset home opened from a bookmark, waited for until its top bar is there. Every
 * wait for Superset from here on may take a minute: cold on a busy 2-core machine, it is slow. */
async function openHome(person: Person, superset: string): Promise<void> {
  person.page.setDefaultTimeout(LONG);
  person.page.setDefaultNavigationTimeout(LONG);
  await person.open(`${superset}/superset/welcome/`, "bookmark");
  await person.waitFor("Superset's home page", () => topEntry(person.page, "Dashboards").waitFor({ timeout: LONG }));
}

/** A list page's rows (Dashboards, Charts, List Roles, List Users). */
function rows(page: Page): Locator {
  return page.locator('[data-test="table-row"]');
}

/** The open list page: its column titles and each row's cells as text, once it has loaded. */
async function listShown(page: Page): Promise<{ columns: string[]; rows: string[][] } | undefined> {
  if (await page.locator('[data-test="loading-indicator"]:visible').count()) return undefined;
  const header = page.locator("thead").first();
  if (!(await header.isVisible().catch(() => false))) return undefined;
  const columns = (await header.locator("th").allInnerTexts()).map((text) => text.trim());
  const cells = await rows(page).evaluateAll((found) =>
    found.map((row) => Array.from(row.querySelectorAll("td"), (cell) => (cell as HTMLElement).innerText.trim())),
  );
  const empty = await page.getByText("No Data", { exact: true }).isVisible().catch(() => false);
  if (!cells.length && !empty) return undefined;
  return { columns, rows: cells };
}

/** The text of column ``name`` in each of ``shown``'s rows. */
function column(shown: { columns: string[]; rows: string[][] }, name: string): string[] {
  const index = shown.columns.indexOf(name);
  if (index < 0) throw new Error(`no column "${name}" among ${JSON.stringify(shown.columns)}`);
  return shown.rows.map((cells) => cells[index] ?? "");
}

/** Waits for the list page at ``path`` (the one just asked for, not the page it replaces) to show
 * its rows. */
async function listAt(person: Person, path: RegExp, what: string): Promise<{ columns: string[]; rows: string[][] }> {
  const page = person.page;
  return person.waitFor(what, () => until(what, async () => (path.test(new URL(page.url()).pathname) ? listShown(page) : undefined)));
}

const LIST_PATHS: Record<string, RegExp> = { Dashboards: /^\/dashboard\/list/, Charts: /^\/chart\/list/ };

/** Goes to a top-bar list (Dashboards, Charts) and waits for its rows. */
async function openList(person: Person, name: string): Promise<{ columns: string[]; rows: string[][] }> {
  await person.click(topEntry(person.page, name), name);
  return listAt(person, LIST_PATHS[name] ?? /./, `the ${name} list`);
}

/** The dashboards the Dashboards list shows, by title, in its order. */
async function dashboardTitles(page: Page): Promise<string[]> {
  return (await rows(page).locator('a[href*="/dashboard/"]').allInnerTexts()).map((title) => title.trim()).filter(Boolean);
}

/** A submenu of the top bar (SQL, Settings) opened under the pointer and ``item`` chosen in it. */
async function fromMenu(person: Person, menu: string, item: string): Promise<void> {
  const page = person.page;
  await person.hover(page.locator("#main-menu").getByText(menu, { exact: true }), `${menu} menu`);
  const popup = page.locator(".ant-menu-submenu-popup:not(.ant-menu-submenu-hidden)").filter({ hasText: item });
  const entry = popup.getByText(item, { exact: true });
  // open, not still fading in: a person sees the menu before choosing in it
  await person.waitFor(`the ${menu} menu`, () =>
    until(`the ${menu} menu`, async () => {
      const opacity = await popup.evaluate((element) => getComputedStyle(element).opacity).catch(() => "0");
      return opacity === "1" && (await entry.isVisible()) ? true : undefined;
    }),
  );
  await person.click(entry, item);
}

/** Clicks ``target``. A top-bar menu folds away once its item is chosen, but may stay open while
 * the pointer rests on it: one still open over ``target`` a moment later is left by pointing away
 * from it, and waited for to fold away. */
async function clickPastMenu(person: Person, target: Locator, name: string): Promise<void> {
  const page = person.page;
  const open = page.locator(".ant-menu-submenu-popup:not(.ant-menu-submenu-hidden)");
  const covered = () =>
    target.evaluate((element) => {
      const box = element.getBoundingClientRect();
      const hit = document.elementFromPoint(box.x + box.width / 2, box.y + box.height / 2);
      return hit !== null && !element.contains(hit) && hit.closest(".ant-menu-submenu-popup") !== null;
    });
  if (await covered()) {
    const folded = await person.waitFor("the menu folding away", () =>
      until("the menu folded away", async () => ((await open.count()) === 0 ? true : undefined), 1_000).catch(() => false),
    );
    if (!folded && (await covered())) {
      await person.hover(page.locator("body"), "off the menu");
      await person.waitFor("the menu folded away", () =>
        until("the menu folded away", async () => ((await open.count()) === 0 ? true : undefined)),
      );
    }
  }
  await person.click(target, name);
}

interface ChartSeen {
  name: string;
  state: "rendered" | "error";
  /** the error's text, or a glimpse of what the chart shows */
  text: string;
}

/** Every chart of the open dashboard once each has rendered or failed (none still loading). */
async function chartsSettled(page: Page): Promise<ChartSeen[] | undefined> {
  const charts = page.locator('[data-test="chart-grid-component"]');
  if (!(await charts.count())) return undefined;
  const seen = await charts.evaluateAll((found) =>
    found.map((chart) => {
      const name = (chart.querySelector('[data-test="slice-header"] [data-test="editable-title"]') as HTMLElement | null)?.innerText.trim() ?? "";
      const alert = chart.querySelector(".ant-alert-error, .dashboard-chart [role='alert']") as HTMLElement | null;
      if (alert) return { name, state: "error", text: alert.innerText.trim().replace(/\s+/g, " ") };
      if (chart.querySelector('[data-test="loading-indicator"]')) return undefined;
      const slice = chart.querySelector('[data-test="slice-container"]') as HTMLElement | null;
      const text = slice?.innerText.trim().replace(/\s+/g, " ") ?? "";
      const drawn = slice !== null && slice.querySelector("svg, canvas, table") !== null;
      return text || drawn ? { name, state: "rendered", text: text.slice(0, 120) } : undefined;
    }),
  );
  return seen.every((chart) => chart !== undefined) ? (seen as ChartSeen[]) : undefined;
}

/** Opens the dashboard ``title`` from the Dashboards list shown and waits until each of its charts
 * has rendered or shown its error. */
async function openDashboard(person: Person, title: string): Promise<ChartSeen[]> {
  const page = person.page;
  await person.click(rows(page).getByRole("link", { name: title, exact: true }), title);
  return person.waitFor(`${title}'s charts rendered or failed`, async () => {
    await page.waitForURL(/\/superset\/dashboard\//, { timeout: LONG });
    return until(`${title}'s charts`, () => chartsSettled(page));
  });
}

// ---------------------------------------------------------------- zip bundles (the study's check)

/** A saved export for bench/tasks.py to open (with ops' own bundle reader) and check it holds
 * each of ``titles``. */
function bundleToCheck(zip: string, titles: string[]): { bundle_zip: string; bundle_must_hold: string[] } {
  return { bundle_zip: zip, bundle_must_hold: [...titles] };
}

// ---------------------------------------------------------------- 1. deploy a dashboard dev → prod

/** "Sales Overview" exported from dev's Dashboards list and imported through prod's, then opened in
 * prod until its charts show data.
 *
 * Route: bookmark dev; Dashboards; point at the dashboard's row; its export action (the zip is
 * saved); bookmark prod; Dashboards; the import action; Select file, the zip picked; Import (and,
 * were the dashboard there already, "OVERWRITE" typed and Overwrite); the dashboard opened from
 * the list.
 *
 * The bundle names its database by dev's uuid, which prod's database of the same name does not
 * have. Superset 6.1 asks nothing: its import looks for the uuid, then for any database of the same
 * name (a unique column), finds prod's "examples" and overwrites it with the bundle's settings,
 * dev's uuid and URI among them. So the person has nothing more to do for the charts to work here,
 * where dev and prod point at one file; elsewhere prod's database would now point where dev's did.
 * A bundle whose database has a password makes the import ask for it first. */
export async function deployByHand(person: Person, supersets: Supersets, files: string): Promise<Record<string, unknown>> {
  const page = person.page;
  await mkdir(files, { recursive: true });
  await openHome(person, supersets.dev);
  const devList = await openList(person, "Dashboards");
  if (!(await dashboardTitles(page)).includes(DEPLOYED)) throw new Error(`dev lists no "${DEPLOYED}": ${JSON.stringify(devList.rows)}`);
  const row = rows(page).filter({ has: page.getByRole("link", { name: DEPLOYED, exact: true }) });
  await person.hover(row, `${DEPLOYED}'s row`);
  const saved = await person.download(row.locator('[role="button"]:has([data-test="upload"])'), "export");
  const zip = join(files, saved.suggestedFilename());
  await saved.saveAs(zip);

  await openHome(person, supersets.prod);
  const before = await openList(person, "Dashboards");
  await person.click(page.getByRole("button").filter({ has: page.locator('[data-test="import-button"]') }), "import");
  const dialog = page.getByRole("dialog").filter({ hasText: "Import dashboard" });
  await person.waitFor("the import dialog", () => dialog.getByRole("button", { name: "Select file" }).waitFor({ timeout: LONG }));
  await person.chooseFile(dialog.getByRole("button", { name: "Select file" }), zip, "Select file");
  await person.waitFor("the file in the dialog", () => dialog.getByText(saved.suggestedFilename()).waitFor({ timeout: LONG }));
  await person.click(dialog.locator('[data-test="modal-confirm-button"]'), "Import");
  const overwrite = dialog.locator('[data-test="overwrite-modal-input"]');
  const outcome = await person.waitFor("the import's outcome", () =>
    until("the import's outcome", async () => {
      if (await overwrite.isVisible().catch(() => false)) return "asks to overwrite";
      if (await dialog.getByText(/password/i).first().isVisible().catch(() => false)) return "asks for a password";
      const error = dialog.locator(".ant-alert-error");
      if (await error.isVisible().catch(() => false)) return `error: ${await error.innerText()}`;
      if (await dialog.isHidden()) return "imported";
      return undefined;
    }),
  );
  if (outcome === "asks to overwrite") {
    await person.type(overwrite, "OVERWRITE", "overwrite confirmation");
    await person.click(dialog.locator('[data-test="modal-confirm-button"]'), "Overwrite");
    await person.waitFor("the dialog closed", () => dialog.waitFor({ state: "hidden", timeout: LONG }));
  } else if (outcome !== "imported") {
    throw new Error(`prod's import ${outcome}`);
  }
  const listed = await person.waitFor(`${DEPLOYED} in prod's list`, () =>
    until(`${DEPLOYED} in prod's list`, async () => {
      const titles = await dashboardTitles(page);
      return titles.includes(DEPLOYED) && (await listShown(page)) ? titles : undefined;
    }),
  );
  const charts = await openDashboard(person, DEPLOYED);
  const failing = charts.filter((chart) => chart.state !== "rendered" || !chart.text);
  if (!charts.length || failing.length) throw new Error(`prod's ${DEPLOYED} does not show its data: ${JSON.stringify(charts)}`);
  return {
    exported: saved.suggestedFilename(),
    ...bundleToCheck(zip, [DEPLOYED]),
    import: outcome,
    prodDashboardsBefore: column(before, "Name").filter(Boolean),
    prodDashboardsAfter: listed,
    prodCharts: charts,
  };
}

// ---------------------------------------------------------------- 2. the broken dashboards

/** Every dashboard in dev's list opened in turn (the person does not know which is broken), its
 * charts waited for until each has rendered or shown an error, the failing ones noted.
 *
 * Route: bookmark dev; Dashboards; per dashboard: its title, the charts read, Dashboards again
 * (not after the last). */
export async function findBrokenByHand(person: Person, supersets: Supersets, _files: string): Promise<Record<string, unknown>> {
  const page = person.page;
  await openHome(person, supersets.dev);
  await openList(person, "Dashboards");
  const titles = await dashboardTitles(page);
  const dashboards: { title: string; charts: ChartSeen[] }[] = [];
  for (const [index, title] of titles.entries()) {
    dashboards.push({ title, charts: await openDashboard(person, title) });
    if (index < titles.length - 1) await openList(person, "Dashboards");
  }
  const broken = dashboards
    .filter((dashboard) => dashboard.charts.some((chart) => chart.state === "error"))
    .map((dashboard) => ({
      dashboard: dashboard.title,
      failing: dashboard.charts.filter((chart) => chart.state === "error").map((chart) => ({ chart: chart.name, error: chart.text })),
    }));
  return { checked: titles, broken, dashboards };
}

// ---------------------------------------------------------------- 3. back up prod

/** Every prod dashboard exported in one zip: Dashboards list, Bulk select, Select all, Export.
 * Superset has no maintenance mode: the backup is the whole job done by hand.
 *
 * Route: bookmark prod; Dashboards; Bulk select; the Select all box; Export (the zip is saved). */
export async function backUpProdByHand(person: Person, supersets: Supersets, files: string): Promise<Record<string, unknown>> {
  const page = person.page;
  await mkdir(files, { recursive: true });
  await openHome(person, supersets.prod);
  await openList(person, "Dashboards");
  const listed = await dashboardTitles(page);
  if (!listed.length) throw new Error("prod lists no dashboard to back up");
  const total = await page.getByText(/^\d+-\d+ of \d+$/).innerText();
  if (!total.endsWith(` of ${listed.length}`)) throw new Error(`prod's list has more than one page (${total}): Select all takes one`);
  await person.click(page.locator('[data-test="bulk-select"]'), "Bulk select");
  const selectAll = page.getByRole("checkbox", { name: "Select all" });
  await person.waitFor("the list's check boxes", () => selectAll.waitFor({ timeout: LONG }));
  await person.click(selectAll, "Select all");
  const controls = page.locator('[data-test="bulk-select-controls"]');
  await person.waitFor("all selected", () =>
    until("all selected", async () => {
      const selected = await controls.locator('[data-test="bulk-select-copy"]').innerText();
      return selected === `${listed.length} Selected` ? true : undefined;
    }),
  );
  const saved = await person.download(controls.getByRole("button", { name: "Export", exact: true }), "Export");
  const zip = join(files, `backup-${saved.suggestedFilename()}`);
  await saved.saveAs(zip);
  return { listed: [...listed].sort(), backup: saved.suggestedFilename(), ...bundleToCheck(zip, listed), maintenanceMode: "none in Superset" };
}

// ---------------------------------------------------------------- 4. a counting query, as CSV

/** The text Ace shows in the editor (its lines, as drawn). */
async function editorText(editor: Locator): Promise<string> {
  const lines = await editor.locator(".ace_text-layer .ace_line").allInnerTexts();
  return lines.join("\n").replace(/\u00a0/g, " ");
}

/** The orders counted per status in dev's SQL Lab on the examples database, downloaded as CSV.
 *
 * Route: bookmark dev; SQL menu, SQL Lab; "Add a new tab" when SQL Lab has none open (a fresh
 * person's has none); examples checked (chosen if another database is); the editor clicked,
 * Ctrl+A, the query typed; Ctrl+Enter; the download-to-CSV action of the results.
 *
 * Ace closes a typed "(" with ")" and steps over the ")" typed next, so the typed text is what runs;
 * its live autocompletion shows no list for this text (a list left open would be closed with
 * Escape). CSV download needs no config flag: it shows to roles holding "can export csv on SQLLab"
 * (Admin does); ALLOW_FULL_CSV_EXPORT only concerns results past the display limit. */
export async function countAndExportByHand(person: Person, supersets: Supersets, files: string): Promise<Record<string, unknown>> {
  const page = person.page;
  await mkdir(files, { recursive: true });
  await openHome(person, supersets.dev);
  await fromMenu(person, "SQL", "SQL Lab");
  const editor = page.locator(".ace_editor").first();
  const addTab = page.getByText("Add a new tab", { exact: true });
  const opened = await person.waitFor("SQL Lab", () =>
    until("SQL Lab", async () => {
      if (await editor.isVisible().catch(() => false)) return "a tab";
      if (await addTab.isVisible().catch(() => false)) return "no tab";
      return undefined;
    }),
  );
  if (opened === "no tab") {
    await clickPastMenu(person, addTab, "Add a new tab");
    await person.waitFor("a new tab's editor", () => editor.waitFor({ timeout: LONG }));
  }
  const database = page.locator('[data-test="sql-editor-left-bar"] [data-test="DatabaseSelector"]');
  const chosen = await person.waitFor("the tab's database", () =>
    until("the tab's database", async () => {
      const name = (await database.locator(".name").innerText().catch(() => "")).trim();
      return name || undefined;
    }),
  );
  if (chosen !== EXAMPLES) await chooseDatabase(person, EXAMPLES);

  await clickPastMenu(person, editor, "SQL editor");
  await person.press("Control+a");
  await person.type(editor, COUNT_SQL, "SQL editor");
  const typed = await editorText(editor);
  if (typed !== COUNT_SQL) throw new Error(`the editor holds ${JSON.stringify(typed)}, not the query typed`);
  if (await page.locator(".ace_autocomplete").isVisible().catch(() => false)) await person.press("Escape");
  await person.press("Control+Enter");

  const download = page.locator('[data-test="export-csv-button"]');
  const rowCount = await person.waitFor("the query's results", async () => {
    await download.waitFor({ timeout: LONG });
    return until("the row count", async () => {
      const tag = await page.getByText(/^\d+ rows?$/).first().innerText().catch(() => "");
      return tag || undefined;
    });
  });
  const ran = (await page.locator('[data-test="span-modal-trigger"]').first().innerText()).replace(/\s+/g, " ").trim();
  const saved = await person.download(download, "Download to CSV");
  const file = join(files, saved.suggestedFilename());
  await saved.saveAs(file);
  const csv = (await readFile(file, "utf8")).replace(/^\ufeff/, "");
  const lines = csv.trim().split(/\r?\n/);
  if (lines[0] !== "status,orders") throw new Error(`the CSV's header is ${JSON.stringify(lines[0])}`);
  const statuses = lines.slice(1).map((line) => line.split(",")[0]);
  if (statuses.length < 1 || new Set(statuses).size !== statuses.length || statuses.length !== Number.parseInt(rowCount, 10)) {
    throw new Error(`the CSV holds ${JSON.stringify(lines)} where SQL Lab showed ${rowCount}`);
  }
  return { sql: typed, ran, shown: rowCount, file: saved.suggestedFilename(), csv };
}

/** ``name`` chosen as the SQL Lab tab's database in the database-and-schema dialog. */
async function chooseDatabase(person: Person, name: string): Promise<void> {
  const page = person.page;
  const database = page.locator('[data-test="sql-editor-left-bar"] [data-test="DatabaseSelector"]');
  await person.click(database, "database");
  const popover = page.locator(".ant-popover").filter({ hasText: "Select Database and Schema" });
  const select = popover.locator(".ant-select").first();
  await person.waitFor("the database dialog", () => select.waitFor({ timeout: LONG }));
  await person.click(select, "Database");
  const option = page.locator(".ant-select-dropdown:not(.ant-select-dropdown-hidden) .ant-select-item-option").filter({ hasText: name });
  await person.waitFor("the databases", () => option.first().waitFor({ timeout: LONG }));
  await person.click(option.first(), name);
  await person.click(popover.getByRole("button", { name: "Select", exact: true }), "Select");
  await person.waitFor(`${name} chosen`, () =>
    until(`${name} chosen`, async () => {
      if (await popover.isVisible()) return undefined;
      return (await database.locator(".name").innerText()).trim() === name ? true : undefined;
    }),
  );
}

// ---------------------------------------------------------------- 5. who can see a dashboard

/** The option of an open pick list whose text matches ``label``, found as a person finds it in a
 * list that cannot be searched: read down a boxful at a time (the list loads more at its end),
 * and when the end has come without it (each page the list loads is sorted in among the rest, so
 * what was looked for may now be above), the wheel spun back to the top and the list read down
 * again; clicked once in view. */
async function pickScrolling(person: Person, field: Locator, label: RegExp, name: string): Promise<string> {
  const page = person.page;
  await clickPastMenu(person, field, name);
  const dropdown = page.locator(".ant-select-dropdown:not(.ant-select-dropdown-hidden)");
  const holder = dropdown.locator(".rc-virtual-list-holder");
  const option = dropdown.locator(".ant-select-item-option").filter({ hasText: label });
  await person.waitFor(`${name}'s options`, () => dropdown.locator(".ant-select-item-option").first().waitFor({ timeout: LONG }));
  const scrolled = () =>
    holder.evaluate(
      (list) =>
        new Promise<{ top: number; height: number; box: number; row: number }>((resolve) =>
          requestAnimationFrame(() =>
            resolve({
              top: list.scrollTop,
              height: list.scrollHeight,
              box: list.clientHeight,
              row: list.querySelector(".ant-select-item")?.getBoundingClientRect().height ?? 32,
            }),
          ),
        ),
    );
  const inView = async (): Promise<boolean> => {
    if (!(await option.count())) return false; // not drawn: a virtual list draws what is in view
    const [list, found] = [await holder.boundingBox(), await option.first().boundingBox()];
    return !!list && !!found && found.y >= list.y && found.y + found.height <= list.y + list.height;
  };
  let reading = true;
  let passes = 1;
  for (let turn = 0; turn < 300; turn++) {
    if (await inView()) {
      const text = (await option.first().innerText()).trim();
      await person.click(option.first(), text);
      return text;
    }
    const { top, height, box, row } = await scrolled();
    if (reading && top + box >= height - 1) {
      // the end of what has loaded: more comes in while the person looks, or this is the end
      const grew = await person.waitFor(`${name}: the end of the list`, () =>
        until("more options", async () => ((await scrolled()).height > height ? true : undefined), 1_000).catch(() => false),
      );
      if (grew) continue;
      if (passes === 2) break;
      reading = false;
    } else if (!reading && top <= 0) {
      reading = true;
      passes = 2;
    } else {
      // reading: a boxful less one row, so no row goes by unseen; back to the top: a fast spin
      await person.scroll(holder, reading ? Math.round(box - row) : -WHEEL_TURN, `${name}'s options`);
    }
  }
  throw new Error(`no option ${label} in ${name}, read through twice`);
}

/** The role names List Roles shows, once they differ from ``before`` (a filter just changed). */
async function rolesShown(person: Person, before: string[], what: string): Promise<string[]> {
  return person.waitFor(what, () =>
    until(what, async () => {
      const shown = await listShown(person.page);
      if (!shown) return undefined;
      const names = column(shown, "Name");
      return JSON.stringify(names) !== JSON.stringify(before) ? names : undefined;
    }),
  );
}

/** Who can see "Sales Overview" in dev: its charts' datasets (Charts list), the roles that give
 * access to them (List Roles, by its Permissions filter: all datasource access, then datasource
 * access on each dataset), the users holding those roles (List Users, its Roles column).
 *
 * Route: bookmark dev; Charts (the list's Dataset and On dashboards columns read); Settings menu,
 * List Roles; the Permissions filter, its list scrolled to "all datasource access" (the list
 * cannot be searched in 6.1: every search fails, see the file's head), clicked, the roles read;
 * the filter again, scrolled to "datasource access [examples].[sales]", clicked, the roles read;
 * Settings menu, List Users, each user's roles read.
 *
 * Not covered, as the route above does not: "all database access", "database access" on the
 * examples database and "schema access" on its schema grant the dataset too (no role here holds
 * them but Admin's all); a dashboard's own roles (DASHBOARD_RBAC) are off here. */
export async function whoCanSeeByHand(person: Person, supersets: Supersets, _files: string): Promise<Record<string, unknown>> {
  const page = person.page;
  await openHome(person, supersets.dev);
  const charts = await openList(person, "Charts");
  const onDashboards = column(charts, "On dashboards");
  const datasets = [...new Set(column(charts, "Dataset").filter((_, index) => onDashboards[index]?.split(/\s*,\s*|\n/).includes(DEPLOYED)))];
  if (!datasets.length) throw new Error(`no chart of the Charts list is on ${DEPLOYED}: ${JSON.stringify(charts.rows)}`);

  await fromMenu(person, "Settings", "List Roles");
  const allRoles = column(await listAt(person, /^\/roles\//, "List Roles"), "Name");
  const field = page
    .locator('[data-test="select-filter-container"]')
    .filter({ has: page.locator("label", { hasText: /^Permissions$/ }) })
    .locator(".ant-select");
  const granting = new Map<string, string[]>();
  let shown = allRoles;
  const wanted: [RegExp, string][] = [[/^all datasource access all datasource access$/, "all datasource access"]];
  for (const dataset of datasets) {
    const escaped = dataset.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    wanted.push([new RegExp(`^datasource access \\[[^\\]]+\\]\\.\\[${escaped}\\]`), `datasource access on ${dataset}`]);
  }
  for (const [label, what] of wanted) {
    const picked = await pickScrolling(person, field, label, "Permissions");
    shown = await rolesShown(person, shown, `the roles holding ${what}`);
    granting.set(picked, shown);
  }
  const roles = new Set([...granting.values()].flat());

  await fromMenu(person, "Settings", "List Users");
  const users = await listAt(person, /^\/users\//, "List Users");
  const usernames = column(users, "Username");
  const held = column(users, "Roles").map((text) => text.split(/\s*,\s*/).filter(Boolean));
  const seeing = usernames.filter((_, index) => held[index]?.some((role) => roles.has(role))).sort();
  return {
    datasets,
    roles: [...roles].sort(),
    rolesByPermission: Object.fromEntries(granting),
    users: Object.fromEntries(usernames.map((username, index) => [username, held[index] ?? []])),
    canSee: seeing,
  };
}
