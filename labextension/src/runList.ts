// The run lists of the sidebar: live runs (running, waiting, cancelling, or planned and not yet
// started, and script runs stopped until a person decides a step) newest first, and finished runs newest first, shortened to a few with "show older".
// A row shows workflow, lifecycle and outcome, done/total nodes, origin, last update and how many
// nodes wait for a person; clicking it selects the run; a finished run has a delete button.

import { Dialog, showDialog, showErrorMessage } from "@jupyterlab/apputils";
import { TERMINAL_STATES, type RunRowJson } from "@rho-notebook/dagview";

import type { RhoApi } from "./api";
import { collapsibleSection, emptyItem, errorText, h, moreItem, shortId, SHOWN, SHOWN_ALL, when } from "./dom";

/** Live, or planned and about to start: listed with the live runs, never deletable. */
export function isActive(row: RunRowJson): boolean {
  return Boolean(row.live) || row.lifecycle === "planned";
}

/** Listed with the live runs: active ones, and script runs that wait for a decision (deletable). */
export function isListedLive(row: RunRowJson): boolean {
  return isActive(row) || row.lifecycle === "needs_decision";
}

export interface RunListOptions {
  api: RhoApi;
  /** The row was clicked (or Enter pressed on it). */
  select: (runId: string) => void;
  /** Deleting a run was confirmed: `removed` says whether the server deleted it. Poll the lists. */
  deleted: (runId: string, removed: boolean) => Promise<void>;
}

export class RunList {
  /** The "Live runs" and "Finished runs" sections, in that order. */
  readonly sections: HTMLElement[];
  private readonly liveList = h("ul", { class: "rho-sb-list rho-sb-live-runs" });
  private readonly finishedList = h("ul", { class: "rho-sb-list rho-sb-finished-runs" });
  private readonly liveCount = h("span", { class: "rho-sb-count" });
  private readonly finishedCount = h("span", { class: "rho-sb-count" });
  private rows: RunRowJson[] = [];
  private selectedId = "";
  private allFinished = false;

  constructor(private readonly options: RunListOptions) {
    this.sections = [
      collapsibleSection("Live runs", this.liveCount, this.liveList),
      collapsibleSection("Finished runs", this.finishedCount, this.finishedList),
    ];
  }

  /** The rows as last shown (the API's order: oldest first). */
  get current(): readonly RunRowJson[] {
    return this.rows;
  }

  find(runId: string): RunRowJson | undefined {
    return this.rows.find((r) => r.run_id === runId);
  }

  show(rows: RunRowJson[]): void {
    this.rows = rows;
    this.render();
  }

  /** Mark the selected run's row; "" unmarks without redrawing. */
  setSelected(runId: string): void {
    this.selectedId = runId;
    if (runId) {
      this.render();
      // the lists are shortened while a run is shown: keep its row in sight
      const row = this.sections[0].parentElement?.querySelector<HTMLElement>(".rho-sb-current");
      row?.scrollIntoView?.({ block: "nearest" });
      return;
    }
    for (const list of [this.liveList, this.finishedList]) {
      for (const item of Array.from(list.querySelectorAll(".rho-sb-current"))) item.classList.remove("rho-sb-current");
    }
  }

  private render(): void {
    const live = this.rows.filter(isListedLive);
    const finished = this.rows.filter((r) => !isListedLive(r)).reverse();
    this.liveCount.textContent = `(${live.length})`;
    this.finishedCount.textContent = `(${finished.length})`;
    this.liveList.replaceChildren(...(live.length ? live.reverse().map((r) => this.item(r)) : [emptyItem("no live runs")]));
    const shown = finished.slice(0, this.allFinished ? SHOWN_ALL : SHOWN).map((r) => this.item(r));
    if (finished.length > SHOWN) {
      const label = this.allFinished ? "show fewer" : `show ${Math.min(finished.length, SHOWN_ALL) - SHOWN} older`;
      shown.push(
        moreItem(label, () => {
          this.allFinished = !this.allFinished;
          this.render();
        }),
      );
    }
    this.finishedList.replaceChildren(...(shown.length ? shown : [emptyItem("no finished runs")]));
  }

  private item(row: RunRowJson): HTMLElement {
    const runId = row.run_id ?? "";
    const lifecycle = row.lifecycle ?? "";
    const counts = row.counts ?? {};
    const done = TERMINAL_STATES.reduce((sum, s) => sum + (counts[s] ?? 0), 0);
    const label = row.outcome ? `${lifecycle} \u00b7 ${row.outcome}` : lifecycle;
    const badge = h("span", { class: `rho-sb-badge rho-sb-lc-${lifecycle} rho-sb-oc-${row.outcome ?? "none"}` }, label);
    const details = [`${done}/${row.total ?? 0} nodes`, row.origin ?? "", when(row.updated_at)].filter(Boolean).join(" \u00b7 ");
    const item = h(
      "li",
      {
        class: "rho-sb-run" + (runId === this.selectedId ? " rho-sb-current" : ""),
        "data-run-id": runId,
        "data-lifecycle": lifecycle,
        "data-outcome": row.outcome ?? "",
        tabindex: "0",
        title: `run ${runId}\nplan ${row.plan_id ?? ""}\ndigest ${row.graph_digest ?? ""}`,
      },
      h("div", { class: "rho-sb-line" }, h("span", { class: "rho-sb-name" }, row.workflow ?? ""), badge),
      h(
        "div",
        { class: "rho-sb-line rho-sb-sub" },
        h("code", {}, shortId(runId)),
        h("span", {}, details),
        row.waiting ? h("span", { class: "rho-sb-waiting" }, `\u2691 ${row.waiting} waiting for you`) : null,
        lifecycle === "needs_decision" ? h("span", { class: "rho-sb-decision" }, "? needs your decision") : null,
      ),
    );
    if (!isActive(row)) {
      const remove = h("button", { class: "rho-sb-btn rho-sb-delete", type: "button", title: "delete this run and its artifacts" }, "\u2715");
      remove.addEventListener("click", (event) => {
        event.stopPropagation();
        void this.remove(row);
      });
      item.querySelector(".rho-sb-line")?.append(remove);
    }
    item.addEventListener("click", () => this.options.select(runId));
    item.addEventListener("keydown", (event) => {
      if (event.key === "Enter") this.options.select(runId);
    });
    return item;
  }

  private async remove(row: RunRowJson): Promise<void> {
    const runId = row.run_id ?? "";
    const answer = await showDialog({
      title: "Delete run",
      body: `Delete run ${runId} of ${row.workflow ?? "its workflow"} and its artifacts? Source files are not touched.`,
      buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: "Delete" })],
    });
    if (!answer.button.accept) return;
    let removed = false;
    try {
      await this.options.api.deleteRun(runId);
      removed = true;
    } catch (error) {
      void showErrorMessage("Cannot delete the run", errorText(error));
    }
    await this.options.deleted(runId, removed);
  }
}
