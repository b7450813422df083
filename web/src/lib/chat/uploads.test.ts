import { describe, expect, it } from "vitest";
import { foldTurn } from "./turn";
import { filesInput, refusalMessages, uploadFiles, uploadPath, UploadRefused } from "./uploads";

const ORIGIN = "https://ops.example";
const CONVERSATION = "5f0c7f6e-0d1c-4c59-9d59-3f1f2c6a8e11";

interface Sent {
  url: string;
  init: RequestInit;
}

/** A fetch answering each call with the next scripted response, keeping what was sent. */
function scriptedFetch(answers: Array<{ status: number; body: unknown }>): { fetcher: typeof fetch; sent: Sent[] } {
  const sent: Sent[] = [];
  const fetcher = (async (input: RequestInfo | URL, init?: RequestInit) => {
    sent.push({ url: String(input), init: init ?? {} });
    const answer = answers.shift() ?? { status: 500, body: {} };
    return new Response(JSON.stringify(answer.body), { status: answer.status });
  }) as typeof fetch;
  return { fetcher, sent };
}

describe("uploads", () => {
  it("sends each file raw to convo under the person's token and returns the issued ids", async () => {
    const { fetcher, sent } = scriptedFetch([
      { status: 201, body: { upload_id: "id-1", name: "отчёт.pdf", size_bytes: 3 } },
      { status: 201, body: { upload_id: "id-2", name: "data.csv", size_bytes: 4 } },
    ]);
    const files = [new File(["pdf"], "отчёт.pdf"), new File(["a,b\n"], "data.csv")];
    const ids = await uploadFiles(files, CONVERSATION, "jwt-token", ORIGIN, fetcher);
    expect(ids).toEqual(["id-1", "id-2"]);
    expect(sent.map((call) => call.url)).toEqual([
      `${ORIGIN}/api/assistant/conversations/${CONVERSATION}/uploads?name=${encodeURIComponent("отчёт.pdf")}`,
      `${ORIGIN}/api/assistant/conversations/${CONVERSATION}/uploads?name=data.csv`,
    ]);
    expect(sent[0].init.method).toBe("POST");
    expect(sent[0].init.headers).toEqual({
      Authorization: "Bearer jwt-token",
      "Content-Type": "application/octet-stream",
    });
    expect(sent[0].init.body).toBe(files[0]);
    expect(filesInput(ids)).toBe('["id-1","id-2"]');
    expect(filesInput([])).toBe("");
  });

  it("a name is a query value, never part of the path", () => {
    expect(uploadPath(CONVERSATION, "../a&b=c.csv")).toBe(
      `/api/assistant/conversations/${CONVERSATION}/uploads?name=..%2Fa%26b%3Dc.csv`,
    );
  });

  it("a refused upload becomes a typed error and a failed turn, and stops the rest", async () => {
    const { fetcher, sent } = scriptedFetch([
      { status: 413, body: { detail: { code: "upload_too_large", message: "files up to 10485760 bytes are accepted" } } },
    ]);
    const files = [new File(["x"], "big.csv"), new File(["y"], "next.csv")];
    const refusal = await uploadFiles(files, CONVERSATION, "t", ORIGIN, fetcher).catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(UploadRefused);
    expect((refusal as UploadRefused).code).toBe("UPLOAD_TOO_LARGE");
    expect((refusal as UploadRefused).message).toBe("big.csv: files up to 10485760 bytes are accepted");
    expect(sent).toHaveLength(1);
    const view = foldTurn(refusalMessages(refusal as UploadRefused));
    expect(view.errors).toEqual([{ code: "UPLOAD_TOO_LARGE", message: "big.csv: files up to 10485760 bytes are accepted" }]);
    expect(view.state).toBe("failed");
  });

  it("names the quota, the token and unknown failures", async () => {
    for (const [status, code] of [
      [429, "UPLOAD_QUOTA_EXCEEDED"],
      [401, "UNAUTHORIZED"],
      [502, "UPLOAD_FAILED"],
    ] as const) {
      const { fetcher } = scriptedFetch([{ status, body: {} }]);
      const refusal = await uploadFiles([new File(["x"], "a.csv")], CONVERSATION, "t", ORIGIN, fetcher).catch(
        (error: unknown) => error,
      );
      expect((refusal as UploadRefused).code).toBe(code);
    }
  });
});
