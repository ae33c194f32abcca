#!/bin/sh
# Harbor copies this to /tests/test.sh after the agent ends and runs it from the working directory.
mkdir -p /logs/verifier
if [ "$(cat /app/answer.txt 2>/dev/null | tr -d '[:space:]')" = "3" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
