import { defineConfig } from "vitest/config";

/** The SC-006 task study (study/), against a running stack; started by bench/tasks.py. */
export default defineConfig({
  test: {
    include: ["study/**/*.study.ts"],
    environment: "node",
    testTimeout: 300_000,
    hookTimeout: 180_000,
    fileParallelism: false,
    sequence: { concurrent: false },
    expect: { poll: { timeout: 60_000, interval: 50 } },
  },
});
