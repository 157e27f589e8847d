// The approvals of the selected run: one card per request its owner is waiting on (an approval
// node's prompt as markdown, or a supervised launch's facts laid out as the notebook and
// `rho-notebook approvals` describe them: executable and its sha256, interpreters, argv, cwd, or
// an agent's runtime, tools, access and prompt; digests on one line), with a comment field and Approve /
// Deny. A decision goes to the server, which journals it; the cards are reloaded after it. An item
// graph's human step (kind "form") is not shown here: the DAG view draws its form (RunSource.forms).

import { showErrorMessage } from "@jupyterlab/apputils";
import { markdownHtml, type ApprovalJson } from "@rho-notebook/dagview";

import type { RhoApi } from "./api";
import { errorText, h, hashLine } from "./dom";

type Facts = Record<string, unknown>;

/** One fact: its name and a value element (text wraps at spaces, never mid-token). */
function fact(name: string, ...value: (HTMLElement | string | null)[]): HTMLElement[] {
  return [h("dt", {}, name), h("dd", {}, ...value)];
}

/** argv as one chip per argument, so the list wraps between arguments only. */
function argvView(argv: unknown): HTMLElement {
  const args = Array.isArray(argv) ? argv.map(String) : [String(argv ?? "")];
  return h("span", { class: "rho-sb-argv" }, ...args.map((a) => h("code", { class: "rho-sb-arg", title: a }, a)));
}

/** The facts of a supervised launch (policy/approvals.py describe_request, laid out). */
export function launchFacts(facts: Facts): HTMLElement {
  const rows: HTMLElement[] = [];
  if ("agent" in facts) {
    rows.push(...fact("agent", `${String(facts.agent ?? "")} (${String(facts.runtime ?? "")})`));
    rows.push(...fact("tools", argvView(facts.tools ?? [])));
    rows.push(...fact("access", String(facts.access ?? "")));
    rows.push(...fact("prompt", h("div", { class: "rho-sb-prompt" }, String(facts.prompt ?? ""))));
  } else {
    rows.push(...fact("executable", h("code", {}, String(facts.executable ?? "")), hashLine(String(facts.sha256 ?? ""))));
    for (const interp of Array.isArray(facts.interpreters) ? (facts.interpreters as Facts[]) : []) {
      rows.push(...fact("interpreter", h("code", {}, String(interp.path ?? "")), hashLine(String(interp.sha256 ?? ""))));
    }
    rows.push(...fact("argv", argvView(facts.argv)));
    rows.push(...fact("cwd", h("code", {}, String(facts.cwd ?? ""))));
  }
  return h("dl", { class: "rho-sb-launch" }, ...rows);
}

export class ApprovalsPanel {
  readonly node = h("div", { class: "rho-sb-approvals" });
  /** The request IDs of the cards shown, so an unchanged answer does not redraw (and clear comments). */
  private key = "";
  private disposed = false;
  /** The requests whose cards are shown (approvals and supervised launches, not forms). */
  shown: ApprovalJson[] = [];

  constructor(
    private readonly api: RhoApi,
    readonly runId: string,
  ) {}

  dispose(): void {
    this.disposed = true;
  }

  /** Load the run's waiting requests and redraw the cards if they changed. */
  async load(): Promise<void> {
    let requests: ApprovalJson[];
    try {
      requests = (await this.api.approvals(this.runId)).filter((r) => r.waiting && r.kind !== "form");
    } catch {
      return; // the next poll or journal record tries again
    }
    if (this.disposed) return;
    const key = requests.map((r) => r.request_id).join(",");
    if (key === this.key) return;
    this.key = key;
    this.shown = requests;
    this.node.replaceChildren(...requests.map((r) => this.card(r)));
  }

  /** Approve the one request shown (no comment); false when none or several are shown. */
  async approveOnly(): Promise<boolean> {
    if (this.shown.length !== 1) return false;
    const request = this.shown[0] as ApprovalJson;
    try {
      await this.api.decide(request.run_id ?? this.runId, request.request_id ?? "", "approve", "");
    } catch (error) {
      void showErrorMessage("The decision was not recorded", errorText(error));
      return false;
    }
    this.key = "(decided)";
    await this.load();
    return true;
  }

  private card(request: ApprovalJson): HTMLElement {
    const node = request.node ?? "";
    const requestId = request.request_id ?? "";
    const facts = h("div", { class: "rho-sb-facts" });
    if (request.kind === "node" && typeof request.facts?.prompt === "string") {
      facts.innerHTML = markdownHtml(request.facts.prompt);
    } else {
      facts.append(launchFacts((request.facts ?? {}) as Facts));
    }
    const comment = h("input", { class: "rho-sb-comment", type: "text", placeholder: "comment (optional, recorded)" });
    const approve = h("button", { class: "rho-sb-btn rho-sb-approve", type: "button" }, "\u2713 Approve");
    const deny = h("button", { class: "rho-sb-btn rho-sb-deny", type: "button" }, "\u2717 Deny");
    const decide = async (decision: "approve" | "deny"): Promise<void> => {
      approve.disabled = deny.disabled = true;
      try {
        await this.api.decide(request.run_id ?? this.runId, requestId, decision, comment.value);
      } catch (error) {
        void showErrorMessage("The decision was not recorded", errorText(error));
        approve.disabled = deny.disabled = false;
        return;
      }
      this.key = "(decided)"; // forces a redraw, even to an empty list
      await this.load();
    };
    approve.addEventListener("click", () => void decide("approve"));
    deny.addEventListener("click", () => void decide("deny"));
    const what = request.kind === "node" ? "approval node" : "supervised launch";
    return h(
      "div",
      { class: "rho-sb-approval", "data-request-id": requestId, "data-node": node },
      h("div", { class: "rho-sb-line" }, h("b", {}, "\u2691 ", node), h("span", { class: "rho-sb-muted" }, `${what} \u00b7 attempt ${request.attempt ?? ""}`)),
      facts,
      h("div", { class: "rho-sb-digestline" }, hashLine(request.facts_sha256 ?? "", "facts")),
      h("div", { class: "rho-sb-line" }, comment),
      h("div", { class: "rho-sb-line" }, approve, deny),
    );
  }
}
