// Server health in the header: polls the summary; shows queue depth and live workers.
import { Badge, Group, Tooltip } from "@mantine/core";

import type { Summary } from "../types";
import { useApi } from "../useApi";

export function HealthBadge() {
  const { data, error } = useApi<Summary>("/v1/dashboard/summary", undefined, 5000);
  if (error && !data) {
    const label = error.needsToken ? "token needed" : "unreachable";
    return (
      <Tooltip label={error.message} multiline w={320}>
        <Badge color={error.needsToken ? "yellow" : "red"} data-testid="health-badge" data-health={label}>
          {label}
        </Badge>
      </Tooltip>
    );
  }
  if (!data) return <Badge color="gray" data-testid="health-badge">…</Badge>;
  const healthy = data.health === "ok";
  const running = data.rollouts_by_status?.running ?? 0;
  const details = `store ${data.store ?? ""} · agentbolt ${data.version ?? ""} · resources v${data.latest_resources_version ?? "—"}`;
  return (
    <Tooltip label={data.problems?.length ? `${data.problems.join("; ")} (${details})` : details} multiline w={360}>
      <Group gap={6}>
        <Badge
          color={healthy ? "green" : data.health === "degraded" ? "yellow" : "red"}
          data-testid="health-badge"
          data-health={data.health}
        >
          {healthy ? "healthy" : data.health}
        </Badge>
        <Badge variant="outline" color="gray">
          queue {data.queue_depth}
        </Badge>
        <Badge variant="outline" color="gray">
          running {running}
        </Badge>
        <Badge variant="outline" color="gray">
          workers {data.workers_alive}
        </Badge>
      </Group>
    </Tooltip>
  );
}
