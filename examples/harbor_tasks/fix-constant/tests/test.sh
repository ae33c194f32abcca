#!/bin/sh
# Copied to /tests/test.sh after the agent ends; run from the environment's working directory.
# Two named rewards: "reward" (the output is right) and "unchanged" (only PI was edited).
mkdir -p /logs/verifier
out=$(python3 /app/area.py 2>/dev/null)
ok=0; [ "$out" = "12.56636" ] && ok=1
same=0
if [ "$(grep -v '^PI = ' /app/area.py)" = "$(printf 'RADIUS = 2\nprint(round(PI * RADIUS * RADIUS, 5))')" ]; then same=1; fi
printf '{"reward": %s, "unchanged": %s}\n' "$ok" "$same" > /logs/verifier/reward.json
