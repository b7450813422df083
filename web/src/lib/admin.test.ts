import { describe, expect, it, vi } from "vitest";
import {
  AdminApi,
  agentAuditQuery,
  auditTime,
  noAgentAuditFilters,
  noOpsAuditFilters,
  noPeopleFilters,
  opsAuditQuery,
  passwordProblem,
  peopleQuery,
  problemKey,
  queryString,
  savedCsv,
  zonedTime,
} from "./admin.ts";
import { ApiError, SessionApi } from "./chat/api.ts";
import { translate } from "./i18n.ts";
import { Paged } from "./Paged.svelte.ts";

describe("the console's query strings", () => {
  it("leave out what is not set, and encode what is", () => {
    expect(queryString({})).toBe("");
    expect(queryString({ q: "", role: null, active: undefined })).toBe("");
    expect(queryString({ q: "  ann a&b ", limit: 50 })).toBe("?q=ann+a%26b&limit=50");
  });

  it("ask ops for people by name, role and whether active, a page at a time", () => {
    expect(peopleQuery(noPeopleFilters())).toBe("?limit=50");
    expect(peopleQuery({ q: "an", role: "admin", active: "false" }, "CUR/=", 20)).toBe(
      "?q=an&role=admin&active=false&limit=20&cursor=CUR%2F%3D",
    );
  });

  it("send a period as ISO-8601 with its zone, the local time the form shows", () => {
    const local = "2026-03-01T10:30";
    expect(zonedTime(local)).toBe(new Date(local).toISOString());
    expect(zonedTime("")).toBeNull();
    expect(zonedTime("not a time")).toBeNull();
  });

  it("name every filter of convo's audit, and paging only for a page (the CSV takes none)", () => {
    const filters = { ...noAgentAuditFilters(), user: "admin", env: "prod", decision: "confirmed", since: "2026-03-01T10:30" };
    const since = encodeURIComponent(new Date("2026-03-01T10:30").toISOString());
    expect(agentAuditQuery(filters)).toBe(`?user=admin&env=prod&decision=confirmed&since=${since}`);
    expect(agentAuditQuery(filters, { cursor: null, limit: 50 })).toBe(`?user=admin&env=prod&decision=confirmed&since=${since}&limit=50`);
    expect(agentAuditQuery({ ...noAgentAuditFilters(), tool: "deploy_dashboard", outcome: "started" }, { cursor: "c", limit: 5 })).toBe(
      "?tool=deploy_dashboard&outcome=started&limit=5&cursor=c",
    );
    expect(agentAuditQuery({ ...noAgentAuditFilters(), until: "garbage" })).toBe(""); // never sent unreadable
  });

  it("name ops' trail's filters: action, not tool", () => {
    expect(opsAuditQuery({ ...noOpsAuditFilters(), user: "cli:root", action: "user.change", outcome: "done" })).toBe(
      "?user=cli%3Aroot&action=user.change&outcome=done",
    );
  });
});

describe("what a refusal means, in words", () => {
  const refused = (status: number, detail: unknown) => new ApiError("POST", "/api/admin/users", status, detail);

  it("reads ops' typed codes", () => {
    expect(problemKey(refused(409, { code: "last_admin", message: "x" }))).toBe("adminErr_last_admin");
    expect(problemKey(refused(409, { code: "user_exists", message: "x" }))).toBe("adminErr_user_exists");
    expect(problemKey(refused(409, { code: "sso_only", message: "x" }))).toBe("adminErr_sso_only");
    expect(problemKey(refused(409, { code: "subject_linked", message: "x" }))).toBe("adminErr_subject_linked");
    expect(problemKey(refused(422, { code: "sso_off", message: "x" }))).toBe("adminErr_sso_off");
    expect(problemKey(refused(404, { code: "user_not_found", message: "x" }))).toBe("adminErr_user_not_found");
    expect(problemKey(refused(403, { code: "permission_denied", required_role: "admin" }))).toBe("adminErr_permission_denied");
    expect(translate("en", problemKey(refused(409, { code: "last_admin" })))).toBe("The last active admin cannot be disabled or demoted.");
  });

  it("names the field a validation error is about", () => {
    const invalid = (field: string) => refused(422, [{ loc: ["body", field], msg: "bad", type: "x" }]);
    expect(problemKey(invalid("password"))).toBe("adminErr_password_short");
    expect(problemKey(invalid("username"))).toBe("adminErr_username");
    expect(problemKey(new ApiError("GET", "/api/assistant/audit", 422, [{ loc: ["query", "tool"], msg: "no tool" }]))).toBe(
      "adminErr_unknown_tool",
    );
    expect(problemKey(refused(422, [{ loc: ["query"], msg: "since must be before until" }]))).toBe("adminErr_period");
    expect(problemKey(refused(422, [{ loc: ["body", "role"], msg: "bad" }]))).toBe("adminErr_invalid");
  });

  it("says it failed for anything else (a network failure, a server error)", () => {
    expect(problemKey(new TypeError("Failed to fetch"))).toBe("adminErr_failed");
    expect(problemKey(refused(500, null))).toBe("adminErr_failed");
  });

  it("has the password checked before it is sent", () => {
    expect(passwordProblem("short", "short")).toBe("adminErr_password_short");
    expect(passwordProblem("twelve-chars-1", "twelve-chars-2")).toBe("adminErr_password_mismatch");
    expect(passwordProblem("twelve-chars-1", "twelve-chars-1")).toBeNull();
  });

  it("is said in both languages", () => {
    for (const key of ["adminErr_last_admin", "adminErr_user_exists", "adminErr_sso_only", "adminOnly", "exportCsv"] as const) {
      expect(translate("ru", key)).toMatch(/[а-яё]/i);
      expect(translate("en", key)).not.toMatch(/[а-яё]/i);
    }
  });
});

/** A SessionApi over a recorded fetch, answering `answer` to every call. */
function apiAnswering(answer: () => Response, ended = vi.fn()) {
  const calls: { url: string; init: RequestInit }[] = [];
  vi.stubGlobal("fetch", async (url: string, init: RequestInit) => (calls.push({ url, init }), answer()));
  const api = new SessionApi({ current: async () => "tok", renew: async () => null, ended });
  return { api, calls, ended };
}

describe("the admin's calls", () => {
  it("send JSON with its type and the person's token, and read the typed refusal", async () => {
    const { api, calls } = apiAnswering(() => Response.json({ detail: { code: "last_admin", message: "no" } }, { status: 409 }));
    const failure = await new AdminApi(api).change("ann/a", { active: false }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ApiError);
    expect((failure as ApiError).code).toBe("last_admin");
    expect((failure as ApiError).message).toBe("PATCH /api/admin/users/ann%2Fa: 409");
    const [{ url, init }] = calls;
    expect(url).toBe("/api/admin/users/ann%2Fa");
    expect(init.method).toBe("PATCH");
    expect(init.body).toBe('{"active":false}');
    const headers = new Headers(init.headers);
    expect(headers.get("Content-Type")).toBe("application/json");
    expect(headers.get("Authorization")).toBe("Bearer tok");
    vi.unstubAllGlobals();
  });

  it("fetch the CSV under the token, the filters in its query and no token in its address", async () => {
    const { api, calls } = apiAnswering(() => new Response("id,created_at\r\n", { headers: { "Content-Type": "text/csv" } }));
    const blob = await new AdminApi(api).agentAuditCsv({ ...noAgentAuditFilters(), user: "admin", env: "prod" });
    expect(await blob.text()).toBe("id,created_at\r\n");
    expect(calls[0].url).toBe("/api/assistant/audit.csv?user=admin&env=prod");
    expect(new Headers(calls[0].init.headers).get("Authorization")).toBe("Bearer tok");
    vi.unstubAllGlobals();
  });

  it("end the session when the token is refused and cannot be renewed", async () => {
    const ended = vi.fn();
    const { api } = apiAnswering(() => Response.json({ detail: { code: "user_inactive" } }, { status: 401 }), ended);
    await expect(new AdminApi(api).people(noPeopleFilters())).rejects.toBeInstanceOf(ApiError);
    expect(ended).toHaveBeenCalledOnce();
    vi.unstubAllGlobals();
  });
});

describe("a listing a page at a time", () => {
  it("adds the next page after those shown, and keeps the total", async () => {
    const load = vi.fn(async (cursor: string | null) =>
      cursor === null ? { items: [1, 2], next_cursor: "p2", total: 3 } : { items: [3], next_cursor: null, total: 3 },
    );
    const paged = new Paged<number>(load);
    await paged.refresh();
    expect([paged.items, paged.next, paged.total]).toEqual([[1, 2], "p2", 3]);
    await paged.more();
    expect([paged.items, paged.next]).toEqual([[1, 2, 3], null]);
    await paged.more(); // nothing follows: not asked
    expect(load).toHaveBeenCalledTimes(2);
    await paged.refresh();
    expect(paged.items).toEqual([1, 2]);
  });

  it("shows only the answer to the newest question", async () => {
    let release: (value: { items: number[]; next_cursor: null }) => void = () => {};
    const slow = new Promise<{ items: number[]; next_cursor: null }>((resolve) => (release = resolve));
    const answers = [slow, Promise.resolve({ items: [2], next_cursor: null })];
    const paged = new Paged<number>(() => answers.shift()!);
    const first = paged.refresh();
    await paged.refresh();
    release({ items: [1], next_cursor: null });
    await first;
    expect(paged.items).toEqual([2]);
    expect(paged.loading).toBe(false);
  });

  it("keeps why a page could not be read, and forgets it once one is", async () => {
    let fail = true;
    const paged = new Paged<number>(async () => {
      if (fail) throw new ApiError("GET", "/x", 403, { code: "permission_denied" });
      return { items: [1], next_cursor: null };
    });
    await paged.refresh();
    expect(problemKey(paged.error)).toBe("adminErr_permission_denied");
    fail = false;
    await paged.refresh();
    expect(paged.error).toBeNull();
  });

  it("replaces a changed item where it is", async () => {
    const paged = new Paged<{ name: string; role: string }>(async () => ({
      items: [{ name: "a", role: "viewer" }, { name: "b", role: "viewer" }],
      next_cursor: null,
    }));
    await paged.refresh();
    paged.replace((item) => item.name === "b", (item) => ({ ...item, role: "admin" }));
    expect(paged.items.map((item) => item.role)).toEqual(["viewer", "admin"]);
  });
});

describe("an export and a record's time", () => {
  it("an export that fails is said in the page's words, and nothing is saved", async () => {
    const saved = vi.fn();
    vi.stubGlobal("URL", { createObjectURL: saved, revokeObjectURL: vi.fn() });
    const refused = new ApiError("GET", "/api/admin/audit.csv", 403, { code: "permission_denied" });
    expect(await savedCsv(() => Promise.reject(refused), "ops-audit.csv")).toBe("adminErr_permission_denied");
    expect(await savedCsv(() => Promise.reject(new TypeError("offline")), "ops-audit.csv")).toBe("adminErr_failed");
    expect(saved).not.toHaveBeenCalled();
    vi.unstubAllGlobals();
  });

  it("a record's time is given to the second, in either language", () => {
    const iso = "2026-12-03T21:05:09Z";
    expect(auditTime(iso, "ru")).toMatch(/^\d{2}\.\d{2}\.\d{4}, \d{2}:\d{2}:09$/);
    expect(auditTime(iso, "en")).toMatch(/^\d{2}\/\d{2}\/\d{4}, \d{2}:\d{2}:09$/);
  });
});
