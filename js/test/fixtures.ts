// Test data: a small laid-out DAG in the shape rho_notebook/views/layout.py produces, node views,
// and a DagSource whose views the tests set and announce by hand.

import { BaseDagSource } from "../src/source";
import type { Change, Detail, NodeView, RunView, WireLayout } from "../src/types";

/**
 * build -> test, build -> lint (conditional), test + lint -> ship (conditional node).
 * Top to bottom, nodes 160 x 36, layers 70 px apart.
 */
export function layoutTB(): WireLayout {
  return {
    direction: "TB",
    width: 400,
    height: 200,
    node_width: 160,
    node_height: 36,
    layers: 3,
    nodes: [
      { name: "build", kind: "command", layer: 0, x: 120, y: 10, needs: [], conditional: false },
      { name: "test", kind: "command", layer: 1, x: 20, y: 80, needs: ["build"], conditional: false },
      { name: "lint", kind: "agent", layer: 1, x: 220, y: 80, needs: ["build"], conditional: false },
      { name: "ship", kind: "approval", layer: 2, x: 120, y: 150, needs: ["test", "lint"], conditional: true },
    ],
    edges: [
      { source: "build", target: "test", condition: false, points: [[200, 46], [100, 80]] },
      { source: "build", target: "lint", condition: false, points: [[200, 46], [300, 80]] },
      { source: "test", target: "ship", condition: true, points: [[100, 116], [200, 150]] },
      { source: "lint", target: "ship", condition: true, points: [[300, 116], [200, 150]] },
    ],
    edge_count: 4,
    reduced_edge_count: 4,
  };
}

export function nodeView(state: string, extra: Partial<NodeView> = {}): NodeView {
  return { state, attempt: 1, started_at: null, ended_at: null, reason: "", exit_code: null, uncertain: false, v: 1, ...extra };
}

/** A DagSource the test drives: set the fields, then `announce` the change. */
export class TestSource extends BaseDagSource {
  layoutData: WireLayout;
  titleText = "release";
  modeName: "plan" | "run" = "run";
  selects: string[] = [];
  actions: string[] = [];

  constructor(layout: WireLayout = layoutTB()) {
    super();
    this.layoutData = layout;
  }

  set(parts: { nodes?: Record<string, NodeView>; run?: RunView; detail?: Detail; selected?: string; offset?: number }): this {
    if (parts.nodes) this.views = parts.nodes;
    if (parts.run) this.runView = parts.run;
    if (parts.detail) this.detailView = parts.detail;
    if (parts.selected !== undefined) this.selectedName = parts.selected;
    if (parts.offset !== undefined) this.offset = parts.offset;
    return this;
  }

  announce(change: Change): void {
    this.emit(change);
  }

  get listenerCount(): number {
    return this.listeners.size;
  }

  layout(): WireLayout {
    return this.layoutData;
  }
  title(): string {
    return this.titleText;
  }
  mode(): "plan" | "run" {
    return this.modeName;
  }
  select(name: string): void {
    this.selects.push(name);
    this.selectedName = name;
    this.emit({ selected: true });
  }
  action(kind: "cancel" | "resume"): void {
    this.actions.push(kind);
  }
}
