"""A small MCP server of our own: a calculator with one tool, ``evaluate``.

    python examples/mcp_calculator/calc_server.py                      # MCP over stdin/stdout
    python examples/mcp_calculator/calc_server.py --http --port 8765   # streamable HTTP at /mcp

``evaluate(expression)`` computes ``+ - * / ( )`` over numbers exactly (the safe
evaluator of ``examples/calc``: parsed with :mod:`ast`, never ``eval``) and returns the
value as text; an expression it refuses is a tool error whose text says why.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # examples/: the calc example's evaluator

from calc.task import CalcError, safe_eval  # noqa: E402
from mcp.server.mcpserver import MCPServer  # noqa: E402
from mcp.server.mcpserver.exceptions import ToolError  # noqa: E402

server = MCPServer("calculator", instructions="Evaluate arithmetic exactly with the evaluate tool.", log_level="WARNING")


@server.tool(description="Evaluate an arithmetic expression with + - * / and parentheses, e.g. '41 * 23 - 15'.")
def evaluate(expression: str) -> str:
    try:
        value = safe_eval(_normalise(expression))
    except CalcError as err:
        raise ToolError(str(err)) from None
    return str(value.numerator) if value.denominator == 1 else f"{float(value):.6g}"


def _normalise(expression: str) -> str:
    return expression.replace("×", "*").replace("÷", "/").replace("−", "-").replace(",", "").strip().rstrip("=")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    p.add_argument("--port", type=int, default=8765)
    args = p.parse_args()
    if args.http:
        server.run("streamable-http", host="127.0.0.1", port=args.port)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
