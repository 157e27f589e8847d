// The rho-notebook JupyterLab extension: one plugin adding the Workflows sidebar (see sidebar.ts),
// its palette commands (commands.ts), settings (settings.ts, schema/plugin.json), a status-bar item
// (statusItem.ts) and notifications (notify.ts). It talks only to the rho_notebook jupyter-server
// extension under <base_url>/rho/api/. Colours come from the JupyterLab theme (docs/jupyterlab.md).

import { ILayoutRestorer, type JupyterFrontEnd, type JupyterFrontEndPlugin } from "@jupyterlab/application";
import { ICommandPalette } from "@jupyterlab/apputils";
import { ISettingRegistry } from "@jupyterlab/settingregistry";
import { IStatusBar } from "@jupyterlab/statusbar";
import { LabIcon } from "@jupyterlab/ui-components";
import type { RunRowJson } from "@rho-notebook/dagview";

import { RhoApi } from "./api";
import { addCommands, CommandIds } from "./commands";
import { RunNotifier } from "./notify";
import { DEFAULT_SETTINGS, followSettings, type RhoSettings } from "./settings";
import { WorkflowsPanel } from "./sidebar";
import { RunPoller, WorkflowsStatus } from "./statusItem";

// JupyterLab's icon convention: the jp-icon3 class recolours the fill per theme (the literal is
// the fallback of a theme without it)
const ICON = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 16 16">
  <g class="jp-icon3" fill="#616161">
    <rect x="5.5" y="1" width="5" height="3.4" rx="1"/>
    <rect x="1" y="11.6" width="5" height="3.4" rx="1"/>
    <rect x="10" y="11.6" width="5" height="3.4" rx="1"/>
    <path d="M7.4 4.4h1.2v2.8h3.9v4.4h-1.2V8.4H4.7v3.2H3.5V7.2h3.9z"/>
  </g>
</svg>`;

export const workflowsIcon = new LabIcon({ name: "rho-notebook:workflows", svgstr: ICON });

const PLUGIN_ID = "rho-notebook:plugin";

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: "A Workflows sidebar: live and finished rho_notebook runs, saved plans, approvals and a live DAG.",
  autoStart: true,
  optional: [ILayoutRestorer, ICommandPalette, ISettingRegistry, IStatusBar],
  activate: (
    app: JupyterFrontEnd,
    restorer: ILayoutRestorer | null,
    palette: ICommandPalette | null,
    registry: ISettingRegistry | null,
    statusBar: IStatusBar | null,
  ) => {
    const api = new RhoApi();
    const panel = new WorkflowsPanel({
      api,
      openMain: (widget) => {
        widget.title.icon = workflowsIcon;
        app.shell.add(widget, "main");
        app.shell.activateById(widget.id);
      },
    });
    panel.title.icon = workflowsIcon;
    app.shell.add(panel, "left", { rank: 650 });
    restorer?.add(panel, "rho-workflows");

    let settings: RhoSettings = { ...DEFAULT_SETTINGS };
    let rows: RunRowJson[] = [];
    const poller = new RunPoller(api, settings.refreshSeconds * 1000);
    const openRun = (runId: string): void => {
      app.shell.activateById(panel.id);
      void panel.select(runId);
    };
    const notifier = new RunNotifier({ open: openRun, enabled: () => settings.notifications });
    let liveKey = "";
    poller.listen((answer) => {
      if (answer) rows = answer;
      notifier.update(answer);
      // Cancel's enabled state follows the live runs: tell menus and the palette when they change
      const key = rows.filter((row) => row.live).map((row) => row.run_id).join(" ");
      if (key !== liveKey) app.commands.notifyCommandChanged(CommandIds.cancel);
      liveKey = key;
    });
    if (statusBar) {
      const item = new WorkflowsStatus(() => app.shell.activateById(panel.id));
      poller.listen((answer, error) => item.showPoll(answer, error));
      statusBar.registerStatusItem(PLUGIN_ID, { item, align: "left", rank: 50 });
    }
    addCommands(app, {
      panel,
      icon: workflowsIcon,
      palette,
      isLive: (runId) => rows.find((row) => row.run_id === runId)?.live ?? true,
      refreshed: () => poller.poll(),
    });
    void followSettings(registry, PLUGIN_ID, (next) => {
      settings = next;
      poller.setInterval(next.refreshSeconds * 1000);
      panel.applySettings({ refreshSeconds: next.refreshSeconds, defaultZoom: next.defaultZoom });
    });
    void app.restored.then(() => poller.start());
  },
};

export default plugin;
