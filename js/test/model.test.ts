import { describe, expect, it } from "vitest";

import {
  attemptCells,
  childrenOf,
  clampZoom,
  fitZoom,
  initialZoom,
  LABEL_PX,
  panePlacement,
  readableZoom,
  READABLE_PX,
  stepZoom,
  wheelFactor,
  ZOOM_MAX,
  ZOOM_MIN,
  zoomScroll,
  countStates,
  curve,
  dependencyEnds,
  elapsed,
  formatDuration,
  labelChars,
  nodeLabel,
  nodeTitle,
  baseState,
  SHOWN_LABEL,
  SHOWN_STATES,
  SHOWN_VARIANTS,
  shownDone,
  shownOf,
  STATES,
  stateOf,
  TERMINAL_STATES,
} from "../src/model";
import { STATE_STYLE } from "../src/dagview";
import type { AttemptJson } from "../src/types";
import { layoutTB, nodeView } from "./fixtures";

describe("states", () => {
  it("has a colour and icon for every state and counts all but pending, ready and running as done", () => {
    expect(Object.keys(STATE_STYLE).sort()).toEqual([...SHOWN_STATES].sort());
    expect(STATES.filter((s) => !TERMINAL_STATES.includes(s))).toEqual(["pending", "ready", "running"]);
  });

  it("draws a known wire state as itself and anything else as pending", () => {
    expect(stateOf("failure")).toBe("failure");
    expect(stateOf("cancellation")).toBe("cancellation");
    expect(stateOf("exploded")).toBe("pending");
    expect(stateOf("")).toBe("pending");
    expect(stateOf(null)).toBe("pending");
    expect(stateOf(undefined)).toBe("pending");
  });

  it("counts the layout's nodes per state, a node without a view as pending", () => {
    const views = { build: nodeView("success"), test: nodeView("running"), lint: nodeView("skipped"), other: nodeView("failure") };
    const { counts, done, total } = countStates(["build", "test", "lint", "ship"], views);
    expect(Object.fromEntries(counts)).toEqual({
      pending: 1,
      ready: 0,
      running: 1,
      success: 1,
      failure: 0,
      denial: 0,
      cancellation: 0,
      skipped: 1,
      blocked: 0,
      waiting_for_approval: 0,
      failure_allowed: 0,
      failure_handled: 0,
      denial_handled: 0,
    });
    expect(done).toBe(2);
    expect(total).toBe(4);
  });
});

describe("shown states", () => {
  it("draws a node by its view's shown state, by its state when the view has none or one it does not know", () => {
    expect(shownOf(nodeView("failure", { shown: "failure_allowed" }))).toBe("failure_allowed");
    expect(shownOf(nodeView("running", { shown: "waiting_for_approval" }))).toBe("waiting_for_approval");
    expect(shownOf(nodeView("failure"))).toBe("failure");
    expect(shownOf(nodeView("failure", { shown: "exploded" as never }))).toBe("failure");
    expect(shownOf(undefined)).toBe("pending");
  });

  it("lists every state and each variant beside the state it stands for, with a label a person reads", () => {
    expect(STATES.every((s) => SHOWN_STATES.includes(s))).toBe(true);
    for (const [variant, state] of Object.entries(SHOWN_VARIANTS)) {
      expect(baseState(variant as keyof typeof SHOWN_VARIANTS)).toBe(state);
      expect(Math.abs(SHOWN_STATES.indexOf(variant as never) - SHOWN_STATES.indexOf(state))).toBe(1);
    }
    expect(SHOWN_LABEL.failure_allowed).toBe("failure (allowed)");
    expect(SHOWN_LABEL.failure_handled).toBe("failure (handled)");
    expect(SHOWN_LABEL.denial_handled).toBe("denial (handled)");
    expect(SHOWN_LABEL.waiting_for_approval).toBe("waiting for approval");
    expect(SHOWN_LABEL.success).toBe("success");
  });

  it("counts an allowed failure apart from failures and a held launch apart from running nodes", () => {
    const views = {
      build: nodeView("success", { shown: "success" }),
      test: nodeView("failure", { shown: "failure_allowed" }),
      lint: nodeView("running", { shown: "waiting_for_approval" }),
      ship: nodeView("failure", { shown: "failure_handled" }),
    };
    const { counts, done, total } = countStates(["build", "test", "lint", "ship"], views);
    expect(counts.get("failure")).toBe(0);
    expect(counts.get("failure_allowed")).toBe(1);
    expect(counts.get("failure_handled")).toBe(1);
    expect(counts.get("running")).toBe(0);
    expect(counts.get("waiting_for_approval")).toBe(1);
    expect([done, total]).toEqual([3, 4]);
    expect(shownDone("waiting_for_approval")).toBe(false);
    expect(shownDone("denial_handled")).toBe(true);
  });

  it("names the shown state in the tooltip", () => {
    const node = layoutTB().nodes[1];
    expect(nodeTitle(node, nodeView("failure", { shown: "failure_allowed", attempt: 1 }))).toBe("test (command): failure (allowed), attempt 1");
  });
});

describe("geometry", () => {
  it("bends edge segments vertically top to bottom and horizontally left to right", () => {
    expect(curve([[0, 0], [10, 20]], "TB")).toBe("M0,0C0,10 10,10 10,20");
    expect(curve([[0, 0], [20, 10]], "LR")).toBe("M0,0C10,0 10,10 20,10");
    expect(curve([[0, 0], [10, 20], [10, 40]], "TB")).toBe("M0,0C0,10 10,10 10,20C10,30 10,30 10,40");
    expect(curve([[5, 5]], "TB")).toBe("M5,5");
  });

  it("joins a dependency's outgoing side to the needing node's incoming side", () => {
    const layout = layoutTB();
    const [build, test] = layout.nodes;
    expect(dependencyEnds(build, test, layout)).toEqual([
      [120 + 80, 10 + 36],
      [20 + 80, 80],
    ]);
    const lr = { ...layout, direction: "LR" };
    expect(dependencyEnds(build, test, lr)).toEqual([
      [120 + 160, 10 + 18],
      [20, 80 + 18],
    ]);
  });

  it("lists the children of every node in layout order", () => {
    const children = childrenOf(layoutTB());
    expect(Object.fromEntries(children)).toEqual({ build: ["test", "lint"], test: ["ship"], lint: ["ship"] });
  });
});

describe("labels", () => {
  it("fits a label to the node width with an ellipsis", () => {
    expect(labelChars(160)).toBe(18);
    expect(nodeLabel("build", 18)).toBe("build");
    expect(nodeLabel("x".repeat(18), 18)).toBe("x".repeat(18));
    expect(nodeLabel("abcdefghijklmnopqrstuvwxyz", 18)).toBe("abcdefghijklmnopq\u2026");
  });

  it("says name, kind, state, attempt and reason in the tooltip", () => {
    const [build] = layoutTB().nodes;
    expect(nodeTitle(build, undefined)).toBe("build (command): pending");
    expect(nodeTitle(build, nodeView("failure", { attempt: 2, reason: "exit 1" }))).toBe("build (command): failure, attempt 2 \u2014 exit 1");
    expect(nodeTitle(build, nodeView("ready", { attempt: 0 }))).toBe("build (command): ready");
    const reused_from = { run_id: "01SOURCE", node: "build", attempt: 3 };
    expect(nodeTitle(build, nodeView("success", { reused_from }))).toBe("build (command): success, attempt 1\nreused from run 01SOURCE (node build, attempt 3)");
    const said = nodeView("success", { reused_from, reason: "reused from run 01SOURCE (node build, attempt 3)" });
    expect(nodeTitle(build, said)).toBe("build (command): success, attempt 1 \u2014 reused from run 01SOURCE (node build, attempt 3)");
  });
});

describe("durations", () => {
  it("formats tenths below 10 s, seconds below a minute, then m:ss and h:mm:ss", () => {
    expect(formatDuration(1234)).toBe("1.2 s");
    expect(formatDuration(42_000)).toBe("42 s");
    expect(formatDuration(65_000)).toBe("1:05");
    expect(formatDuration(3_600_000 + 2 * 60_000 + 3_000)).toBe("1:02:03");
    expect(formatDuration(-1)).toBe("–");
    expect(formatDuration(NaN)).toBe("–");
  });

  it("measures to the end, or to now on the kernel's clock while running", () => {
    const start = "2025-01-01T00:00:00.000Z";
    expect(elapsed(start, "2025-01-01T00:00:05.000Z")).toBe(5000);
    const now = Date.parse("2025-01-01T00:00:10.000Z");
    expect(elapsed(start, null, 0, now)).toBe(10_000);
    expect(elapsed(start, null, 2_000, now)).toBe(12_000);
    expect(elapsed(null, null)).toBeNaN();
  });
});

describe("attempt rows", () => {
  const attempt = (extra: Partial<AttemptJson>): AttemptJson => ({
    number: 1,
    started_at: "2025-01-01T10:00:00.000000+00:00",
    ended_at: "2025-01-01T10:00:02.500000+00:00",
    pid: 42,
    state: "failure",
    exit: { kind: "exited", code: 3, signal: null },
    message: "exit code 3",
    uncertain: false,
    abandoned: false,
    pending_approval: null,
    approval: null,
    ...extra,
  });

  it("shows number, state, start, duration, exit and message", () => {
    expect(attemptCells(attempt({}))).toEqual(["1", "failure", "2025-01-01 10:00:00.000", "2.5 s", "exited 3", "exit code 3"]);
  });

  it("names signals, running, uncertain and abandoned attempts", () => {
    expect(attemptCells(attempt({ exit: { kind: "signaled", code: null, signal: 9 } }))[4]).toBe("signaled sig 9");
    const running = attemptCells(attempt({ state: null, ended_at: null, exit: null, message: "" }));
    expect([running[1], running[3], running[4]]).toEqual(["running", "\u2026", ""]);
    expect(attemptCells(attempt({ state: null, uncertain: true }))[1]).toBe("uncertain");
    expect(attemptCells(attempt({ state: null, uncertain: true, abandoned: true }))[1]).toBe("uncertain (abandoned)");
    expect(attemptCells(attempt({ started_at: null, ended_at: null }))[2]).toBe("");
  });
});

describe("zoom and fit", () => {
  it("keeps the zoom within its range", () => {
    expect(clampZoom(0.01)).toBe(ZOOM_MIN);
    expect(clampZoom(99)).toBe(ZOOM_MAX);
    expect(clampZoom(1.5)).toBe(1.5);
    expect(clampZoom(NaN)).toBe(1);
  });

  it("draws labels at 11 px from the readable zoom on", () => {
    expect(readableZoom()).toBeCloseTo(11 / 12);
    expect(LABEL_PX * readableZoom()).toBeCloseTo(READABLE_PX);
    expect(readableZoom(10, 12)).toBeCloseTo(1.2);
  });

  it("fits the whole graph by its tighter side, less a margin", () => {
    expect(fitZoom({ width: 400, height: 200 }, { width: 208, height: 1000 })).toBeCloseTo(0.5);
    expect(fitZoom({ width: 400, height: 200 }, { width: 1000, height: 108 })).toBeCloseTo(0.5);
    expect(fitZoom({ width: 100, height: 100 }, { width: 10000, height: 10000 })).toBe(ZOOM_MAX);
    // a side the view has no size for yet does not count
    expect(fitZoom({ width: 400, height: 200 }, { width: 808, height: 0 })).toBeCloseTo(2);
  });

  it("starts whole when the graph fits at up to 1:1, and never below the readable zoom", () => {
    expect(initialZoom({ width: 400, height: 300 }, { width: 900, height: 600 })).toBe(1);
    expect(initialZoom({ width: 400, height: 300 }, { width: 380, height: 600 })).toBeCloseTo(372 / 400);
    // the case of the report: a 620 px wide DAG in a 300 px sidebar used to shrink to labels of 6 px
    const narrow = initialZoom({ width: 620, height: 420 }, { width: 300, height: 500 });
    expect(narrow).toBeCloseTo(readableZoom());
    expect(LABEL_PX * narrow).toBeGreaterThanOrEqual(READABLE_PX - 1e-9);
  });

  it("steps by a quarter and turns the wheel into a bounded factor", () => {
    expect(stepZoom(1, 1)).toBeCloseTo(1.25);
    expect(stepZoom(1, -1)).toBeCloseTo(0.8);
    expect(stepZoom(ZOOM_MAX, 1)).toBe(ZOOM_MAX);
    expect(wheelFactor(-100)).toBeGreaterThan(1);
    expect(wheelFactor(100)).toBeLessThan(1);
    expect(wheelFactor(100) * wheelFactor(-100)).toBeCloseTo(1);
    expect(wheelFactor(3, 1)).toBeCloseTo(wheelFactor(48));
    expect(wheelFactor(100000)).toBeCloseTo(wheelFactor(300));
  });

  it("keeps the point under the pointer in place while zooming", () => {
    // content x under the pointer: (scroll + pointer) / zoom, before and after
    const scroll = zoomScroll(1, 2, 100, 50);
    expect((scroll + 100) / 2).toBeCloseTo((50 + 100) / 1);
    expect(zoomScroll(2, 1, 100, 0)).toBe(0);
  });

  it("puts the node pane beside the graph only in a wide view", () => {
    expect(panePlacement(620)).toBe("below");
    expect(panePlacement(899)).toBe("below");
    expect(panePlacement(900)).toBe("side");
    expect(panePlacement(500, 400)).toBe("side");
  });
});
