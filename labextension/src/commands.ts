// The extension's commands, in the command palette under "Workflows": open the sidebar, refresh it,
// cancel the selected run, approve the selected request. Each is enabled only when it applies (a
// run selected and live, exactly one request shown), so the palette greys out what would do nothing.

import type { JupyterFrontEnd } from "@jupyterlab/application";
import type { ICommandPalette } from "@jupyterlab/apputils";
import type { LabIcon } from "@jupyterlab/ui-components";

import type { WorkflowsPanel } from "./sidebar";

export const CommandIds = {
  open: "rho-notebook:show-workflows",
  refresh: "rho-notebook:refresh",
  cancel: "rho-notebook:cancel-selected-run",
  approve: "rho-notebook:approve-selected-request",
} as const;

export const PALETTE_CATEGORY = "Workflows";

export function addCommands(
  app: JupyterFrontEnd,
  options: {
    panel: WorkflowsPanel;
    icon: LabIcon;
    palette: ICommandPalette | null;
    /** Whether a run is live, from the last run list (unknown runs count as live: the server decides). */
    isLive: (runId: string) => boolean;
    /** Also poll the status-bar item and notifications now. */
    refreshed: () => Promise<void>;
  },
): void {
  const { panel, icon, palette } = options;
  const show = (): void => app.shell.activateById(panel.id);
  app.commands.addCommand(CommandIds.open, {
    label: "Show Workflows",
    caption: "Open the rho_notebook Workflows sidebar",
    icon,
    execute: show,
  });
  app.commands.addCommand(CommandIds.refresh, {
    label: "Refresh Workflows",
    caption: "Read the run list and the saved plans again now",
    execute: async () => {
      await Promise.all([panel.refresh(), options.refreshed()]);
    },
  });
  app.commands.addCommand(CommandIds.cancel, {
    label: "Cancel the Selected Run",
    caption: "Request cancellation of the run selected in the Workflows sidebar",
    isEnabled: () => {
      const runId = panel.selectedRunId();
      return runId !== null && options.isLive(runId);
    },
    execute: async () => {
      show();
      await panel.cancelSelected();
    },
  });
  app.commands.addCommand(CommandIds.approve, {
    label: "Approve the Selected Request",
    caption: "Approve the one waiting request of the run selected in the Workflows sidebar",
    isEnabled: () => panel.selectedRunId() !== null && panel.selectedApprovals() === 1,
    execute: async () => {
      show();
      return panel.approveSelected();
    },
  });
  for (const command of Object.values(CommandIds)) palette?.addItem({ command, category: PALETTE_CATEGORY });
}
