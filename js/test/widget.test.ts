import { describe, expect, it } from "vitest";

import type { Change, Detail, NodeView, StreamView } from "../src/types";
import { ModelStore } from "../src/widget";
import { layoutTB, nodeView } from "./fixtures";

/** A widget model as anywidget hands it over: traits, change events fired by set, custom messages. */
class FakeModel {
  traits: Record<string, unknown>;
  sent: unknown[] = [];
  sets: string[] = [];
  private handlers = new Map<string, ((payload?: unknown) => void)[]>();

  constructor(traits: Record<string, unknown> = {}) {
    this.traits = { mode: "run", title: "release", graph_layout: layoutTB(), nodes: {}, run: {}, detail: {}, selected: "", ...traits };
  }
  get(key: string): unknown {
    return this.traits[key];
  }
  set(key: string, value: unknown): void {
    this.sets.push(key);
    this.traits[key] = value;
    this.trigger(`change:${key}`);
  }
  on(event: string, handler: (payload?: unknown) => void): void {
    this.handlers.set(event, [...(this.handlers.get(event) ?? []), handler]);
  }
  off(): void {}
  send(message: unknown): void {
    this.sent.push(message);
  }
  save_changes(): void {}
  trigger(event: string, payload?: unknown): void {
    for (const handler of this.handlers.get(event) ?? []) handler(payload);
  }
  /** The kernel sends a custom message. */
  message(payload: unknown): void {
    this.trigger("msg:custom", payload);
  }
}

function store(traits: Record<string, unknown> = {}): { model: FakeModel; store: ModelStore; changes: Change[] } {
  const model = new FakeModel(traits);
  const created = new ModelStore(model as never);
  const changes: Change[] = [];
  created.subscribe((c) => changes.push(c));
  return { model, store: created, changes };
}

const stream = (text: string, start = 0): StreamView => ({ text, bytes: start + text.length, start, end: start + text.length, truncated: false, limit: 0 });

describe("ModelStore", () => {
  it("starts from the synced traits and greets the kernel", () => {
    const { model, store: s } = store({ nodes: { build: nodeView("running") }, run: { lifecycle: "running" }, selected: "build", mode: "run" });
    expect(s.nodes().build.state).toBe("running");
    expect(s.run().lifecycle).toBe("running");
    expect(s.selected()).toBe("build");
    expect([s.mode(), s.title(), s.layout().nodes.length]).toEqual(["run", "release", 4]);
    expect(model.sent).toEqual([{ kind: "hello" }]);
  });

  it("merges node views by version: newer or equal wins, older is dropped", () => {
    const { model, store: s, changes } = store({ nodes: { build: nodeView("running", { v: 5 }) } });
    model.message({ kind: "patch", nodes: { build: nodeView("success", { v: 7 }), test: nodeView("ready", { v: 2 }) } });
    expect(changes[changes.length - 1]).toEqual({ nodes: ["build", "test"] });
    model.message({ kind: "patch", nodes: { build: nodeView("running", { v: 6 }) } });
    expect(s.nodes().build).toMatchObject({ state: "success", v: 7 });
    expect(changes).toHaveLength(1); // the stale patch changed nothing, so nobody was told
  });

  it("names only the nodes whose state or version moved", () => {
    const { model, changes } = store({ nodes: { build: nodeView("running", { v: 3 }) } });
    model.message({ kind: "snapshot", nodes: { build: nodeView("running", { v: 3 }), test: nodeView("pending", { v: 1 }) } });
    expect(changes).toEqual([{ nodes: ["test"] }]);
  });

  it("merges the run view unless it is older than the one shown", () => {
    const { model, store: s, changes } = store({ run: { lifecycle: "running", v: 4, can_cancel: true } });
    model.message({ kind: "patch", run: { lifecycle: "completed", outcome: "success", v: 9 } });
    expect(s.run()).toMatchObject({ lifecycle: "completed", outcome: "success", can_cancel: true, v: 9 });
    model.message({ kind: "patch", run: { lifecycle: "running", v: 8 } });
    expect(s.run().lifecycle).toBe("completed");
    expect(changes).toEqual([{ run: true }]);
  });

  it("takes a patch's detail only for the selected node, a snapshot's always", () => {
    const { model, store: s, changes } = store({ selected: "test" });
    model.message({ kind: "patch", detail: { node: "lint", kind: "agent" } });
    expect(s.detail()).toEqual({});
    model.message({ kind: "patch", detail: { node: "test", kind: "command" } });
    expect(s.detail().node).toBe("test");
    model.message({ kind: "snapshot", detail: { node: "lint", kind: "agent" } });
    expect(s.detail().node).toBe("lint");
    expect(changes).toEqual([{ detail: true }, { detail: true }]);
  });

  it("appends output chunks of the detail's node, skipping what it already shows", () => {
    const { model, store: s, changes } = store({ selected: "test", detail: { node: "test", stdout: stream("ab") } });
    model.message({ kind: "patch", output: [{ node: "test", attempt: 1, stream: "stdout", start: 2, end: 4, text: "cd" }] });
    model.message({ kind: "patch", output: [{ node: "test", attempt: 1, stream: "stdout", start: 0, end: 4, text: "abcd" }] });
    model.message({ kind: "patch", output: [{ node: "lint", attempt: 1, stream: "stdout", start: 0, end: 2, text: "zz" }] });
    model.message({ kind: "patch", output: [{ node: "test", attempt: 1, stream: "stderr", start: 0, end: 3, text: "err" }] });
    const detail = s.detail() as Detail;
    expect(detail.stdout).toMatchObject({ text: "abcd", start: 0, end: 4, bytes: 4 });
    expect(detail.stderr).toMatchObject({ text: "err", start: 0, end: 3 });
    expect(changes.map((c) => c.output?.map((o) => o.text))).toEqual([["cd"], ["err"]]);
  });

  it("keeps the last 64 KiB of a stream and moves its start", () => {
    const { model, store: s } = store({ selected: "test", detail: { node: "test", stdout: stream("x".repeat(65_536)) } });
    model.message({ kind: "patch", output: [{ node: "test", attempt: 1, stream: "stdout", start: 65_536, end: 65_546, text: "0123456789" }] });
    const stdout = s.detail().stdout as StreamView;
    expect(stdout.text).toHaveLength(65_536);
    expect(stdout.text.endsWith("x0123456789")).toBe(true);
    expect([stdout.start, stdout.end]).toEqual([10, 65_546]);
  });

  it("mirrors merged views into the model without hearing its own change events", () => {
    const { model, changes } = store();
    model.message({ kind: "patch", nodes: { build: nodeView("success", { v: 2 }) }, run: { lifecycle: "running", v: 1 } });
    expect(model.sets.sort()).toEqual(["nodes", "run"]);
    expect((model.traits.nodes as Record<string, NodeView>).build.state).toBe("success");
    expect(changes).toHaveLength(1);
  });

  it("follows trait changes from the kernel", () => {
    const { model, store: s, changes } = store();
    model.set("selected", "lint");
    expect(s.selected()).toBe("lint");
    model.set("graph_layout", { ...layoutTB(), nodes: [] });
    model.set("nodes", { ship: nodeView("blocked", { v: 1 }) });
    expect(changes).toEqual([{ selected: true }, { layout: true, nodes: "all" }, { nodes: ["ship"] }]);
  });

  it("selects optimistically and asks the kernel for the detail; sends actions", () => {
    const { model, store: s, changes } = store();
    s.select("build");
    s.action("cancel");
    expect(s.selected()).toBe("build");
    expect(changes).toEqual([{ selected: true }]);
    expect(model.sent.slice(1)).toEqual([
      { kind: "select", node: "build" },
      { kind: "action", action: "cancel" },
    ]);
  });

  it("sets the clock offset from the kernel's time and ignores unknown messages", () => {
    const { model, store: s, changes } = store();
    const kernelNow = new Date(Date.now() + 60_000).toISOString();
    model.message({ kind: "patch", now: kernelNow });
    expect(s.clockOffset()).toBeGreaterThan(59_000);
    expect(s.clockOffset()).toBeLessThan(61_000);
    model.message({ kind: "something-else", nodes: { build: nodeView("success") } });
    expect(s.messages).toBe(1);
    expect(changes).toEqual([]);
  });
});
