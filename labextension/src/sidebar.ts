// The Workflows sidebar: the Rho /workflow hub in JupyterLab. Live and finished runs (polled, so a
// run started from a notebook, another kernel or a terminal appears within seconds), saved plans
// with a Run button that shows the exact graph digest and needs an explicit confirming click, and
// the selected run: its pending approvals (approve / deny with a comment) and its live DAG drawn
// by the shared DAG view (@rho-notebook/dagview), whose toolbar offers Cancel and Resume and whose
// pane shows node outputs.
//
// Layout: the lists sit in one scrolling block above the selected run. While a run is selected
// the sidebar is in "focus" (class rho-sb-focus): the lists are shortened to about a third of the
// height, Saved plans is folded (each list's heading folds and unfolds it), and the run's approvals
// and DAG take the rest of the height; "Open" shows the run in a main-area tab.
//
// At JupyterLab's default sidebar width (250 px) the selected run's DAG is fitted whole, rows keep
// their buttons on one line, and values wrap at spaces (sidebar.css). Two runs ticked in the lists
// open the compare view (compare.ts) where the selected run would be.
//
// This panel only polls and wires its parts together: RunList (runList.ts), PlanList
// (planList.ts), SelectedRun with its ApprovalsPanel (runDetail.ts, approvals.ts), CompareView
// (compare.ts), and the Cancel / Resume requests (runActions.ts). Its public methods (refresh,
// selectedRunId, cancelSelected, approveSelected, applySettings) serve the palette commands and
// settings of index.ts.

import { MainAreaWidget, showErrorMessage } from "@jupyterlab/apputils";
import { Widget } from "@lumino/widgets";
import type { RunRowJson } from "@rho-notebook/dagview";

import { RhoApi, type JournalRecord } from "./api";
import { errorText, h, isCollapsed, setCollapsed, shortId } from "./dom";
import { PlanList } from "./planList";
import { runAction } from "./runActions";
import { RunMainView, SelectedRun } from "./runDetail";
import { CompareView } from "./compare";
import { RunList } from "./runList";
import { RunSource } from "./source";

const RUNS_POLL_MS = 1500;

/** The settings the sidebar follows (labextension/schema/plugin.json, read by index.ts). */
export interface SidebarSettings {
  /** Seconds between two polls of the run list. */
  refreshSeconds: number;
  /** The selected run's starting zoom: "fit" (the whole graph) or "100%" (the view's own start). */
  defaultZoom: string;
}
const PLANS_POLL_MS = 10000;

export class WorkflowsPanel extends Widget {
  private readonly api: RhoApi;
  private readonly openMain: (widget: Widget) => void;
  private readonly status = h("span", { class: "rho-sb-status" });
  private readonly runs: RunList;
  private readonly plans: PlanList;
  private readonly selected: SelectedRun;
  private readonly comparison: CompareView;
  /** The last run list answer, to skip work while nothing changed. */
  private rowsKey = "";
  private runsTimer: number | null = null;
  private plansTimer: number | null = null;
  private polling = false;
  /** Whether Saved plans was folded before a run was selected (restored when none is). */
  private plansFolded: boolean | null = null;
  private runsPollMs = RUNS_POLL_MS;

  constructor(options: { api?: RhoApi; openMain: (widget: Widget) => void }) {
    super();
    this.api = options.api ?? new RhoApi();
    this.openMain = options.openMain;
    this.id = "rho-workflows";
    this.addClass("rho-sidebar");
    this.title.caption = "Workflows";
    this.runs = new RunList({
      api: this.api,
      select: (runId) => void this.select(runId),
      deleted: async (runId, removed) => {
        if (removed && runId === this.selected.runId) this.closeSelected();
        await this.pollRuns();
      },
      compare: (oldRun, newRun) => void this.compare(oldRun, newRun),
    });
    this.comparison = new CompareView(this.api, () => this.closeSelected());
    this.plans = new PlanList({
      api: this.api,
      started: async (runId) => {
        await this.pollRuns();
        await this.select(runId);
      },
      changed: () => this.pollPlans(),
    });
    this.selected = new SelectedRun({
      api: this.api,
      record: (record) => this.onRecord(record),
      action: (kind) => void this.act(kind),
      openMain: (runId) => void this.openInMain(runId),
      close: () => this.closeSelected(),
      forked: () => void this.pollRuns(),
    });
    const refresh = h("button", { class: "rho-sb-btn rho-sb-refresh", type: "button", title: "refresh now" }, "\u21bb");
    refresh.addEventListener("click", () => {
      void this.pollRuns();
      void this.pollPlans();
    });
    this.node.append(
      h("header", { class: "rho-sb-head" }, h("h2", {}, "Workflows"), this.status, refresh),
      h("div", { class: "rho-sb-lists" }, ...this.runs.sections, this.plans.section),
      this.selected.node,
      this.comparison.node,
    );
  }

  // -- lifecycle --------------------------------------------------------------------------------

  protected onAfterShow(): void {
    this.startPolling();
  }

  protected onAfterAttach(): void {
    if (this.isVisible) this.startPolling();
  }

  protected onBeforeHide(): void {
    this.stopPolling();
  }

  protected onBeforeDetach(): void {
    this.stopPolling();
  }

  dispose(): void {
    this.stopPolling();
    this.closeSelected();
    this.plans.dispose();
    super.dispose();
  }

  private startPolling(): void {
    if (this.polling) return;
    this.polling = true;
    const runs = async (): Promise<void> => {
      await this.pollRuns();
      if (this.polling) this.runsTimer = window.setTimeout(runs, this.runsPollMs);
    };
    const plans = async (): Promise<void> => {
      await this.pollPlans();
      if (this.polling) this.plansTimer = window.setTimeout(plans, PLANS_POLL_MS);
    };
    void runs();
    void plans();
  }

  private stopPolling(): void {
    this.polling = false;
    if (this.runsTimer !== null) window.clearTimeout(this.runsTimer);
    if (this.plansTimer !== null) window.clearTimeout(this.plansTimer);
    this.runsTimer = this.plansTimer = null;
  }

  private setStatus(text: string, error: boolean): void {
    this.status.textContent = text;
    this.status.classList.toggle("rho-sb-error", error);
  }

  // -- for commands and settings (index.ts) ------------------------------------------------------

  /** Poll the run list and the saved plans now. */
  async refresh(): Promise<void> {
    await Promise.all([this.pollRuns(), this.pollPlans()]);
  }

  /** The run shown under the lists, or null. */
  selectedRunId(): string | null {
    return this.selected.runId || null;
  }

  /** Request cancellation of the selected run (errors are shown in a dialog). */
  async cancelSelected(): Promise<void> {
    if (this.selected.runId) await this.act("cancel");
  }

  /** The number of approval requests of the selected run shown with Approve / Deny. */
  selectedApprovals(): number {
    return this.selected.approvalCount();
  }

  /** Approve the selected run's waiting request if exactly one is shown; true when approved. */
  async approveSelected(): Promise<boolean> {
    return this.selected.approveOnly();
  }

  /** Follow the settings: the run list's poll interval and the selected run's starting zoom. */
  applySettings(settings: SidebarSettings): void {
    const seconds = Number(settings.refreshSeconds);
    this.runsPollMs = Number.isFinite(seconds) && seconds > 0 ? Math.max(250, seconds * 1000) : RUNS_POLL_MS;
    this.selected.setDefaultZoom(settings.defaultZoom);
  }

  // -- polling ----------------------------------------------------------------------------------

  async pollRuns(): Promise<void> {
    let rows: RunRowJson[];
    try {
      rows = await this.api.runs();
    } catch (error) {
      this.setStatus(errorText(error), true);
      return;
    }
    this.setStatus(`updated ${new Date().toLocaleTimeString()}`, false);
    const key = JSON.stringify(rows);
    if (key === this.rowsKey) return;
    this.rowsKey = key;
    this.runs.show(rows);
    const row = this.runs.find(this.selected.runId);
    if (row) this.selected.update(row);
  }

  async pollPlans(): Promise<void> {
    try {
      const plans = await this.api.plans();
      this.plans.show(plans);
      this.runs.setLabels(new Map(plans.map((p) => [p.plan_id, p.entry])));
    } catch (error) {
      this.setStatus(errorText(error), true);
    }
  }

  // -- the selected run -------------------------------------------------------------------------

  async select(runId: string): Promise<void> {
    if (runId === this.selected.runId && this.selected.source) return;
    this.closeSelected();
    this.giveRoom(true);
    this.runs.setSelected(runId);
    await this.selected.open(runId, this.runs.find(runId));
  }

  /** Show the compare view of two runs where the selected run would be. */
  async compare(oldRun: string, newRun: string): Promise<void> {
    this.closeSelected();
    this.giveRoom(true);
    await this.comparison.open(oldRun, newRun);
  }

  private closeSelected(): void {
    this.comparison.close();
    this.selected.close();
    this.runs.setSelected("");
    this.giveRoom(false);
  }

  /** Give the selected run the room (shorten the lists, fold the plans), or give it back. */
  private giveRoom(on: boolean): void {
    if (on === this.node.classList.contains("rho-sb-focus")) return;
    this.node.classList.toggle("rho-sb-focus", on);
    if (on) {
      this.plansFolded = isCollapsed(this.plans.section);
      setCollapsed(this.plans.section, true);
    } else if (this.plansFolded !== null) {
      setCollapsed(this.plans.section, this.plansFolded);
      this.plansFolded = null;
    }
  }

  private async openInMain(runId: string): Promise<void> {
    try {
      const source = await RunSource.open(this.api, runId, { record: () => undefined, action: (kind) => void this.act(kind, runId) });
      const content = new RunMainView(source);
      const widget = new MainAreaWidget({ content });
      widget.id = `rho-run-${runId}`;
      widget.title.label = `${source.title()} ${shortId(runId)}`;
      widget.title.closable = true;
      this.openMain(widget);
    } catch (error) {
      void showErrorMessage("Cannot open the run", errorText(error));
    }
  }

  private onRecord(record: JournalRecord | null): void {
    if (record === null || record.kind.startsWith("approval_")) void this.selected.loadApprovals();
    if (record === null || ["run_completed", "run_started", "run_halted"].includes(record.kind)) void this.pollRuns();
  }

  /** Cancel or resume `runId` (the selected run unless the main-area view asks), then refresh. */
  private async act(kind: "cancel" | "resume", runId = this.selected.runId): Promise<void> {
    const row = this.runs.find(runId);
    const shown = this.selected.source?.run();
    const outcome = await runAction(this.api, kind, {
      runId,
      digest: row?.graph_digest ?? shown?.graph_digest ?? "",
      lifecycle: row?.lifecycle ?? shown?.lifecycle,
      halted: shown?.halted,
      next: row?.next ?? shown?.next,
    });
    if (outcome === "declined") {
      this.selected.source?.scheduleRefresh();
      return;
    }
    const source = this.selected.source;
    if (kind === "resume" && outcome === "requested" && source && source.runId === runId) source.follow();
    this.selected.source?.scheduleRefresh();
    await this.pollRuns();
  }
}
