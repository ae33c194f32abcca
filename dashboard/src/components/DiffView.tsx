// A unified diff, lines coloured: + added, - removed, @@ hunk headers.
import { Paper } from "@mantine/core";

export function DiffView({ unified }: { unified: string }) {
  const lines = unified.split("\n").filter((l, i, all) => !(i === all.length - 1 && l === ""));
  return (
    <Paper withBorder py={4} data-testid="diff">
      {lines.map((line, i) => {
        let cls = "diff-line";
        if (line.startsWith("+++") || line.startsWith("---")) cls += " diff-hunk";
        else if (line.startsWith("+")) cls += " diff-add";
        else if (line.startsWith("-")) cls += " diff-del";
        else if (line.startsWith("@@")) cls += " diff-hunk";
        return (
          <div key={i} className={cls} data-testid={cls.includes("add") ? "diff-add" : cls.includes("del") ? "diff-del" : undefined}>
            {line || " "}
          </div>
        );
      })}
    </Paper>
  );
}
