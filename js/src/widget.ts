// anywidget entry: adapts the widget model (synced traits + custom patch messages) to a DagSource
// and calls renderDag. One store per model, created in `initialize`, shared by all its views.
//
// Patches never go through save_changes: the store keeps the merged views and mirrors them into
// the model with model.set (local only), so a saved widget state holds the latest views. Merging is
// per node by version `v` (newest wins), so patches and snapshots may arrive in any order. A script
// run's layout grows while it runs (a new step is a new node): a patch or snapshot then carries the
// whole new `layout`, kept here and mirrored into `graph_layout` like the views.

import type { AnyModel } from "@anywidget/types";

import { renderDag } from "./dagview";
import { BaseDagSource } from "./source";
import { requestTimeline, type TimelineJson, type TimelineModel } from "./timeline";
import type { Change, Detail, ForkAnswer, ForkRequest, FormRequestView, NodeView, OutputChunk, RunView, WireLayout } from "./types";

interface Traits {
  mode: "plan" | "run";
  title: string;
  graph_layout: WireLayout;
  nodes: Record<string, NodeView>;
  run: RunView;
  detail: Detail;
  selected: string;
  forms: FormRequestView[];
}

interface Message {
  kind: "patch" | "snapshot";
  nodes?: Record<string, NodeView>;
  run?: RunView;
  detail?: Detail;
  output?: OutputChunk[];
  layout?: WireLayout;
  forms?: FormRequestView[];
  now?: string;
}

/** The kernel's answer to a "fork" message: the planned or started fork, or the refusal. */
interface ForkReply {
  kind: "fork_answer";
  id: string;
  answer?: ForkAnswer;
  error?: string;
}

const PANE_CHARS = 64 * 1024;

/** The DagSource of one widget model (exported for the unit tests). */
export class ModelStore extends BaseDagSource {
  private model: AnyModel<Traits>;
  private mirroring = false;
  messages = 0;

  constructor(model: AnyModel<Traits>) {
    super();
    this.model = model;
    this.views = { ...(model.get("nodes") ?? {}) };
    this.runView = { ...(model.get("run") ?? {}) };
    this.detailView = { ...(model.get("detail") ?? {}) };
    this.selectedName = model.get("selected") ?? "";
    this.formViews = [...(model.get("forms") ?? [])];
    model.on("change:forms", () => {
      if (this.mirroring) return;
      this.formViews = [...(this.model.get("forms") ?? [])];
      this.emit({ forms: true });
    });
    model.on("change:nodes", () => {
      if (!this.mirroring) this.emit({ nodes: this.mergeNodes(this.model.get("nodes") ?? {}) });
    });
    model.on("change:run", () => {
      if (!this.mirroring && this.mergeRun(this.model.get("run") ?? {})) this.emit({ run: true });
    });
    model.on("change:detail", () => {
      if (this.mirroring) return;
      this.detailView = { ...(this.model.get("detail") ?? {}) };
      this.emit({ detail: true });
    });
    model.on("change:selected", () => {
      if (this.mirroring) return;
      this.selectedName = this.model.get("selected") ?? "";
      this.emit({ selected: true });
    });
    model.on("change:graph_layout", () => {
      if (!this.mirroring) this.emit({ layout: true, nodes: "all" });
    });
    model.on("change:title", () => this.emit({ run: true }));
    model.on("msg:custom", (msg: Message | ForkReply) => this.receive(msg));
    model.send({ kind: "hello" });
  }

  private mergeNodes(incoming: Record<string, NodeView>): string[] {
    const changed: string[] = [];
    for (const [name, view] of Object.entries(incoming)) {
      const current = this.views[name];
      if (!current || (view.v ?? 0) >= (current.v ?? 0)) {
        if (!current || current.state !== view.state || current.shown !== view.shown || current.v !== view.v) changed.push(name);
        this.views[name] = view;
      }
    }
    return changed;
  }

  private mergeRun(incoming: RunView): boolean {
    if ((incoming.v ?? 0) < (this.runView.v ?? 0)) return false;
    this.runView = { ...this.runView, ...incoming };
    return true;
  }

  private appendOutput(chunks: OutputChunk[]): OutputChunk[] {
    const applied: OutputChunk[] = [];
    for (const chunk of chunks) {
      if (chunk.node !== this.detailView.node) continue;
      const stream = this.detailView[chunk.stream] ?? { text: "", bytes: 0, start: chunk.start, end: chunk.start, truncated: false, limit: 0 };
      if (chunk.end <= stream.end) continue; // already shown (e.g. the detail was reloaded meanwhile)
      let joined = stream.text + chunk.text;
      let start = stream.start;
      if (joined.length > PANE_CHARS) {
        start += joined.length - PANE_CHARS;
        joined = joined.slice(joined.length - PANE_CHARS);
      }
      this.detailView = { ...this.detailView, [chunk.stream]: { ...stream, text: joined, start, end: chunk.end, bytes: chunk.end } };
      applied.push(chunk);
    }
    return applied;
  }

  private receive(msg: Message | ForkReply): void {
    if (msg.kind === "fork_answer") return this.forkAnswered(msg);
    if (msg.kind !== "patch" && msg.kind !== "snapshot") return;
    this.messages += 1;
    if (msg.now) this.offset = Date.parse(msg.now) - Date.now();
    const change: Change = {};
    if (msg.layout && JSON.stringify(msg.layout) !== JSON.stringify(this.model.get("graph_layout"))) {
      this.mirroring = true;
      try {
        this.model.set("graph_layout", msg.layout);
      } finally {
        this.mirroring = false;
      }
      change.layout = true;
      change.nodes = "all";
    }
    if (msg.nodes) {
      const changed = this.mergeNodes(msg.nodes);
      if (changed.length && !change.nodes) change.nodes = changed;
    }
    if (msg.run && this.mergeRun(msg.run)) change.run = true;
    if (msg.forms) {
      this.formViews = msg.forms;
      change.forms = true;
    }
    if (msg.detail && (msg.kind === "snapshot" || msg.detail.node === this.selectedName)) {
      this.detailView = msg.detail;
      change.detail = true;
    }
    if (msg.output && !change.detail) {
      const applied = this.appendOutput(msg.output);
      if (applied.length) change.output = applied;
    }
    this.mirror(change);
    this.emit(change);
  }

  private mirror(change: Change): void {
    this.mirroring = true;
    try {
      if (change.nodes) this.model.set("nodes", { ...this.views });
      if (change.run) this.model.set("run", { ...this.runView });
      if (change.detail || change.output) this.model.set("detail", { ...this.detailView });
      if (change.forms) this.model.set("forms", [...this.formViews]);
    } finally {
      this.mirroring = false;
    }
  }

  layout(): WireLayout {
    return this.model.get("graph_layout");
  }
  title(): string {
    return this.model.get("title") ?? "";
  }
  mode(): "plan" | "run" {
    return this.model.get("mode") ?? "plan";
  }
  select(name: string): void {
    // optimistic: highlight now, the pane fills when the kernel answers with the detail
    this.selectedName = name;
    this.emit({ selected: true });
    this.model.send({ kind: "select", node: name });
  }
  action(kind: "cancel" | "resume"): void {
    this.model.send({ kind: "action", action: kind });
  }
  /** The run's timeline rows, folded by the kernel (a "timeline" action, answered by a message). */
  timeline(): Promise<TimelineJson> {
    return requestTimeline(this.model as unknown as TimelineModel);
  }
  answer(request: string, values: Record<string, unknown> | null): void {
    this.model.send(values === null ? { kind: "decline", request } : { kind: "answer", request, values });
  }
  /** "Fork from here": the kernel plans (or, with the confirmed digest, starts) the fork and answers. */
  fork(request: ForkRequest): Promise<ForkAnswer> {
    const id = `fork-${++this.forkCount}`;
    return new Promise((resolve, reject) => {
      this.forks.set(id, { resolve, reject });
      this.model.send({ kind: "fork", id, ...request });
    });
  }
  private forkCount = 0;
  private forks = new Map<string, { resolve: (answer: ForkAnswer) => void; reject: (error: Error) => void }>();
  private forkAnswered(msg: ForkReply): void {
    const waiting = this.forks.get(msg.id);
    if (!waiting) return;
    this.forks.delete(msg.id);
    if (msg.error !== undefined) waiting.reject(new Error(msg.error));
    else waiting.resolve(msg.answer ?? {});
  }
}

const stores = new WeakMap<object, ModelStore>();

function storeFor(model: AnyModel<Traits>): ModelStore {
  let store = stores.get(model);
  if (!store) {
    store = new ModelStore(model);
    stores.set(model, store);
  }
  return store;
}

export default {
  initialize({ model }: { model: AnyModel<Traits> }) {
    storeFor(model);
  },
  render({ model, el }: { model: AnyModel<Traits>; el: HTMLElement }) {
    return renderDag(el, storeFor(model));
  },
};
