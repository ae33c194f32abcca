// One row of the Rollouts table: the DOM of <Table.Tr>/<Table.Td>/<Text size="xs" c="dimmed">
// inside <Table striped highlightOnHover> (Mantine's classes and data attributes), written
// out as plain elements. Rendering some 25 Mantine components per row made 50 rows most of
// the page's first render; plain elements look the same and cost a fraction.
import { Table, Text } from "@mantine/core";
import type { CSSProperties } from "react";

import { fmtDuration, fmtNumber, fmtTime } from "../format";
import type { RolloutRow } from "../types";
import { StatusBadge } from "./StatusBadge";

const TR = `${Table.classes.tr} mantine-Table-tr row-link`;
const TD = `${Table.classes.td} mantine-Table-td`;
const TD_MONO = `${TD} mono`;
const DIMMED_XS = `mantine-focus-auto clip ${Text.classes.root} mantine-Text-root`;
const DIMMED_XS_STYLE = {
  "--text-fz": "var(--mantine-font-size-xs)",
  "--text-lh": "var(--mantine-line-height-xs)",
  color: "var(--mantine-color-dimmed)",
} as CSSProperties;

export function RolloutTableRow({ rollout: r, onOpen }: { rollout: RolloutRow; onOpen: (rolloutId: string) => void }) {
  return (
    <tr
      className={TR}
      // what <Table striped highlightOnHover> gives each of its rows
      data-with-row-border="true"
      data-striped="odd"
      data-hover="true"
      data-testid="rollout-row"
      data-rollout-id={r.rollout_id}
      data-status={r.status}
      onClick={() => onOpen(r.rollout_id)}
    >
      <td className={TD_MONO}>{r.rollout_id}</td>
      <td className={TD}>
        <StatusBadge status={r.status} />
      </td>
      <td className={TD}>{r.mode}</td>
      <td className={TD} data-testid="rollout-reward">
        {fmtNumber(r.reward)}
      </td>
      <td className={TD}>{fmtDuration(r.duration)}</td>
      <td className={TD}>{r.attempt_count}</td>
      <td className={TD}>{r.resources_version !== null ? `v${r.resources_version}` : "—"}</td>
      <td className={TD_MONO}>{r.worker_id ?? "—"}</td>
      <td className={TD}>{fmtTime(r.created_at)}</td>
      <td className={TD}>
        <p className={DIMMED_XS} data-size="xs" style={DIMMED_XS_STYLE}>
          {r.input_preview ?? ""}
        </p>
      </td>
    </tr>
  );
}
