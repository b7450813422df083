import { describe, expect, it } from "vitest";
import { markdown } from "./markdown.ts";

describe("an answer's Markdown", () => {
  it("shows tables as tables and links in a new tab", () => {
    const html = markdown("dev has problems:\n\n| id | chart |\n|---|---|\n| 5 | [Legacy uptime](http://bi/chart/5) |");
    expect(html).toContain("<table>");
    expect(html).toContain('<a href="http://bi/chart/5" target="_blank" rel="noopener noreferrer">Legacy uptime</a>');
  });

  it.each([
    ["<img src=x onerror=alert(1)>", "&lt;img src=x onerror=alert(1)&gt;"],
    ["<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"],
    ["[click](javascript:alert(1))", "[click](javascript:alert(1))"],
    ['[x](data:text/html;base64,PHNjcmlwdD4=)', "[x](data:text/html;base64,PHNjcmlwdD4=)"],
  ])("never runs what a title or a result may carry: %s", (text, shown) => {
    const html = markdown(text);
    expect(html).toContain(shown);
    expect(html).not.toMatch(/<(img|script)\b|href="(javascript|data):/i);
  });
});
