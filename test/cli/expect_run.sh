#!/bin/sh
# Runs a command and checks how it ended, for CTest:
#   expect_run.sh EXIT_CODE LAST_LINE_REGEX OUTPUT_REGEX -- command args...
# EXIT_CODE must match exactly; LAST_LINE_REGEX (grep -E, "" to skip) must match the last line of stdout;
# OUTPUT_REGEX (grep -E, "" to skip) must match some line of stdout or stderr.
set -u
expected_code=$1 last_regex=$2 output_regex=$3
shift 4
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
"$@" >"$out" 2>"$err"
code=$?
cat "$out"
cat "$err" >&2
status=0
if [ "$code" -ne "$expected_code" ]; then
  echo "expect_run: exit code $code, expected $expected_code" >&2
  status=1
fi
if [ -n "$last_regex" ] && ! tail -n 1 "$out" | grep -Eq -- "$last_regex"; then
  echo "expect_run: last line '$(tail -n 1 "$out")' does not match '$last_regex'" >&2
  status=1
fi
if [ -n "$output_regex" ] && ! cat "$out" "$err" | grep -Eq -- "$output_regex"; then
  echo "expect_run: no output line matches '$output_regex'" >&2
  status=1
fi
exit $status
