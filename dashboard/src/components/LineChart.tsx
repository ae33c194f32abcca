// A small uPlot line chart of one metric against the training step.
import { Paper, Text } from "@mantine/core";
import { useEffect, useRef } from "react";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";

import { fmtNumber } from "../format";

export interface LineChartProps {
  title: string;
  points: [number, number | null][];
  color?: string;
  height?: number;
}

function toData(points: [number, number | null][]): uPlot.AlignedData {
  return [points.map((p) => p[0]), points.map((p) => p[1])];
}

/** The y range: uPlot's usual padding, but a series flat to float precision (a ratio of
 * 1 ± 1e-7) gets a visible band around its value instead of a degenerate axis. */
function yRange(_u: uPlot, min: number | null, max: number | null): uPlot.Range.MinMax {
  if (min == null || max == null || !Number.isFinite(min) || !Number.isFinite(max)) return [0, 1];
  const mag = Math.max(Math.abs(min), Math.abs(max));
  if (max - min <= mag * 1e-6) {
    const pad = mag > 0 ? mag * 0.1 : 1;
    return [min - pad, max + pad];
  }
  return uPlot.rangeNum(min, max, 0.1, true);
}

/** Steps are integers: ticks only at whole steps. */
const STEP_INCRS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000];

/** Room for the longest tick label of the y axis (e.g. "-2.00e-8"), so none is cut. */
function yAxisWidth(_u: uPlot, values: string[] | null): number {
  const longest = Math.max(0, ...(values ?? []).map((v) => v.length));
  return Math.max(40, longest * 7 + 18);
}

export function LineChart({ title, points, color = "#4c6ef5", height = 180 }: LineChartProps) {
  const holder = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);

  useEffect(() => {
    const el = holder.current;
    if (!el) return;
    const opts: uPlot.Options = {
      width: Math.max(200, el.clientWidth),
      height,
      legend: { show: false },
      cursor: { drag: { x: true, y: false } },
      scales: { x: { time: false }, y: { range: yRange } },
      axes: [
        { label: "step", labelSize: 14, size: 30, incrs: STEP_INCRS },
        { size: yAxisWidth, values: (_u, splits) => splits.map((v) => fmtNumber(v, 3)) },
      ],
      series: [
        {},
        { label: title, stroke: color, width: 2, points: { show: true, size: 4 }, value: (_u, v) => fmtNumber(v) },
      ],
    };
    plot.current = new uPlot(opts, toData([]), el);
    const resize = new ResizeObserver(() => plot.current?.setSize({ width: Math.max(200, el.clientWidth), height }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      plot.current?.destroy();
      plot.current = null;
    };
  }, [title, color, height]);

  useEffect(() => {
    plot.current?.setData(toData(points));
  }, [points, title, color, height]);

  const last = points[points.length - 1];
  return (
    <Paper withBorder p="xs" data-testid="chart" data-key={title} data-points={points.length}>
      <Text size="sm" fw={600}>
        {title}{" "}
        <Text span size="xs" c="dimmed">
          {last ? `step ${last[0]}: ${fmtNumber(last[1])}` : "no points yet"}
        </Text>
      </Text>
      <div ref={holder} />
    </Paper>
  );
}
