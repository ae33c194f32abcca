// A status as a small coloured badge: the DOM of Mantine's <Badge variant="light" size="sm">
// (its classes and variables), written out, because tables show one per row and a plain
// element renders many times faster than the component (the first screen has 50).
import { Badge, useMantineTheme, type MantineTheme } from "@mantine/core";
import type { CSSProperties } from "react";

import { STATUS_COLORS } from "../format";

const ROOT = `${Badge.classes.root} mantine-Badge-root`;
const LABEL = `${Badge.classes.label} mantine-Badge-label`;

const styles = new WeakMap<MantineTheme, Map<string, CSSProperties>>();

/** The variables <Badge variant="light" size="sm" color={color}> sets, made once per color. */
function badgeStyle(theme: MantineTheme, color: string): CSSProperties {
  let byColor = styles.get(theme);
  if (!byColor) styles.set(theme, (byColor = new Map()));
  let style = byColor.get(color);
  if (!style) {
    const colors = theme.variantColorResolver({ color, theme, variant: "light" });
    style = {
      "--badge-height": "var(--badge-height-sm)",
      "--badge-padding-x": "var(--badge-padding-x-sm)",
      "--badge-fz": "var(--badge-fz-sm)",
      "--badge-bg": colors.background,
      "--badge-color": colors.color,
      "--badge-bd": colors.border,
    } as CSSProperties;
    byColor.set(color, style);
  }
  return style;
}

export function StatusBadge({ status }: { status: string | null | undefined }) {
  const theme = useMantineTheme();
  const s = status ?? "unknown";
  return (
    <div className={ROOT} data-variant="light" data-size="sm" data-testid="status-badge" style={badgeStyle(theme, STATUS_COLORS[s] ?? "gray")}>
      <span className={LABEL}>{s}</span>
    </div>
  );
}
