/** The one way the page talks to the agent: @gradio/client's `submit("/chat", ...)`, iterated with
 * `for await` over data and status events. The model depends on the `ChatTransport` shape only.
 * Attached files are uploaded to convo first (uploads.ts) and the message names their ids. */

import { Client } from "@gradio/client";
import type { WireMessage } from "./types";
import { filesInput, refusalMessages, uploadFiles, UploadRefused } from "./uploads";

export type Action = "send" | "confirm" | "reject";

export interface ChatRequest {
  text: string;
  files: File[];
  conversationId: string;
  action: Action;
  envId: string;
  uiContext: string;
}

export type ChatEvent =
  | { kind: "data"; messages: WireMessage[] }
  | { kind: "status"; stage: "pending" | "generating" | "streaming" | "complete" | "error"; message: string };

export interface ChatJob extends AsyncIterable<ChatEvent> {
  cancel(): Promise<void>;
}

export interface ChatTransport {
  /** Throws when the agent cannot be reached (the model retries). */
  connect(token: string): Promise<void>;
  submit(request: ChatRequest): ChatJob;
}

/** Where the agent's Gradio app is, on the page's own origin (the reverse proxy routes it). */
export const AGENT_PATH = "/api/agent/gradio/";

export class GradioTransport implements ChatTransport {
  #client: Client | null = null;
  #token = "";

  constructor(
    private readonly origin: string,
    private readonly fetcher: typeof fetch = (...args) => fetch(...args),
  ) {}

  async connect(token: string): Promise<void> {
    this.#client = await Client.connect(new URL(AGENT_PATH, this.origin).href, {
      headers: { Authorization: `Bearer ${token}` },
      events: ["data", "status"],
    });
    this.#token = token;
  }

  submit(request: ChatRequest): ChatJob {
    const client = this.#client;
    if (!client) throw new Error("not connected");
    const { origin, fetcher } = this;
    const token = this.#token;
    let job: ReturnType<Client["submit"]> | null = null;
    let cancelled = false;
    return {
      cancel: async () => {
        cancelled = true;
        await job?.cancel();
      },
      async *[Symbol.asyncIterator]() {
        let uploadIds: string[];
        try {
          uploadIds = await uploadFiles(request.files, request.conversationId, token, origin, fetcher);
        } catch (failure) {
          if (!(failure instanceof UploadRefused)) throw failure;
          yield { kind: "data", messages: refusalMessages(failure) };
          yield { kind: "status", stage: "complete", message: "" };
          return;
        }
        if (cancelled) {
          yield { kind: "status", stage: "error", message: "cancelled" };
          return;
        }
        job = client.submit("/chat", [
          request.text,
          request.conversationId,
          request.action,
          request.envId,
          request.uiContext,
          filesInput(uploadIds),
        ]);
        for await (const event of job) {
          if (event.type === "data") {
            yield { kind: "data", messages: messagesOf(event.data) };
          } else if (event.type === "status") {
            const text = typeof event.message === "string" ? event.message : "";
            yield { kind: "status", stage: event.stage, message: text };
            if (event.stage === "complete" || event.stage === "error") return;
          }
        }
      },
    };
  }
}

/** The turn's ChatMessages in a data event (the chatbot's value: a list of message dicts). */
export function messagesOf(data: unknown): WireMessage[] {
  const outputs = Array.isArray(data) ? data : [data];
  const list = outputs.find((item) => Array.isArray(item)) ?? outputs;
  return (list as unknown[]).filter(
    (item): item is WireMessage => typeof item === "object" && item !== null && "metadata" in item,
  );
}
