import { Badge } from "@mantine/core";

import { STATUS_COLORS } from "../format";

export function StatusBadge({ status }: { status: string | null | undefined }) {
  const s = status ?? "unknown";
  return (
    <Badge color={STATUS_COLORS[s] ?? "gray"} variant="light" size="sm" data-testid="status-badge">
      {s}
    </Badge>
  );
}
