import { describe, expect, it } from "vitest";
import { chooseLang, preferredLang, roleLabel } from "./i18n.ts";
import { memoryStorage as memory } from "./memory-storage.ts";

describe("the page's language", () => {
  it("is the browser's first of Russian or English until the person chooses", () => {
    expect(preferredLang(memory(), ["de-DE", "en-US", "ru"])).toBe("en");
    expect(preferredLang(memory(), ["ru-RU", "en"])).toBe("ru");
    expect(preferredLang(memory(), ["fr"])).toBe("ru");
  });

  it("is the person's choice afterwards, whatever the browser says", () => {
    const storage = memory();
    expect(chooseLang("en", storage)).toBe("en");
    expect(preferredLang(storage, ["ru-RU"])).toBe("en");
    chooseLang("ru", storage);
    expect(preferredLang(storage, ["en-US"])).toBe("ru");
  });

  it("ignores a kept value that is not a language of the page", () => {
    const storage = memory();
    storage.setItem("sstools.lang", "de");
    expect(preferredLang(storage, ["en-GB"])).toBe("en");
  });
});

describe("a role's name", () => {
  it("is said in the page's language, and as ops named it when the page does not know it", () => {
    expect(roleLabel("ru", "admin")).toBe("администратор");
    expect(roleLabel("en", "analyst")).toBe("analyst");
    expect(roleLabel("ru", "viewer")).toBe("наблюдатель");
    expect(roleLabel("en", "auditor")).toBe("auditor");
    expect(roleLabel("ru", "constructor")).toBe("constructor");
  });
});
