// Resources: every version over time (newest first), with APO's candidate info; the
// chosen version's prompt templates and their diff against another version.
import { Badge, Button, Code, Grid, Group, Paper, Select, Stack, Table, Text, Title } from "@mantine/core";
import { useState } from "react";
import { useSearchParams } from "react-router";

import { ApiErrorAlert } from "../components/ApiErrorAlert";
import { DiffView } from "../components/DiffView";
import { Loading } from "../components/Loading";
import { fmtNumber, fmtTime } from "../format";
import type { Page, ResourceDiff, ResourceVersion } from "../types";
import { useApi } from "../useApi";

interface ApoInfo {
  candidate_id?: string;
  parent_id?: string | null;
  round?: number;
  critique?: string;
  score?: number;
  mean_val?: number;
  best?: boolean;
  [key: string]: unknown;
}

function apoOf(v: ResourceVersion): ApoInfo | null {
  const apo = v.metadata?.apo;
  return apo && typeof apo === "object" ? (apo as ApoInfo) : null;
}

function VersionDetail({ version, versions }: { version: ResourceVersion; versions: ResourceVersion[] }) {
  const older = versions.filter((v) => v.version < version.version);
  const apo = apoOf(version);
  // an APO candidate is diffed against the version of its parent candidate (what the
  // critique changed), when that is among the versions listed; else the previous version
  const parent = apo?.parent_id
    ? older.filter((v) => apoOf(v)?.candidate_id === apo.parent_id).sort((a, b) => a.version - b.version)[0]
    : undefined;
  const [against, setAgainst] = useState<string | null>(parent ? String(parent.version) : null);
  const diff = useApi<ResourceDiff>(`/v1/dashboard/resources/${version.version}/diff`, {
    against: against ?? undefined,
  });
  const names = Object.keys(version.prompt_templates ?? {});
  return (
    <Stack gap="sm" data-testid="version-detail">
      <Group gap="xs">
        <Title order={4}>Version {version.version}</Title>
        <Text size="sm" c="dimmed">
          {fmtTime(version.created_at)}
        </Text>
      </Group>
      {apo && (
        <Paper withBorder p="sm" data-testid="apo-info">
          <Group gap="xs" mb={4}>
            <Badge color="grape">APO</Badge>
            {apo.round !== undefined && <Badge variant="light">round {apo.round}</Badge>}
            {apo.candidate_id && <Badge variant="light">candidate {apo.candidate_id}</Badge>}
            {apo.parent_id && (
              <Badge variant="light">
                parent {apo.parent_id}
                {parent ? ` (v${parent.version})` : ""}
              </Badge>
            )}
            {typeof apo.score === "number" && <Badge variant="light">score {fmtNumber(apo.score)}</Badge>}
            {typeof apo.mean_val === "number" && (
              <Badge variant="light">mean validation reward {fmtNumber(apo.mean_val)}</Badge>
            )}
            {apo.best === true && <Badge color="green">best</Badge>}
          </Group>
          {apo.critique && (
            <>
              <Text size="xs" c="dimmed">
                Critique that led to this candidate
              </Text>
              <pre className="pre">{apo.critique}</pre>
            </>
          )}
        </Paper>
      )}
      <Group gap="xs" align="flex-end">
        <Select
          label="Diff against"
          placeholder={older.length ? `previous (v${older[0].version})` : "nothing older"}
          data={versions.filter((v) => v.version !== version.version).map((v) => ({ value: String(v.version), label: `v${v.version}` }))}
          value={against}
          onChange={setAgainst}
          clearable
          w={200}
          data-testid="diff-against"
        />
      </Group>
      <ApiErrorAlert error={diff.error} />
      {diff.data &&
        Object.entries(diff.data.diffs)
          .sort(([, a], [, b]) => Number(b.changed !== false) - Number(a.changed !== false))
          .map(([name, d]) => (
          <Stack gap={4} key={name}>
            <Text fw={600} size="sm">
              {name}{" "}
              <Text span size="xs" c="dimmed">
                {diff.data!.against ? `v${diff.data!.against} → v${diff.data!.version}` : "first version"}
              </Text>
            </Text>
            {d.changed !== false && d.unified ? (
              <DiffView unified={d.unified} />
            ) : (
              <Text size="sm" c="dimmed">
                unchanged
              </Text>
            )}
          </Stack>
        ))}
      {diff.data && Object.keys(diff.data.diffs).length === 0 && <Text c="dimmed">No prompt template changed.</Text>}
      <Title order={5}>Prompt templates</Title>
      {names.length === 0 && <Text c="dimmed">This version has no prompt templates ({version.names.join(", ")}).</Text>}
      {names.map((name) => (
        <Stack gap={2} key={name}>
          <Text size="sm" fw={600}>
            {name}
          </Text>
          <Code block className="pre" data-testid="prompt-template">
            {version.prompt_templates[name]}
          </Code>
        </Stack>
      ))}
      {Object.keys(version.metadata ?? {}).length > 0 && (
        <>
          <Title order={5}>Metadata</Title>
          <Code block className="pre">
            {JSON.stringify(version.metadata, null, 2)}
          </Code>
        </>
      )}
    </Stack>
  );
}

export function ResourcesPage() {
  const [params, setParams] = useSearchParams();
  const [cursors, setCursors] = useState<(string | null)[]>([null]);
  const cursor = cursors[cursors.length - 1];
  const list = useApi<Page<ResourceVersion>>("/v1/dashboard/resources", { limit: 50, cursor }, 5000);
  const versions = list.data?.items ?? [];
  const wanted = params.get("version");
  const selected = versions.find((v) => String(v.version) === wanted) ?? versions[0];

  return (
    <Stack gap="sm">
      <Title order={3}>Resources</Title>
      <ApiErrorAlert error={list.error} />
      {!list.data && !list.error && <Loading />}
      {list.data && versions.length === 0 && <Text c="dimmed">No resources published yet.</Text>}
      {versions.length > 0 && (
        <Grid>
          <Grid.Col span={{ base: 12, lg: 5 }}>
            <Table highlightOnHover verticalSpacing={4} data-testid="versions-table">
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Version</Table.Th>
                  <Table.Th>Created</Table.Th>
                  <Table.Th>Resources</Table.Th>
                  <Table.Th>APO</Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {versions.map((v) => {
                  const apo = apoOf(v);
                  return (
                    <Table.Tr
                      key={v.version}
                      className="row-link"
                      data-testid="version-row"
                      data-version={v.version}
                      onClick={() => setParams({ version: String(v.version) }, { replace: true })}
                      bg={v.version === selected?.version ? "var(--mantine-color-indigo-0)" : undefined}
                    >
                      <Table.Td>v{v.version}</Table.Td>
                      <Table.Td>{fmtTime(v.created_at)}</Table.Td>
                      <Table.Td>
                        <Text size="xs">{v.names.join(", ")}</Text>
                      </Table.Td>
                      <Table.Td>
                        {apo ? (
                          <Text size="xs">
                            {apo.round !== undefined ? `r${apo.round} ` : ""}
                            {apo.candidate_id ?? ""}
                          </Text>
                        ) : (
                          "—"
                        )}
                      </Table.Td>
                    </Table.Tr>
                  );
                })}
              </Table.Tbody>
            </Table>
            <Group justify="flex-end" mt="xs" gap="xs">
              <Button size="xs" variant="default" disabled={cursors.length < 2} onClick={() => setCursors((c) => c.slice(0, -1))}>
                ← Newer
              </Button>
              <Button
                size="xs"
                variant="default"
                disabled={!list.data?.next_cursor}
                onClick={() => list.data?.next_cursor && setCursors((c) => [...c, list.data!.next_cursor])}
              >
                Older →
              </Button>
            </Group>
          </Grid.Col>
          <Grid.Col span={{ base: 12, lg: 7 }}>
            {selected && <VersionDetail key={selected.version} version={selected} versions={versions} />}
          </Grid.Col>
        </Grid>
      )}
    </Stack>
  );
}
