// The saved plans of the sidebar, newest first, shortened to a few with "show more". "Run…" opens
// the confirmation under the plan: its exact graph digest, inputs, authority list, the permission
// mode and a preview of the DAG; only "Confirm digest and run" starts a run (with that digest).

import { Dialog, showDialog, showErrorMessage } from "@jupyterlab/apputils";
import { renderDag, type PlanJson } from "@rho-notebook/dagview";

import type { RhoApi } from "./api";
import { collapsibleSection, emptyItem, errorText, h, moreItem, shortId, SHOWN, SHOWN_ALL, when } from "./dom";
import { PlanSource } from "./source";

export interface PlanListOptions {
  api: RhoApi;
  /** A run of a plan was started from the confirmation. */
  started: (runId: string) => Promise<void>;
  /** A plan was deleted (or deleting it failed): the list needs polling. */
  changed: () => Promise<void>;
}

export class PlanList {
  readonly section: HTMLElement;
  private readonly list = h("ul", { class: "rho-sb-list rho-sb-plans" });
  private readonly count = h("span", { class: "rho-sb-count" });
  private plans: PlanJson[] = [];
  private key = "";
  private all = false;
  /** The plan whose confirmation is open (kept open across redraws). */
  private confirming = "";
  private previewCleanup: (() => void) | null = null;

  constructor(private readonly options: PlanListOptions) {
    this.section = collapsibleSection("Saved plans", this.count, this.list);
  }

  /** Show the API's plans (oldest first); nothing is redrawn while the set of plan IDs is unchanged. */
  show(plans: PlanJson[]): void {
    const key = JSON.stringify(plans.map((p) => p.plan_id));
    if (key === this.key) return;
    this.key = key;
    this.plans = plans.slice().reverse();
    this.render();
  }

  dispose(): void {
    this.closePreview();
  }

  private closePreview(): void {
    this.previewCleanup?.();
    this.previewCleanup = null;
  }

  private render(): void {
    this.closePreview();
    this.count.textContent = `(${this.plans.length})`;
    const items = this.plans.slice(0, this.all ? SHOWN_ALL : SHOWN).map((plan) => this.item(plan));
    if (this.plans.length > SHOWN) {
      const label = this.all ? "show fewer" : `show ${Math.min(this.plans.length, SHOWN_ALL) - SHOWN} more`;
      items.push(
        moreItem(label, () => {
          this.all = !this.all;
          this.render();
        }),
      );
    }
    this.list.replaceChildren(...(items.length ? items : [emptyItem("no saved plans (plan one with %%workflow or rho-notebook plan)")]));
  }

  private item(plan: PlanJson): HTMLElement {
    const run = h("button", { class: "rho-sb-btn rho-sb-run-plan", type: "button", title: "show the graph digest, then confirm to run" }, "\u25b6 Run\u2026");
    const remove = h("button", { class: "rho-sb-btn rho-sb-delete", type: "button", title: "delete this saved plan (runs keep their copy)" }, "\u2715");
    const item = h(
      "li",
      { class: "rho-sb-plan", "data-plan-id": plan.plan_id, title: `plan ${plan.plan_id}\nentry ${plan.entry}\nworkspace ${plan.workspace_root}` },
      h("div", { class: "rho-sb-line" }, h("span", { class: "rho-sb-name", title: plan.workflow }, plan.workflow), h("span", { class: "rho-sb-spacer" }), run, remove),
      h("div", { class: "rho-sb-line rho-sb-sub" }, h("code", {}, shortId(plan.plan_id)), h("span", {}, `${plan.entry} \u00b7 ${when(plan.created_at)}`)),
    );
    run.addEventListener("click", () => void this.confirm(plan, item));
    remove.addEventListener("click", () => void this.remove(plan));
    if (this.confirming === plan.plan_id) void this.confirm(plan, item);
    return item;
  }

  private async confirm(plan: PlanJson, item: HTMLElement): Promise<void> {
    this.closePreview();
    for (const open of Array.from(this.list.querySelectorAll(".rho-sb-confirm"))) open.remove();
    this.confirming = plan.plan_id;
    const mode = h(
      "select",
      { class: "rho-sb-mode", title: "permission mode for command launches" },
      h("option", { value: "auto" }, "auto"),
      h("option", { value: "supervised" }, "supervised"),
      h("option", { value: "plan" }, "plan"),
    );
    const go = h("button", { class: "rho-sb-btn rho-sb-confirm-run", type: "button" }, "Confirm digest and run");
    const cancel = h("button", { class: "rho-sb-btn", type: "button" }, "Cancel");
    const preview = h("div", { class: "rho-sb-preview" });
    const inputs = Object.keys(plan.inputs).length ? h("pre", { class: "rho-sb-inputs" }, JSON.stringify(plan.inputs, null, 2)) : null;
    const authority = h(
      "details",
      { class: "rho-sb-authority" },
      h("summary", {}, `authority (${plan.authority.length})`),
      h("ul", {}, ...plan.authority.map((a) => h("li", {}, h("b", {}, String(a.kind ?? "")), " ", h("code", {}, String(a.value ?? "")), a.detail ? ` ${String(a.detail)}` : ""))),
    );
    const box = h(
      "div",
      { class: "rho-sb-confirm" },
      h("div", {}, "Run this plan once with graph digest"),
      h("code", { class: "rho-sb-digest", title: plan.graph_digest }, plan.graph_digest),
      inputs ? h("div", { class: "rho-sb-muted" }, "inputs") : null,
      inputs,
      authority,
      h("div", { class: "rho-sb-line" }, h("label", {}, "mode ", mode), h("span", { class: "rho-sb-spacer" }), cancel, go),
      preview,
    );
    item.append(box);
    const close = (): void => {
      this.confirming = "";
      this.closePreview();
      box.remove();
    };
    cancel.addEventListener("click", close);
    go.addEventListener("click", () => {
      go.disabled = true;
      void this.options.api
        .startRun(plan.plan_id, plan.graph_digest, mode.value)
        .then(async (started) => {
          close();
          await this.options.started(started.run_id);
        })
        .catch((error) => {
          go.disabled = false;
          void showErrorMessage("The run was not started", errorText(error));
        });
    });
    try {
      const full = await this.options.api.plan(plan.plan_id);
      if (box.isConnected) this.previewCleanup = renderDag(preview, new PlanSource(full.layout, plan.workflow));
    } catch (error) {
      preview.textContent = errorText(error);
    }
  }

  private async remove(plan: PlanJson): Promise<void> {
    const answer = await showDialog({
      title: "Delete plan",
      body: `Delete saved plan ${plan.plan_id} (${plan.workflow})? Its runs keep their own copy of the graph; source files are not touched.`,
      buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: "Delete" })],
    });
    if (!answer.button.accept) return;
    try {
      await this.options.api.deletePlan(plan.plan_id);
    } catch (error) {
      void showErrorMessage("Cannot delete the plan", errorText(error));
    }
    await this.options.changed();
  }
}
