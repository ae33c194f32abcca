// Workers: runners and controllers, how long since each was heard from, what it runs.
import { Anchor, Badge, Stack, Table, Text, Title } from "@mantine/core";
import { Link } from "react-router";

import { idPath } from "../api";
import { ApiErrorAlert } from "../components/ApiErrorAlert";
import { Loading } from "../components/Loading";
import { StatusBadge } from "../components/StatusBadge";
import { fmtAge } from "../format";
import type { WorkerRow } from "../types";
import { useApi } from "../useApi";

function ageColor(age: number | null, alive: boolean | undefined): string {
  if (age === null || alive === false) return "gray";
  if (age < 30) return "green";
  if (age < 120) return "yellow";
  return "red";
}

export function WorkersPage() {
  const { data, error } = useApi<{ now: number; workers: WorkerRow[] }>("/v1/dashboard/workers", undefined, 2000);
  return (
    <Stack gap="sm">
      <Title order={3}>Workers</Title>
      <ApiErrorAlert error={error} />
      {!data && !error && <Loading />}
      {data && data.workers.length === 0 && <Text c="dimmed">No worker has registered yet.</Text>}
      {data && data.workers.length > 0 && (
        <Table striped verticalSpacing={4} data-testid="workers-table">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Worker</Table.Th>
              <Table.Th>Kind</Table.Th>
              <Table.Th>Status</Table.Th>
              <Table.Th>Heartbeat</Table.Th>
              <Table.Th>Current rollout</Table.Th>
              <Table.Th>Attempt</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {data.workers.map((w) => (
              <Table.Tr key={w.worker_id} data-testid="worker-row" data-worker-id={w.worker_id}>
                <Table.Td className="mono">{w.worker_id}</Table.Td>
                <Table.Td>{w.kind ?? "—"}</Table.Td>
                <Table.Td>
                  <StatusBadge status={w.status} />
                </Table.Td>
                <Table.Td>
                  <Badge variant="dot" color={ageColor(w.heartbeat_age, w.alive)}>
                    {fmtAge(w.heartbeat_age)}
                  </Badge>
                </Table.Td>
                <Table.Td className="mono">
                  {w.current_rollout_id ? (
                    <Anchor component={Link} to={`/rollouts/${idPath(w.current_rollout_id)}`} size="xs">
                      {w.current_rollout_id}
                    </Anchor>
                  ) : (
                    "—"
                  )}
                </Table.Td>
                <Table.Td className="mono">{w.current_attempt_id ?? "—"}</Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
    </Stack>
  );
}
