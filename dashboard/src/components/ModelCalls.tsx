// The model calls of one attempt: prompt and response text, tokens, logprobs, policy version.
import { Accordion, Badge, Group, Paper, Stack, Text } from "@mantine/core";

import { fmtDuration, fmtNumber } from "../format";
import type { ModelCall, ToolCall } from "../types";

function ToolCalls({ calls }: { calls: ToolCall[] | undefined }) {
  if (!calls?.length) return null;
  return (
    <>
      {calls.map((c, i) => (
        <pre key={i} className="pre">
          → {c.name ?? "tool"}({c.arguments})
        </pre>
      ))}
    </>
  );
}

function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((part) => (typeof part === "object" && part && "text" in part ? String((part as { text: unknown }).text) : JSON.stringify(part)))
      .join("\n");
  }
  return content === null || content === undefined ? "" : JSON.stringify(content, null, 2);
}

function CallBody({ call }: { call: ModelCall }) {
  return (
    <Stack gap="xs">
      <Text size="xs" fw={700} c="dimmed">
        PROMPT
      </Text>
      {call.prompt_messages ? (
        call.prompt_messages.map((m, i) => (
          <Paper key={i} withBorder p={6} data-testid="prompt-message">
            <Badge size="xs" variant="light" mb={4}>
              {m.role}
            </Badge>
            <pre className="pre">{contentText(m.content)}</pre>
            <ToolCalls calls={m.tool_calls} />
          </Paper>
        ))
      ) : (
        <Paper withBorder p={6}>
          <pre className="pre">{call.prompt_text ?? "(prompt not recorded)"}</pre>
        </Paper>
      )}
      <Text size="xs" fw={700} c="dimmed">
        RESPONSE {call.finish_reason ? `(finish: ${call.finish_reason})` : ""}
      </Text>
      <Paper withBorder p={6} bg="var(--mantine-color-indigo-0)">
        <pre className="pre" data-testid="response-text">
          {call.failed
            ? `failed: ${call.error ?? "unknown error"}`
            : (call.response_text ?? (call.response_tool_calls?.length ? "" : "(no text)"))}
        </pre>
        <ToolCalls calls={call.response_tool_calls} />
      </Paper>
    </Stack>
  );
}

export function ModelCalls({ calls }: { calls: ModelCall[] }) {
  if (calls.length === 0) return <Text c="dimmed">No model calls in this attempt.</Text>;
  return (
    <Accordion multiple variant="separated" defaultValue={calls.length <= 3 ? calls.map((c) => c.span_id) : []}>
      {calls.map((call, i) => (
        <Accordion.Item key={call.span_id} value={call.span_id} data-testid="model-call">
          <Accordion.Control>
            <Group gap="xs" wrap="wrap">
              <Text fw={600} size="sm">
                #{i + 1} {call.model ?? "model"}
              </Text>
              {call.agent_name && (
                <Badge variant="outline" size="sm">
                  {call.agent_name}
                </Badge>
              )}
              {call.failed && (
                <Badge color="red" size="sm">
                  failed
                </Badge>
              )}
              <Text size="xs" c="dimmed">
                {fmtDuration(call.duration)} · {call.prompt_tokens ?? "?"} → {call.completion_tokens ?? "?"} tokens
              </Text>
              {call.logprobs && (
                <Text size="xs" c="dimmed" data-testid="call-logprobs">
                  logprob mean {fmtNumber(call.logprobs.mean)} · min {fmtNumber(call.logprobs.min)} (n={call.logprobs.n})
                </Text>
              )}
              {call.policy_version !== null && call.policy_version !== undefined && (
                <Badge size="sm" variant="light" color="grape">
                  policy v{call.policy_version}
                </Badge>
              )}
              {call.has_token_ids && (
                <Badge size="sm" variant="light" color="teal">
                  token ids
                </Badge>
              )}
            </Group>
          </Accordion.Control>
          <Accordion.Panel>
            <CallBody call={call} />
          </Accordion.Panel>
        </Accordion.Item>
      ))}
    </Accordion>
  );
}
