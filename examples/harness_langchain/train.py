"""Evaluate and train an unmodified LangChain agent (``agent.py``) through the controller.

The same run as ``examples/harness_openai/train.py`` (its algorithm, model choices,
evaluator and dataset), with the LangChain agent as the program:

    python examples/harness_langchain/train.py --smoke
    python examples/harness_langchain/train.py --base-url http://127.0.0.1:8000/v1 --model Qwen/Qwen2.5-1.5B-Instruct

In ``--smoke`` the calculator model asks for the ``add`` tool, so each rollout makes two
model calls (tool call, then the answer), both recorded and turned into triplets.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "harness_openai"))

from train import PY, main

COMMAND = [PY, str(HERE / "agent.py"), "--question", "{question}"]

if __name__ == "__main__":
    sys.exit(main(command=COMMAND, what="LangChain agent", calls_per_rollout=2))
