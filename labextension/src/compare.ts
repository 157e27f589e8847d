// The compare view of the sidebar: two runs ticked in the run lists, side by side. It shows the
// plan diff exactly as `rho-notebook diff OLD NEW` prints it (the server sends the same lines and
// JSON: GET runs/<old>/compare/<new>, rho_notebook/server/_compare.py), then per node what the runs
// did: the state shown, the exit code and the value (a preview of each, and whether it changed).
// Nodes whose state, exit and value are the same are folded under "unchanged".

import type { CompareJson, CompareSide, RhoApi } from "./api";
import { errorText, h, shortId } from "./dom";

type CompareNode = CompareJson["nodes"][number];

export class CompareView {
  readonly node = h("section", { class: "rho-sb-compare-view", hidden: "" });
  /** The pair shown ("old new"), "" when closed. */
  pair = "";

  constructor(
    private readonly api: RhoApi,
    private readonly closed: () => void,
  ) {}

  /** Load and show the comparison of `oldRun` (the diff's OLD side) with `newRun`. */
  async open(oldRun: string, newRun: string): Promise<void> {
    this.pair = `${oldRun} ${newRun}`;
    const close = h("button", { class: "rho-sb-btn rho-sb-close", type: "button", title: "close the comparison" }, "\u2715");
    close.addEventListener("click", () => this.closed());
    const body = h("div", { class: "rho-sb-cmp-body" }, h("div", { class: "rho-sb-muted" }, "comparing\u2026"));
    this.node.replaceChildren(
      h("div", { class: "rho-sb-sel-head" }, h("b", {}, "Compare two runs"), h("span", { class: "rho-sb-spacer" }), close),
      h(
        "div",
        { class: "rho-sb-line rho-sb-sub" },
        h("span", {}, "old"),
        h("code", { title: oldRun }, shortId(oldRun)),
        h("span", {}, "\u2192 new"),
        h("code", { title: newRun }, shortId(newRun)),
      ),
      body,
    );
    this.node.dataset.old = oldRun;
    this.node.dataset.new = newRun;
    this.node.hidden = false;
    let answer: CompareJson;
    try {
      answer = await this.api.compare(oldRun, newRun);
    } catch (error) {
      body.replaceChildren(h("div", { class: "rho-sb-error" }, errorText(error)));
      return;
    }
    if (this.pair !== `${oldRun} ${newRun}`) return;
    body.replaceChildren(...render(answer));
    this.node.dataset.loaded = "true";
  }

  close(): void {
    this.pair = "";
    this.node.hidden = true;
    this.node.replaceChildren();
    for (const key of ["old", "new", "loaded"]) delete this.node.dataset[key];
  }
}

function render(answer: CompareJson): HTMLElement[] {
  const plan = answer.plan;
  const workflows = plan.old.workflow === plan.new.workflow ? plan.old.workflow : `${plan.old.workflow} \u2192 ${plan.new.workflow}`;
  const lines = answer.text.map((line) => h("div", { class: `rho-sb-diff-line rho-sb-diff-${lineKind(line)}` }, line));
  const changed = answer.nodes.filter((n) => n.changed.length);
  const same = answer.nodes.filter((n) => !n.changed.length);
  return [
    h("div", { class: "rho-sb-muted" }, workflows),
    h("h3", { class: "rho-sb-cmp-title" }, "Plan diff"),
    h("div", { class: "rho-sb-diff", title: "as `rho-notebook diff OLD NEW` prints it" }, ...lines),
    h("h3", { class: "rho-sb-cmp-title" }, `Nodes (${changed.length} changed)`),
    h("ul", { class: "rho-sb-list rho-sb-cmp-nodes" }, ...(changed.length ? changed.map(nodeItem) : [h("li", { class: "rho-sb-empty" }, "every node ran the same")])),
    same.length
      ? h(
          "details",
          { class: "rho-sb-cmp-same" },
          h("summary", {}, `${same.length} unchanged`),
          h("ul", { class: "rho-sb-list rho-sb-cmp-nodes" }, ...same.map(nodeItem)),
        )
      : h("span", {}),
  ];
}

function lineKind(line: string): string {
  if (line.startsWith("+ ")) return "added";
  if (line.startsWith("- ")) return "removed";
  if (line.startsWith("~ ")) return "changed";
  return "info";
}

function nodeItem(entry: CompareNode): HTMLElement {
  const facts: (HTMLElement | string)[] = [];
  const { old, new: now } = entry;
  if (!old || !now) {
    facts.push(h("span", { class: "rho-sb-cmp-fact" }, old ? "only in the old run" : "only in the new run"));
  } else {
    facts.push(h("span", { class: "rho-sb-cmp-fact", "data-what": "state" }, old.state === now.state ? old.state : `${old.state} \u2192 ${now.state}`));
    if (old.exit_code !== now.exit_code) facts.push(h("span", { class: "rho-sb-cmp-fact", "data-what": "exit" }, `exit ${old.exit_code ?? "\u2013"} \u2192 ${now.exit_code ?? "\u2013"}`));
    if (entry.changed.includes("value")) facts.push(h("span", { class: "rho-sb-cmp-fact", "data-what": "value" }, "value changed"));
  }
  const values = entry.changed.includes("value") || entry.changed.includes("presence") ? [preview("old", old), preview("new", now)] : [];
  return h(
    "li",
    { class: "rho-sb-cmp-node", "data-node": entry.node, "data-changed": entry.changed.join(" ") },
    h("div", { class: "rho-sb-line" }, h("b", { class: "rho-sb-name", title: entry.node }, entry.node), ...facts),
    ...values,
  );
}

function preview(side: "old" | "new", value: CompareSide | null): HTMLElement {
  const text = value ? value.preview || "(no value)" : "(not in this run)";
  return h("div", { class: `rho-sb-cmp-value rho-sb-cmp-${side}` }, h("span", { class: "rho-sb-muted" }, side), h("pre", { title: value?.value_sha256 ?? "" }, text));
}
