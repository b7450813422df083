/** Files the person attaches go to convo first (same origin, their JWT, the raw file as the body);
 * the message then names them by the ids convo issued — never by a path or anything else. An
 * upload convo refuses (too large, over the person's quota, a bad name) ends the turn with a typed
 * error before the message is sent. */

import type { WireMessage } from "./types";

export interface UploadedFile {
  uploadId: string;
  name: string;
  sizeBytes: number;
}

/** Convo said no: `code` is the stream's error code for it. */
export class UploadRefused extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const CODES: Record<number, string> = {
  401: "UNAUTHORIZED",
  404: "CONVERSATION_NOT_FOUND",
  413: "UPLOAD_TOO_LARGE",
  422: "UPLOAD_INVALID_NAME",
  429: "UPLOAD_QUOTA_EXCEEDED",
};

export function uploadPath(conversationId: string, name: string): string {
  return `/api/assistant/conversations/${encodeURIComponent(conversationId)}/uploads?name=${encodeURIComponent(name)}`;
}

/** One file to convo; throws UploadRefused when convo answers with an error (a network failure
 * is thrown as it is). */
export async function uploadFile(
  file: File,
  conversationId: string,
  token: string,
  origin: string,
  fetcher: typeof fetch = fetch,
): Promise<UploadedFile> {
  const response = await fetcher(new URL(uploadPath(conversationId, file.name), origin).href, {
    method: "POST",
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/octet-stream" },
    body: file,
  });
  if (!response.ok) {
    let detail: { code?: string; message?: string } = {};
    try {
      detail = ((await response.json()) as { detail?: typeof detail }).detail ?? {};
    } catch {
      // not JSON (a proxy's page): the status says enough
    }
    const why = detail.message ?? detail.code ?? `HTTP ${response.status}`;
    throw new UploadRefused(CODES[response.status] ?? "UPLOAD_FAILED", `${file.name}: ${why}`);
  }
  const body = (await response.json()) as { upload_id: string; name: string; size_bytes: number };
  return { uploadId: body.upload_id, name: body.name, sizeBytes: body.size_bytes };
}

/** Every file, one after another; their ids in order. */
export async function uploadFiles(
  files: readonly File[],
  conversationId: string,
  token: string,
  origin: string,
  fetcher: typeof fetch = fetch,
): Promise<string[]> {
  const ids: string[] = [];
  for (const file of files) ids.push((await uploadFile(file, conversationId, token, origin, fetcher)).uploadId);
  return ids;
}

/** The `files` input of /chat: a JSON list of upload ids, or empty for none. */
export function filesInput(uploadIds: readonly string[]): string {
  return uploadIds.length > 0 ? JSON.stringify(uploadIds) : "";
}

/** A refused upload as the turn's stream would say it: the error, then a failed state. */
export function refusalMessages(refusal: UploadRefused): WireMessage[] {
  return [
    { role: "assistant", content: refusal.message, metadata: { type: "error", code: refusal.code, message: refusal.message } },
    { role: "assistant", content: "failed", metadata: { type: "state", state: "failed" } },
  ];
}
