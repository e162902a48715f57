#!/usr/bin/env bash
# drill_test.sh SECONDS REGEX -- COMMAND...: COMMAND must end within SECONDS with a non-zero exit code, and print a
# line matching REGEX (grep -E). A hang is killed 20 s past the limit and fails.
set -u
limit=$1 regex=$2
shift 3
start=$(date +%s)
output=$(timeout $((limit + 20)) "$@" 2>&1)
code=$?
elapsed=$(($(date +%s) - start))
printf '%s\n' "$output" | tail -n 20
echo "exit $code after $elapsed s (limit $limit s)"
if [ "$code" -eq 124 ]; then echo "FAIL: hung, killed"; exit 1; fi
if [ "$code" -eq 0 ]; then echo "FAIL: exit 0"; exit 1; fi
if [ "$elapsed" -gt "$limit" ]; then echo "FAIL: took $elapsed s"; exit 1; fi
if ! printf '%s\n' "$output" | grep -Eq "$regex"; then echo "FAIL: no line matches: $regex"; exit 1; fi
echo "PASS"
