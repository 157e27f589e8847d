// Human steps of an item graph in the widget: the pending form (one input per typed field, the
// defaults filled in) answered with Submit / Decline through the widget's message channel, a
// refused answer shown on the form with what the person typed, the item pane's input and output
// items as JSON trees, and loop rounds of one step drawn in one frame.

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { formCard, formValues, renderDag, roundGroups } from "../src/dagview";
import type { FormRequestView, WireLayout } from "../src/types";
import { ModelStore } from "../src/widget";
import { layoutTB, nodeView, TestSource } from "./fixtures";

/** The widget model as anywidget hands it over (traits, change events, custom messages). */
class FakeModel {
  traits: Record<string, unknown>;
  sent: unknown[] = [];
  private handlers = new Map<string, ((payload?: unknown) => void)[]>();

  constructor(traits: Record<string, unknown> = {}) {
    this.traits = { mode: "run", title: "triage", graph_layout: layoutTB(), nodes: {}, run: {}, detail: {}, selected: "", forms: [], ...traits };
  }
  get(key: string): unknown {
    return this.traits[key];
  }
  set(key: string, value: unknown): void {
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
  message(payload: unknown): void {
    this.trigger("msg:custom", payload);
  }
}

const ESCALATE: FormRequestView = {
  request_id: "req-1",
  node: "ship",
  step: "ship",
  prompt: "Escalate ticket 70 (hardware, 3 words)?",
  form: {
    assignee: { type: "enum", required: true, choices: ["oncall", "backlog"], label: "Who takes it" },
    note: { type: "string", required: false, default: "" },
    priority: { type: "integer", required: false, default: 3 },
    urgent: { type: "bool", required: false, default: true },
  },
};

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

const input = (root: ParentNode, name: string) => root.querySelector(`[name='${name}']`) as HTMLInputElement & HTMLSelectElement;

describe("a form card", () => {
  it("has one labelled input per field, of the field's type, with its default", () => {
    const card = formCard(ESCALATE, { submit: () => {} });
    expect(card.querySelector(".rho-form-prompt")?.textContent).toBe("Escalate ticket 70 (hardware, 3 words)?");
    const labels = Array.from(card.querySelectorAll(".rho-field")).map((f) => [(f as HTMLElement).dataset.field, f.querySelector(".rho-field-label")?.textContent]);
    expect(labels).toEqual([
      ["assignee", "Who takes it *"],
      ["note", "note"],
      ["priority", "priority"],
      ["urgent", "urgent"],
    ]);
    expect(input(card, "assignee").tagName).toBe("SELECT");
    expect(Array.from(input(card, "assignee").options).map((o) => o.textContent)).toEqual(["\u2014 choose \u2014", "oncall", "backlog"]);
    expect([input(card, "note").type, input(card, "note").value]).toEqual(["text", ""]);
    expect([input(card, "priority").type, input(card, "priority").value]).toEqual(["number", "3"]);
    expect([input(card, "urgent").type, input(card, "urgent").checked]).toEqual(["checkbox", true]);
  });

  it("reads typed values: a number, a bool, the chosen choice; an empty select is left out", () => {
    const card = formCard(ESCALATE, { submit: () => {} });
    expect(formValues(card, ESCALATE.form)).toEqual({ note: "", priority: 3, urgent: true });
    input(card, "assignee").value = "1";
    input(card, "priority").value = "7";
    input(card, "urgent").checked = false;
    input(card, "note").value = "call Bob";
    expect(formValues(card, ESCALATE.form)).toEqual({ assignee: "backlog", note: "call Bob", priority: 7, urgent: false });
  });

  it("without an answer handler is read-only and says which command answers it", () => {
    const card = formCard(ESCALATE, { runId: "r-123" });
    expect((card.querySelector("button.rho-submit") as HTMLButtonElement).disabled).toBe(true);
    expect(card.textContent).toContain("rho-notebook answer r-123 ship FIELD=VALUE...");
  });
});

describe("forms in the widget", () => {
  function mount(): FakeModel {
    const model = new FakeModel({ nodes: { ship: nodeView("running") } });
    const store = new ModelStore(model as never);
    cleanups.push(renderDag(el, store));
    model.sent = [];
    return model;
  }

  it("shows a pending form from a patch, marks its node, and sends the submitted values", () => {
    const model = mount();
    expect((el.querySelector(".rho-forms") as HTMLElement).hidden).toBe(true);
    model.message({ kind: "patch", forms: [ESCALATE] });
    expect((el.querySelector(".rho-forms") as HTMLElement).hidden).toBe(false);
    expect(el.querySelector("g.rho-node[data-name='ship']")?.classList.contains("rho-asking")).toBe(true);
    expect(model.get("forms")).toEqual([ESCALATE]); // mirrored: a saved widget state has it
    input(el, "assignee").value = "0";
    (el.querySelector("button.rho-submit") as HTMLButtonElement).click();
    expect(model.sent).toEqual([{ kind: "answer", request: "req-1", values: { assignee: "oncall", note: "", priority: 3, urgent: true } }]);
    expect((el.querySelector("button.rho-submit") as HTMLButtonElement).disabled).toBe(true);
  });

  it("draws a refused answer's message and keeps what the person typed", () => {
    const model = mount();
    model.message({ kind: "patch", forms: [ESCALATE] });
    input(el, "assignee").value = "1";
    input(el, "priority").value = "2.5";
    (el.querySelector("button.rho-submit") as HTMLButtonElement).click();
    expect(model.sent).toEqual([{ kind: "answer", request: "req-1", values: { assignee: "backlog", note: "", priority: 2.5, urgent: true } }]);
    model.message({ kind: "patch", forms: [{ ...ESCALATE, error: "step ship: input 'priority' must be an integer" }] });
    expect(el.querySelector(".rho-form-error")?.textContent).toBe("step ship: input 'priority' must be an integer");
    expect([input(el, "assignee").value, input(el, "priority").value]).toEqual(["1", "2.5"]);
    expect((el.querySelector("button.rho-submit") as HTMLButtonElement).disabled).toBe(false);
  });

  it("declines with Decline, and hides the forms once none is pending", () => {
    const model = mount();
    model.message({ kind: "patch", forms: [ESCALATE] });
    (el.querySelector("button.rho-decline") as HTMLButtonElement).click();
    expect(model.sent).toEqual([{ kind: "decline", request: "req-1" }]);
    model.message({ kind: "patch", forms: [] });
    expect((el.querySelector(".rho-forms") as HTMLElement).hidden).toBe(true);
    expect(el.querySelector("g.rho-node[data-name='ship']")?.classList.contains("rho-asking")).toBe(false);
  });
});

describe("item steps in the pane", () => {
  it("shows the input item and the output item as collapsible JSON trees", () => {
    const source = new TestSource().set({
      nodes: { test: nodeView("success") },
      selected: "test",
      detail: {
        node: "test",
        kind: "item",
        has_input: true,
        input: { score: 70, tags: ["a", "b"] },
        has_value: true,
        value: { score: 70, level: "high" },
        definition: { kind: "item", step: "test", step_kind: "set", params: { fields: { level: "high" } } },
      },
    });
    cleanups.push(renderDag(el, source));
    const sections = Array.from(el.querySelectorAll(".rho-section > summary")).map((s) => s.textContent);
    expect(sections).toContain("input item");
    expect(sections).toContain("output item");
    const inputTree = el.querySelector(".rho-section-input details.rho-json") as HTMLDetailsElement;
    expect(inputTree.open).toBe(true);
    const leaves = Array.from(el.querySelectorAll(".rho-section-input .rho-json-leaf")).map((l) => l.textContent);
    expect(leaves).toEqual(["score: 70", "0: \"a\"", "1: \"b\""]);
    expect(el.querySelector(".rho-section-value")?.textContent).toContain("level: \"high\"");
    // the step's params are a tree in the definition, not "[object Object]"
    expect(el.querySelector(".rho-definition")?.textContent).not.toContain("[object Object]");
  });
});

describe("loop rounds", () => {
  it("groups step@N nodes by step and frames them in the graph", () => {
    expect(Array.from(roundGroups(["a", "fix@1", "check@1", "fix@2", "x@y"]))).toEqual([
      ["fix", ["fix@1", "fix@2"]],
      ["check", ["check@1"]],
    ]);
    // a script's steps may be named like rounds (step ids allow @): only item nodes are framed
    const steps: WireLayout = layoutTB();
    steps.nodes = steps.nodes.map((n) => (n.name === "test" ? { ...n, name: "fix@1" } : n.name === "lint" ? { ...n, name: "fix@2" } : n));
    cleanups.push(renderDag(el, new TestSource(steps)));
    expect(el.querySelector("g.rho-round-group")).toBeNull();
    el.replaceChildren();
    const layout: WireLayout = layoutTB();
    layout.nodes = layout.nodes.map((n) => (n.name === "test" ? { ...n, name: "fix@1", kind: "item" } : n.name === "lint" ? { ...n, name: "fix@2", kind: "item" } : n));
    cleanups.push(renderDag(el, new TestSource(layout)));
    const frame = el.querySelector("g.rho-round-group[data-step='fix']") as SVGGElement;
    expect(frame.querySelector("text")?.textContent).toBe("fix \u00b7 2 rounds");
    const rect = frame.querySelector("rect") as SVGRectElement;
    expect([rect.getAttribute("x"), rect.getAttribute("width")]).toEqual(["12", "376"]);
  });
});
