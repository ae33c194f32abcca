// A trace waterfall: one row per span, nested by parent (depth), bars on a shared time
// axis from the attempt's start; rewards are diamonds on the axis where they happened.
import { Badge, Code, Group, Paper, Stack, Text } from "@mantine/core";
import { useState } from "react";

import { fmtDuration, fmtNumber } from "../format";
import type { SpanKind, Waterfall as WaterfallData, WaterfallSpan } from "../types";

const KIND_COLORS: Record<SpanKind, string> = {
  llm: "var(--mantine-color-indigo-5)",
  reward: "var(--mantine-color-yellow-6)",
  tool: "var(--mantine-color-teal-5)",
  agent: "var(--mantine-color-gray-5)",
  other: "var(--mantine-color-blue-3)",
};

/** What a row is called: an operation's own name ("plan") rather than "agentbolt.operation". */
function label(span: WaterfallSpan): string {
  const attrs = span.attributes_preview;
  if (attrs && typeof attrs === "object") {
    const op = attrs["agentbolt.operation.name"];
    if (typeof op === "string" && op) return op;
  }
  return span.name;
}

const PLACED_HINT =
  "Placed by time: this span recorded no parent (the gateway cannot know the agent's span), " +
  "so it is shown under the innermost span that was open around it.";

function ticks(total: number): number[] {
  if (total <= 0) return [0];
  const raw = total / 6;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? raw;
  const out: number[] = [];
  for (let t = 0; t <= total + 1e-9; t += step) out.push(t);
  return out;
}

export function Waterfall({ data }: { data: WaterfallData }) {
  const [selected, setSelected] = useState<string | null>(null);
  const t0 = data.t0 ?? Math.min(...data.spans.map((s) => s.start));
  const ends = [
    ...data.spans.map((s) => s.end ?? s.start),
    ...data.rewards.map((r) => r.time),
    ...data.spans.map((s) => s.start),
  ];
  const total = Math.max(1e-3, Math.max(...ends, t0) - t0);
  const pct = (t: number) => `${(((t - t0) / total) * 100).toFixed(3)}%`;
  const chosen: WaterfallSpan | undefined = data.spans.find((s) => s.span_id === selected);

  if (data.spans.length === 0) {
    return <Text c="dimmed">No spans recorded for this attempt.</Text>;
  }
  return (
    <Stack gap={4} data-testid="waterfall">
      <Group gap="xs">
        {(Object.keys(KIND_COLORS) as SpanKind[]).map((k) => (
          <Group gap={4} key={k}>
            <span style={{ width: 10, height: 10, background: KIND_COLORS[k], display: "inline-block", borderRadius: 2 }} />
            <Text size="xs">{k}</Text>
          </Group>
        ))}
        <Group gap={4}>
          <span className="wf-reward" style={{ position: "static", transform: "rotate(45deg)", display: "inline-block", width: 8, height: 8 }} />
          <Text size="xs">reward value</Text>
        </Group>
        {data.spans.some((s) => s.placed === "by_time") && (
          <Group gap={4} title={PLACED_HINT}>
            <span className="wf-placed">by time</span>
            <Text size="xs">no recorded parent: nested in the span open around it</Text>
          </Group>
        )}
        {data.truncated && (
          <Badge color="orange" variant="light">
            truncated: more spans than shown
          </Badge>
        )}
      </Group>
      <div className="wf-row" style={{ cursor: "default" }}>
        <Text size="xs" c="dimmed">
          span
        </Text>
        <div className="wf-axis" data-testid="waterfall-axis">
          {ticks(total).map((t) => (
            <span key={t} className="wf-tick" style={{ left: `${(t / total) * 100}%` }}>
              {fmtDuration(t)}
            </span>
          ))}
          {data.rewards.map((r, i) => (
            <span
              key={i}
              className="wf-reward"
              style={{ left: pct(r.time) }}
              title={`${r.name ?? "reward"} = ${fmtNumber(r.value)} at +${fmtDuration(r.time - t0)}`}
              data-testid="waterfall-reward"
            />
          ))}
        </div>
      </div>
      {data.spans.map((s) => {
        const end = s.end ?? s.start;
        return (
          <div
            key={s.span_id}
            className="wf-row"
            data-testid="waterfall-row"
            data-kind={s.kind}
            data-placed={s.placed ?? undefined}
            onClick={() => setSelected(s.span_id === selected ? null : s.span_id)}
            style={s.span_id === selected ? { background: "var(--mantine-color-indigo-0)" } : undefined}
          >
            <div className="wf-name" style={{ paddingLeft: s.depth * 14 }} title={`${s.name}${s.summary ? ` — ${s.summary}` : ""}`}>
              {s.status === "error" ? "⚠ " : ""}
              {label(s)}
              {s.placed === "by_time" && (
                <span className="wf-placed" title={PLACED_HINT} data-testid="placed-by-time">
                  by time
                </span>
              )}
              {s.summary && s.summary !== s.name && s.summary !== label(s) && (
                <Text span size="xs" c="dimmed">
                  {" "}
                  {s.summary}
                </Text>
              )}
            </div>
            <div className="wf-track">
              <div
                className="wf-bar"
                title={`${s.name}: ${fmtDuration(s.duration)}${s.summary ? ` — ${s.summary}` : ""}`}
                style={{
                  left: pct(s.start),
                  width: `${Math.max(0.2, ((end - s.start) / total) * 100)}%`,
                  background: s.status === "error" ? "var(--mantine-color-red-6)" : KIND_COLORS[s.kind] ?? KIND_COLORS.other,
                }}
              />
            </div>
          </div>
        );
      })}
      {chosen && (
        <Paper withBorder p="sm" data-testid="span-details">
          <Group gap="xs" mb={4}>
            <Text fw={600}>{label(chosen)}</Text>
            {label(chosen) !== chosen.name && (
              <Text size="xs" c="dimmed">
                {chosen.name}
              </Text>
            )}
            <Badge variant="light">{chosen.kind}</Badge>
            {chosen.placed === "by_time" && (
              <Badge variant="light" color="violet" title={PLACED_HINT}>
                placed by time
              </Badge>
            )}
            <Badge variant="light" color={chosen.status === "error" ? "red" : "gray"}>
              {chosen.status}
            </Badge>
            <Text size="sm">
              +{fmtDuration(chosen.start - t0)} · {fmtDuration(chosen.duration)}
            </Text>
          </Group>
          {chosen.summary && <Text size="sm">{chosen.summary}</Text>}
          {chosen.attributes_preview && (
            <Code block className="pre">
              {typeof chosen.attributes_preview === "string"
                ? chosen.attributes_preview
                : JSON.stringify(chosen.attributes_preview, null, 2)}
            </Code>
          )}
        </Paper>
      )}
    </Stack>
  );
}
