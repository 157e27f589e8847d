// What a run's or a node's model calls spent (issue 34, docs/usage.md): the `usage` object of the
// run view and the `spend` of the node pane, as one line. The counts come from the journal
// (service/usage.py); the cost is null, shown "cost unknown", when a model has no price.
import type { UsageCountsJson } from "./wire.gen";

function plural(count: number, noun: string, many = `${noun}s`): string {
  return `${count} ${count === 1 ? noun : many}`;
}

/** `$0.000064`, or `cost unknown` (never 0) when a model has no price in settings. */
export function costText(cost: number | null | undefined): string {
  return cost === null || cost === undefined ? "cost unknown" : `$${cost.toFixed(6)}`;
}

/** One line: `3 calls · 36 in / 14 out tokens · 1 retry · $0.000064`, then what was saved. */
export function spendText(usage: UsageCountsJson & { saved?: UsageCountsJson }): string {
  const parts = [plural(usage.calls, "call"), `${usage.input_tokens} in / ${usage.output_tokens} out tokens`];
  if (usage.cached_tokens) parts.push(`${usage.cached_tokens} cached`);
  if (usage.reasoning_tokens) parts.push(`${usage.reasoning_tokens} reasoning`);
  if (usage.retries) parts.push(plural(usage.retries, "retry", "retries"));
  if (usage.tool_calls) parts.push(plural(usage.tool_calls, "tool call"));
  parts.push(costText(usage.cost_usd));
  const saved = usage.saved;
  if (saved) parts.push(`saved ${plural(saved.calls, "call")}, ${saved.input_tokens + saved.output_tokens} tokens, ${costText(saved.cost_usd)}`);
  return parts.join(" \u00b7 ");
}
