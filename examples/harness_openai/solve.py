"""A stand-alone agent: answers one question with an OpenAI-compatible model.

It knows nothing about agentbolt. Like any program built on the ``openai`` package it
reads ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` from its environment; agentbolt's
controller sets them to the rollout's gateway URL and token, which is all it takes.

    OPENAI_BASE_URL=http://localhost:8000/v1 OPENAI_API_KEY=none python solve.py --question "what is 2 + 3?"
"""

import argparse

from openai import OpenAI


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--question", required=True)
    parser.add_argument("--model", default="default")
    args = parser.parse_args()
    client = OpenAI()
    reply = client.chat.completions.create(
        model=args.model,
        messages=[
            {"role": "system", "content": "Answer the arithmetic question. End with 'The answer is N.'"},
            {"role": "user", "content": args.question},
        ],
        max_tokens=64,
    )
    print(reply.choices[0].message.content)


if __name__ == "__main__":
    main()
