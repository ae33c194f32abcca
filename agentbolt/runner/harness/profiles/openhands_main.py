"""The OpenHands SDK's standard agent on one task — run by the OpenHands profile with the
SDK's own Python (3.12+), never imported by agentbolt.

    python openhands_main.py TASK_FILE

The OpenHands SDK is a library, not a command: this is its documented entry point
(``get_default_agent`` + ``Conversation``) and nothing else — the SDK's default tools
(terminal, file editor, task tracker), its system prompt and condenser, browser off.
The model is ``openai/$AGENTBOLT_OPENHANDS_MODEL`` at ``$OPENAI_BASE_URL`` with
``$OPENAI_API_KEY``; the workspace is the working directory.
"""

import os
import sys

from openhands.sdk import LLM, Conversation
from openhands.tools.preset.default import get_default_agent


def main() -> int:
    with open(sys.argv[1], encoding="utf-8") as fh:
        task = fh.read()
    llm = LLM(
        model="openai/" + os.environ["AGENTBOLT_OPENHANDS_MODEL"],
        base_url=os.environ["OPENAI_BASE_URL"],
        api_key=os.environ["OPENAI_API_KEY"],
        usage_id="agent",
        num_retries=1,
        max_input_tokens=int(os.environ.get("AGENTBOLT_OPENHANDS_CONTEXT", "32768")),
    )
    agent = get_default_agent(llm=llm, cli_mode=True)
    conversation = Conversation(agent=agent, workspace=os.getcwd(),
                                max_iteration_per_run=int(os.environ.get("AGENTBOLT_OPENHANDS_MAX_STEPS", "30")))
    conversation.send_message(task)
    conversation.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
