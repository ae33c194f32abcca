// Per training step: the rows (rollouts) that went in, how many trained, the dropped ones by
// reason, and for a step that trained nothing the one line saying why (GRPO's rows/...
// metrics, read through /v1/dashboard/training/rows).
import { Badge, Group, Table, Text } from "@mantine/core";

import { ApiErrorAlert } from "./ApiErrorAlert";
import type { RowStep } from "../types";
import { useApi } from "../useApi";

const SHOWN = 50;

/** ``policy``: one policy's rows in a run that trains several (its "<policy>/rows/..."). */
export default function RowsTable({ runId, live, policy }: { runId: string; live: boolean; policy?: string }) {
  const rows = useApi<{ run_id: string; steps: RowStep[] }>(
    "/v1/dashboard/training/rows",
    { run_id: runId, policy },
    live ? 5000 : undefined,
  );
  const steps = [...(rows.data?.steps ?? [])].reverse().slice(0, SHOWN);
  if (rows.error) return <ApiErrorAlert error={rows.error} />;
  if (!steps.length) return null;
  return (
    <Table verticalSpacing={4} striped data-testid="rows-table" data-policy={policy}>
      <Table.Thead>
        <Table.Tr>
          <Table.Th>Step</Table.Th>
          <Table.Th>Rows in → trained</Table.Th>
          <Table.Th>Dropped, by reason</Table.Th>
        </Table.Tr>
      </Table.Thead>
      <Table.Tbody>
        {steps.map((s) => (
          <Table.Tr key={s.step} data-testid="rows-step" data-step={s.step}>
            <Table.Td>{s.step}</Table.Td>
            <Table.Td data-testid="rows-flow">
              {s.rows_in} → {s.rows_trained ?? "—"}
            </Table.Td>
            <Table.Td>
              <Group gap={4}>
                {Object.entries(s.dropped).map(([reason, n]) => (
                  <Badge key={reason} size="sm" variant="light" color="orange" data-testid="rows-dropped">
                    {reason} {n}
                  </Badge>
                ))}
              </Group>
              {s.why_nothing_trained && (
                <Text size="sm" c="red" data-testid="why-nothing-trained">
                  Trained nothing: {s.why_nothing_trained}
                </Text>
              )}
            </Table.Td>
          </Table.Tr>
        ))}
      </Table.Tbody>
    </Table>
  );
}
