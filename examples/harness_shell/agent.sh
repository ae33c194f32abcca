#!/bin/sh
# A calculator agent in POSIX shell, with curl and awk: it knows nothing but
# OPENAI_BASE_URL, OPENAI_API_KEY and the question it is given.
#
#   OPENAI_BASE_URL=http://127.0.0.1:8000/v1 OPENAI_API_KEY=none sh agent.sh "What is 41 * 23 - 15?"
#
# Turn 1: the model should reply CALC(<expression>); the calculator (awk, on digits and
# + - * / ( ) only) computes it; turn 2: the model gets "Result: N..." and replies
# ANSWER: <number>. Prints "call: ok|error|none" and "answer: <number>" (or "answer: none").
set -u
question="$1"
max_tokens="${AGENT_MAX_TOKENS:-32}"
model="${OPENAI_MODEL:-default}"

system='You solve math problems with a calculator. First reply with only CALC(<expression>), for example CALC(12 * 34). You will get the result. Then reply with ANSWER: <number>.'
example_q='Ann buys 41 packs of 23 pens and loses 15 pens. How many pens does she have?'
example_call='CALC(41 * 23 - 15)'
example_result='Result: 928. Now give the final answer as ANSWER: <number>.'
example_answer='ANSWER: 928'

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

messages="$(message system "$system"),$(message user "$example_q"),$(message assistant "$example_call")"
messages="$messages,$(message user "$example_result"),$(message assistant "$example_answer"),$(message user "$question")"

chat() {  # the model's reply to $messages
    body=$(printf '{"model":"%s","max_tokens":%s,"messages":[%s]}' "$model" "$max_tokens" "$messages")
    response=$(curl -sS --max-time 300 -X POST "$OPENAI_BASE_URL/chat/completions" \
        -H "Authorization: Bearer $OPENAI_API_KEY" -H "Content-Type: application/json" --data-binary "$body") \
        || { echo "agent: the model call failed" >&2; exit 3; }
    printf '%s' "$response" | reply_content \
        || { echo "agent: unexpected answer from the model: $response" >&2; exit 3; }
}

# The calculator tool: CALC(<expression>) -> its value, or nothing for a bad expression.
calculate() {
    expr=$(printf '%s' "$1" | tr -d ',' | tr 'xX' '**' | sed 's/=[[:space:]]*$//')
    [ -n "$expr" ] || return 1
    if printf '%s' "$expr" | grep -q '[^-0-9+*/(). ]'; then return 1; fi
    awk "BEGIN { v = ($expr); if (v == int(v) && v < 1e15 && v > -1e15) printf \"%d\", v; else printf \"%.6g\", v }" 2>/dev/null
}

# The number after the last ANSWER:, else the last number of the reply.
final_number() {
    printf '%s\n' "$1" | awk 'BEGIN { RS = "\001" }
    { s = $0; n = ""; a = ""
      while (match(s, /-?[0-9][0-9,]*(\.[0-9]+)?/)) {
        n = substr(s, RSTART, RLENGTH)
        if (substr(s, 1, RSTART - 1) ~ /ANSWER:[ ]*$/) a = n
        s = substr(s, RSTART + RLENGTH)
      }
      v = (a != "") ? a : n; gsub(",", "", v); print (v == "" ? "none" : v) }'
}

reply=$(chat)
call=$(printf '%s' "$reply" | tr '\n' ' ' | sed -n 's/^.*[Cc][Aa][Ll][Cc][[:space:]]*[([]\(.*\)$/\1/p' | sed 's/[])][^])]*$//')
if [ -z "$call" ] && ! printf '%s' "$reply" | grep -qi 'calc[[:space:]]*[([]'; then
    echo "call: none"
    echo "answer: $(final_number "$reply")"
    exit 0
fi
if result=$(calculate "$call"); then
    echo "call: ok"
    tool="Result: $result. Now give the final answer as ANSWER: <number>."
else
    echo "call: error"
    tool="Error: the calculator cannot compute '$call'. Now give the final answer as ANSWER: <number>."
fi
messages="$messages,$(message assistant "$reply"),$(message user "$tool")"
reply=$(chat)
echo "answer: $(final_number "$reply")"
