/** Sign-in at ops (`POST /api/auth/login`, same origin); the token is kept for the browser session. */

const KEY = "sstools.session";

export interface Session {
  token: string;
  username: string;
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
  const body = (await response.json()) as { access_token: string };
  const session = { token: body.access_token, username };
  sessionStorage.setItem(KEY, JSON.stringify(session));
  return session;
}

export interface EnvironmentChoice {
  id: string;
  name: string;
  production: boolean;
}

/** Where the person may point the page (ops: ids and names only). */
export async function environments(token: string): Promise<EnvironmentChoice[]> {
  const response = await fetch("/api/auth/environments", { headers: { Authorization: `Bearer ${token}` } });
  return response.ok ? ((await response.json()) as EnvironmentChoice[]) : [];
}

export function currentSession(): Session | null {
  const kept = sessionStorage.getItem(KEY);
  return kept ? (JSON.parse(kept) as Session) : null;
}

export function logout(): void {
  sessionStorage.removeItem(KEY);
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
