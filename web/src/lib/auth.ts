/** Sign-in at ops (`POST /api/auth/login`, same origin); the tokens are kept for the browser
 * session. The access token is short-lived: the refresh token renews it without the person
 * noticing (`renewSession`), until ops refuses (expired, signed out, disabled). */

import type { SessionTokens } from "./chat/types.ts";

const KEY = "sstools.session";

export interface Session {
  token: string;
  username: string;
  refreshToken?: string;
  /** When the access token ends (ms since the epoch). */
  expiresAt?: number;
}

interface Issued {
  access_token: string;
  expires_in: number;
  refresh_token: string;
}

function keep(username: string, issued: Issued): Session {
  const session = {
    token: issued.access_token,
    username,
    refreshToken: issued.refresh_token,
    expiresAt: Date.now() + issued.expires_in * 1000,
  };
  sessionStorage.setItem(KEY, JSON.stringify(session));
  return session;
}

/** A refused sign-in; `retryAfter` is set when ops said to wait (429) rather than "wrong". */
export class LoginFailed extends Error {
  constructor(
    status: number,
    readonly retryAfter: number | null = null,
  ) {
    super(String(status));
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
  return keep(username, (await response.json()) as Issued);
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

/** The session a single sign-on's hand-off stands for (used once, within a minute). */
export async function ssoSession(handoff: string): Promise<Session> {
  const response = await fetch("/api/auth/oidc/session", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ handoff }),
  });
  if (!response.ok) throw new LoginFailed(response.status);
  const issued = (await response.json()) as Issued;
  const me = await fetch("/api/auth/me", { headers: { Authorization: `Bearer ${issued.access_token}` } });
  if (!me.ok) throw new LoginFailed(me.status);
  return keep(((await me.json()) as { username: string }).username, issued);
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
  return response.ok ? keep(current.username, (await response.json()) as Issued) : null;
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
  if (refreshToken) {
    void fetch("/api/auth/logout", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ refresh_token: refreshToken }),
    }).catch(() => {});
  }
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
