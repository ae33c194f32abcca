"""The evaluator of ``agent.sh``: reads the agent's output on stdin, prints its reward.

1.0 for the right final answer, plus 0.1 when the agent made a well-formed calculator
call (the same reward as ``examples/calc``). Kept apart from the agent: the program under
training does not grade itself.

    sh agent.sh "What is 41 * 23 - 15?" | python grade.py --expected 928
"""

import argparse
import sys


def reward(output: str, expected: float) -> float:
    fields = dict(line.split(": ", 1) for line in output.splitlines() if ": " in line)
    try:
        correct = abs(float(fields.get("answer", "none")) - expected) < 1e-6
    except ValueError:
        correct = False
    return (1.0 if correct else 0.0) + (0.1 if fields.get("call") == "ok" else 0.0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--expected", type=float, required=True)
    args = parser.parse_args()
    print(reward(sys.stdin.read(), args.expected))


if __name__ == "__main__":
    main()
