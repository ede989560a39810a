#!/usr/bin/env bash
# A project named "default" and a key in it, on a running boxd: what
# tools/setup.sh hands a new user.
#
#   printf '%s\n' "$admin_token" | tools/setup-first-key.sh http://127.0.0.1:7070
#
# The admin token comes on standard input and reaches curl through a 0600
# header file, never through an argument: a command line is readable by
# every local user (/proc/<pid>/cmdline, ps).  Prints the key's secret.
set -euo pipefail

url="${1:?usage: setup-first-key.sh URL < admin-token}"
IFS= read -r token || true
if [ -z "$token" ]; then
  echo "setup-first-key.sh: no admin token on standard input" >&2
  exit 1
fi

headers="$(umask 077 && mktemp)"
trap 'rm -f "$headers"' EXIT
# printf is a shell builtin: the token is on no command line here either
printf 'Authorization: Bearer %s\nContent-Type: application/json\n' "$token" >"$headers"
unset token

# the project may exist from an earlier run
curl -fsS -o /dev/null -X POST "$url/v1/projects" -H @"$headers" \
  -d '{"name": "default"}' 2>/dev/null || true
key_json="$(curl -fsS -X POST "$url/v1/projects/default/keys" -H @"$headers" \
  -d "{\"name\": \"setup-$(date +%s)\"}")"
printf '%s' "$key_json" | jq -er .secret
