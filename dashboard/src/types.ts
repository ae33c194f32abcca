// Shapes of the dashboard read API (agentbolt/server/routes/dashboard.py).

export type RolloutStatus = "queuing" | "preparing" | "running" | "requeuing" | "succeeded" | "failed" | "cancelled";
export const ROLLOUT_STATUSES: RolloutStatus[] = [
  "queuing",
  "preparing",
  "running",
  "requeuing",
  "succeeded",
  "failed",
  "cancelled",
];
export type RolloutMode = "train" | "val" | "test";

export interface Page<T> {
  items: T[];
  next_cursor: string | null;
}

export interface RolloutRow {
  rollout_id: string;
  status: RolloutStatus;
  mode: RolloutMode;
  reward: number | null;
  created_at: number;
  start_time: number | null;
  end_time: number | null;
  duration: number | null;
  attempt_count: number;
  resources_version: number | null;
  worker_id: string | null;
  input_preview: string | null;
}

export interface RolloutPage extends Page<RolloutRow> {
  total?: number | null;
  total_capped?: boolean;
}

export interface ErrorInfo {
  type: string;
  message: string;
  traceback?: string | null;
  retryable?: boolean | null;
}

export interface Rollout {
  rollout_id: string;
  input: unknown;
  mode: RolloutMode;
  status: RolloutStatus;
  resources_version: number | null;
  config: Record<string, unknown>;
  metadata: Record<string, unknown>;
  created_at: number;
  updated_at: number;
  start_time: number | null;
  end_time: number | null;
  attempt_count: number;
  latest_attempt_id: string | null;
  reward: number | null;
}

export interface Attempt {
  attempt_id: string;
  rollout_id: string;
  sequence_id: number;
  worker_id: string | null;
  status: string;
  start_time: number;
  end_time: number | null;
  last_heartbeat_time: number;
  resources_version: number | null;
  error: ErrorInfo | null;
  metadata: Record<string, unknown>;
  reward: number | null;
  duration?: number | null;
}

export interface RolloutDetail {
  rollout: Rollout;
  attempts: Attempt[];
  resources_version: number | null;
}

export type SpanKind = "llm" | "reward" | "tool" | "agent" | "other";

export interface WaterfallSpan {
  span_id: string;
  parent_id: string | null;
  name: string;
  kind: SpanKind;
  start: number;
  end: number | null;
  duration: number | null;
  status: string;
  depth: number;
  /** "by_time": no recorded parent (a gateway call); nested under the span enclosing it in time. */
  placed?: "by_time" | null;
  summary?: string | null;
  attributes_preview?: Record<string, unknown> | string | null;
}

export interface Waterfall {
  attempt_id: string | null;
  t0: number | null;
  spans: WaterfallSpan[];
  rewards: { time: number; value: number; name?: string | null }[];
  truncated: boolean;
}

export interface ToolCall {
  name: string | null;
  arguments: string;
}

export interface ModelCall {
  span_id: string;
  operation?: string | null;
  agent_name: string | null;
  model: string | null;
  start: number | null;
  end: number | null;
  duration: number | null;
  prompt_messages: { role: string; content: unknown; tool_calls?: ToolCall[] }[] | null;
  prompt_text: string | null;
  response_text: string | null;
  response_tool_calls?: ToolCall[];
  finish_reason: string | null;
  prompt_tokens: number | null;
  completion_tokens: number | null;
  has_token_ids: boolean;
  logprobs: { mean: number; min: number; n: number } | null;
  policy_version: number | string | null;
  failed: boolean;
  error: string | null;
}

export interface TrainingRun {
  run_id: string;
  first_step: number | null;
  last_step: number | null;
  n_records: number;
  last_time: number | null;
  keys: string[];
}

export interface TrainingSeries {
  run_id: string;
  series: Record<string, [number, number | null][]>;
  more?: boolean;
  last_step: number | null;
}

export interface ResourceVersion {
  version: number;
  created_at: number;
  names: string[];
  kinds?: Record<string, string>;
  metadata: Record<string, unknown>;
  prompt_templates: Record<string, string>;
}

export interface ResourceDiff {
  version: number;
  against: number | null;
  diffs: Record<string, { before: string | null; after: string | null; changed?: boolean; unified: string }>;
}

export interface WorkerRow {
  worker_id: string;
  status: string;
  last_heartbeat_time: number | null;
  heartbeat_age: number | null;
  alive?: boolean;
  current_rollout_id: string | null;
  current_attempt_id: string | null;
  kind: string | null;
  metadata: Record<string, unknown>;
}

export interface Summary {
  health: string;
  problems?: string[];
  store?: string;
  total_rollouts?: number;
  workers_total?: number;
  rollouts_by_status: Record<string, number>;
  queue_depth: number;
  workers_alive: number;
  latest_resources_version: number | null;
  server_time: number;
  version?: string;
}

/** GET /v1/dashboard/rollouts/{id}/lineage: the attempt's samples by lineage. */
export interface LineageCall {
  span_id: string;
  agent_name: string | null;
  start: number;
  length: number;
  trained: boolean;
  finish_reason: string | null;
}

export type BreakCause = "first" | "new_conversation" | "diverged";

export interface LineageSample {
  index: number;
  conversation: number;
  cause: BreakCause;
  diverged_at: number | null;
  diverged_from: string | null;
  parent: number | null;
  agents: string[];
  tokens: number;
  tokens_trained: number;
  tokens_context: number;
  calls: LineageCall[];
}

export interface Lineage {
  attempt_id: string | null;
  agent_match: string | null;
  samples: LineageSample[];
  counts: {
    calls: number;
    conversations: number;
    samples: number;
    breaks: Record<string, number>;
    tokens_trained: number;
    tokens_context: number;
    tokens_shared: number;
  } | null;
  skipped_calls: number;
  error: string | null;
}

/** GET /v1/dashboard/training/rows: per step, the rows in, trained and dropped by reason. */
export interface RowStep {
  step: number;
  rows_in: number;
  rows_trained: number | null;
  dropped: Record<string, number>;
  why_nothing_trained: string | null;
}
