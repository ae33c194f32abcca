#!/bin/sh
# Copied to /tests/test.sh after the agent ends; run from the environment's working directory.
mkdir -p /logs/verifier
if [ -f /app/greeting.txt ] && [ "$(cat /app/greeting.txt)" = "hello, harbor" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
