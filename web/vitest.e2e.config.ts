import { defineConfig } from "vitest/config";

/** The page in a real browser against a running stack (E2E_BASE_URL); started by tests/test_stack.py. */
export default defineConfig({
  test: {
    include: ["e2e/**/*.e2e.ts"],
    environment: "node",
    testTimeout: 180_000,
    hookTimeout: 60_000,
    fileParallelism: false,
    sequence: { concurrent: false },
    // A poll waits for what the page shows, however long a busy 2-core machine takes to show it
    // (vitest's default gives up after 1 s: a turn still asking Superset then reads as a failure).
    expect: { poll: { timeout: 60_000, interval: 100 } },
  },
});
