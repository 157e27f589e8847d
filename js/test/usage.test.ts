import { describe, expect, it } from "vitest";

import { costText, spendText } from "../src/usage";

const counts = {
  input_tokens: 36,
  output_tokens: 14,
  cached_tokens: 0,
  reasoning_tokens: 0,
  calls: 3,
  retries: 1,
  tool_calls: 1,
  wall_seconds: 2.5,
  cost_usd: 0.000064,
};

describe("what model calls spent, on one line", () => {
  it("names calls, tokens, retries, tool calls and the cost", () => {
    expect(spendText(counts)).toBe("3 calls \u00b7 36 in / 14 out tokens \u00b7 1 retry \u00b7 1 tool call \u00b7 $0.000064");
  });

  it("says an unknown cost is unknown, never 0", () => {
    expect(costText(null)).toBe("cost unknown");
    expect(spendText({ ...counts, cost_usd: null, retries: 0, tool_calls: 0 })).toBe("3 calls \u00b7 36 in / 14 out tokens \u00b7 cost unknown");
  });

  it("shows what a reused node saved", () => {
    const none = { ...counts, calls: 0, input_tokens: 0, output_tokens: 0, retries: 0, tool_calls: 0, cost_usd: 0 };
    expect(spendText({ ...none, saved: { ...counts, calls: 2, input_tokens: 16, output_tokens: 10, cost_usd: 0.000036 } })).toBe(
      "0 calls \u00b7 0 in / 0 out tokens \u00b7 $0.000000 \u00b7 saved 2 calls, 26 tokens, $0.000036",
    );
  });
});
