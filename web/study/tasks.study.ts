/** SC-006: five multi-step jobs, each done by hand in Superset's own UI and through the agent's
 * page, in Debian's Chromium driven by playwright-core as a person clicks and types. Each job
 * gets a browser context of its own, signed in (not part of the job) to what it needs; what the
 * person did and waited for is written to STUDY_RESULTS for bench/tasks.py, which turns it into
 * the keystroke-level model's estimate. Run by bench/tasks.py against a stack of its own:
 * STUDY_BASE_URL (the page), STUDY_SUPERSET_DEV and STUDY_SUPERSET_PROD, STUDY_FILES (where
 * downloads are kept). */

import { mkdirSync, writeFileSync } from "node:fs";
import { chromium, type Browser, type BrowserContext } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import * as chat from "./chat.ts";
import { Person, type Action } from "./person.ts";
import * as manual from "./superset.ts";

const site = { base: required("STUDY_BASE_URL") };
const supersets = { dev: required("STUDY_SUPERSET_DEV"), prod: required("STUDY_SUPERSET_PROD") };
const FILES = required("STUDY_FILES");
const RESULTS = required("STUDY_RESULTS");
// An admin of the stack's sign-in provider (tools/devstack oidc.DEMO_PEOPLE): Admin in both
// Supersets and in the agent, so neither side is refused anything.
const ADAM = { username: "adam", password: "adam-demo" };
// Each side deploys a dashboard prod does not hold yet, of the same kind (tables of the examples
// database): neither meets an overwrite the other left behind. By hand: superset.ts' "Sales
// Overview", the dashboard whose readers both sides then find.
const DEPLOYED_IN_CHAT = "Orders and Events";
const ASKED_ABOUT = "Sales Overview";
const STATUSES = ["cancelled", "new", "paid", "shipped"]; // the examples database's orders

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

type Way = "manual" | "chat";

interface Outcome {
  task: string;
  way: Way;
  actions: Action[];
  wall_ms: number;
  found: Record<string, unknown>;
}

let browser: Browser;
const outcomes: Outcome[] = [];

beforeAll(async () => {
  mkdirSync(FILES, { recursive: true });
  browser = await chromium.launch({
    executablePath: process.env.STUDY_CHROMIUM ?? "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
});

afterAll(async () => {
  await browser?.close();
  writeFileSync(RESULTS, JSON.stringify(outcomes, null, 1));
});

async function context(): Promise<BrowserContext> {
  return browser.newContext({ viewport: { width: 1280, height: 860 }, locale: "ru-RU", acceptDownloads: true });
}

/** ``job`` done by a person signed in as ``way`` needs (both Supersets, or the page), timed
 * from their first action to the job's end, and written down. */
async function measured(task: string, way: Way, job: (person: Person) => Promise<Record<string, unknown>>): Promise<Record<string, unknown>> {
  const browsing = await context();
  try {
    const page = await browsing.newPage();
    if (way === "manual") {
      await manual.signInToSuperset(page, supersets.dev);
      await manual.signInToSuperset(page, supersets.prod);
    } else {
      await chat.signInToPage(page, site.base, ADAM);
    }
    const person = new Person(page);
    const started = performance.now();
    const found = await job(person);
    outcomes.push({ task, way, actions: person.actions, wall_ms: Math.round(performance.now() - started), found });
    return found;
  } finally {
    await browsing.close();
  }
}

const csvLines = (csv: unknown) => String(csv).trim().split(/\r?\n/);

describe("SC-006: five jobs, by hand in Superset and in the agent's page", () => {
  it("deploys a dashboard from dev to prod", async () => {
    await measured("deploy", "manual", (person) => manual.deployByHand(person, supersets, FILES));
    await measured("deploy", "chat", (person) => chat.deployInChat(person, site, DEPLOYED_IN_CHAT));
  });

  it("finds the broken dashboards and the failing chart", async () => {
    const byHand = await measured("broken", "manual", (person) => manual.findBrokenByHand(person, supersets, FILES));
    expect(JSON.stringify(byHand)).toContain("Legacy uptime");
    const inChat = await measured("broken", "chat", (person) => chat.findBrokenInChat(person, site));
    expect(inChat.answer).toContain("Legacy uptime");
  });

  it("backs up prod and starts a maintenance window", async () => {
    await measured("backup", "manual", (person) => manual.backUpProdByHand(person, supersets, FILES));
    await measured("backup", "chat", (person) => chat.backUpAndMaintainInChat(person, site));
  });

  it("runs a counting query and exports the result", async () => {
    for (const way of ["manual", "chat"] as const) {
      const found =
        way === "manual"
          ? await measured("count", way, (person) => manual.countAndExportByHand(person, supersets, FILES))
          : await measured("count", way, (person) => chat.countAndExportInChat(person, site, FILES));
      const lines = csvLines(found.csv);
      expect(lines).toHaveLength(1 + STATUSES.length); // a header and a row per status
      expect(lines.slice(1).map((line) => line.split(",")[0]).sort()).toEqual(STATUSES);
    }
  });

  it("finds who can see a dashboard", async () => {
    const byHand = await measured("access", "manual", (person) => manual.whoCanSeeByHand(person, supersets, FILES));
    const inChat = await measured("access", "chat", (person) => chat.whoCanSeeInChat(person, site, ASKED_ABOUT));
    for (const username of ["alice", "vera", "anna"]) {
      expect(JSON.stringify(byHand)).toContain(username);
      expect(inChat.answer).toContain(username);
    }
  });
});
