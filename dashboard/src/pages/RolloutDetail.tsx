// One rollout: its attempts (worker, status, errors), then for the chosen attempt the
// trace waterfall, the model calls, and the samples they merge into (a tree of conversations,
// where merging broke and why, which calls train).
import { Anchor, Badge, Code, Group, Paper, SimpleGrid, Stack, Table, Tabs, Text, Title } from "@mantine/core";
import { lazy, Suspense, useEffect, useState } from "react";
import { Link, useParams } from "react-router";

import { idPath } from "../api";
import { ApiErrorAlert } from "../components/ApiErrorAlert";
import { Loading } from "../components/Loading";
import { ModelCalls } from "../components/ModelCalls";
import { StatusBadge } from "../components/StatusBadge";
import { Waterfall } from "../components/Waterfall";
import { fmtDuration, fmtNumber, fmtTime } from "../format";
import type { ModelCall, RolloutDetail, Waterfall as WaterfallData } from "../types";
import { useApi } from "../useApi";

const LineageTree = lazy(() => import("../components/LineageTree"));

const TERMINAL = new Set(["succeeded", "failed", "cancelled"]);

function Field({ label, children }: { label: string; children: React.ReactNode }) {
  return (
    <div>
      <Text size="xs" c="dimmed">
        {label}
      </Text>
      <Text size="sm" component="div">
        {children}
      </Text>
    </div>
  );
}

export function RolloutDetailPage() {
  const rolloutId = useParams()["*"] ?? "";
  const base = `/v1/dashboard/rollouts/${idPath(rolloutId)}`;
  const [live, setLive] = useState(true);
  const detail = useApi<RolloutDetail>(base, undefined, live ? 3000 : undefined);
  const rollout = detail.data?.rollout;
  useEffect(() => {
    if (rollout && TERMINAL.has(rollout.status)) setLive(false);
  }, [rollout]);

  const attempts = detail.data?.attempts ?? [];
  // what the agent returned when it was not a reward (its answer), from the latest attempt that did
  const output = [...attempts].reverse().find((a) => "output" in (a.metadata ?? {}))?.metadata.output;
  const [attemptId, setAttemptId] = useState<string | null>(null);
  const chosen = attemptId ?? rollout?.latest_attempt_id ?? attempts[attempts.length - 1]?.attempt_id ?? null;
  const attemptQuery = chosen ? { attempt_id: chosen } : undefined;
  const waterfall = useApi<WaterfallData>(rollout ? `${base}/waterfall` : null, attemptQuery, live ? 3000 : undefined);
  const calls = useApi<{ calls: ModelCall[] }>(rollout ? `${base}/calls` : null, attemptQuery, live ? 3000 : undefined);

  if (detail.error && !detail.data) return <ApiErrorAlert error={detail.error} />;
  if (!rollout) return <Loading />;

  return (
    <Stack gap="md">
      <Group gap="xs">
        <Anchor component={Link} to="/rollouts" size="sm">
          ← Rollouts
        </Anchor>
      </Group>
      <Group gap="sm">
        <Title order={3} className="mono" data-testid="rollout-title">
          {rollout.rollout_id}
        </Title>
        <StatusBadge status={rollout.status} />
        <Badge variant="outline">{rollout.mode}</Badge>
        {live && (
          <Badge color="blue" variant="dot">
            live
          </Badge>
        )}
      </Group>
      <Paper withBorder p="sm">
        <SimpleGrid cols={{ base: 2, md: 6 }}>
          <Field label="Reward">{fmtNumber(rollout.reward)}</Field>
          <Field label="Resources">
            {detail.data?.resources_version ? (
              <Anchor component={Link} to={`/resources?version=${detail.data.resources_version}`}>
                v{detail.data.resources_version}
              </Anchor>
            ) : (
              "—"
            )}
          </Field>
          <Field label="Created">{fmtTime(rollout.created_at)}</Field>
          <Field label="Started">{fmtTime(rollout.start_time)}</Field>
          <Field label="Ended">{fmtTime(rollout.end_time)}</Field>
          <Field label="Duration">
            {rollout.start_time && rollout.end_time ? fmtDuration(rollout.end_time - rollout.start_time) : "—"}
          </Field>
        </SimpleGrid>
        <Text size="xs" c="dimmed" mt="sm">
          Input
        </Text>
        <Code block className="pre" data-testid="rollout-input">
          {typeof rollout.input === "string" ? rollout.input : JSON.stringify(rollout.input, null, 2)}
        </Code>
        {output !== undefined && (
          <>
            <Text size="xs" c="dimmed" mt="sm">
              Output
            </Text>
            <Code block className="pre" data-testid="rollout-output">
              {typeof output === "string" ? output : JSON.stringify(output, null, 2)}
            </Code>
          </>
        )}
      </Paper>

      <Title order={4}>Attempts</Title>
      <Table highlightOnHover verticalSpacing={4} data-testid="attempts-table">
        <Table.Thead>
          <Table.Tr>
            <Table.Th>#</Table.Th>
            <Table.Th>Attempt</Table.Th>
            <Table.Th>Worker</Table.Th>
            <Table.Th>Status</Table.Th>
            <Table.Th>Started</Table.Th>
            <Table.Th>Duration</Table.Th>
            <Table.Th>Reward</Table.Th>
            <Table.Th>Error</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {attempts.map((a) => (
            <Table.Tr
              key={a.attempt_id}
              className="row-link"
              data-testid="attempt-row"
              onClick={() => setAttemptId(a.attempt_id)}
              bg={a.attempt_id === chosen ? "var(--mantine-color-indigo-0)" : undefined}
            >
              <Table.Td>{a.sequence_id}</Table.Td>
              <Table.Td className="mono">{a.attempt_id}</Table.Td>
              <Table.Td className="mono">{a.worker_id ?? "—"}</Table.Td>
              <Table.Td>
                <StatusBadge status={a.status} />
              </Table.Td>
              <Table.Td>{fmtTime(a.start_time)}</Table.Td>
              <Table.Td>{fmtDuration(a.duration ?? (a.end_time ? a.end_time - a.start_time : null))}</Table.Td>
              <Table.Td>{fmtNumber(a.reward)}</Table.Td>
              <Table.Td>
                {a.error ? (
                  <Text size="xs" c="red" title={a.error.traceback ?? undefined} data-testid="attempt-error">
                    {a.error.type}: {a.error.message}
                  </Text>
                ) : (
                  "—"
                )}
              </Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>

      <Tabs defaultValue="waterfall" keepMounted={false}>
        <Tabs.List>
          <Tabs.Tab value="waterfall" data-testid="tab-waterfall">
            Trace ({waterfall.data?.spans.length ?? "…"} spans)
          </Tabs.Tab>
          <Tabs.Tab value="calls" data-testid="tab-calls">
            Model calls ({calls.data?.calls.length ?? "…"})
          </Tabs.Tab>
          <Tabs.Tab value="samples" data-testid="tab-samples">
            Samples
          </Tabs.Tab>
        </Tabs.List>
        <Tabs.Panel value="waterfall" pt="sm">
          <ApiErrorAlert error={waterfall.error} />
          {waterfall.data ? <Waterfall data={waterfall.data} /> : <Loading />}
        </Tabs.Panel>
        <Tabs.Panel value="calls" pt="sm">
          <ApiErrorAlert error={calls.error} />
          {calls.data ? <ModelCalls calls={calls.data.calls} /> : <Loading />}
        </Tabs.Panel>
        <Tabs.Panel value="samples" pt="sm">
          <Suspense fallback={<Loading />}>
            <LineageTree base={base} attemptId={chosen} />
          </Suspense>
        </Tabs.Panel>
      </Tabs>
      {Object.keys(rollout.metadata ?? {}).length > 0 && (
        <>
          <Title order={5}>Metadata</Title>
          <Code block className="pre">
            {JSON.stringify(rollout.metadata, null, 2)}
          </Code>
        </>
      )}
    </Stack>
  );
}
