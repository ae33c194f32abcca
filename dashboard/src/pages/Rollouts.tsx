// Rollouts: filter by status / mode, search, sort, page through, refresh live.
import {
  Badge,
  Button,
  Chip,
  Group,
  Select,
  Stack,
  Switch,
  Table,
  Text,
  TextInput,
  Title,
  UnstyledButton,
} from "@mantine/core";
import { useDebouncedValue } from "@mantine/hooks";
import { useEffect, useMemo, useState } from "react";
import { useNavigate, useSearchParams } from "react-router";

import { idPath } from "../api";
import { ApiErrorAlert } from "../components/ApiErrorAlert";
import { RolloutTableRow } from "../components/RolloutTableRow";
import { ROLLOUT_STATUSES, type RolloutPage } from "../types";
import { useApi } from "../useApi";

const SORTABLE: { key: string; label: string }[] = [
  { key: "created_at", label: "Created" },
  { key: "start_time", label: "Started" },
  { key: "end_time", label: "Ended" },
  { key: "reward", label: "Reward" },
  { key: "duration", label: "Duration" },
  { key: "attempt_count", label: "Attempts" },
];

// A closed dropdown is not kept in the page: nothing to position (a forced layout) on the first render.
const LIGHT_DROPDOWN = { keepMounted: false };

export function RolloutsPage() {
  const navigate = useNavigate();
  const [params, setParams] = useSearchParams();
  const statuses = params.getAll("status");
  const mode = params.get("mode") ?? "";
  const sortBy = params.get("sort_by") ?? "created_at";
  const descending = params.get("descending") !== "false";
  const limit = Number(params.get("limit") ?? 50);
  const [searchInput, setSearchInput] = useState(params.get("search") ?? "");
  const [search] = useDebouncedValue(searchInput, 300);
  const [live, setLive] = useState(true);
  // The cursor of each page visited, for the filters they were visited with: other filters
  // start again at page 1 (derived while rendering, so no effect re-renders the page).
  const [paging, setPaging] = useState<{ filterKey: string; cursors: (string | null)[] }>({ filterKey: "", cursors: [null] });

  const update = (changes: Record<string, string | string[] | null>) => {
    const next = new URLSearchParams(params);
    for (const [k, v] of Object.entries(changes)) {
      next.delete(k);
      if (Array.isArray(v)) v.forEach((x) => next.append(k, x));
      else if (v !== null && v !== "") next.set(k, v);
    }
    setParams(next, { replace: true });
  };

  useEffect(() => {
    if ((params.get("search") ?? "") !== search) update({ search });
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [search]);

  const filterKey = `${statuses.join(",")}|${mode}|${search}|${sortBy}|${descending}|${limit}`;
  const cursors = paging.filterKey === filterKey ? paging.cursors : [null];
  const setCursors = (next: (c: (string | null)[]) => (string | null)[]) =>
    setPaging((p) => ({ filterKey, cursors: next(p.filterKey === filterKey ? p.cursors : [null]) }));
  const cursor = cursors[cursors.length - 1];

  const query = useMemo(
    () => ({ status: statuses, mode, search, sort_by: sortBy, descending, limit, cursor }),
    // eslint-disable-next-line react-hooks/exhaustive-deps
    [filterKey, cursor],
  );
  const { data, error, loading } = useApi<RolloutPage>("/v1/dashboard/rollouts", query, live ? 3000 : undefined);

  const sortHeader = (key: string, label: string) => (
    <UnstyledButton
      onClick={() => update({ sort_by: key, descending: sortBy === key ? String(!descending) : "true" })}
      data-testid={`sort-${key}`}
    >
      <Text fw={700} size="sm">
        {label} {sortBy === key ? (descending ? "▼" : "▲") : ""}
      </Text>
    </UnstyledButton>
  );

  const openRollout = (rolloutId: string) => navigate(`/rollouts/${idPath(rolloutId)}`);
  const total = data?.total;
  const pageIndex = cursors.length - 1;

  return (
    <Stack gap="sm">
      <Group justify="space-between">
        <Title order={3}>Rollouts</Title>
        <Group gap="xs">
          {total !== undefined && total !== null && (
            <Badge variant="light" data-testid="rollout-total">
              {total.toLocaleString()}
              {data?.total_capped ? "+" : ""} rollouts
            </Badge>
          )}
          <Switch
            label="Live"
            checked={live}
            onChange={(e) => setLive(e.currentTarget.checked)}
            data-testid="live-toggle"
          />
        </Group>
      </Group>
      <Group gap="xs" align="flex-end">
        <Chip.Group multiple value={statuses} onChange={(v) => update({ status: v })}>
          <Group gap={4}>
            {ROLLOUT_STATUSES.map((s) => (
              <Chip key={s} value={s} size="xs" wrapperProps={{ "data-testid": `filter-status-${s}` }}>
                {s}
              </Chip>
            ))}
          </Group>
        </Chip.Group>
      </Group>
      <Group gap="xs" align="flex-end">
        <TextInput
          placeholder="Search rollout id or input"
          value={searchInput}
          onChange={(e) => setSearchInput(e.currentTarget.value)}
          w={280}
          data-testid="rollout-search"
        />
        <Select
          placeholder="Any mode"
          data={["train", "val", "test"]}
          value={mode || null}
          onChange={(v) => update({ mode: v })}
          clearable
          w={130}
          comboboxProps={LIGHT_DROPDOWN}
          data-testid="filter-mode"
        />
        <Select
          data={[10, 25, 50, 100, 200].map((n) => ({ value: String(n), label: `${n} per page` }))}
          value={String(limit)}
          onChange={(v) => update({ limit: v })}
          w={140}
          allowDeselect={false}
          comboboxProps={LIGHT_DROPDOWN}
        />
      </Group>
      <ApiErrorAlert error={error} />
      <Table.ScrollContainer minWidth={900}>
        <Table striped highlightOnHover verticalSpacing={4} data-testid="rollouts-table">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Rollout</Table.Th>
              <Table.Th>Status</Table.Th>
              <Table.Th>Mode</Table.Th>
              <Table.Th>{sortHeader("reward", "Reward")}</Table.Th>
              <Table.Th>{sortHeader("duration", "Duration")}</Table.Th>
              <Table.Th>{sortHeader("attempt_count", "Attempts")}</Table.Th>
              <Table.Th>Resources</Table.Th>
              <Table.Th>Worker</Table.Th>
              <Table.Th>{sortHeader("created_at", "Created")}</Table.Th>
              <Table.Th>Input</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {data?.items.map((r) => (
              <RolloutTableRow key={r.rollout_id} rollout={r} onOpen={openRollout} />
            ))}
          </Table.Tbody>
        </Table>
      </Table.ScrollContainer>
      {data && data.items.length === 0 && (
        <Text c="dimmed" data-testid="rollouts-empty">
          No rollouts match.
        </Text>
      )}
      {!data && loading && <Text c="dimmed">Loading…</Text>}
      <Group justify="space-between">
        <Text size="sm" c="dimmed">
          Page {pageIndex + 1}
          {SORTABLE.find((s) => s.key === sortBy) ? ` · sorted by ${SORTABLE.find((s) => s.key === sortBy)!.label.toLowerCase()}` : ""}
        </Text>
        <Group gap="xs">
          <Button
            variant="default"
            size="xs"
            disabled={pageIndex === 0}
            onClick={() => setCursors((c) => c.slice(0, -1))}
            data-testid="page-prev"
          >
            ← Previous
          </Button>
          <Button
            variant="default"
            size="xs"
            disabled={!data?.next_cursor}
            onClick={() => data?.next_cursor && setCursors((c) => [...c, data.next_cursor])}
            data-testid="page-next"
          >
            Next →
          </Button>
        </Group>
      </Group>
    </Stack>
  );
}
