#!/bin/sh
# A one-command shell agent for Harbor tasks, in POSIX shell with curl and awk (the
# approach of examples/harness_shell/agent.sh): it knows nothing but OPENAI_BASE_URL,
# OPENAI_API_KEY, the instruction and the environment's working directory.
#
#   OPENAI_BASE_URL=http://127.0.0.1:8000/v1 OPENAI_API_KEY=none sh agent.sh "Create /app/x.txt" /app
#
# It asks the model for one shell command, runs it (at most 20 s) from the working
# directory and prints "command: ..." and "exit: N". The task's verifier scores the result.
set -u
instruction="$1"
workdir="${2:-/}"
max_tokens="${AGENT_MAX_TOKENS:-48}"
model="${OPENAI_MODEL:-default}"

system='You operate a Linux shell. Reply with exactly one POSIX shell command that does the task, and nothing else.'
example_q='Write the word yes to /tmp/out.txt.'
example_a='echo yes > /tmp/out.txt'

# The JSON string literal of stdin.
json_string() {
    awk 'BEGIN { RS = "\001" }
    { s = $0; out = ""
      for (k = 1; k <= length(s); k++) {
        c = substr(s, k, 1)
        if (c == "\\") out = out "\\\\"
        else if (c == "\"") out = out "\\\""
        else if (c == "\n") out = out "\\n"
        else if (c == "\t") out = out "\\t"
        else if (c < " ") out = out " "
        else out = out c
      }
      printf "\"%s\"", out }
    END { if (NR == 0) printf "\"\"" }'
}

# The first "content" string of a chat completion (JSON on stdin), decoded.
reply_content() {
    awk 'BEGIN { RS = "\001" }
    { if (!match($0, /"content"[ ]*:[ ]*"/)) exit 1
      s = substr($0, RSTART + RLENGTH); out = ""
      for (k = 1; k <= length(s); k++) {
        c = substr(s, k, 1)
        if (c == "\"") break
        if (c == "\\") {
          k++; e = substr(s, k, 1)
          if (e == "n") out = out "\n"
          else if (e == "t") out = out "\t"
          else if (e == "u") { k += 4; out = out "?" }
          else if (e != "r") out = out e
        } else out = out c
      }
      printf "%s", out }'
}

message() {  # role, content -> one JSON message
    printf '{"role":"%s","content":%s}' "$1" "$(printf '%s' "$2" | json_string)"
}

messages="$(message system "$system"),$(message user "$example_q"),$(message assistant "$example_a")"
messages="$messages,$(message user "$instruction")"
body=$(printf '{"model":"%s","max_tokens":%s,"messages":[%s]}' "$model" "$max_tokens" "$messages")
response=$(curl -sS --max-time 300 -X POST "$OPENAI_BASE_URL/chat/completions" \
    -H "Authorization: Bearer $OPENAI_API_KEY" -H "Content-Type: application/json" --data-binary "$body") \
    || { echo "agent: the model call failed" >&2; exit 3; }
reply=$(printf '%s' "$response" | reply_content) \
    || { echo "agent: unexpected answer from the model: $response" >&2; exit 3; }

# The first non-empty line that is not a code fence, without surrounding backticks.
command=$(printf '%s\n' "$reply" | awk '/^[[:space:]]*```/ { next } NF { gsub(/^[[:space:]]*`+|`+[[:space:]]*$/, ""); print; exit }')
echo "command: $command"
cd "$workdir" 2>/dev/null || cd /
timeout 20 sh -c "$command" </dev/null >/dev/null 2>&1
echo "exit: $?"
