// Training: the metric curves of a run (mean reward, success rate, loss, KL, tokens/s,
// and any other key), fetched incrementally while the page is open; and the evaluation
// results per policy version. A run that trains several policies (GRPOPolicies: one LoRA
// per agent) logs each policy's metrics under "<policy>/..."; each policy's curves get a
// section of their own, with its current version. A run that counts its rows (GRPO's rows/...)
// gets a table: per step the rows in → trained, the dropped ones by reason, and why a step
// trained nothing.
import { Badge, Group, Select, SimpleGrid, Stack, Switch, Table, Text, Title } from "@mantine/core";
import { lazy, Suspense, useEffect, useMemo, useRef, useState } from "react";

import { apiGet, ApiError } from "../api";
import { ApiErrorAlert } from "../components/ApiErrorAlert";
import { LineChart } from "../components/LineChart";
import { fmtNumber, fmtTime } from "../format";
import type { TrainingRun, TrainingSeries } from "../types";
import { useApi } from "../useApi";

const RowsTable = lazy(() => import("../components/RowsTable"));

/** Charted first, in this order; then every other key of the run. */
const PREFERRED = [
  "reward/mean",
  "success_rate",
  "train/loss",
  "train/kl",
  "train/tokens_per_second",
  "val/success_rate",
  "val/mean_reward",
  "best_mean_val",
];
const COLORS = ["#4c6ef5", "#12b886", "#fa5252", "#fd7e14", "#7950f2", "#15aabf", "#e64980", "#82c91e"];
const EVAL_PREFIXES = ["val/", "test/", "eval/"];
const POLL_MS = 2000;

type Series = Record<string, [number, number | null][]>;

function mergeSeries(into: Series, more: Series): Series {
  const out: Series = { ...into };
  for (const [key, pts] of Object.entries(more)) {
    const have = out[key] ?? [];
    const last = have.length ? have[have.length - 1][0] : -Infinity;
    out[key] = [...have, ...pts.filter((p) => p[0] > last)];
  }
  return out;
}

/** The run's series, first in full, then only the steps after the last one seen. */
function useSeries(runId: string | null, live: boolean): { series: Series; error?: ApiError } {
  const [series, setSeries] = useState<Series>({});
  const [error, setError] = useState<ApiError>();
  const lastStep = useRef<number | null>(null);

  useEffect(() => {
    setSeries({});
    setError(undefined);
    lastStep.current = null;
    if (!runId) return;
    let stopped = false;
    let timer: number | undefined;
    const poll = async () => {
      try {
        const page = await apiGet<TrainingSeries>("/v1/dashboard/training/series", {
          run_id: runId,
          after_step: lastStep.current,
        });
        if (stopped) return;
        if (page.last_step !== null && page.last_step !== undefined) lastStep.current = page.last_step;
        if (Object.values(page.series).some((pts) => pts.length)) setSeries((s) => mergeSeries(s, page.series));
        setError(undefined);
      } catch (err) {
        if (!stopped) setError(err instanceof ApiError ? err : new ApiError(0, String(err)));
      }
      if (!stopped && live) timer = window.setTimeout(poll, POLL_MS);
    };
    poll();
    return () => {
      stopped = true;
      window.clearTimeout(timer);
    };
  }, [runId, live]);
  return { series, error };
}

function orderedKeys(keys: string[], prefix = ""): string[] {
  const preferred = PREFERRED.map((k) => prefix + k);
  const rest = keys.filter((k) => !preferred.includes(k) && k !== prefix + "policy_version").sort();
  return [...preferred.filter((k) => keys.includes(k)), ...rest];
}

/** The policies of a run that trains several: the "<policy>" of every "<policy>/policy_version"
 * (an evaluation's "val/policy_version" names no policy). */
function policiesOf(keys: string[]): string[] {
  return keys
    .flatMap((k) => {
      const m = /^([^/]+)\/policy_version$/.exec(k);
      return m && !EVAL_PREFIXES.includes(m[1] + "/") ? [m[1]] : [];
    })
    .sort();
}

function lastValue(series: Series, key: string): number | null | undefined {
  const pts = series[key];
  return pts?.length ? pts[pts.length - 1][1] : undefined;
}

function Charts({ keys, series, offset = 0 }: { keys: string[]; series: Series; offset?: number }) {
  return (
    <SimpleGrid cols={{ base: 1, md: 2, xl: 3 }}>
      {keys.map((key, i) => (
        <LineChart key={key} title={key} points={series[key]} color={COLORS[(i + offset) % COLORS.length]} />
      ))}
    </SimpleGrid>
  );
}

function EvalTable({ series }: { series: Series }) {
  const evalKeys = Object.keys(series).filter((k) => EVAL_PREFIXES.some((p) => k.startsWith(p)) && series[k].length);
  const policies = policiesOf(Object.keys(series));
  const versionKeys = policies.length ? policies.map((p) => `${p}/policy_version`) : ["policy_version"];
  const versionAt = (step: number) => {
    const found = versionKeys.flatMap((key, i) => {
      const v = (series[key] ?? []).find((p) => p[0] === step)?.[1];
      return v === undefined || v === null ? [] : [policies.length ? `${policies[i]} v${v}` : `v${v}`];
    });
    return found.length ? found.join(", ") : "—";
  };
  const steps = [...new Set(evalKeys.flatMap((k) => series[k].map((p) => p[0])))].sort((a, b) => a - b);
  if (!evalKeys.length) return <Text c="dimmed">No evaluation results yet (metrics named val/..., test/...).</Text>;
  const valueAt = (key: string, step: number) => series[key].find((p) => p[0] === step)?.[1];
  return (
    <Table verticalSpacing={4} data-testid="eval-table" striped>
      <Table.Thead>
        <Table.Tr>
          <Table.Th>Step</Table.Th>
          <Table.Th>Policy version</Table.Th>
          {evalKeys.map((k) => (
            <Table.Th key={k}>{k}</Table.Th>
          ))}
        </Table.Tr>
      </Table.Thead>
      <Table.Tbody>
        {steps.map((step) => (
          <Table.Tr key={step} data-testid="eval-row">
            <Table.Td>{step}</Table.Td>
            <Table.Td>{versionAt(step)}</Table.Td>
            {evalKeys.map((k) => (
              <Table.Td key={k}>{fmtNumber(valueAt(k, step))}</Table.Td>
            ))}
          </Table.Tr>
        ))}
      </Table.Tbody>
    </Table>
  );
}

export default function TrainingPage() {
  const runs = useApi<{ runs?: TrainingRun[]; items?: TrainingRun[] }>("/v1/dashboard/training/runs", undefined, 5000);
  const [runId, setRunId] = useState<string | null>(null);
  const [live, setLive] = useState(true);
  const items = useMemo(() => runs.data?.runs ?? runs.data?.items ?? [], [runs.data]);
  const newest = useMemo(
    () => [...items].sort((a, b) => (b.last_time ?? 0) - (a.last_time ?? 0))[0]?.run_id ?? null,
    [items],
  );
  const chosen = runId ?? newest;
  const { series, error } = useSeries(chosen, live);
  const run = items.find((r) => r.run_id === chosen);
  const logged = Object.keys(series).filter((k) => series[k].length);
  const policies = policiesOf(logged);
  const ofPolicy = (p: string) => charted.filter((k) => k.startsWith(p + "/") && !k.startsWith(p + "/rows/dropped/"));
  // rows/dropped/<reason> are in the rows table, not charted one by one
  const charted = logged.filter((k) => !k.startsWith("rows/dropped/"));
  const shared = orderedKeys(charted.filter((k) => !policies.some((p) => k.startsWith(p + "/"))));

  return (
    <Stack gap="sm">
      <Group justify="space-between">
        <Title order={3}>Training</Title>
        <Group>
          <Select
            placeholder={items.length ? "Run" : "No runs yet"}
            data={items.map((r) => r.run_id)}
            value={chosen}
            onChange={setRunId}
            w={260}
            allowDeselect={false}
            data-testid="run-select"
          />
          <Switch label="Live" checked={live} onChange={(e) => setLive(e.currentTarget.checked)} />
        </Group>
      </Group>
      <ApiErrorAlert error={runs.error ?? error} />
      {run && (
        <Group gap="xs">
          <Badge variant="light">steps {run.first_step ?? "—"} – {run.last_step ?? "—"}</Badge>
          <Badge variant="light">{run.n_records} records</Badge>
          <Badge variant="light">last {fmtTime(run.last_time)}</Badge>
        </Group>
      )}
      {runs.data && !items.length && (
        <Text c="dimmed">
          No metrics recorded yet. Training algorithms write them to the store as they go (see docs/metrics.md).
        </Text>
      )}
      {chosen && logged.includes("rows/in") && (
        <>
          <Title order={4}>Rows per step</Title>
          <Suspense fallback={null}>
            <RowsTable runId={chosen} live={live} />
          </Suspense>
        </>
      )}
      <Charts keys={shared} series={series} />
      {policies.map((p, i) => (
        <Stack gap="xs" key={p} data-testid="policy-section" data-policy={p}>
          <Group gap="xs">
            <Title order={4}>Policy {p}</Title>
            <Badge variant="light" data-testid="policy-version">
              v{fmtNumber(lastValue(series, `${p}/policy_version`))}
            </Badge>
          </Group>
          {chosen && logged.includes(`${p}/rows/in`) && (
            <Suspense fallback={null}>
              <RowsTable runId={chosen} live={live} policy={p} />
            </Suspense>
          )}
          <Charts keys={orderedKeys(ofPolicy(p), p + "/")} series={series} offset={i + 1} />
        </Stack>
      ))}
      {chosen && (
        <>
          <Title order={4}>Evaluation per version</Title>
          <EvalTable series={series} />
        </>
      )}
    </Stack>
  );
}
