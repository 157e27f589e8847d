// The extension's settings (labextension/schema/plugin.json, shown in JupyterLab's Settings Editor
// under "Workflows"): the poll interval, the sidebar's starting zoom and notifications on/off.
// JupyterLab's setting registry validates them against the schema and fills in the defaults; this
// module only reads them into one typed object and calls back whenever the user changes them.

import type { ISettingRegistry } from "@jupyterlab/settingregistry";

export interface RhoSettings {
  /** Seconds between two polls of the run list (the sidebar and the status-bar item). */
  refreshSeconds: number;
  /** The selected run's starting zoom in the sidebar: "fit" or "100%". */
  defaultZoom: "fit" | "100%";
  /** Whether a run that starts waiting for a person, or ends, raises a JupyterLab notification. */
  notifications: boolean;
}

/** The schema's defaults: what applies when no setting registry is available. */
export const DEFAULT_SETTINGS: RhoSettings = { refreshSeconds: 1.5, defaultZoom: "fit", notifications: true };

/** The composite (user over default) settings, each value checked (a bad value keeps its default). */
export function readSettings(settings: ISettingRegistry.ISettings | null): RhoSettings {
  if (!settings) return { ...DEFAULT_SETTINGS };
  const seconds = Number(settings.get("refreshSeconds").composite);
  const zoom = settings.get("defaultZoom").composite;
  const notifications = settings.get("notifications").composite;
  return {
    refreshSeconds: Number.isFinite(seconds) && seconds > 0 ? seconds : DEFAULT_SETTINGS.refreshSeconds,
    defaultZoom: zoom === "100%" ? "100%" : "fit",
    notifications: typeof notifications === "boolean" ? notifications : DEFAULT_SETTINGS.notifications,
  };
}

/**
 * Load the plugin's settings and call `apply` now and after every change. Without a registry, or
 * when loading fails (a broken user settings file), `apply` gets the defaults and the failure is
 * logged: the sidebar works on without settings rather than not at all.
 */
export async function followSettings(
  registry: ISettingRegistry | null,
  pluginId: string,
  apply: (settings: RhoSettings) => void,
): Promise<void> {
  if (!registry) {
    apply({ ...DEFAULT_SETTINGS });
    return;
  }
  try {
    const settings = await registry.load(pluginId);
    apply(readSettings(settings));
    settings.changed.connect(() => apply(readSettings(settings)));
  } catch (error) {
    console.warn(`rho-notebook: cannot load the settings of ${pluginId}; using the defaults`, error);
    apply({ ...DEFAULT_SETTINGS });
  }
}
