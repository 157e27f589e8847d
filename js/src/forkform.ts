// "Fork from here" in the node pane of a completed run (issue 35): an editor for the node's value
// (prefilled with its current value as JSON) and two ways to fork, "Fork with this value" (the node
// takes the edited value) and "Re-run from here" (no value: the node runs again). Both go through
// the source's fork(): the first call plans the fork (the kernel or server checks the value against
// the node's output schema before anything starts; a refusal names the field and is shown inline),
// and answers with the derived plan's ID and graph digest; the person confirms that digest, exactly
// like a run, and the second call (with that plan's ID and digest) starts exactly that fork. A source without fork(): no section.
//
// The form is kept per node across redraws of the pane (the pane is drawn again on every change
// of the node's detail), so an edit in progress is never lost.

import type { DagSource, Detail, ForkAnswer, ForkRequest } from "./types";

/** The class names the browser tests and the CSS use. */
export const FORK_CLASS = "rho-section-fork";

function el<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string>, ...children: (Node | string | null)[]): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  for (const child of children) if (child !== null) node.append(child);
  return node;
}

/** Parse the editor's text: the value, or the message that says where the JSON is wrong. */
export function parseValue(text: string): { value?: unknown; error?: string } {
  if (!text.trim()) return { error: "the value is empty: write the node's new output as JSON" };
  try {
    return { value: JSON.parse(text) as unknown };
  } catch (error) {
    return { error: `the value is not valid JSON: ${error instanceof Error ? error.message : String(error)}` };
  }
}

/** Whether the pane of `detail` offers "Fork from here": a run source that can fork, the run completed. */
export function canFork(source: DagSource, detail: Detail): boolean {
  return typeof source.fork === "function" && source.mode() === "run" && source.run().lifecycle === "completed" && Boolean(detail.node);
}

/** The "fork from here" sections of one DAG view, one per node, kept across redraws. */
export class ForkForms {
  private forms = new Map<string, HTMLElement>();

  constructor(private readonly source: DagSource) {}

  /** The section for the selected node's pane, or null when this run cannot be forked here. */
  section(detail: Detail): HTMLElement | null {
    if (!canFork(this.source, detail)) return null;
    const node = detail.node as string;
    let form = this.forms.get(node);
    if (!form) {
      form = this.build(node, detail);
      this.forms.set(node, form);
    }
    return form;
  }

  private build(node: string, detail: Detail): HTMLElement {
    const hasValue = Boolean(detail.has_value);
    const editor = el("textarea", { class: "rho-fork-value", rows: "6", spellcheck: "false", "aria-label": `new value of ${node} (JSON)` });
    editor.value = hasValue ? JSON.stringify(detail.value, null, 2) : "";
    const edit = el("button", { class: "rho-btn rho-fork-edit", type: "button", title: "fork: this node takes the edited value, what follows runs anew" }, "Fork with this value");
    const rerun = el("button", { class: "rho-btn rho-fork-rerun", type: "button", title: "fork: this node and what follows run anew, the rest is taken from this run" }, "Re-run from here");
    const error = el("div", { class: "rho-fork-error", role: "alert", hidden: "" });
    const confirm = el("div", { class: "rho-fork-confirm", hidden: "" });
    const result = el("div", { class: "rho-fork-result", hidden: "" });
    const note = el("div", { class: "rho-note" }, "Ancestors and nodes not downstream are taken from this run, never launched.");
    const section = el(
      "details",
      { class: `rho-section ${FORK_CLASS}`, "data-node": node },
      el("summary", {}, "fork from here"),
      note,
      hasValue ? el("label", { class: "rho-fork-label" }, "new value (JSON, checked against the node's output schema)") : null,
      hasValue ? editor : null,
      el("div", { class: "rho-fork-actions" }, hasValue ? edit : null, rerun),
      error,
      confirm,
      result,
    );
    const buttons = [edit, rerun];
    const busy = (on: boolean): void => {
      for (const b of buttons) b.disabled = on;
    };
    const fail = (message: string): void => {
      error.textContent = message;
      error.hidden = false;
      confirm.hidden = true;
      busy(false);
    };
    const send = (request: ForkRequest): void => {
      busy(true);
      error.hidden = true;
      (this.source.fork as NonNullable<DagSource["fork"]>)(request).then(
        (answer: ForkAnswer) => {
          if (answer.run_id) return this.started(section, answer, busy);
          // the person confirms this planned fork's digest: exactly that plan starts
          const start = { node, plan_id: answer.plan_id, graph_digest: answer.graph_digest };
          this.askConsent(confirm, answer, () => send(start), () => busy(false));
        },
        (failure: unknown) => fail(failure instanceof Error ? failure.message : String(failure)),
      );
    };
    edit.addEventListener("click", () => {
      const parsed = parseValue(editor.value);
      if (parsed.error !== undefined) return fail(parsed.error);
      send({ node, value: parsed.value });
    });
    rerun.addEventListener("click", () => send({ node }));
    return section;
  }

  /** Show the derived plan's digest with "Confirm digest and start" (and Cancel). */
  private askConsent(confirm: HTMLElement, answer: ForkAnswer, start: () => void, cancel: () => void): void {
    const go = el("button", { class: "rho-btn rho-fork-start", type: "button" }, "Confirm digest and start");
    const back = el("button", { class: "rho-btn rho-fork-cancel", type: "button" }, "Cancel");
    confirm.replaceChildren(
      el("div", {}, answer.summary ?? "Start the fork: its derived plan has graph digest"),
      el("code", { class: "rho-fork-digest" }, answer.graph_digest ?? ""),
      el("div", { class: "rho-fork-actions" }, go, back),
    );
    confirm.hidden = false;
    go.addEventListener("click", () => {
      confirm.hidden = true;
      start();
    });
    back.addEventListener("click", () => {
      confirm.hidden = true;
      cancel();
    });
  }

  private started(section: HTMLElement, answer: ForkAnswer, busy: (on: boolean) => void): void {
    const result = section.querySelector<HTMLElement>(".rho-fork-result");
    if (result) {
      result.textContent = `forked: run ${answer.run_id}` + (answer.message ? ` \u2014 ${answer.message}` : "");
      result.hidden = false;
    }
    section.dataset.forkRun = answer.run_id ?? "";
    busy(false);
  }
}
