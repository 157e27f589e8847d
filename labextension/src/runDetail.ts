// The selected run, under the lists: a head (workflow, run ID, "Open" in the main area, close),
// its approvals and its live DAG (the shared view of @rho-notebook/dagview over a RunSource that
// follows the run's event stream). RunMainView is the same DAG, wider, in the main area. An item
// graph's human step shows its form in the DAG view itself (RunSource.forms), as in the notebook.

import { Widget } from "@lumino/widgets";
import { renderDag, type RunRowJson } from "@rho-notebook/dagview";

import type { JournalRecord, RhoApi } from "./api";
import { ApprovalsPanel } from "./approvals";
import { errorText, h, shortId } from "./dom";
import { RunSource } from "./source";

/** The run opened in the main area: the same DAG view, wider. */
export class RunMainView extends Widget {
  private cleanup: (() => void) | null = null;

  constructor(private readonly source: RunSource) {
    super();
    this.addClass("rho-main-run");
    // the tab has the wheel to itself: it zooms without Ctrl
    this.cleanup = renderDag(this.node, source, { wheelZoom: "always" });
  }

  dispose(): void {
    this.cleanup?.();
    this.cleanup = null;
    this.source.dispose();
    super.dispose();
  }
}

export interface SelectedRunOptions {
  api: RhoApi;
  /** A journal record of the selected run arrived (null: its event stream ended). */
  record: (record: JournalRecord | null) => void;
  /** Cancel or Resume was clicked in the DAG's toolbar. */
  action: (kind: "cancel" | "resume") => void;
  /** "Open" was clicked: show the run in the main area. */
  openMain: (runId: string) => void;
  /** The close button was clicked. */
  close: () => void;
}

export class SelectedRun {
  readonly node = h("section", { class: "rho-sb-selected", hidden: "" });
  /** The selected run ("" when none). */
  runId = "";
  /** The selected run's DagSource, once its view loaded. */
  source: RunSource | null = null;
  private approvals: ApprovalsPanel | null = null;
  private dagCleanup: (() => void) | null = null;

  constructor(private readonly options: SelectedRunOptions) {}

  /** Show `runId` (replacing the run shown); resolves when its DAG and approvals are shown. */
  async open(runId: string, row: RunRowJson | undefined): Promise<void> {
    this.close();
    this.runId = runId;
    const dag = h("div", { class: "rho-sb-dag" });
    const approvals = new ApprovalsPanel(this.options.api, runId);
    this.approvals = approvals;
    const open = h("button", { class: "rho-sb-btn rho-sb-open", type: "button", title: "open this run's DAG in the main area" }, "\u2197 Open");
    const close = h("button", { class: "rho-sb-btn rho-sb-close", type: "button", title: "close" }, "\u2715");
    this.node.replaceChildren(
      h("div", { class: "rho-sb-sel-head" }, h("b", {}, row?.workflow ?? "run"), h("code", {}, shortId(runId)), h("span", { class: "rho-sb-spacer" }), open, close),
      approvals.node,
      dag,
    );
    this.node.dataset.runId = runId;
    this.node.hidden = false;
    close.addEventListener("click", () => this.options.close());
    open.addEventListener("click", () => this.options.openMain(runId));
    let source: RunSource;
    try {
      source = await RunSource.open(this.options.api, runId, { record: this.options.record, action: this.options.action });
    } catch (error) {
      dag.textContent = errorText(error);
      return;
    }
    if (this.runId !== runId) {
      source.dispose();
      return;
    }
    this.source = source;
    this.dagCleanup = renderDag(dag, source);
    await approvals.load();
  }

  close(): void {
    this.dagCleanup?.();
    this.dagCleanup = null;
    this.source?.dispose();
    this.source = null;
    this.approvals?.dispose();
    this.approvals = null;
    this.runId = "";
    this.node.hidden = true;
    this.node.replaceChildren();
    delete this.node.dataset.runId;
  }

  /** The run list changed and has this run's new row: follow it again if it went live, refresh. */
  update(row: RunRowJson): void {
    const source = this.source;
    if (!source) return;
    if (row.live && !source.following) source.follow();
    source.scheduleRefresh();
    void this.loadApprovals();
  }

  async loadApprovals(): Promise<void> {
    await this.approvals?.load();
  }
}
