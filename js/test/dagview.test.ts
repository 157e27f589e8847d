import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { renderDag } from "../src/dagview";
import { layoutTB, nodeView, TestSource } from "./fixtures";

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

function render(source: TestSource): void {
  cleanups.push(renderDag(el, source));
}

const node = (name: string) => el.querySelector<SVGGElement>(`g.rho-node[data-name='${name}']`) as SVGGElement;
const states = () => Array.from(el.querySelectorAll<SVGGElement>("g.rho-node")).map((g) => [g.dataset.name, g.dataset.state]);
const legend = () =>
  Object.fromEntries(Array.from(el.querySelectorAll<HTMLElement>(".rho-chip[data-state]")).map((c) => [c.dataset.state, Number(c.querySelector("b")?.textContent)]));
const button = (cls: string) => el.querySelector<HTMLButtonElement>(`button.${cls}`) as HTMLButtonElement;
const classes = (name: string) => (node(name).getAttribute("class") ?? "").split(" ");

describe("drawing the layout", () => {
  it("places one node per layout node, sized by the layout", () => {
    render(new TestSource());
    const svg = el.querySelector("svg.rho-graph") as SVGSVGElement;
    expect(svg.getAttribute("viewBox")).toBe("0 0 400 200");
    expect(el.querySelectorAll("g.rho-node")).toHaveLength(4);
    expect(node("test").getAttribute("transform")).toBe("translate(20,80)");
    const rect = node("test").querySelector("rect") as SVGRectElement;
    expect([rect.getAttribute("width"), rect.getAttribute("height")]).toEqual(["160", "36"]);
    expect(node("test").querySelector("text.rho-label")?.textContent).toBe("test");
  });

  it("draws every edge of the layout through its points, dashed when it carries a condition", () => {
    render(new TestSource());
    const edges = Array.from(el.querySelectorAll("path.rho-edge"));
    expect(edges.map((e) => `${e.getAttribute("data-source")}>${e.getAttribute("data-target")}`)).toEqual(["build>test", "build>lint", "test>ship", "lint>ship"]);
    expect(edges[0].getAttribute("d")).toBe("M200,46C200,63 100,63 100,80");
    expect(el.querySelectorAll("path.rho-edge.rho-edge-cond")).toHaveLength(2);
    expect(el.querySelector(".rho-edge-note")?.textContent).toContain("4 nodes \u00b7 4 of 4 edges drawn");
  });

  it("marks conditional nodes and shortens long names", () => {
    const layout = layoutTB();
    layout.nodes[1] = { ...layout.nodes[1], name: "a-very-long-node-name-indeed" };
    render(new TestSource(layout));
    expect(node("ship").querySelector("text.rho-when")?.textContent).toBe("when");
    expect(node("build").querySelector("text.rho-when")).toBeNull();
    expect(node("a-very-long-node-name-indeed").querySelector("text.rho-label")?.textContent).toBe("a-very-long-node-\u2026");
  });

  it("escapes names in the markup", () => {
    const layout = layoutTB();
    layout.nodes[0] = { ...layout.nodes[0], name: 'x"<b>' };
    render(new TestSource(layout));
    expect(el.querySelector("g.rho-node b")).toBeNull();
    expect(el.querySelectorAll("g.rho-node")[0].getAttribute("data-name")).toBe('x"<b>');
  });
});

describe("node states", () => {
  it("colours nodes by their views, pending without one, and counts them in the legend", () => {
    const source = new TestSource().set({ nodes: { build: nodeView("success"), test: nodeView("running"), lint: nodeView("failure") } });
    render(source);
    expect(states()).toEqual([
      ["build", "success"],
      ["test", "running"],
      ["lint", "failure"],
      ["ship", "pending"],
    ]);
    expect(classes("build")).toContain("rho-s-success");
    expect(node("build").querySelector("text.rho-icon")?.textContent).toBe("\u2713");
    expect(legend()).toMatchObject({ success: 1, running: 1, failure: 1, pending: 1, skipped: 0 });
    expect(el.querySelector(".rho-chip-skipped")?.classList.contains("rho-zero")).toBe(true);
    expect([el.dataset.done, el.dataset.total]).toEqual(["2", "4"]);
  });

  it("styles and counts nodes by their shown state: an allowed failure and a held launch apart", () => {
    const source = new TestSource().set({
      nodes: {
        build: nodeView("success", { shown: "success" }),
        test: nodeView("failure", { shown: "failure_allowed" }),
        lint: nodeView("running", { shown: "waiting_for_approval" }),
      },
    });
    render(source);
    expect(classes("test")).toContain("rho-s-failure_allowed");
    expect(classes("test")).not.toContain("rho-s-failure");
    expect(classes("lint")).toContain("rho-s-waiting_for_approval");
    expect(node("lint").querySelector("text.rho-icon")?.textContent).toBe("\u25f7");
    expect(legend()).toMatchObject({ failure: 0, failure_allowed: 1, running: 0, waiting_for_approval: 1, success: 1, pending: 1 });
    const chip = (state: string) => el.querySelector<HTMLElement>(`.rho-chip-${state}`) as HTMLElement;
    expect(chip("failure_allowed").hidden).toBe(false);
    expect(chip("failure_allowed").textContent).toContain("failure (allowed)");
    expect(chip("waiting_for_approval").textContent).toContain("waiting for approval");
    expect(chip("failure_handled").hidden).toBe(true); // a variant no node has is not listed
    expect(chip("failure").hidden).toBe(false); // a state always is (faded at zero)
    expect(chip("failure").classList.contains("rho-zero")).toBe(true);
    expect([el.dataset.done, el.dataset.total]).toEqual(["2", "4"]);
    expect(node("test").querySelector("title")?.textContent).toContain("failure (allowed)");
    // the person approves: the launch runs, and the legend follows
    source.set({ nodes: { ...source.nodes(), lint: nodeView("running", { shown: "running" }) } });
    source.announce({ nodes: ["lint"] });
    expect(classes("lint")).toContain("rho-s-running");
    expect(chip("waiting_for_approval").hidden).toBe(true);
    expect(legend()).toMatchObject({ running: 1, waiting_for_approval: 0 });
  });

  it("shows the shown state's label in the node pane", () => {
    const source = new TestSource().set({
      nodes: { test: nodeView("failure", { shown: "failure_allowed" }) },
      detail: { node: "test", kind: "command", state: "failure", attempt: 1 },
      selected: "test",
    });
    render(source);
    const chip = el.querySelector(".rho-pane .rho-chip") as HTMLElement;
    expect(chip.getAttribute("data-state")).toBe("failure_allowed");
    expect(chip.textContent).toContain("failure (allowed)");
  });

  it("updates the nodes a change names, and only those", () => {
    const source = new TestSource().set({ nodes: { build: nodeView("running") } });
    render(source);
    source.set({ nodes: { build: nodeView("success"), test: nodeView("running") } });
    source.announce({ nodes: ["build"] });
    expect(node("build").dataset.state).toBe("success");
    expect(node("test").dataset.state).toBe("pending");
    source.announce({ nodes: "all" });
    expect(node("test").dataset.state).toBe("running");
    expect(legend()).toMatchObject({ success: 1, running: 1, pending: 2 });
    expect(el.dataset.done).toBe("1");
  });

  it("draws a state it does not know as pending instead of failing", () => {
    render(new TestSource().set({ nodes: { build: nodeView("teleported") } }));
    expect(node("build").dataset.state).toBe("pending");
    expect(legend().pending).toBe(4);
  });

  it("puts state, attempt and reason in the tooltip", () => {
    render(new TestSource().set({ nodes: { lint: nodeView("skipped", { attempt: 0, reason: "condition false" }) } }));
    expect(node("lint").querySelector("title")?.textContent).toBe("lint (agent): skipped \u2014 condition false");
  });

  it("marks a reused node and names its source run in the tooltip, until a later view is not reused", () => {
    const reused_from = { run_id: "01SOURCE", node: "test", attempt: 2 };
    const source = new TestSource().set({ nodes: { test: nodeView("success", { reused_from }), build: nodeView("success") } });
    render(source);
    expect(classes("test")).toEqual(expect.arrayContaining(["rho-s-success", "rho-reused"]));
    expect(node("test").querySelector("text.rho-reused-mark")?.textContent).toBe("\u21ba reused");
    expect(node("test").querySelector("title")?.textContent).toBe("test (command): success, attempt 1\nreused from run 01SOURCE (node test, attempt 2)");
    expect(classes("build")).not.toContain("rho-reused");
    expect(node("build").querySelector("text.rho-reused-mark")?.textContent).toBe("");
    source.set({ nodes: { test: nodeView("running", { attempt: 2 }) } });
    source.announce({ nodes: ["test"] });
    expect(classes("test")).not.toContain("rho-reused");
  });
});

describe("the run toolbar", () => {
  it("shows a plan as a plan: no lifecycle, no buttons", () => {
    const source = new TestSource();
    source.modeName = "plan";
    render(source);
    expect(el.querySelector(".rho-badge")?.textContent).toBe("plan");
    expect(el.dataset.lifecycle).toBe("plan");
    expect(button("rho-cancel").hidden).toBe(true);
    expect(button("rho-resume").hidden).toBe(true);
    expect(el.querySelector(".rho-title")?.textContent).toBe("release");
  });

  it("shows lifecycle and outcome, and Cancel while the run can be cancelled", () => {
    const source = new TestSource().set({ run: { run_id: "r1", lifecycle: "running", can_cancel: true, started_at: new Date(Date.now() - 5000).toISOString() } });
    render(source);
    expect(el.querySelector(".rho-badge")?.textContent).toBe("running");
    expect(el.dataset.lifecycle).toBe("running");
    expect(button("rho-cancel").hidden).toBe(false);
    expect(button("rho-resume").hidden).toBe(true);
    expect(el.querySelector(".rho-elapsed")?.textContent).toMatch(/^elapsed \d+\.\d s$/);

    source.set({ run: { run_id: "r1", lifecycle: "completed", outcome: "failure", can_resume: true, graph_digest: "sha256:0123456789abcdef0123" } });
    source.announce({ run: true });
    expect(el.querySelector(".rho-badge")?.textContent).toBe("completed \u00b7 failure");
    expect([el.dataset.lifecycle, el.dataset.outcome]).toEqual(["completed", "failure"]);
    expect(button("rho-cancel").hidden).toBe(true);
    expect(button("rho-resume").hidden).toBe(false);
    expect(button("rho-resume").textContent).toBe("\u21bb Resume \u2014 confirm sha256:0123456789ab\u2026");
  });

  it("asks the source to cancel, and disables Cancel while the request is pending", () => {
    const source = new TestSource().set({ run: { lifecycle: "running", can_cancel: true } });
    render(source);
    button("rho-cancel").click();
    expect(source.actions).toEqual(["cancel"]);
    expect(button("rho-cancel").disabled).toBe(true);
    source.set({ run: { lifecycle: "cancelling", can_cancel: true, cancel_pending: true } });
    source.announce({ run: true });
    expect(button("rho-cancel").disabled).toBe(true);
    expect(el.querySelector(".rho-badge")?.textContent).toBe("cancelling");
  });

  it("asks the source to resume, and enables Resume again on the next run update", () => {
    const source = new TestSource().set({ run: { lifecycle: "completed", outcome: "failure", can_resume: true, graph_digest: "sha256:ab" } });
    render(source);
    button("rho-resume").click();
    expect(source.actions).toEqual(["resume"]);
    expect(button("rho-resume").disabled).toBe(true);
    source.announce({ run: true });
    expect(button("rho-resume").disabled).toBe(false);
  });
});

describe("selection and the node pane", () => {
  it("selects a node on click and unselects it on a second click or Escape", () => {
    const source = new TestSource();
    render(source);
    node("test").dispatchEvent(new MouseEvent("click", { bubbles: true }));
    expect(source.selects).toEqual(["test"]);
    node("test").dispatchEvent(new MouseEvent("click", { bubbles: true }));
    expect(source.selects).toEqual(["test", ""]);
    source.select("lint");
    el.dispatchEvent(new KeyboardEvent("keydown", { key: "Escape" }));
    expect(source.selects).toEqual(["test", "", "lint", ""]);
  });

  it("highlights the selected node, what it needs (with dependency paths) and what needs it", () => {
    const source = new TestSource();
    render(source);
    source.select("ship");
    expect(classes("ship")).toContain("rho-sel");
    expect(classes("test")).toContain("rho-need");
    expect(classes("lint")).toContain("rho-need");
    const deps = Array.from(el.querySelectorAll("path.rho-dep"));
    expect(deps).toHaveLength(2);
    // ship is conditional: its dependency paths are dashed; from test's bottom middle to ship's top middle
    expect(deps.every((d) => d.classList.contains("rho-edge-cond"))).toBe(true);
    expect(deps[0].getAttribute("d")).toBe("M100,116C100,133 200,133 200,150");

    source.select("build");
    expect(classes("ship")).not.toContain("rho-sel");
    expect(classes("test")).toEqual(expect.arrayContaining(["rho-child"]));
    expect(classes("test")).not.toContain("rho-need");
    expect(el.querySelectorAll("path.rho-dep")).toHaveLength(0);
    expect(el.querySelector("svg.rho-graph")?.classList.contains("rho-has-sel")).toBe(true);

    source.select("");
    expect(el.querySelectorAll(".rho-sel, .rho-need, .rho-child")).toHaveLength(0);
    expect((el.querySelector(".rho-pane") as HTMLElement).hidden).toBe(true);
  });

  it("says loading until the selected node's detail arrives, then shows its sections", () => {
    const source = new TestSource().set({ nodes: { test: nodeView("failure", { attempt: 1 }) } });
    render(source);
    source.select("test");
    const pane = el.querySelector(".rho-pane") as HTMLElement;
    expect(pane.hidden).toBe(false);
    expect(pane.textContent).toContain("loading\u2026");

    source.set({
      detail: {
        node: "test",
        kind: "command",
        state: "failure",
        attempt: 1,
        reason: "exit code 3",
        stdout: { text: "42 passed\n", bytes: 10, start: 0, end: 10, truncated: false, limit: 10000 },
        stderr: { text: "boom", bytes: 2004, start: 2000, end: 2004, truncated: true, limit: 2004 },
        attempts: [
          {
            number: 1,
            started_at: "2025-01-01T10:00:00.000000+00:00",
            ended_at: "2025-01-01T10:00:01.000000+00:00",
            pid: 7,
            state: "failure",
            exit: { kind: "exited", code: 3 },
            message: "exit code 3",
            uncertain: false,
            abandoned: false,
            pending_approval: null,
            approval: null,
          },
        ],
        definition: { kind: "command", argv: ["sh", "-c", "exit 3"], needs: ["build"] },
        has_value: true,
        value: { passed: 42 },
      },
    });
    source.announce({ detail: true });
    expect(pane.querySelector(".rho-pane-name")?.textContent).toBe("test");
    expect(pane.querySelector(".rho-chip")?.getAttribute("data-state")).toBe("failure");
    expect(pane.querySelector(".rho-reason")?.textContent).toBe("exit code 3");
    expect(pane.querySelector(".rho-section-stdout pre")?.textContent).toBe("42 passed\n");
    expect(pane.querySelector(".rho-section-stderr")?.textContent).toContain("the first 2000 bytes are not shown");
    expect(pane.querySelector(".rho-section-stderr .rho-truncated")?.textContent).toContain("kept 2004 bytes");
    expect(pane.querySelector(".rho-section-attempts > .rho-table-scroll > table.rho-attempts")).not.toBeNull();
    const cells = Array.from(pane.querySelectorAll(".rho-attempts tr:nth-child(2) td")).map((td) => td.textContent);
    expect(cells).toEqual(["1", "failure", "2025-01-01 10:00:00.000", "1.0 s", "exited 3", "exit code 3"]);
    expect(pane.querySelector(".rho-definition")?.textContent).toContain('["sh","-c","exit 3"]');
    expect(pane.querySelector(".rho-section-value .rho-json-number")?.textContent).toBe("42");
  });

  it("says where a reused result came from and who approved a carried launch", () => {
    const reused_from = { run_id: "01SOURCE", node: "test", attempt: 2 };
    const source = new TestSource().set({ nodes: { test: nodeView("success", { reused_from }) } });
    render(source);
    source.select("test");
    source.set({ detail: { node: "test", kind: "python", state: "success", attempt: 1, reused_from, has_value: true, value: { n: 1 } } });
    source.announce({ detail: true });
    const pane = el.querySelector(".rho-pane") as HTMLElement;
    expect(pane.querySelector(".rho-reused-from")?.textContent).toBe("\u21ba reused from run 01SOURCE (node test, attempt 2): nothing was launched in this run");
    expect(pane.querySelector(".rho-carried")).toBeNull();
    source.set({ detail: { node: "test", kind: "python", state: "success", attempt: 1, reused_from, reason: "reused from run 01SOURCE (node test, attempt 2)" } });
    source.announce({ detail: true });
    expect(pane.querySelector(".rho-reused-from")).toBeNull();
    expect(pane.querySelector(".rho-reason")?.textContent).toBe("reused from run 01SOURCE (node test, attempt 2)");
    source.set({
      detail: { node: "test", kind: "command", state: "success", attempt: 1, approval: { via: "carried", by: "ada", comment: "carried from run 01EARLIER" } },
    });
    source.announce({ detail: true });
    expect(pane.querySelector(".rho-carried")?.textContent).toBe("\u2713 approval carried from run 01EARLIER by ada");
  });

  it("renders an agent's answer as sanitized markdown", () => {
    const source = new TestSource();
    render(source);
    source.select("lint");
    source.set({ detail: { node: "lint", kind: "agent", answer: { text: "# Findings\n**bold** <img src=x onerror=alert(1)>", bytes: 40, start: 0, end: 40, truncated: false, limit: 1000 } } });
    source.announce({ detail: true });
    const markdown = el.querySelector(".rho-section-answer .rho-markdown") as HTMLElement;
    expect(markdown.querySelector("h1")?.textContent).toBe("Findings");
    expect(markdown.querySelector("strong")?.textContent).toBe("bold");
    expect(markdown.querySelector("img")?.hasAttribute("onerror")).toBe(false);
  });

  it("appends streamed output of the selected node to its pane", () => {
    const source = new TestSource();
    render(source);
    source.select("test");
    source.set({ detail: { node: "test", kind: "command", live: true, stdout: { text: "", bytes: 0, start: 0, end: 0, truncated: false, limit: 100 } } });
    source.announce({ detail: true });
    const pre = el.querySelector("pre.rho-stdout") as HTMLPreElement;
    expect(pre.textContent).toBe("(empty)");
    source.announce({ output: [{ node: "test", attempt: 1, stream: "stdout", start: 0, end: 6, text: "hello\n" }] });
    source.announce({ output: [{ node: "other", attempt: 1, stream: "stdout", start: 0, end: 3, text: "no\n" }] });
    source.announce({ output: [{ node: "test", attempt: 1, stream: "stdout", start: 6, end: 12, text: "world\n" }] });
    expect(pre.textContent).toBe("hello\nworld\n");
  });
});

describe("zoom and pan", () => {
  const svg = () => el.querySelector("svg.rho-graph") as SVGSVGElement;
  const viewport = () => el.querySelector(".rho-viewport") as HTMLElement;

  it("zooms by steps from the toolbar and shows the zoom", () => {
    render(new TestSource());
    expect(el.dataset.zoom).toBe("1.000");
    expect(svg().getAttribute("width")).toBe("400");
    button("rho-zoom-in").click();
    expect(el.dataset.zoom).toBe("1.250");
    expect([svg().getAttribute("width"), svg().getAttribute("height")]).toEqual(["500", "250"]);
    expect(el.querySelector(".rho-zoom-level")?.textContent).toBe("125%");
    button("rho-zoom-out").click();
    button("rho-zoom-out").click();
    expect(el.dataset.zoom).toBe("0.800");
  });

  it("zooms with Ctrl + wheel only, unless the view has the wheel to itself", () => {
    render(new TestSource());
    const plain = new WheelEvent("wheel", { deltaY: -100, cancelable: true, bubbles: true });
    viewport().dispatchEvent(plain);
    expect(el.dataset.zoom).toBe("1.000");
    expect(plain.defaultPrevented).toBe(false);
    const ctrl = new WheelEvent("wheel", { deltaY: -100, ctrlKey: true, cancelable: true, bubbles: true });
    viewport().dispatchEvent(ctrl);
    expect(Number(el.dataset.zoom)).toBeGreaterThan(1);
    expect(ctrl.defaultPrevented).toBe(true);

    const other = document.createElement("div");
    document.body.append(other);
    cleanups.push(renderDag(other, new TestSource(), { wheelZoom: "always" }));
    other.querySelector(".rho-viewport")?.dispatchEvent(new WheelEvent("wheel", { deltaY: 100, cancelable: true, bubbles: true }));
    expect(Number(other.dataset.zoom)).toBeLessThan(1);
    other.remove();
  });

  it("fits the graph into the viewport", () => {
    render(new TestSource());
    Object.defineProperty(viewport(), "clientWidth", { configurable: true, value: 208 });
    Object.defineProperty(viewport(), "clientHeight", { configurable: true, value: 400 });
    button("rho-zoom-fit").click();
    expect(el.dataset.zoom).toBe("0.500");
    expect(svg().getAttribute("width")).toBe("200");
  });

  it("does not take a drag for a click on a node", () => {
    const source = new TestSource();
    render(source);
    const target = node("test");
    target.dispatchEvent(new MouseEvent("pointerdown", { button: 0, clientX: 10, clientY: 10, bubbles: true }));
    window.dispatchEvent(new MouseEvent("pointermove", { clientX: 60, clientY: 40, bubbles: true }));
    window.dispatchEvent(new MouseEvent("pointerup", { clientX: 60, clientY: 40, bubbles: true }));
    target.dispatchEvent(new MouseEvent("click", { bubbles: true }));
    expect(source.selects).toEqual([]);
    target.dispatchEvent(new MouseEvent("click", { bubbles: true }));
    expect(source.selects).toEqual(["test"]);
  });

  it("starts with the pane below the graph", () => {
    render(new TestSource());
    expect(el.dataset.pane).toBe("below");
  });
});

describe("layout changes and cleanup", () => {
  it("redraws the graph when the layout changes", () => {
    const source = new TestSource();
    render(source);
    const layout = layoutTB();
    layout.nodes = layout.nodes.slice(0, 2);
    layout.edges = layout.edges.slice(0, 1);
    source.layoutData = layout;
    source.set({ nodes: { test: nodeView("success") } });
    source.announce({ layout: true, nodes: "all" });
    expect(states()).toEqual([
      ["build", "pending"],
      ["test", "success"],
    ]);
    expect(el.querySelectorAll("path.rho-edge")).toHaveLength(1);
    expect(el.dataset.total).toBe("2");
  });

  it("stops listening once cleaned up", () => {
    const source = new TestSource();
    const cleanup = renderDag(el, source);
    expect(source.listenerCount).toBe(1);
    cleanup();
    expect(source.listenerCount).toBe(0);
    source.set({ nodes: { build: nodeView("success") } });
    source.announce({ nodes: ["build"] });
    expect(node("build").dataset.state).toBe("pending");
  });
});
