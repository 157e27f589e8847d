// "Fork from here" in the node pane (forkform.ts) through the widget's message channel: offered
// only for a completed run, the editor prefilled with the node's value, invalid JSON refused
// inline without a message, the kernel's refusal (naming the field) shown inline, the derived
// plan's digest shown for consent and sent back with the second message, the started fork named;
// an edit in progress survives a redraw of the pane.

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { renderDag } from "../src/dagview";
import { parseValue } from "../src/forkform";
import { ModelStore } from "../src/widget";
import { layoutTB, nodeView } from "./fixtures";

class FakeModel {
  traits: Record<string, unknown>;
  sent: Record<string, unknown>[] = [];
  private handlers = new Map<string, ((payload?: unknown) => void)[]>();

  constructor(traits: Record<string, unknown> = {}) {
    this.traits = { mode: "run", title: "chain", graph_layout: layoutTB(), nodes: {}, run: {}, detail: {}, selected: "", forms: [], ...traits };
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
  send(message: Record<string, unknown>): void {
    this.sent.push(message);
  }
  save_changes(): void {}
  trigger(event: string, payload?: unknown): void {
    for (const handler of this.handlers.get(event) ?? []) handler(payload);
  }
  forks(): Record<string, unknown>[] {
    return this.sent.filter((m) => m.kind === "fork");
  }
}

const tick = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 0));

let el: HTMLElement;
let cleanup: (() => void) | null = null;

beforeEach(() => {
  el = document.createElement("div");
  document.body.append(el);
});
afterEach(() => {
  cleanup?.();
  cleanup = null;
  el.remove();
});

function open(lifecycle: string): { model: FakeModel; store: ModelStore } {
  const nodes = { build: nodeView("success"), test: nodeView("success"), lint: nodeView("success"), ship: nodeView("success") };
  const detail = { node: "test", kind: "command", state: "success", attempt: 1, has_value: true, value: { n: 2 } };
  const model = new FakeModel({ nodes, run: { run_id: "run-1", lifecycle, v: 1 }, detail, selected: "test" });
  const store = new ModelStore(model as never);
  cleanup = renderDag(el, store);
  return { model, store };
}

describe("fork from here", () => {
  it("is not offered while the run is not completed", () => {
    open("running");
    expect(el.querySelector(".rho-pane .rho-section-fork")).toBeNull();
  });

  it("plans, asks for the digest, then starts the fork with the edited value", async () => {
    const { model, store } = open("completed");
    const section = el.querySelector<HTMLElement>(".rho-pane .rho-section-fork");
    expect(section).not.toBeNull();
    const editor = section!.querySelector<HTMLTextAreaElement>("textarea.rho-fork-value")!;
    expect(JSON.parse(editor.value)).toEqual({ n: 2 });

    // not JSON: said inline, nothing sent
    editor.value = "{n: 3";
    section!.querySelector<HTMLButtonElement>(".rho-fork-edit")!.click();
    expect(section!.querySelector<HTMLElement>(".rho-fork-error")!.hidden).toBe(false);
    expect(section!.querySelector(".rho-fork-error")!.textContent).toContain("not valid JSON");
    expect(model.forks()).toHaveLength(0);

    // the kernel refuses a value that does not match the schema: its message, inline
    editor.value = '{"n": "three"}';
    section!.querySelector<HTMLButtonElement>(".rho-fork-edit")!.click();
    const first = model.forks()[0];
    expect(first).toMatchObject({ kind: "fork", node: "test", value: { n: "three" } });
    expect(first).not.toHaveProperty("graph_digest");
    model.trigger("msg:custom", { kind: "fork_answer", id: first.id, error: "field n: expected integer, got string" });
    await tick();
    expect(section!.querySelector(".rho-fork-error")!.textContent).toBe("field n: expected integer, got string");

    // a redraw of the pane keeps the edit in progress
    editor.value = '{"n": 3}';
    model.set("detail", { ...(model.get("detail") as object) });
    const again = el.querySelector<HTMLElement>(".rho-pane .rho-section-fork")!;
    expect(again.querySelector<HTMLTextAreaElement>("textarea.rho-fork-value")!.value).toBe('{"n": 3}');

    // planned: the digest is shown; confirming sends it back; the started fork is named
    again.querySelector<HTMLButtonElement>(".rho-fork-edit")!.click();
    const second = model.forks()[1];
    model.trigger("msg:custom", { kind: "fork_answer", id: second.id, answer: { plan_id: "p-2", graph_digest: "sha256:abc" } });
    await tick();
    expect(again.querySelector(".rho-fork-digest")!.textContent).toBe("sha256:abc");
    again.querySelector<HTMLButtonElement>(".rho-fork-start")!.click();
    const third = model.forks()[2];
    expect(third).toEqual({ kind: "fork", id: third.id, node: "test", plan_id: "p-2", graph_digest: "sha256:abc" });
    model.trigger("msg:custom", { kind: "fork_answer", id: third.id, answer: { run_id: "run-2", graph_digest: "sha256:abc" } });
    await tick();
    expect(again.querySelector(".rho-fork-result")!.textContent).toContain("run-2");
    expect(again.dataset.forkRun).toBe("run-2");
    expect(store).toBeDefined();
  });

  it("re-runs from here without a value", async () => {
    const { model } = open("completed");
    el.querySelector<HTMLButtonElement>(".rho-pane .rho-fork-rerun")!.click();
    const sent = model.forks()[0];
    expect(sent).toMatchObject({ kind: "fork", node: "test" });
    expect(sent).not.toHaveProperty("value");
  });

  it("parses the editor's text", () => {
    expect(parseValue("null")).toEqual({ value: null });
    expect(parseValue("  ").error).toContain("empty");
  });
});
