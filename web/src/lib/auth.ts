/** Sign-in at ops (`POST /api/auth/login`, same origin); the tokens are kept for the browser
 * session. The access token is short-lived: the refresh token renews it without the person
 * noticing (`renewSession`), until ops refuses (expired, signed out, disabled). */

import type { SessionTokens } from "./chat/types.ts";
import type { StringKey } from "./i18n.ts";

const KEY = "sstools.session";

export interface Session {
  token: string;
  username: string;
  /** The person's role at ops (viewer, analyst, operator, admin) as ops last said it; the page's
   * header names it. Absent in a session kept before roles were, or when ops could not say. */
  role?: string;
  refreshToken?: string;
  /** When the access token ends (ms since the epoch). */
  expiresAt?: number;
}

/** Who a session is: its person's name and role. */
export type Person = Pick<Session, "username" | "role">;

interface Issued {
  access_token: string;
  expires_in: number;
  refresh_token: string;
}

function keep(person: Person, issued: Issued): Session {
  const session: Session = {
    token: issued.access_token,
    username: person.username,
    ...(person.role ? { role: person.role } : {}),
    refreshToken: issued.refresh_token,
    expiresAt: Date.now() + issued.expires_in * 1000,
  };
  sessionStorage.setItem(KEY, JSON.stringify(session));
  return session;
}

/** Who ops says a token's person is now (`GET /api/auth/me`): name, role, and the requests an
 * empty chat offers them. */
export interface Me {
  username: string;
  role: string;
  examples: Example[];
}

async function whoIs(token: string): Promise<Me> {
  const me = await fetch("/api/auth/me", { headers: { Authorization: `Bearer ${token}` } });
  if (!me.ok) throw new LoginFailed(me.status, null, await refusalCode(me));
  return (await me.json()) as Me;
}

/** The kept session's person as ops said it just now (a role changed by an admin, or by the
 * groups of a single sign-on, since the session began); the tokens stay as they are. */
export function rememberPerson(person: Person): Session | null {
  const kept = currentSession();
  if (!kept || kept.username !== person.username) return kept;
  const session = { ...kept, role: person.role };
  sessionStorage.setItem(KEY, JSON.stringify(session));
  return session;
}

/** A refused sign-in; `retryAfter` is set when ops said to wait (429) rather than "wrong";
 * `code` is ops' reason (`detail.code`: `oidc_handoff_foreign`, ...) when it gave one. */
export class LoginFailed extends Error {
  constructor(
    readonly status: number,
    readonly retryAfter: number | null = null,
    readonly code: string | null = null,
  ) {
    super(code ? `${status} ${code}` : String(status));
  }
}

/** The code of ops' refusal (`{"detail": {"code": ...}}`), or null when its body says none. */
async function refusalCode(response: Response): Promise<string | null> {
  try {
    const { detail } = (await response.json()) as { detail?: { code?: unknown } };
    return typeof detail?.code === "string" ? detail.code : null;
  } catch {
    return null; // no JSON (a proxy's own error page)
  }
}

export async function login(username: string, password: string): Promise<Session> {
  const response = await fetch("/api/auth/login", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ username, password }),
  });
  if (response.status === 429) {
    throw new LoginFailed(429, Math.max(1, Number(response.headers.get("Retry-After")) || 1));
  }
  if (!response.ok) throw new LoginFailed(response.status);
  const issued = (await response.json()) as Issued;
  // the role, for the header; the page asks ops again once it begins, so a failure here is not
  // a failed sign-in (the password was right)
  const me = await whoIs(issued.access_token).catch(() => null);
  return keep(me ?? { username }, issued);
}

/** How this ops lets people sign in (`GET /api/auth/methods`): a password, a provider, or both. */
export interface SignInMethods {
  password: boolean;
  sso: { name: string; start: string } | null;
}

export async function signInMethods(): Promise<SignInMethods> {
  const response = await fetch("/api/auth/methods");
  return response.ok ? ((await response.json()) as SignInMethods) : { password: true, sso: null };
}

/** Where the browser goes to sign in through the provider, and comes back to `returnTo` (a path
 * under /agent); `silent`: only if the provider knows the person already (`prompt=none`). */
export function ssoStartUrl(methods: SignInMethods, returnTo: string, silent = false): string {
  const query = new URLSearchParams({ return_to: returnTo });
  if (silent) query.set("prompt", "none");
  return `${methods.sso?.start ?? "/api/auth/oidc/start"}?${query}`;
}

/** What ops' single sign-on left in the address's fragment (`#sso=<hand-off>` or
 * `#sso_error=<code>`), taken out of the address at once so it stays in no history entry. */
export function takeSsoAnswer(): { handoff: string } | { error: string } | null {
  const fragment = new URLSearchParams(location.hash.slice(1));
  const handoff = fragment.get("sso");
  const error = fragment.get("sso_error");
  if (handoff === null && error === null) return null;
  history.replaceState(history.state, "", location.pathname + location.search);
  return handoff !== null ? { handoff } : { error: error ?? "oidc_denied" };
}

/** Why a hand-off was not taken, as the sign-in page explains it: ops' reasons it knows, else
 * "sso_failed" (a network failure, a server error, a reason this page does not know). */
const HANDOFF_REFUSALS: readonly string[] = ["oidc_handoff_foreign", "oidc_handoff_invalid", "user_inactive"];

export function handoffRefusal(error: unknown): string {
  return error instanceof LoginFailed && error.code !== null && HANDOFF_REFUSALS.includes(error.code)
    ? error.code
    : "sso_failed";
}

/** The page's own reason: a hand-off for another person came to a tab where someone is signed in. */
export const HANDOFF_OTHER_PERSON = "handoff_other_person";

/** Takes a single sign-on's hand-off (used once, within a minute) in this tab; null once its
 * session is kept, else why not (a code `ssoMessageKey` explains). Ops takes a hand-off only in
 * the browser that started its sign-in (a cookie of its own), so one carried in from another
 * (login CSRF: `#sso=` of the attacker's sign-in) is refused as `oidc_handoff_foreign`. And a
 * hand-off never changes who is signed in to a tab: where a session is kept, one for another
 * person is revoked at once and the kept session stays (whatever ops checked); one for the same
 * person renews it. */
export async function takeHandoff(handoff: string): Promise<string | null> {
  let issued: Issued;
  let me: Me;
  try {
    const response = await fetch("/api/auth/oidc/session", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ handoff }),
      credentials: "same-origin", // the binding cookie ops set at its callback goes with it
    });
    if (!response.ok) throw new LoginFailed(response.status, null, await refusalCode(response));
    issued = (await response.json()) as Issued;
  } catch (error) {
    return handoffRefusal(error);
  }
  try {
    me = await whoIs(issued.access_token);
  } catch (error) {
    revoke(issued.refresh_token); // a session no one here will use
    return handoffRefusal(error);
  }
  const before = currentSession();
  if (before && before.username !== me.username) {
    revoke(issued.refresh_token);
    return HANDOFF_OTHER_PERSON;
  }
  if (before?.refreshToken) revoke(before.refreshToken);
  keep(me, issued);
  return null;
}

/** What the sign-in page (or the chat, where someone is signed in) says for a single sign-on's
 * refusal `code`; "sso_failed" for one it does not know. */
const SSO_MESSAGES = new Map<string, StringKey>([
  ["oidc_denied", "sso_oidc_denied"],
  ["oidc_unmapped", "sso_oidc_unmapped"],
  ["oidc_user_disabled", "sso_oidc_user_disabled"],
  ["oidc_last_admin", "sso_oidc_last_admin"],
  ["oidc_name_taken", "sso_oidc_name_taken"],
  ["oidc_handoff_foreign", "sso_oidc_handoff_foreign"],
  ["oidc_handoff_invalid", "sso_oidc_handoff_invalid"],
  ["user_inactive", "sso_oidc_user_disabled"],
  [HANDOFF_OTHER_PERSON, "sso_handoff_other_person"],
]);

/** Said where someone is signed in already (the chat, not the sign-in page): the refusals whose
 * words would ask them to sign in again say that they still are instead. */
const SSO_KEPT_MESSAGES = new Map<StringKey, StringKey>([
  ["sso_oidc_handoff_foreign", "ssoKept_oidc_handoff_foreign"],
  ["sso_oidc_handoff_invalid", "ssoKept_oidc_handoff_invalid"],
  ["sso_failed", "ssoKept_failed"],
]);

/** `embedded`: in a Superset's drawer, where a refused silent try means the provider does not
 * know this browser yet; `signedIn`: said to someone whose session in the tab stays. */
export function ssoMessageKey(code: string, embedded = false, signedIn = false): StringKey {
  if (embedded && code === "oidc_denied") return "ssoSilentFailed";
  const key = SSO_MESSAGES.get(code) ?? "sso_failed";
  return signedIn ? (SSO_KEPT_MESSAGES.get(key) ?? key) : key;
}

const SSO_ERROR_KEY = "sstools.ssoError";

/** Why the last single sign-on did not sign the person in, for the sign-in page to say. */
export function keepSsoError(code: string): void {
  sessionStorage.setItem(SSO_ERROR_KEY, code);
}

export function takeSsoError(): string | null {
  const code = sessionStorage.getItem(SSO_ERROR_KEY);
  sessionStorage.removeItem(SSO_ERROR_KEY);
  return code;
}

let renewing: Promise<Session | null> | null = null;

/** A session whose access token is not `failed`: the kept one if someone renewed it already,
 * else a renewed one; null when ops will not renew it (the person signs in again). One renewal
 * at a time: a refresh token is used up by its renewal, and a second use revokes the session. */
export function renewSession(failed: string): Promise<Session | null> {
  const current = currentSession();
  if (current && current.token !== failed) return Promise.resolve(current);
  renewing ??= renewed(current).finally(() => (renewing = null));
  return renewing;
}

async function renewed(current: Session | null): Promise<Session | null> {
  if (!current?.refreshToken) return null;
  const response = await fetch("/api/auth/refresh", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ refresh_token: current.refreshToken }),
  });
  return response.ok ? keep(current, (await response.json()) as Issued) : null;
}

const RENEW_BEFORE_END_MS = 60_000;

/** The kept session's tokens for the page's calls: an access token near its end (or of unknown
 * end) is renewed before use; `onEnded` runs once, when the session is over (signed out,
 * disabled, expired). */
export function sessionTokens(onEnded: () => void): SessionTokens {
  let over = false;
  return {
    async current() {
      const kept = currentSession();
      if (!kept) return null;
      if ((kept.expiresAt ?? 0) - Date.now() > RENEW_BEFORE_END_MS) return kept.token;
      return (await renewSession(kept.token))?.token ?? kept.token;
    },
    async renew(failed) {
      return (await renewSession(failed))?.token ?? null;
    },
    ended() {
      if (over) return;
      over = true;
      onEnded();
    },
  };
}

export interface EnvironmentChoice {
  id: string;
  name: string;
  production: boolean;
  /** The origin people open this Superset at, when the drawer is installed there. */
  origin: string | null;
}

/** A request an empty chat offers, one the person's role may run (ops: /api/auth/me). */
export interface Example {
  tool: string;
  ru: string;
  en: string;
}

/** Where the person may point the page (ops: ids, names, and each drawer's origin). */
export async function environments(token: string): Promise<EnvironmentChoice[]> {
  const response = await fetch("/api/auth/environments", { headers: { Authorization: `Bearer ${token}` } });
  return response.ok ? ((await response.json()) as EnvironmentChoice[]) : [];
}

export function currentSession(): Session | null {
  const kept = sessionStorage.getItem(KEY);
  return kept ? (JSON.parse(kept) as Session) : null;
}

/** Forget the session here and revoke it at ops (its refresh token; the access token ends soon). */
export function logout(): void {
  const refreshToken = currentSession()?.refreshToken;
  sessionStorage.removeItem(KEY);
  if (refreshToken) revoke(refreshToken);
}

function revoke(refreshToken: string): void {
  void fetch("/api/auth/logout", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ refresh_token: refreshToken }),
  }).catch(() => {});
}

const DRAFT_KEY = "sstools.draft";

/** What the person was writing, and where, when their session ended: kept for this tab until
 * they are signed in again. */
export interface KeptDraft {
  text: string;
  conversationId: string;
}

export function keepDraft(draft: KeptDraft): void {
  sessionStorage.setItem(DRAFT_KEY, JSON.stringify(draft));
}

/** The kept draft, still kept (the sign-in page says so). */
export function keptDraft(): KeptDraft | null {
  const kept = sessionStorage.getItem(DRAFT_KEY);
  return kept ? (JSON.parse(kept) as KeptDraft) : null;
}

/** The kept draft, no longer kept (the chat takes it back). */
export function takeDraft(): KeptDraft | null {
  const kept = keptDraft();
  sessionStorage.removeItem(DRAFT_KEY);
  return kept;
}
