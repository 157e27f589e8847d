// The run lists of the sidebar: live runs (running, waiting, cancelling, or planned and not yet
// started, and runs that need a person: script runs stopped until a person decides a step, runs
// whose owner exited uncleanly) newest first, and finished runs newest first, shortened to a few
// with "show older". Above them a search box (run ID prefix, workflow, plan label) and a state
// filter (all / live / needs a person / finished / failed) narrow both lists.
// A row shows workflow, lifecycle and outcome, done/total nodes, origin, last update and how many
// nodes wait for a person (a run that needs a person also the command to act); clicking it selects
// the run; a finished run has a delete button; its checkbox picks it for the compare view (two).

import { Dialog, showDialog, showErrorMessage } from "@jupyterlab/apputils";
import { TERMINAL_STATES, type RunRowJson } from "@rho-notebook/dagview";

import type { RhoApi } from "./api";
import { collapsibleSection, emptyItem, errorText, h, moreItem, shortId, SHOWN, SHOWN_ALL, when } from "./dom";

/** Live, or planned and about to start: listed with the live runs, never deletable. */
export function isActive(row: RunRowJson): boolean {
  return Boolean(row.live) || row.lifecycle === "planned";
}

/** Lifecycles of runs no owner holds that go on only after a person acts. */
const NEEDS_ACT = ["needs_decision", "needs_recovery"];

/** Listed with the live runs: active ones, and runs that wait for a person to act (never deletable here). */
export function isListedLive(row: RunRowJson): boolean {
  return isActive(row) || NEEDS_ACT.includes(row.lifecycle ?? "");
}

/** A person is needed: a request or form waits, or the run waits for a decision or recovery. */
export function needsPerson(row: RunRowJson): boolean {
  return (row.waiting ?? 0) > 0 || NEEDS_ACT.includes(row.lifecycle ?? "");
}

/** A fork's lineage, as `runs` rows carry it (issue 35): `lineage: [{run, node}, ...]`, nearest first. */
export function lineageOf(row: RunRowJson): { run: string; node: string }[] {
  const found = (row as RunRowJson & { lineage?: unknown }).lineage;
  if (!Array.isArray(found)) return [];
  return found.filter((link): link is { run: string; node: string } => typeof link?.run === "string" && typeof link?.node === "string");
}

/** "forked from RUN at NODE" under a fork's row (a fork of a fork: "\u2190 RUN at NODE" each further), or null. */
function lineageLine(row: RunRowJson): HTMLElement | null {
  const chain = lineageOf(row);
  if (!chain.length) return null;
  const [source] = chain;
  const text = chain.map((link) => `${shortId(link.run)} at ${link.node}`).join(" \u2190 ");
  return h(
    "div",
    {
      class: "rho-sb-line rho-sb-sub rho-sb-lineage",
      "data-forked-from": source.run,
      "data-forked-at": source.node,
      title: chain.map((link) => `forked from run ${link.run} at node ${link.node}`).join("\n"),
    },
    `\u21b3 forked from ${text}`,
  );
}

/** Outcomes listed under "failed". */
const FAILED = ["failure", "denial", "blocked", "stalled"];

/** The state filter's choices: value -> label. */
export const RUN_FILTERS: readonly [string, string][] = [
  ["all", "all runs"],
  ["live", "live"],
  ["person", "needs a person"],
  ["finished", "finished"],
  ["failed", "failed"],
];

/** Whether `row` passes the state filter `filter` (a RUN_FILTERS value). */
export function passesFilter(row: RunRowJson, filter: string): boolean {
  switch (filter) {
    case "live":
      return isListedLive(row);
    case "person":
      return needsPerson(row);
    case "finished":
      return !isListedLive(row);
    case "failed":
      return FAILED.includes(row.outcome ?? "") || row.lifecycle === "damaged";
    default:
      return true;
  }
}

/** Whether `row` matches the search text: a run ID prefix, or part of the workflow name or plan label. */
export function matchesSearch(row: RunRowJson, text: string, label: string): boolean {
  const words = text.toLowerCase().split(/\s+/).filter(Boolean);
  const runId = (row.run_id ?? "").toLowerCase();
  const haystack = `${row.workflow ?? ""} ${label}`.toLowerCase();
  return words.every((word) => runId.startsWith(word) || haystack.includes(word));
}

/** The command that makes a run no owner holds go on, for a run that needs a person: the row's
 * `next`, which the server words by the CLI's own rule (`--raise-budget` for a run its budget
 * halted, `--decide STEP=rerun|skip` for halted script steps, `--recover-uncertain`). */
export function actCommand(row: RunRowJson): string {
  if (row.lifecycle !== "needs_decision" && row.lifecycle !== "needs_recovery") return "";
  // (inspect `rho-notebook status RUN` first: the sidebar's Resume offers the same recovery)
  return row.next ?? `rho-notebook resume ${row.run_id ?? ""}`;
}

/** Node states that are done, as shown (an allowed or handled failure is done, too). */
const DONE_SHOWN = [...TERMINAL_STATES, "failure_allowed", "failure_handled", "denial_handled"];

export interface RunListOptions {
  api: RhoApi;
  /** The row was clicked (or Enter pressed on it). */
  select: (runId: string) => void;
  /** Deleting a run was confirmed: `removed` says whether the server deleted it. Poll the lists. */
  deleted: (runId: string, removed: boolean) => Promise<void>;
  /** "Compare" was clicked with two runs picked: the older first. */
  compare: (oldRun: string, newRun: string) => void;
}

export class RunList {
  /** The search and filter bar, then the "Live runs" and "Finished runs" sections. */
  readonly sections: HTMLElement[];
  private readonly search = h("input", {
    class: "rho-sb-search",
    type: "search",
    placeholder: "search runs",
    title: "run ID prefix, workflow name or plan label",
    "aria-label": "search runs",
  });
  private readonly filter = h(
    "select",
    { class: "rho-sb-filter", title: "show runs in this state", "aria-label": "run state filter" },
    ...RUN_FILTERS.map(([value, label]) => h("option", { value }, label)),
  );
  private readonly compareButton = h(
    "button",
    { class: "rho-sb-btn rho-sb-compare", type: "button", disabled: "", title: "tick two runs, then compare them" },
    "\u21c4",
  );
  /** Runs ticked for the compare view (at most two, oldest tick first). */
  private picked: string[] = [];
  /** Plan ID -> its label (the entry it was planned from), for the search. */
  private labels = new Map<string, string>();
  private readonly liveList = h("ul", { class: "rho-sb-list rho-sb-live-runs" });
  private readonly finishedList = h("ul", { class: "rho-sb-list rho-sb-finished-runs" });
  private readonly liveCount = h("span", { class: "rho-sb-count" });
  private readonly finishedCount = h("span", { class: "rho-sb-count" });
  private rows: RunRowJson[] = [];
  private selectedId = "";
  private allFinished = false;

  constructor(private readonly options: RunListOptions) {
    this.search.addEventListener("input", () => this.render());
    this.filter.addEventListener("change", () => this.render());
    this.compareButton.addEventListener("click", () => this.comparePicked());
    this.sections = [
      h("div", { class: "rho-sb-runbar" }, this.search, this.filter, this.compareButton),
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
    this.picked = this.picked.filter((id) => rows.some((r) => r.run_id === id));
    this.render();
  }

  /** The saved plans' labels (plan ID -> entry), matched by the search. */
  setLabels(labels: Map<string, string>): void {
    this.labels = labels;
    if (this.search.value) this.render();
  }

  /** Set the search text and state filter (as a person would), and redraw. */
  narrow(text: string, filter = this.filter.value): void {
    this.search.value = text;
    this.filter.value = filter;
    this.render();
  }

  private comparePicked(): void {
    if (this.picked.length !== 2) return;
    // run IDs are time-ordered: the older run is the diff's old side
    const [older, newer] = [...this.picked].sort();
    this.options.compare(older as string, newer as string);
  }

  private pick(runId: string, on: boolean): void {
    this.picked = this.picked.filter((id) => id !== runId);
    if (on) this.picked.push(runId);
    if (this.picked.length > 2) this.picked.shift();
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
    const text = this.search.value.trim();
    const filter = this.filter.value;
    const rows = this.rows.filter((r) => passesFilter(r, filter) && (!text || matchesSearch(r, text, this.labels.get(r.plan_id ?? "") ?? "")));
    const live = rows.filter(isListedLive);
    const finished = rows.filter((r) => !isListedLive(r)).reverse();
    const narrowed = rows.length !== this.rows.length;
    this.liveCount.textContent = narrowed ? `(${live.length} of ${this.rows.filter(isListedLive).length})` : `(${live.length})`;
    this.finishedCount.textContent = narrowed ? `(${finished.length} of ${this.rows.length - this.rows.filter(isListedLive).length})` : `(${finished.length})`;
    this.compareButton.disabled = this.picked.length !== 2;
    this.compareButton.title = this.picked.length === 2 ? "compare the two ticked runs" : `tick two runs, then compare them (${this.picked.length} ticked)`;
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
    const done = DONE_SHOWN.reduce((sum, s) => sum + (counts[s] ?? 0), 0);
    // a completed run says its outcome only (its row is in Finished runs), to leave the name room
    const label = row.outcome ? (lifecycle === "completed" ? row.outcome : `${lifecycle} \u00b7 ${row.outcome}`) : lifecycle;
    const badge = h("span", { class: `rho-sb-badge rho-sb-lc-${lifecycle} rho-sb-oc-${row.outcome ?? "none"}`, title: row.outcome ? `${lifecycle} \u00b7 ${row.outcome}` : lifecycle }, label);
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
      h("div", { class: "rho-sb-line" }, h("span", { class: "rho-sb-name", title: row.workflow ?? "" }, row.workflow ?? ""), badge),
      h(
        "div",
        { class: "rho-sb-line rho-sb-sub" },
        h("code", {}, shortId(runId)),
        h("span", {}, details),
        row.waiting ? h("span", { class: "rho-sb-waiting" }, `\u2691 ${row.waiting} waiting for you`) : null,
        lifecycle === "needs_decision" ? h("span", { class: "rho-sb-decision" }, "? needs your decision") : null,
        lifecycle === "needs_recovery" ? h("span", { class: "rho-sb-decision" }, "! needs recovery") : null,
      ),
      actCommand(row) ? h("code", { class: "rho-sb-act", title: "run this in a terminal to go on" }, actCommand(row)) : null,
      lineageLine(row),
    );
    const tick = h("input", { class: "rho-sb-pick", type: "checkbox", title: "tick two runs to compare them", "aria-label": `pick run ${shortId(runId)} to compare` });
    tick.checked = this.picked.includes(runId);
    tick.addEventListener("click", (event) => event.stopPropagation());
    tick.addEventListener("change", () => this.pick(runId, tick.checked));
    item.querySelector(".rho-sb-line")?.prepend(tick);
    if (!isListedLive(row)) {
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
