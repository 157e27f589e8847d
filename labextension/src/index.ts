// The rho-notebook JupyterLab extension: one plugin adding the Workflows sidebar (see sidebar.ts).
// It talks only to the rho_notebook jupyter-server extension under <base_url>/rho/api/.

import { ILayoutRestorer, type JupyterFrontEnd, type JupyterFrontEndPlugin } from "@jupyterlab/application";
import { ICommandPalette } from "@jupyterlab/apputils";
import { LabIcon } from "@jupyterlab/ui-components";

import { WorkflowsPanel } from "./sidebar";

const ICON = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 16 16">
  <g class="jp-icon3" fill="#616161">
    <rect x="5.5" y="1" width="5" height="3.4" rx="1"/>
    <rect x="1" y="11.6" width="5" height="3.4" rx="1"/>
    <rect x="10" y="11.6" width="5" height="3.4" rx="1"/>
    <path d="M7.4 4.4h1.2v2.8h3.9v4.4h-1.2V8.4H4.7v3.2H3.5V7.2h3.9z"/>
  </g>
</svg>`;

export const workflowsIcon = new LabIcon({ name: "rho-notebook:workflows", svgstr: ICON });

const COMMAND = "rho-notebook:show-workflows";

const plugin: JupyterFrontEndPlugin<void> = {
  id: "rho-notebook:sidebar",
  description: "A Workflows sidebar: live and finished rho_notebook runs, saved plans, approvals and a live DAG.",
  autoStart: true,
  optional: [ILayoutRestorer, ICommandPalette],
  activate: (app: JupyterFrontEnd, restorer: ILayoutRestorer | null, palette: ICommandPalette | null) => {
    const panel = new WorkflowsPanel({
      openMain: (widget) => {
        widget.title.icon = workflowsIcon;
        app.shell.add(widget, "main");
        app.shell.activateById(widget.id);
      },
    });
    panel.title.icon = workflowsIcon;
    app.shell.add(panel, "left", { rank: 650 });
    restorer?.add(panel, "rho-workflows");
    app.commands.addCommand(COMMAND, {
      label: "Show Workflows",
      caption: "Open the rho_notebook Workflows sidebar",
      execute: () => app.shell.activateById(panel.id),
    });
    palette?.addItem({ command: COMMAND, category: "Workflows" });
  },
};

export default plugin;
