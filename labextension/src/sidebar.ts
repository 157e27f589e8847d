// The Workflows sidebar: the Rho /workflow hub in JupyterLab. Live and finished runs (polled, so a
// run started from a notebook, another kernel or a terminal appears within seconds), saved plans
// with a Run button that shows the exact graph digest and needs an explicit confirming click, and
// the selected run: its pending approvals (approve / deny with a comment) and its live DAG drawn
// by the shared DAG view module (js/src/dagview.ts), whose toolbar offers Cancel and Resume and
// whose pane shows node outputs.

import { Dialog, MainAreaWidget, showDialog, showErrorMessage } from "@jupyterlab/apputils";
import { Widget } from "@lumino/widgets";

import { markdownHtml, renderDag } from "../../js/src/dagview";

import { ApiError, RhoApi, type Approval, type JournalRecord, type PlanInfo, type RunRow } from "./api";
import { PlanSource, RunSource } from "./source";

const RUNS_POLL_MS = 1500;
const PLANS_POLL_MS = 10000;
const SHOWN = 8;
const SHOWN_ALL = 200;
const TERMINAL = ["success", "failure", "denial", "cancellation", "skipped", "blocked"];

function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string> = {},
  ...children: (Node | string | null | undefined | false)[]
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child);
  }
  return node;
}

function shortId(id: string): string {
  return id.slice(0, 13);
}

function when(iso: string | undefined): string {
  if (!iso) return "";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return "";
  const today = new Date().toDateString() === date.toDateString();
  return today ? date.toLocaleTimeString() : date.toLocaleString();
}

function errorText(error: unknown): string {
  return error instanceof ApiError ? `${error.message} [${error.rule}]` : String(error);
}

/** The run opened in the main area: the same DAG view, wider. */
class RunMainView extends Widget {
  private cleanup: (() => void) | null = null;

  constructor(private readonly source: RunSource) {
    super();
    this.addClass("rho-main-run");
    this.cleanup = renderDag(this.node, source);
  }

  dispose(): void {
    this.cleanup?.();
    this.cleanup = null;
    this.source.dispose();
    super.dispose();
  }
}

export class WorkflowsPanel extends Widget {
  private readonly api: RhoApi;
  private readonly openMain: (widget: Widget) => void;
  private readonly status = h("span", { class: "rho-sb-status" });
  private readonly liveList = h("ul", { class: "rho-sb-list rho-sb-live-runs" });
  private readonly finishedList = h("ul", { class: "rho-sb-list rho-sb-finished-runs" });
  private readonly planList = h("ul", { class: "rho-sb-list rho-sb-plans" });
  private readonly liveCount = h("span", { class: "rho-sb-count" });
  private readonly finishedCount = h("span", { class: "rho-sb-count" });
  private readonly planCount = h("span", { class: "rho-sb-count" });
  private readonly selectedBox = h("section", { class: "rho-sb-selected", hidden: "" });
  private rows: RunRow[] = [];
  private rowsKey = "";
  private plans: PlanInfo[] = [];
  private plansKey = "";
  private confirming = "";
  private confirmCleanup: (() => void) | null = null;
  private selectedId = "";
  private source: RunSource | null = null;
  private dagCleanup: (() => void) | null = null;
  private approvalsKey = "";
  private runsTimer: number | null = null;
  private plansTimer: number | null = null;
  private polling = false;
  private allFinished = false;
  private allPlans = false;

  constructor(options: { api?: RhoApi; openMain: (widget: Widget) => void }) {
    super();
    this.api = options.api ?? new RhoApi();
    this.openMain = options.openMain;
    this.id = "rho-workflows";
    this.addClass("rho-sidebar");
    this.title.caption = "Workflows";
    const refresh = h("button", { class: "rho-sb-btn rho-sb-refresh", type: "button", title: "refresh now" }, "\u21bb");
    refresh.addEventListener("click", () => {
      void this.pollRuns();
      void this.pollPlans();
    });
    this.node.append(
      h("header", { class: "rho-sb-head" }, h("h2", {}, "Workflows"), this.status, refresh),
      h("section", { class: "rho-sb-section" }, h("h3", {}, "Live runs ", this.liveCount), this.liveList),
      h("section", { class: "rho-sb-section" }, h("h3", {}, "Finished runs ", this.finishedCount), this.finishedList),
      h("section", { class: "rho-sb-section" }, h("h3", {}, "Saved plans ", this.planCount), this.planList),
      this.selectedBox,
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
    this.confirmCleanup?.();
    super.dispose();
  }

  private startPolling(): void {
    if (this.polling) return;
    this.polling = true;
    const runs = async (): Promise<void> => {
      await this.pollRuns();
      if (this.polling) this.runsTimer = window.setTimeout(runs, RUNS_POLL_MS);
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

  // -- runs -------------------------------------------------------------------------------------

  async pollRuns(): Promise<void> {
    let rows: RunRow[];
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
    this.rows = rows;
    this.renderRuns();
    const selected = rows.find((r) => r.run_id === this.selectedId);
    if (selected && this.source) {
      if (selected.live && !this.source.following) this.source.follow();
      this.source.scheduleRefresh();
      void this.loadApprovals();
    }
  }

  private setStatus(text: string, error: boolean): void {
    this.status.textContent = text;
    this.status.classList.toggle("rho-sb-error", error);
  }

  private renderRuns(): void {
    const live = this.rows.filter((r) => r.live || r.lifecycle === "planned");
    const finished = this.rows.filter((r) => !(r.live || r.lifecycle === "planned")).reverse();
    this.liveCount.textContent = `(${live.length})`;
    this.finishedCount.textContent = `(${finished.length})`;
    this.liveList.replaceChildren(...(live.length ? live.reverse().map((r) => this.runItem(r)) : [h("li", { class: "rho-sb-empty" }, "no live runs")]));
    const limit = this.allFinished ? SHOWN_ALL : SHOWN;
    const shown = finished.slice(0, limit).map((r) => this.runItem(r));
    if (finished.length > SHOWN) {
      shown.push(
        this.more(this.allFinished ? "show fewer" : `show ${Math.min(finished.length, SHOWN_ALL) - SHOWN} older`, () => {
          this.allFinished = !this.allFinished;
          this.renderRuns();
        }),
      );
    }
    this.finishedList.replaceChildren(...(shown.length ? shown : [h("li", { class: "rho-sb-empty" }, "no finished runs")]));
  }

  private more(label: string, toggle: () => void): HTMLElement {
    const button = h("button", { class: "rho-sb-link", type: "button" }, label);
    button.addEventListener("click", toggle);
    return h("li", { class: "rho-sb-empty rho-sb-more" }, button);
  }

  private runItem(row: RunRow): HTMLElement {
    const done = TERMINAL.reduce((sum, s) => sum + (row.counts[s] ?? 0), 0);
    const label = row.outcome ? `${row.lifecycle} \u00b7 ${row.outcome}` : row.lifecycle;
    const badge = h("span", { class: `rho-sb-badge rho-sb-lc-${row.lifecycle} rho-sb-oc-${row.outcome ?? "none"}` }, label);
    const details = [`${done}/${row.total} nodes`, row.origin ?? "", when(row.updated_at)].filter(Boolean).join(" \u00b7 ");
    const item = h(
      "li",
      {
        class: "rho-sb-run" + (row.run_id === this.selectedId ? " rho-sb-current" : ""),
        "data-run-id": row.run_id,
        "data-lifecycle": row.lifecycle,
        "data-outcome": row.outcome ?? "",
        tabindex: "0",
        title: `run ${row.run_id}\nplan ${row.plan_id}\ndigest ${row.graph_digest}`,
      },
      h("div", { class: "rho-sb-line" }, h("span", { class: "rho-sb-name" }, row.workflow), badge),
      h(
        "div",
        { class: "rho-sb-line rho-sb-sub" },
        h("code", {}, shortId(row.run_id)),
        h("span", {}, details),
        row.waiting ? h("span", { class: "rho-sb-waiting" }, `\u2691 ${row.waiting} waiting for you`) : null,
      ),
    );
    if (!row.live && row.lifecycle !== "planned") {
      const remove = h("button", { class: "rho-sb-btn rho-sb-delete", type: "button", title: "delete this run and its artifacts" }, "\u2715");
      remove.addEventListener("click", (event) => {
        event.stopPropagation();
        void this.deleteRun(row);
      });
      item.querySelector(".rho-sb-line")?.append(remove);
    }
    item.addEventListener("click", () => void this.select(row.run_id));
    item.addEventListener("keydown", (event) => {
      if (event.key === "Enter") void this.select(row.run_id);
    });
    return item;
  }

  private async deleteRun(row: RunRow): Promise<void> {
    const answer = await showDialog({
      title: "Delete run",
      body: `Delete run ${row.run_id} of ${row.workflow} and its artifacts? Source files are not touched.`,
      buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: "Delete" })],
    });
    if (!answer.button.accept) return;
    try {
      await this.api.deleteRun(row.run_id);
      if (row.run_id === this.selectedId) this.closeSelected();
    } catch (error) {
      void showErrorMessage("Cannot delete the run", errorText(error));
    }
    await this.pollRuns();
  }

  // -- the selected run -------------------------------------------------------------------------

  async select(runId: string): Promise<void> {
    if (runId === this.selectedId && this.source) return;
    this.closeSelected();
    this.selectedId = runId;
    this.renderRuns();
    const dag = h("div", { class: "rho-sb-dag" });
    const approvals = h("div", { class: "rho-sb-approvals" });
    const open = h("button", { class: "rho-sb-btn rho-sb-open", type: "button", title: "open this run's DAG in the main area" }, "\u2197 Open");
    const close = h("button", { class: "rho-sb-btn rho-sb-close", type: "button", title: "close" }, "\u2715");
    const row = this.rows.find((r) => r.run_id === runId);
    this.selectedBox.replaceChildren(
      h("div", { class: "rho-sb-sel-head" }, h("b", {}, row?.workflow ?? "run"), h("code", {}, shortId(runId)), h("span", { class: "rho-sb-spacer" }), open, close),
      approvals,
      dag,
    );
    this.selectedBox.dataset.runId = runId;
    this.selectedBox.hidden = false;
    close.addEventListener("click", () => this.closeSelected());
    open.addEventListener("click", () => void this.openInMain(runId));
    let source: RunSource;
    try {
      source = await RunSource.open(this.api, runId, {
        record: (record) => this.onRecord(record),
        action: (kind) => void this.act(kind),
      });
    } catch (error) {
      dag.textContent = errorText(error);
      return;
    }
    if (this.selectedId !== runId) {
      source.dispose();
      return;
    }
    this.source = source;
    this.dagCleanup = renderDag(dag, source);
    await this.loadApprovals();
  }

  private closeSelected(): void {
    this.dagCleanup?.();
    this.dagCleanup = null;
    this.source?.dispose();
    this.source = null;
    this.selectedId = "";
    this.approvalsKey = "";
    this.selectedBox.hidden = true;
    this.selectedBox.replaceChildren();
    delete this.selectedBox.dataset.runId;
    for (const item of Array.from(this.node.querySelectorAll(".rho-sb-current"))) item.classList.remove("rho-sb-current");
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
    if (record === null || record.kind.startsWith("approval_")) void this.loadApprovals();
    if (record === null || record.kind === "run_completed" || record.kind === "run_started") void this.pollRuns();
  }

  private async act(kind: "cancel" | "resume", runId = this.selectedId): Promise<void> {
    const row = this.rows.find((r) => r.run_id === runId);
    try {
      if (kind === "cancel") {
        await this.api.cancel(runId);
      } else {
        const digest = row?.graph_digest ?? this.source?.run().graph_digest ?? "";
        const body = this.digestBody(`Resume run ${runId} from its frozen graph with graph digest`, digest);
        const recover = h("input", { type: "checkbox", class: "rho-sb-recover" });
        if ((row?.lifecycle ?? this.source?.run().lifecycle) === "needs_recovery") {
          body.node.append(
            h("p", {}, "Its owner exited uncleanly: some attempts have no journaled result. Inspect their status and artifacts first."),
            h("label", {}, recover, " recover uncertain attempts (stop leftover processes of this run and rerun them)"),
          );
        }
        const answer = await showDialog({
          title: "Resume run",
          body,
          buttons: [Dialog.cancelButton(), Dialog.okButton({ label: "Confirm digest and resume" })],
        });
        if (!answer.button.accept) {
          this.source?.scheduleRefresh();
          return;
        }
        await this.api.resume(runId, digest, recover.checked);
        if (this.source && this.source.runId === runId) this.source.follow();
      }
    } catch (error) {
      void showErrorMessage(kind === "cancel" ? "Cannot cancel the run" : "Cannot resume the run", errorText(error));
    }
    this.source?.scheduleRefresh();
    await this.pollRuns();
  }

  private digestBody(text: string, digest: string): Widget {
    const body = new Widget();
    body.node.append(h("p", {}, text), h("code", { class: "rho-sb-digest" }, digest));
    return body;
  }

  // -- approvals --------------------------------------------------------------------------------

  async loadApprovals(): Promise<void> {
    const runId = this.selectedId;
    if (!runId) return;
    let requests: Approval[];
    try {
      requests = (await this.api.approvals(runId)).filter((r) => r.waiting);
    } catch {
      return;
    }
    if (runId !== this.selectedId) return;
    const key = requests.map((r) => r.request_id).join(",");
    if (key === this.approvalsKey) return;
    this.approvalsKey = key;
    const box = this.selectedBox.querySelector(".rho-sb-approvals");
    if (!box) return;
    box.replaceChildren(...requests.map((r) => this.approvalCard(r)));
  }

  private approvalCard(request: Approval): HTMLElement {
    const facts = h("div", { class: "rho-sb-facts" });
    if (request.kind === "node" && typeof request.facts.prompt === "string") {
      facts.innerHTML = markdownHtml(request.facts.prompt);
    } else {
      facts.append(h("pre", {}, JSON.stringify(request.facts, null, 2)));
    }
    const comment = h("input", { class: "rho-sb-comment", type: "text", placeholder: "comment (optional, recorded)" });
    const approve = h("button", { class: "rho-sb-btn rho-sb-approve", type: "button" }, "\u2713 Approve");
    const deny = h("button", { class: "rho-sb-btn rho-sb-deny", type: "button" }, "\u2717 Deny");
    const decide = async (decision: "approve" | "deny"): Promise<void> => {
      approve.disabled = deny.disabled = true;
      try {
        await this.api.decide(request.run_id, request.request_id, decision, comment.value);
      } catch (error) {
        void showErrorMessage("The decision was not recorded", errorText(error));
        approve.disabled = deny.disabled = false;
        return;
      }
      this.approvalsKey = "(decided)";  // forces a redraw, even to an empty list
      await this.loadApprovals();
    };
    approve.addEventListener("click", () => void decide("approve"));
    deny.addEventListener("click", () => void decide("deny"));
    const what = request.kind === "node" ? "approval node" : "supervised launch";
    return h(
      "div",
      { class: "rho-sb-approval", "data-request-id": request.request_id, "data-node": request.node },
      h("div", { class: "rho-sb-line" }, h("b", {}, "\u2691 ", request.node), h("span", { class: "rho-sb-muted" }, `${what} \u00b7 attempt ${request.attempt}`)),
      facts,
      h("div", { class: "rho-sb-muted" }, `facts ${request.facts_sha256.slice(0, 19)}\u2026`),
      h("div", { class: "rho-sb-line" }, comment),
      h("div", { class: "rho-sb-line" }, approve, deny),
    );
  }

  // -- plans ------------------------------------------------------------------------------------

  async pollPlans(): Promise<void> {
    let plans: PlanInfo[];
    try {
      plans = await this.api.plans();
    } catch (error) {
      this.setStatus(errorText(error), true);
      return;
    }
    const key = JSON.stringify(plans.map((p) => p.plan_id));
    if (key === this.plansKey) return;
    this.plansKey = key;
    this.plans = plans.slice().reverse();
    this.renderPlans();
  }

  private renderPlans(): void {
    this.confirmCleanup?.();
    this.confirmCleanup = null;
    this.planCount.textContent = `(${this.plans.length})`;
    const items = this.plans.slice(0, this.allPlans ? SHOWN_ALL : SHOWN).map((plan) => this.planItem(plan));
    if (this.plans.length > SHOWN) {
      items.push(
        this.more(this.allPlans ? "show fewer" : `show ${Math.min(this.plans.length, SHOWN_ALL) - SHOWN} more`, () => {
          this.allPlans = !this.allPlans;
          this.renderPlans();
        }),
      );
    }
    this.planList.replaceChildren(...(items.length ? items : [h("li", { class: "rho-sb-empty" }, "no saved plans (plan one with %%workflow or rho-notebook plan)")]));
  }

  private planItem(plan: PlanInfo): HTMLElement {
    const run = h("button", { class: "rho-sb-btn rho-sb-run-plan", type: "button", title: "show the graph digest, then confirm to run" }, "\u25b6 Run\u2026");
    const remove = h("button", { class: "rho-sb-btn rho-sb-delete", type: "button", title: "delete this saved plan (runs keep their copy)" }, "\u2715");
    const item = h(
      "li",
      { class: "rho-sb-plan", "data-plan-id": plan.plan_id, title: `plan ${plan.plan_id}\nentry ${plan.entry}\nworkspace ${plan.workspace_root}` },
      h("div", { class: "rho-sb-line" }, h("span", { class: "rho-sb-name" }, plan.workflow), h("span", { class: "rho-sb-spacer" }), run, remove),
      h("div", { class: "rho-sb-line rho-sb-sub" }, h("code", {}, shortId(plan.plan_id)), h("span", {}, `${plan.entry} \u00b7 ${when(plan.created_at)}`)),
    );
    run.addEventListener("click", () => void this.confirmRun(plan, item));
    remove.addEventListener("click", () => void this.deletePlan(plan));
    if (this.confirming === plan.plan_id) void this.confirmRun(plan, item);
    return item;
  }

  private async confirmRun(plan: PlanInfo, item: HTMLElement): Promise<void> {
    this.confirmCleanup?.();
    this.confirmCleanup = null;
    for (const open of Array.from(this.planList.querySelectorAll(".rho-sb-confirm"))) open.remove();
    this.confirming = plan.plan_id;
    const mode = h("select", { class: "rho-sb-mode", title: "permission mode for command launches" }, h("option", { value: "auto" }, "auto"), h("option", { value: "supervised" }, "supervised"), h("option", { value: "plan" }, "plan"));
    const go = h("button", { class: "rho-sb-btn rho-sb-confirm-run", type: "button" }, "Confirm digest and run");
    const cancel = h("button", { class: "rho-sb-btn", type: "button" }, "Cancel");
    const preview = h("div", { class: "rho-sb-preview" });
    const inputs = Object.keys(plan.inputs).length ? h("pre", { class: "rho-sb-inputs" }, JSON.stringify(plan.inputs, null, 2)) : null;
    const authority = h(
      "details",
      { class: "rho-sb-authority" },
      h("summary", {}, `authority (${plan.authority.length})`),
      h("ul", {}, ...plan.authority.map((a) => h("li", {}, h("b", {}, a.kind), " ", h("code", {}, a.value), a.detail ? ` ${a.detail}` : ""))),
    );
    const box = h(
      "div",
      { class: "rho-sb-confirm" },
      h("div", {}, "Run this plan once with graph digest"),
      h("code", { class: "rho-sb-digest" }, plan.graph_digest),
      inputs ? h("div", { class: "rho-sb-muted" }, "inputs") : null,
      inputs,
      authority,
      h("div", { class: "rho-sb-line" }, h("label", {}, "mode ", mode), h("span", { class: "rho-sb-spacer" }), cancel, go),
      preview,
    );
    item.append(box);
    const close = (): void => {
      this.confirming = "";
      this.confirmCleanup?.();
      this.confirmCleanup = null;
      box.remove();
    };
    cancel.addEventListener("click", close);
    go.addEventListener("click", () => {
      go.disabled = true;
      void this.api
        .startRun(plan.plan_id, plan.graph_digest, mode.value)
        .then(async (started) => {
          close();
          await this.pollRuns();
          await this.select(started.run_id);
        })
        .catch((error) => {
          go.disabled = false;
          void showErrorMessage("The run was not started", errorText(error));
        });
    });
    try {
      const full = await this.api.plan(plan.plan_id);
      if (box.isConnected) this.confirmCleanup = renderDag(preview, new PlanSource(full.layout, plan.workflow));
    } catch (error) {
      preview.textContent = errorText(error);
    }
  }

  private async deletePlan(plan: PlanInfo): Promise<void> {
    const answer = await showDialog({
      title: "Delete plan",
      body: `Delete saved plan ${plan.plan_id} (${plan.workflow})? Its runs keep their own copy of the graph; source files are not touched.`,
      buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: "Delete" })],
    });
    if (!answer.button.accept) return;
    try {
      await this.api.deletePlan(plan.plan_id);
    } catch (error) {
      void showErrorMessage("Cannot delete the plan", errorText(error));
    }
    await this.pollPlans();
  }
}
