// Script runs in the DAG view: steps arrive as nodes while the run runs (the layout grows), a
// replayed step is marked like a reused node, and a run that stopped at a step (lifecycle
// needs_decision) shows it in the legend, on the node, in the toolbar and in the pane.

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { renderDag } from "../src/dagview";
import { countHalted, DECISION_LABEL, decisionText, instancesText, nodeMark, nodeTitle, outputText } from "../src/model";
import type { WireLayout } from "../src/types";
import { ModelStore } from "../src/widget";
import { nodeView, TestSource } from "./fixtures";

/** The layout views/layout.py gives the first `count` steps of a fan-out: call-1 feeds call-2.. */
function steps(count: number): WireLayout {
  const names = ["call-1", "review-a", "review-b", "combine"].slice(0, count);
  const needs: Record<string, string[]> = { "call-1": [], "review-a": ["call-1"], "review-b": ["call-1"], combine: ["review-a", "review-b"] };
  const layer: Record<string, number> = { "call-1": 0, "review-a": 1, "review-b": 1, combine: 2 };
  const nodes = names.map((name, i) => ({ name, kind: name === "call-1" ? "command" : "agent", layer: layer[name], x: 10 + 170 * (i % 2), y: 10 + 70 * layer[name], needs: needs[name], conditional: false }));
  const edges = nodes.flatMap((n) => n.needs.map((need) => ({ source: need, target: n.name, condition: false, points: [[0, 0], [1, 1]] })));
  return { direction: "TB", width: 360, height: 80 + 70 * Math.max(...nodes.map((n) => n.layer), 0), node_width: 160, node_height: 34, layers: 3, nodes, edges, edge_count: edges.length, reduced_edge_count: edges.length };
}

let el: HTMLElement;
let cleanups: (() => void)[] = [];

beforeEach(() => {
  el = document.createElement("div");
  document.body.append(el);
});

afterEach(() => {
  for (const cleanup of cleanups) cleanup();
  cleanups = [];
  el.remove();
});

const names = () => Array.from(el.querySelectorAll<SVGGElement>("g.rho-node")).map((g) => g.dataset.name);
const node = (name: string) => el.querySelector<SVGGElement>(`g.rho-node[data-name='${name}']`) as SVGGElement;
const classes = (name: string) => (node(name).getAttribute("class") ?? "").split(" ");
const chip = () => el.querySelector<HTMLElement>(".rho-chip-needs_decision") as HTMLElement;

describe("a script run in the view", () => {
  it("adds the steps that arrive, with their edges, and keeps the ones it had", () => {
    const source = new TestSource(steps(1)).set({ run: { lifecycle: "running", run_id: "01RUN", script: true }, nodes: { "call-1": nodeView("running", { step_kind: "command" }) } });
    cleanups.push(renderDag(el, source));
    expect(names()).toEqual(["call-1"]);
    expect(el.querySelector(".rho-edge-note")?.textContent).toContain("1 steps in arrival order");
    source.layoutData = steps(3);
    source.set({ nodes: { "call-1": nodeView("success"), "review-a": nodeView("running"), "review-b": nodeView("running") } });
    source.announce({ layout: true, nodes: "all" });
    expect(names()).toEqual(["call-1", "review-a", "review-b"]);
    expect(Array.from(el.querySelectorAll("path.rho-edge")).map((e) => `${e.getAttribute("data-source")}>${e.getAttribute("data-target")}`)).toEqual(["call-1>review-a", "call-1>review-b"]);
    expect([node("call-1").dataset.state, node("review-a").dataset.state]).toEqual(["success", "running"]);
    expect(el.dataset.total).toBe("3");
  });

  it("marks a replayed step like a reused node and says so in the tooltip", () => {
    const source = new TestSource(steps(2)).set({ nodes: { "call-1": nodeView("success", { replayed: 1 }), "review-a": nodeView("success") } });
    cleanups.push(renderDag(el, source));
    expect(classes("call-1")).toContain("rho-replayed");
    expect(node("call-1").querySelector("text.rho-reused-mark")?.textContent).toBe("\u21ba replayed");
    expect(node("call-1").querySelector("title")?.textContent).toContain("replayed 1\u00d7 from the journal: nothing ran");
    expect(classes("review-a")).not.toContain("rho-replayed");
    expect(node("review-a").querySelector("text.rho-reused-mark")?.textContent).toBe("");
  });

  it("counts the halted steps in the legend's needs-decision chip, marks them and names the command", () => {
    const halted = [{ step: "review-b", why: "started and never settled" }];
    const source = new TestSource(steps(3)).set({
      run: { lifecycle: "needs_decision", run_id: "01RUN", can_resume: true, halted },
      nodes: { "call-1": nodeView("success"), "review-a": nodeView("success"), "review-b": nodeView("running", { halted: "started and never settled" }) },
    });
    cleanups.push(renderDag(el, source));
    expect(chip().textContent).toContain(DECISION_LABEL);
    expect(chip().querySelector("b")?.textContent).toBe("1");
    expect(chip().classList.contains("rho-zero")).toBe(false);
    expect(chip().dataset.state).toBeUndefined(); // not a node state: the state chips still sum to the total
    expect(classes("review-b")).toEqual(expect.arrayContaining(["rho-halted", "rho-s-running"]));
    expect(node("review-b").querySelector("text.rho-reused-mark")?.textContent).toBe("? needs decision");
    const badge = el.querySelector(".rho-badge") as HTMLElement;
    expect(badge.classList.contains("rho-badge-needs_decision")).toBe(true);
    expect(el.querySelector(".rho-message")?.textContent).toBe(
      "needs a decision: review-b (started and never settled) \u2014 rho-notebook resume 01RUN --decide review-b=rerun|skip",
    );
    // resumed: the mark goes
    source.set({ run: { lifecycle: "running", run_id: "01RUN" }, nodes: { "review-b": nodeView("running", { v: 2 }) } });
    source.announce({ run: true, nodes: "all" });
    expect(chip().classList.contains("rho-zero")).toBe(true);
    expect(classes("review-b")).not.toContain("rho-halted");
  });

  it("shows the script's emitted output under the legend, and the step pane's facts", () => {
    const source = new TestSource(steps(1)).set({ run: { lifecycle: "completed", outcome: "success", run_id: "01RUN", output: { findings: 3 } } });
    cleanups.push(renderDag(el, source));
    const output = el.querySelector(".rho-run-output") as HTMLElement;
    expect(output.hidden).toBe(false);
    expect(output.textContent).toBe('output {"findings":3}');
    source.set({
      selected: "call-1",
      detail: {
        node: "call-1",
        kind: "command",
        state: "success",
        attempt: 1,
        halted: "recovery is manual",
        replayed: 2,
        step: { kind: "command", digest: "sha256:ab", facts: {}, after: [], recovery: "manual" },
        has_value: true,
        value: { output: "ok", value: null },
      },
    });
    source.announce({ selected: true });
    const pane = el.querySelector(".rho-pane") as HTMLElement;
    expect(pane.querySelector(".rho-halted-why")?.textContent).toBe("? needs decision: recovery is manual \u2014 rho-notebook resume 01RUN --decide call-1=rerun|skip");
    expect(pane.querySelector(".rho-replayed-note")?.textContent).toContain("replayed 2\u00d7");
    expect(pane.querySelector(".rho-section-value summary")?.textContent).toBe("step result (output, value)");
  });
});

describe("the model of the marks", () => {
  it("picks one mark: needs decision, then replayed, then reused", () => {
    const reused_from = { run_id: "R", node: "n", attempt: 1 };
    expect(nodeMark(nodeView("running", { halted: "why", replayed: 1, reused_from }))).toEqual({ text: "? needs decision", kind: "halted" });
    expect(nodeMark(nodeView("success", { replayed: 1, reused_from }))).toEqual({ text: "\u21ba replayed", kind: "replayed" });
    expect(nodeMark(nodeView("success", { replayed: 0, reused_from })).kind).toBe("reused");
    expect(nodeMark(undefined)).toEqual({ text: "", kind: "" });
  });

  it("marks an aggregate step with its instances: settled of all while any runs, then the count", () => {
    const running = { counts: { success: 2, running: 1 }, states: { "s[0]": "success", "s[1]": "success", "s[2]": "running" } };
    expect(nodeMark(nodeView("running", { instances: running }))).toEqual({ text: "2/3 \u00d7", kind: "instances" });
    const done = { counts: { success: 3 }, states: { "s[0]": "success", "s[1]": "success", "s[2]": "success" } };
    expect(nodeMark(nodeView("success", { instances: done }))).toEqual({ text: "3 \u00d7", kind: "instances" });
    expect(instancesText(running)).toBe("instances: 2 success, 1 running");
    const node = { name: "s", kind: "aggregate", needs: [], x: 0, y: 0 } as unknown as Parameters<typeof nodeTitle>[0];
    expect(nodeTitle(node, nodeView("running", { instances: running }))).toContain("instances: 2 success, 1 running");
  });

  it("counts halted steps and writes the resume command for every one of them", () => {
    expect(countHalted(["a", "b", "c"], { a: nodeView("running", { halted: "x" }), b: nodeView("success") })).toBe(1);
    expect(decisionText("01R", [{ step: "a", why: "lost" }, { step: "b", why: "manual" }])).toBe(
      "needs a decision: a (lost); b (manual) \u2014 rho-notebook resume 01R --decide a=rerun|skip --decide b=rerun|skip",
    );
    expect(decisionText("01R", [])).toBe("");
    // a run its budget halted: the server's `next` (a graph run takes no --decide)
    expect(decisionText("01R", [{ step: "c", why: "budget tokens: ..." }], "rho-notebook resume 01R --raise-budget tokens=N")).toBe(
      "needs a decision: c (budget tokens: ...) \u2014 rho-notebook resume 01R --raise-budget tokens=N",
    );
    expect(outputText("x".repeat(300), 10)).toBe('"xxxxxxxx\u2026');
  });
});

describe("the widget store of a script run", () => {
  class FakeModel {
    traits: Record<string, unknown>;
    private handlers = new Map<string, ((payload?: unknown) => void)[]>();
    constructor() {
      this.traits = { mode: "run", title: "review", graph_layout: steps(1), nodes: {}, run: {}, detail: {}, selected: "" };
    }
    get(key: string): unknown {
      return this.traits[key];
    }
    set(key: string, value: unknown): void {
      this.traits[key] = value;
      for (const handler of this.handlers.get(`change:${key}`) ?? []) handler();
    }
    on(event: string, handler: (payload?: unknown) => void): void {
      this.handlers.set(event, [...(this.handlers.get(event) ?? []), handler]);
    }
    off(): void {}
    send(): void {}
    save_changes(): void {}
    message(payload: unknown): void {
      for (const handler of this.handlers.get("msg:custom") ?? []) handler(payload);
    }
  }

  it("takes a grown layout from a patch, redraws every node once, and keeps it for a reconnect", () => {
    const model = new FakeModel();
    const store = new ModelStore(model as never);
    const changes: unknown[] = [];
    store.subscribe((c) => changes.push(c));
    cleanups.push(renderDag(el, store));
    expect(names()).toEqual(["call-1"]);
    model.message({ kind: "patch", layout: steps(2), nodes: { "review-a": nodeView("running", { v: 3 }) } });
    expect(changes).toEqual([{ layout: true, nodes: "all" }]);
    expect(names()).toEqual(["call-1", "review-a"]);
    expect(node("review-a").dataset.state).toBe("running");
    expect((model.traits.graph_layout as WireLayout).nodes).toHaveLength(2);
    // the same layout again (a snapshot after a reconnect) is no change
    model.message({ kind: "snapshot", layout: steps(2), nodes: { "review-a": nodeView("running", { v: 3 }) } });
    expect(changes).toHaveLength(1);
  });
});
