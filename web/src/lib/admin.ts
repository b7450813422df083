/** The admin console's calls (`/agent/admin`): ops' accounts and audit trail, convo's audit of the
 * agent's commands, all under the admin's own token (SessionApi: renewed as the chat's calls
 * are), and what their refusals mean in words. */

import type { SessionApi } from "./chat/api.ts";
import type { AuditRecordOut } from "./generated/contracts.ts";
import { ApiError } from "./chat/api.ts";
import type { Lang, StringKey } from "./i18n.ts";

export const ROLES = ["viewer", "analyst", "operator", "admin"] as const;
export type Role = (typeof ROLES)[number];

/** What the agent decided about a command (convo's `decision`). */
export const DECISIONS = ["allowed", "denied", "refused", "needs_confirmation", "confirmed", "rejected"] as const;
/** How a command ended (the turn's final state, convo's `outcome`). */
export const OUTCOMES = [
  "success",
  "started",
  "failed",
  "cancelled",
  "denied",
  "needs_confirmation",
  "needs_clarification",
  "issues_found",
] as const;

/** The shortest password ops takes (ops' PASSWORD_MIN_CHARS). */
export const PASSWORD_MIN_CHARS = 12;

export interface LastSignIn {
  method: "password" | "sso";
  at: string;
  address: string;
  /** Single sign-on: the provider's group whose mapping gave the role (null: the default role). */
  group: string | null;
}

export interface Account {
  username: string;
  role: Role;
  active: boolean;
  /** Made by single sign-on: no password lets them in, and none may be set. */
  sso_only: boolean;
  last_sign_in: LastSignIn | null;
  /** The provider's subject whose single sign-ons are this account (null: none is). */
  sso_subject: SsoSubject | null;
}

export interface SsoSubject {
  issuer: string;
  subject: string;
}

/** What a change answers: the account's name, role and whether active. */
export type AccountChanged = Pick<Account, "username" | "role" | "active">;

/** One command the agent took, as convo's audit API returns it (generated from its models). */
export type AgentAuditRecord = AuditRecordOut;

export interface OpsAuditEntry {
  id: string;
  at: string;
  user: string;
  service: string;
  action: string;
  env: string;
  outcome: string;
  detail: Record<string, unknown>;
}

/** A page of a listing, and where the next starts (null: none follows). */
export interface Listing<T> {
  items: T[];
  next_cursor: string | null;
  total?: number;
}

export interface PeopleFilters {
  q: string;
  role: Role | "";
  /** "true" active ones, "false" disabled ones, "" both. */
  active: "" | "true" | "false";
}

/** The filters of an audit listing as the form holds them; `since` and `until` as a
 * `datetime-local` input gives them (the browser's local time, no zone). */
export interface AgentAuditFilters {
  user: string;
  tool: string;
  env: string;
  decision: string;
  outcome: string;
  since: string;
  until: string;
}

export interface OpsAuditFilters {
  user: string;
  action: string;
  env: string;
  outcome: string;
  since: string;
  until: string;
}

export const PAGE_SIZE = 50;

export function noPeopleFilters(): PeopleFilters {
  return { q: "", role: "", active: "" };
}

export function noAgentAuditFilters(): AgentAuditFilters {
  return { user: "", tool: "", env: "", decision: "", outcome: "", since: "", until: "" };
}

export function noOpsAuditFilters(): OpsAuditFilters {
  return { user: "", action: "", env: "", outcome: "", since: "", until: "" };
}

/** A `datetime-local` value (local time) as ISO-8601 with its zone, which the APIs require;
 * null for an empty or unreadable one. */
export function zonedTime(local: string): string | null {
  if (!local.trim()) return null;
  const at = new Date(local);
  return Number.isNaN(at.getTime()) ? null : at.toISOString();
}

/** `?name=value&...` of the parameters that are set (trimmed, empties left out), or "". */
export function queryString(params: Record<string, string | number | null | undefined>): string {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    const text = value === null || value === undefined ? "" : String(value).trim();
    if (text) query.set(name, text);
  }
  const built = query.toString();
  return built ? `?${built}` : "";
}

export function peopleQuery(filters: PeopleFilters, cursor: string | null = null, limit = PAGE_SIZE): string {
  return queryString({ q: filters.q, role: filters.role, active: filters.active, limit, cursor });
}

/** Convo's audit filters (the CSV takes the same, without `limit` and `cursor`). */
export function agentAuditQuery(filters: AgentAuditFilters, page: { cursor: string | null; limit: number } | null = null): string {
  return queryString({
    user: filters.user,
    tool: filters.tool,
    env: filters.env,
    decision: filters.decision,
    outcome: filters.outcome,
    since: zonedTime(filters.since),
    until: zonedTime(filters.until),
    ...(page ? { limit: page.limit, cursor: page.cursor } : {}),
  });
}

export function opsAuditQuery(filters: OpsAuditFilters, page: { cursor: string | null; limit: number } | null = null): string {
  return queryString({
    user: filters.user,
    action: filters.action,
    env: filters.env,
    outcome: filters.outcome,
    since: zonedTime(filters.since),
    until: zonedTime(filters.until),
    ...(page ? { limit: page.limit, cursor: page.cursor } : {}),
  });
}

/** Why a new password cannot be sent (it is checked by ops as well), or null. */
export function passwordProblem(password: string, again: string): StringKey | null {
  if (password.length < PASSWORD_MIN_CHARS) return "adminErr_password_short";
  if (password !== again) return "adminErr_password_mismatch";
  return null;
}

const CODES: Record<string, StringKey> = {
  user_exists: "adminErr_user_exists",
  user_not_found: "adminErr_user_not_found",
  last_admin: "adminErr_last_admin",
  sso_only: "adminErr_sso_only",
  subject_linked: "adminErr_subject_linked",
  sso_off: "adminErr_sso_off",
  permission_denied: "adminErr_permission_denied",
  audit_record_not_found: "adminErr_record_not_found",
  bad_cursor: "adminErr_invalid",
};

/** What a refused call means, in the page's words: ops' and convo's typed codes, and which
 * field a 422 names (FastAPI's `detail` list of `{loc, msg, type}`). */
export function problemKey(error: unknown): StringKey {
  if (!(error instanceof ApiError)) return "adminErr_failed";
  const known = error.code === null ? undefined : CODES[error.code];
  if (known) return known;
  if (error.status === 403) return "adminErr_permission_denied";
  if (error.status === 404) return "adminErr_user_not_found";
  if (error.status === 422 || error.status === 400) {
    const fields = Array.isArray(error.detail)
      ? error.detail.map((problem: { loc?: unknown[] }) => String(problem?.loc?.at(-1) ?? ""))
      : [];
    if (fields.includes("password")) return "adminErr_password_short";
    if (fields.includes("username")) return "adminErr_username";
    if (fields.includes("tool")) return "adminErr_unknown_tool";
    if (fields.includes("env")) return "adminErr_unknown_env";
    // a Period refused as a whole: since not before until
    if (fields.some((field) => field === "" || field === "query" || field === "since" || field === "until")) {
      return "adminErr_period";
    }
    return "adminErr_invalid";
  }
  return "adminErr_failed";
}

/** The admin's calls, each under their token. */
export class AdminApi {
  constructor(private readonly api: SessionApi) {}

  people(filters: PeopleFilters, cursor: string | null = null): Promise<Listing<Account>> {
    return this.api.json(`/api/admin/users${peopleQuery(filters, cursor)}`);
  }

  person(username: string): Promise<Account> {
    return this.api.json(`/api/admin/users/${encodeURIComponent(username)}`);
  }

  add(username: string, password: string, role: Role): Promise<AccountChanged> {
    return this.api.send("POST", "/api/admin/users", { username, password, role });
  }

  change(username: string, change: { role?: Role; active?: boolean }): Promise<AccountChanged> {
    return this.api.send("PATCH", `/api/admin/users/${encodeURIComponent(username)}`, change);
  }

  setPassword(username: string, password: string): Promise<AccountChanged> {
    return this.api.send("POST", `/api/admin/users/${encodeURIComponent(username)}/password`, { password });
  }

  /** Single sign-ons of `subject` (at the configured provider) are this account from now on. */
  link(username: string, subject: string): Promise<AccountChanged> {
    return this.api.send("PUT", `/api/admin/users/${encodeURIComponent(username)}/sso`, { subject });
  }

  unlink(username: string): Promise<AccountChanged> {
    return this.api.json(`/api/admin/users/${encodeURIComponent(username)}/sso`, { method: "DELETE" });
  }

  agentAudit(filters: AgentAuditFilters, cursor: string | null = null): Promise<Listing<AgentAuditRecord>> {
    return this.api.json(`/api/assistant/audit${agentAuditQuery(filters, { cursor, limit: PAGE_SIZE })}`);
  }

  agentRecord(id: string): Promise<AgentAuditRecord> {
    return this.api.json(`/api/assistant/audit/${encodeURIComponent(id)}`);
  }

  /** Every record the filters name, as convo's CSV (fetched under the token, never a URL
   * carrying it). */
  agentAuditCsv(filters: AgentAuditFilters): Promise<Blob> {
    return this.api.blob(`/api/assistant/audit.csv${agentAuditQuery(filters)}`);
  }

  opsAudit(filters: OpsAuditFilters, cursor: string | null = null): Promise<Listing<OpsAuditEntry>> {
    return this.api.json(`/api/admin/audit${opsAuditQuery(filters, { cursor, limit: PAGE_SIZE })}`);
  }

  opsAuditCsv(filters: OpsAuditFilters): Promise<Blob> {
    return this.api.blob(`/api/admin/audit.csv${opsAuditQuery(filters)}`);
  }
}

/** A file the browser saves, from what was fetched. */
export function saveFile(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob);
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** Saves the CSV ``fetch`` gives as ``name``; what went wrong, in the page's words, or null. */
export async function savedCsv(fetch: () => Promise<Blob>, name: string): Promise<StringKey | null> {
  try {
    saveFile(await fetch(), name);
    return null;
  } catch (failure) {
    return problemKey(failure);
  }
}

/** When an audit record was made, in the page's language, to the second. */
export function auditTime(iso: string, lang: Lang): string {
  return new Date(iso).toLocaleString(lang === "ru" ? "ru-RU" : "en-GB", { dateStyle: "short", timeStyle: "medium" });
}
