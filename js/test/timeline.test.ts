import { describe, expect, it, vi } from "vitest";

import { renderDag } from "../src/dagview";
import { hoverText, requestTimeline, segments, timelineSvg, usageLines, type TimelineJson, type TimelineRow } from "../src/timeline";
import type { Change, DagSource } from "../src/types";
import { ModelStore } from "../src/widget";
import { layoutTB, nodeView } from "./fixtures";

const retried: TimelineRow = {
  name: "flaky",
  kind: "node",
  needs: ["fetch"],
  state: "success",
  critical: true,
  bars: [
    { attempt: 1, queued: 1, launched: 2, started: 2, finished: 4, state: "cancellation", retry: true, waits: [] },
    { attempt: 2, queued: null, launched: 6, started: 6.1, finished: 8, state: "success", retry: false, waits: [[6, 7]] },
  ],
};

const timeline = (): TimelineJson => ({
  run_id: "01run",
  origin: "2026-01-01T00:00:00+00:00",
  now: "2026-01-01T00:00:10+00:00",
  span: 10,
  running: false,
  critical_path: ["fetch", "flaky"],
  rows: [
    { name: "fetch", kind: "node", needs: [], state: "success", critical: true, bars: [{ attempt: 1, queued: null, launched: 0, started: 0, finished: 1, state: "success", retry: false, waits: [] }] },
    retried,
    { name: "never", kind: "node", needs: ["fetch"], state: "skipped", critical: false, bars: [], decided: 1 },
  ],
});

describe("timeline segments", () => {
  it("scales queued time, a retry, the last attempt and a wait for a person", () => {
    const found = segments(retried, 10, 100);
    expect(found.map((s) => [s.kind, s.attempt, Math.round(s.x), Math.round(s.width)])).toEqual([
      ["queued", 1, 10, 10],
      ["retry", 1, 20, 20],
      ["run", 2, 60, 20],
      ["wait", 2, 60, 10],
    ]);
  });

  it("runs an open bar to the span's end and gives a reused attempt a mark", () => {
    const open: TimelineRow = { ...retried, bars: [{ ...retried.bars[1], finished: null, state: "running" }] };
    const [run] = segments(open, 10, 100).filter((s) => s.kind === "run");
    expect(run.x + run.width).toBe(100);
    const reused: TimelineRow = { ...retried, bars: [{ ...retried.bars[1], reused: true }], replays: [9] };
    expect(segments(reused, 10, 100).map((s) => s.kind)).toEqual(["mark", "mark"]);
  });
});

describe("timeline hover", () => {
  it("says the attempt, the retry, the wait and the ledger when the node view has one", () => {
    const view = { ...nodeView("success"), usage: { input_tokens: 1200, output_tokens: 300, cached_tokens: 0, calls: 2, retries: 1, wall_seconds: 3.5, cost_usd: null } };
    const text = hoverText(retried, retried.bars[0], view as never);
    expect(text).toContain("attempt 1 (earlier attempt: retried): cancellation, 2.0 s");
    expect(text).toContain("queued 1.0 s before launch");
    expect(text).toContain("tokens: 1,200 in \u00b7 300 out");
    expect(text).toContain("2 model calls, 1 retry, 3.5 s");
    expect(text).toContain("cost: unknown (no price)");
    expect(hoverText(retried, retried.bars[1])).toContain("waited 1.0 s for a person");
  });

  it("tolerates a node view without usage", () => {
    expect(usageLines(nodeView("success"))).toEqual([]);
    expect(usageLines(undefined)).toEqual([]);
    expect(hoverText(retried, retried.bars[1], nodeView("success"))).not.toContain("tokens");
  });

  it("prices a priced ledger and says what a reused node saved", () => {
    expect(usageLines({ ...nodeView("success"), usage: { cost_usd: 0.01234 } } as never)).toContain("cost: $0.0123");
    const reused = usageLines({ ...nodeView("success"), usage: { calls: 0, saved: { input_tokens: 900, output_tokens: 40, calls: 1 } } } as never);
    expect(reused).toContain("saved (reused or replayed): 900 in \u00b7 40 out, 1 model call");
  });
});

describe("timeline picture", () => {
  it("draws one row per node, marks the critical path and the retry", () => {
    const host = document.createElement("div");
    host.innerHTML = timelineSvg(timeline(), {}, 600);
    const rows = Array.from(host.querySelectorAll<SVGGElement>("g.rho-tl-row"));
    expect(rows.map((r) => r.dataset.node)).toEqual(["fetch", "flaky", "never"]);
    expect(rows.filter((r) => r.classList.contains("rho-tl-critical")).map((r) => r.dataset.node)).toEqual(["fetch", "flaky"]);
    expect(host.querySelectorAll('rect.rho-tl-retry[data-attempt="1"]').length).toBe(1);
    expect(host.querySelectorAll("rect.rho-tl-wait").length).toBe(1);
    expect(rows[2].querySelectorAll("rect").length).toBe(0);
  });
});

class Source implements DagSource {
  asked = 0;
  listeners = new Set<(change: Change) => void>();
  layout = layoutTB;
  title = () => "release";
  mode = () => "run" as const;
  nodes = () => ({});
  run = () => ({ lifecycle: "completed" });
  detail = () => ({});
  selected = () => "";
  clockOffset = () => 0;
  subscribe(listener: (change: Change) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
  select(): void {}
  action(): void {}
  timeline(): Promise<TimelineJson> {
    this.asked += 1;
    return Promise.resolve(timeline());
  }
}

describe("Timeline tab", () => {
  it("sits beside the DAG and loads the rows when shown", async () => {
    const el = document.createElement("div");
    const source = new Source();
    const stop = renderDag(el, source);
    const tab = el.querySelector<HTMLButtonElement>(".rho-tab-timeline");
    expect(tab).not.toBeNull();
    expect(source.asked).toBe(0);
    tab?.click();
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(source.asked).toBe(1);
    expect(el.querySelector<HTMLElement>(".rho-body")?.hidden).toBe(true);
    expect(el.querySelectorAll(".rho-timeline g.rho-tl-row").length).toBe(3);
    el.querySelector<HTMLButtonElement>(".rho-tab-dag")?.click();
    expect(el.querySelector<HTMLElement>(".rho-timeline")?.hidden).toBe(true);
    stop();
    expect(el.querySelector(".rho-tabs")).toBeNull();
  });

  it("loads again, at most once a second, while the run moves and the tab is open", async () => {
    vi.useFakeTimers();
    try {
      const el = document.createElement("div");
      const source = new Source();
      renderDag(el, source);
      el.querySelector<HTMLButtonElement>(".rho-tab-timeline")?.click();
      await vi.advanceTimersByTimeAsync(0);
      expect(source.asked).toBe(1);
      for (const listener of source.listeners) listener({ run: true });
      for (const listener of source.listeners) listener({ nodes: ["fetch"] });
      await vi.advanceTimersByTimeAsync(1000);
      expect(source.asked).toBe(2); // two changes, one reload
      el.querySelector<HTMLButtonElement>(".rho-tab-dag")?.click();
      for (const listener of source.listeners) listener({ run: true });
      await vi.advanceTimersByTimeAsync(2000);
      expect(source.asked).toBe(2); // the DAG tab is shown: nothing asked
    } finally {
      vi.useRealTimers();
    }
  });

  it("is not offered by a source without timelines", () => {
    const el = document.createElement("div");
    const source = new Source() as Partial<Source>;
    delete (source as { timeline?: unknown }).timeline;
    Object.defineProperty(source, "timeline", { value: undefined });
    renderDag(el, source as DagSource);
    expect(el.querySelector(".rho-tab-timeline")).toBeNull();
  });
});

describe("widget timeline request", () => {
  it("asks the kernel with a timeline action and takes its answer", async () => {
    const handlers: ((msg: unknown) => void)[] = [];
    const sent: unknown[] = [];
    const model = {
      get: (key: string) => ({ mode: "run", title: "t", graph_layout: layoutTB(), nodes: {}, run: {}, detail: {}, selected: "", forms: [] })[key],
      set: () => undefined,
      on: (event: string, handler: (msg: unknown) => void) => {
        if (event === "msg:custom") handlers.push(handler);
      },
      off: (_event: string, handler: (msg: unknown) => void) => handlers.splice(handlers.indexOf(handler), 1),
      send: (msg: unknown) => sent.push(msg),
    };
    const store = new ModelStore(model as never);
    const answer = store.timeline();
    expect(sent).toContainEqual({ kind: "action", action: "timeline" });
    for (const handler of [...handlers]) handler({ kind: "timeline", timeline: timeline() });
    expect((await answer).rows.length).toBe(3);
    await expect(requestTimeline({ send: () => undefined, on: () => undefined, off: () => undefined }, 1)).rejects.toThrow("did not answer");
  });
});
