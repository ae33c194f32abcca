// A rollout attempt's samples as a tree of conversations: the attempt's first conversation
// at the root, each other conversation (a sub-agent, a title call) a branch of the rollout,
// and a sample whose history was rewritten (compaction, an edited turn) under the sample it
// diverged from, with the token where it did. Each sample says why it started and lists
// its calls, the trained ones marked (agent_match decides which agents' calls train).
import { Badge, Group, Paper, Stack, Text, TextInput, Title } from "@mantine/core";
import { useState } from "react";

import { ApiErrorAlert } from "./ApiErrorAlert";
import { Loading } from "./Loading";
import type { Lineage, LineageSample } from "../types";
import { useApi } from "../useApi";

const CAUSE_TEXT: Record<string, string> = {
  first: "first call of the attempt",
  new_conversation: "new conversation (a sub-agent, a title call): shares no long prefix with earlier calls",
  diverged: "diverged: history rewritten (compaction, an edited or dropped turn, stripped reasoning)",
};
const CAUSE_COLOR: Record<string, string> = { first: "gray", new_conversation: "blue", diverged: "orange" };

function SampleNode({ sample }: { sample: LineageSample }) {
  const why =
    sample.cause === "diverged"
      ? `${CAUSE_TEXT.diverged}; shares tokens 0–${(sample.diverged_at ?? 1) - 1} with sample ${sample.parent ?? "?"}, differs from token ${sample.diverged_at}`
      : CAUSE_TEXT[sample.cause];
  return (
    <Paper withBorder p="xs" data-testid="lineage-sample" data-cause={sample.cause} data-conversation={sample.conversation}>
      <Group gap="xs">
        <Text fw={600} size="sm">
          Sample {sample.index}
        </Text>
        <Badge color={CAUSE_COLOR[sample.cause]} variant="light" data-testid="lineage-cause">
          {sample.cause}
        </Badge>
        <Text size="xs" c="dimmed">
          conversation {sample.conversation} · {sample.agents.join(", ")} · {sample.tokens} tokens,{" "}
          {sample.tokens_trained} trained
        </Text>
      </Group>
      <Text size="xs" c="dimmed" data-testid="lineage-why">
        {why}
      </Text>
      <Group gap={4} mt={4}>
        {sample.calls.map((c) => (
          <Badge
            key={c.span_id}
            size="sm"
            variant={c.trained ? "filled" : "outline"}
            color={c.trained ? "green" : "gray"}
            title={`${c.agent_name ?? "(unnamed)"}: ${c.length} response tokens from token ${c.start}${c.finish_reason ? `, ${c.finish_reason}` : ""}`}
            data-testid="lineage-call"
            data-trained={c.trained}
          >
            {c.span_id} {c.trained ? "trained" : "context"}
          </Badge>
        ))}
      </Group>
    </Paper>
  );
}

function Conversation({ number, samples }: { number: number; samples: LineageSample[] }) {
  const roots = samples.filter((s) => s.parent === null || !samples.some((o) => o.index === s.parent));
  const agents = [...new Set(samples.flatMap((s) => s.agents))].join(", ");
  return (
    <li data-testid="lineage-conversation" data-conversation={number}>
      <Text size="sm" fw={600}>
        {number === 0 ? "Conversation 0 (the attempt's first)" : `Conversation ${number}: branch`} — {agents}
      </Text>
      <ul className="lineage-tree">
        {roots.map((r) => (
          <Tree key={r.index} sample={r} all={samples} />
        ))}
      </ul>
    </li>
  );
}

/** A sample and, below it, the samples that diverged from it. */
function Tree({ sample, all }: { sample: LineageSample; all: LineageSample[] }) {
  const below = all.filter((s) => s.parent === sample.index);
  return (
    <li>
      <SampleNode sample={sample} />
      {below.length > 0 && (
        <ul className="lineage-tree">
          {below.map((b) => (
            <Tree key={b.index} sample={b} all={all} />
          ))}
        </ul>
      )}
    </li>
  );
}

export default function LineageTree({ base, attemptId }: { base: string; attemptId: string | null }) {
  const [agentMatch, setAgentMatch] = useState("");
  const query = { attempt_id: attemptId ?? undefined, agent_match: agentMatch || undefined };
  const lineage = useApi<Lineage>(`${base}/lineage`, query);
  const data = lineage.data;
  if (lineage.error && !data) return <ApiErrorAlert error={lineage.error} />;
  if (!data) return <Loading />;
  const conversations = [...new Set(data.samples.map((s) => s.conversation))].sort((a, b) => a - b);
  const c = data.counts;
  return (
    <Stack gap="xs" data-testid="lineage">
      <Group gap="xs">
        {c && (
          <>
            <Badge variant="light">{c.calls} calls</Badge>
            <Badge variant="light">{c.conversations} conversations</Badge>
            <Badge variant="light" data-testid="lineage-samples">
              {c.samples} samples
            </Badge>
            {Object.entries(c.breaks)
              .filter(([cause, n]) => cause !== "first" && n > 0)
              .map(([cause, n]) => (
                <Badge key={cause} color={CAUSE_COLOR[cause]} variant="light" data-testid="lineage-break">
                  {n} {cause}
                </Badge>
              ))}
            <Badge variant="light">
              tokens {c.tokens_trained} trained · {c.tokens_context} context · {c.tokens_shared} computed once
            </Badge>
          </>
        )}
        <TextInput
          size="xs"
          placeholder="agent_match (regex): which agents train"
          value={agentMatch}
          onChange={(e) => setAgentMatch(e.currentTarget.value)}
          w={280}
          data-testid="lineage-agent-match"
        />
      </Group>
      <ApiErrorAlert error={lineage.error} />
      {data.error && (
        <Text c="red" size="sm" data-testid="lineage-error">
          {data.error}
        </Text>
      )}
      {!data.error && !data.samples.length && <Text c="dimmed">No model call with token ids in this attempt.</Text>}
      <Title order={5}>Conversations</Title>
      <ul className="lineage-tree">
        {conversations.map((n) => (
          <Conversation key={n} number={n} samples={data.samples.filter((s) => s.conversation === n)} />
        ))}
      </ul>
    </Stack>
  );
}
