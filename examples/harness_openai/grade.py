"""The evaluator: reads the agent's output on stdin, prints its reward (1.0 or 0.0).

Kept apart from the agent on purpose: the program under training does not grade itself.

    python solve.py --question "what is 2 + 3?" | python grade.py --expected 5
"""

import argparse
import re
import sys


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--expected", required=True)
    args = parser.parse_args()
    output = sys.stdin.read()
    numbers = re.findall(r"-?\d+", output)
    print(1.0 if numbers and numbers[-1] == args.expected.strip() else 0.0)


if __name__ == "__main__":
    main()
