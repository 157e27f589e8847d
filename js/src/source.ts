// The state and plumbing every live DagSource shares: the anywidget ModelStore (widget.ts) and the
// lab sidebar's RunSource (labextension/src/source.ts). Subclasses fill the views from their own
// feed (model messages, REST answers) and say where the layout comes from and what select and
// action do; the view (dagview.ts) reads the rest from here.

import type { Change, DagSource, Detail, FormRequestView, NodeView, RunView, WireLayout } from "./types";

export abstract class BaseDagSource implements DagSource {
  protected views: Record<string, NodeView> = {};
  protected runView: RunView = {};
  protected detailView: Detail = {};
  protected selectedName = "";
  protected formViews: FormRequestView[] = [];
  /** Milliseconds to add to Date.now() to get the kernel's (or server's) clock. */
  protected offset = 0;
  protected listeners = new Set<(change: Change) => void>();

  abstract layout(): WireLayout;
  abstract title(): string;
  abstract mode(): "plan" | "run";
  abstract select(name: string): void;
  abstract action(kind: "cancel" | "resume"): void;

  nodes(): Record<string, NodeView> {
    return this.views;
  }
  run(): RunView {
    return this.runView;
  }
  detail(): Detail {
    return this.detailView;
  }
  selected(): string {
    return this.selectedName;
  }
  forms(): FormRequestView[] {
    return this.formViews;
  }
  clockOffset(): number {
    return this.offset;
  }
  subscribe(listener: (change: Change) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Tell the listeners; an empty change (nothing merged, nothing new) is not worth a redraw. */
  protected emit(change: Change): void {
    if (!Object.keys(change).length) return;
    for (const listener of this.listeners) listener(change);
  }
}
