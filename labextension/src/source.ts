// A DagSource (the input of the shared DAG view, @rho-notebook/dagview) for one run, fed by the
// REST API: the layout and node views from /view, live updates from the run's event stream
// (each batch of journal records triggers one refresh of the node and run views), and the pane of
// the selected node from /nodes/<node>, polled while that node runs. A script run's /view always
// carries its layout (its steps appear as nodes while it runs): a grown layout is drawn again.
// An item graph's human steps waiting for a person are the source's forms (the run's waiting
// requests of kind "form", reloaded with the views); the view draws them with Submit and Decline,
// which go to .../approvals/<request>/answer and to a deny; a refusal (the server names the field)
// is shown in the form.

import {
  BaseDagSource,
  type ApprovalJson,
  type Change,
  type DagSource,
  type Detail,
  type FormField,
  type FormRequestView,
  type ForkAnswer,
  type ForkRequest,
  type NodeView,
  type RunView,
  type WireLayout,
} from "@rho-notebook/dagview";

import { ApiError, RhoApi, type JournalRecord, type RunViewData } from "./api";
import { errorText } from "./dom";

const REFRESH_MS = 200;
const DETAIL_POLL_MS = 1000;

export class RunSource extends BaseDagSource {
  private layoutData: WireLayout;
  private stopStream: (() => void) | null = null;
  private refreshTimer: number | null = null;
  private detailTimer: number | null = null;
  private disposed = false;
  /** The journal seq of the /view answer the views come from. */
  private viewSeq = 0;
  /** The waiting form requests of the last /approvals answer, before errors are added. */
  private formRequests: ApprovalJson[] = [];
  /** The refusal of the last answer to a form, by request ID (shown in that form). */
  private formErrors = new Map<string, string>();
  lastSeq: number;

  private constructor(
    private readonly api: RhoApi,
    readonly runId: string,
    data: RunViewData,
    private readonly onRecord: (record: JournalRecord | null) => void,
    private readonly onAction: (kind: "cancel" | "resume") => void,
  ) {
    super();
    this.layoutData = data.layout as WireLayout;
    this.views = data.nodes;
    this.runView = data.run;
    this.lastSeq = data.last_seq;
    this.viewSeq = data.last_seq;
    this.offset = Date.parse(data.now) - Date.now();
    this.titleText = data.title;
    this.follow();
    void this.loadForms();
  }

  private titleText: string;

  /** Load a run's view and start following its event stream. */
  static async open(
    api: RhoApi,
    runId: string,
    hooks: { record: (record: JournalRecord | null) => void; action: (kind: "cancel" | "resume") => void },
  ): Promise<RunSource> {
    const data = await api.view(runId, true);
    return new RunSource(api, runId, data, hooks.record, hooks.action);
  }

  /** Follow the stream from the last seq seen (again, e.g. after the run was resumed). */
  follow(): void {
    if (this.disposed) return;
    this.stopStream?.();
    this.stopStream = this.api.follow(this.runId, this.lastSeq, {
      record: (record) => {
        this.lastSeq = Math.max(this.lastSeq, record.seq);
        this.onRecord(record);
        if (record.node && record.node === this.selectedName) this.loadDetail();
        this.scheduleRefresh();
      },
      end: () => {
        this.stopStream = null;
        this.scheduleRefresh();
        this.onRecord(null);
      },
    });
  }

  get following(): boolean {
    return this.stopStream !== null;
  }

  dispose(): void {
    this.disposed = true;
    this.stopStream?.();
    this.stopStream = null;
    if (this.refreshTimer !== null) window.clearTimeout(this.refreshTimer);
    if (this.detailTimer !== null) window.clearTimeout(this.detailTimer);
    this.listeners.clear();
  }

  scheduleRefresh(): void {
    if (this.refreshTimer !== null || this.disposed) return;
    this.refreshTimer = window.setTimeout(() => {
      this.refreshTimer = null;
      void this.refresh();
    }, REFRESH_MS);
  }

  async refresh(): Promise<void> {
    let data: RunViewData;
    try {
      data = await this.api.view(this.runId, false);
    } catch {
      return;
    }
    // refreshes overlap (timer, sidebar): an answer older than one already shown must not win
    if (this.disposed || data.last_seq < this.viewSeq) return;
    this.viewSeq = data.last_seq;
    this.offset = Date.parse(data.now) - Date.now();
    // /view stamps every view with the journal's last_seq, so `v` moves on each answer and is no
    // per-node version: compare without it (the widget's merge by `v` does not fit here)
    const changed: string[] = [];
    for (const [name, view] of Object.entries(data.nodes)) {
      const current = this.views[name];
      if (!current || JSON.stringify({ ...current, v: 0 }) !== JSON.stringify({ ...view, v: 0 })) changed.push(name);
    }
    this.views = data.nodes;
    const layout = data.layout as WireLayout | undefined;
    const layoutChanged = Boolean(layout) && JSON.stringify(layout) !== JSON.stringify(this.layoutData);
    if (layout && layoutChanged) this.layoutData = layout;
    const runChanged = JSON.stringify(this.runView) !== JSON.stringify(data.run);
    this.runView = data.run;
    this.lastSeq = Math.max(this.lastSeq, data.last_seq);
    const change: Change = {};
    if (changed.length) change.nodes = changed;
    if (layoutChanged) {
      change.layout = true;
      change.nodes = "all";
    }
    if (runChanged) change.run = true;
    this.emit(change);
    await this.loadForms();
  }

  /** Reload the run's waiting form requests; tell the view when they (or their errors) changed. */
  async loadForms(): Promise<void> {
    let requests: ApprovalJson[];
    try {
      requests = (await this.api.approvals(this.runId)).filter((r) => r.kind === "form" && r.waiting);
    } catch {
      return; // the next refresh tries again
    }
    if (this.disposed) return;
    this.formRequests = requests;
    this.showForms();
  }

  private showForms(): void {
    const live = new Set(this.formRequests.map((r) => r.request_id));
    for (const id of [...this.formErrors.keys()]) if (!live.has(id)) this.formErrors.delete(id);
    const views = this.formRequests.map((r) => formView(r, this.formErrors.get(r.request_id)));
    if (JSON.stringify(views) === JSON.stringify(this.formViews)) return;
    this.formViews = views;
    this.emit({ forms: true });
  }

  /** Submit a form's values (null: decline it); a refusal is shown in the form. */
  answer(request: string, values: Record<string, unknown> | null): void {
    const sent = values === null ? this.api.decide(this.runId, request, "deny", "") : this.api.answer(this.runId, request, values, "");
    void sent.then(
      () => {
        this.formErrors.delete(request);
        return this.loadForms();
      },
      (error: unknown) => {
        this.formErrors.set(request, error instanceof ApiError ? error.message : errorText(error));
        // drawn again even when the message is the same: the view disabled the buttons
        this.formViews = [];
        this.showForms();
        return this.loadForms();
      },
    );
  }

  private loadDetail(): void {
    const name = this.selectedName;
    if (!name) return;
    void this.api
      .detail(this.runId, name)
      .then((detail) => {
        if (this.disposed || name !== this.selectedName) return;
        this.detailView = detail;
        this.emit({ detail: true });
        if (this.detailTimer !== null) window.clearTimeout(this.detailTimer);
        this.detailTimer = detail.live ? window.setTimeout(() => this.loadDetail(), DETAIL_POLL_MS) : null;
      })
      .catch(() => undefined);
  }

  // -- DagSource --------------------------------------------------------------------------------

  layout(): WireLayout {
    return this.layoutData;
  }
  title(): string {
    return this.titleText;
  }
  mode(): "plan" | "run" {
    return "run";
  }
  select(name: string): void {
    this.selectedName = name;
    this.detailView = {};
    this.emit({ selected: true });
    this.loadDetail();
  }
  action(kind: "cancel" | "resume"): void {
    this.onAction(kind);
  }
  /** The Timeline tab's rows: GET runs/<run>/timeline (rho_notebook/server/_timeline.py). */
  timeline(): Promise<import("@rho-notebook/dagview").TimelineJson> {
    return this.api.request("GET", ["runs", this.runId, "timeline"]);
  }
  /** "Fork from here" (the view's forkform.ts): plan, then start once the digest is confirmed. */
  async fork(request: ForkRequest): Promise<ForkAnswer> {
    const answer = await this.api.fork(this.runId, request);
    if (answer.run_id) this.onForked?.(answer.run_id);
    return answer;
  }
  /** Called with a fork's run ID once it started (the sidebar shows the new run). */
  onForked: ((runId: string) => void) | null = null;
}

/** A waiting request of kind "form" as the view draws it: its step, question and fields. */
function formView(request: ApprovalJson, error: string | undefined): FormRequestView {
  const facts = request.facts ?? {};
  const form = facts.form !== null && typeof facts.form === "object" && !Array.isArray(facts.form) ? facts.form : {};
  const view: FormRequestView = {
    request_id: request.request_id,
    node: request.node,
    step: typeof facts.step === "string" ? facts.step : request.node,
    prompt: typeof facts.prompt === "string" ? facts.prompt : "",
    form: form as Record<string, FormField>,
  };
  if (error !== undefined) view.error = error;
  return view;
}

/** A DagSource for a saved plan (no run): the frozen graph, every node pending. */
export class PlanSource implements DagSource {
  private selectedName = "";
  private listeners = new Set<(change: Change) => void>();

  constructor(
    private readonly layoutData: WireLayout,
    private readonly name: string,
  ) {}

  layout(): WireLayout {
    return this.layoutData;
  }
  title(): string {
    return this.name;
  }
  mode(): "plan" | "run" {
    return "plan";
  }
  nodes(): Record<string, NodeView> {
    return {};
  }
  run(): RunView {
    return {};
  }
  detail(): Detail {
    return {};
  }
  selected(): string {
    return this.selectedName;
  }
  clockOffset(): number {
    return 0;
  }
  subscribe(listener: (change: Change) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
  select(): void {
    // a plan has no node outputs to show; its definitions are in the plan's authority list
  }
  action(): void {
    // a plan has no run to cancel or resume
  }
}
