// vitest: the unit tests of the DAG view model, the view itself (in jsdom), the DagSource base class
// and the widget's ModelStore. Run with `npm test` in js/ (tests/unit/test_js_unit.py runs it too).
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    environment: "jsdom",
    include: ["test/**/*.test.ts"],
    restoreMocks: true,
  },
});
