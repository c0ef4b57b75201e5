#!/bin/sh
# Runs the conformance programs (tests/conformance/*.c, built into BIN_DIR)
# once per row of expected.txt and compares what each prints after
# "CONFORM <rule> " with the row's expected outcome: the real GPU's.
# Prints "PASS rule: outcome", "SKIP rule" (too few devices) or
# "FAIL rule: expected X, observed Y", then "conformance: N passed, M failed".
#
# Usage: tests/conformance/run.sh BIN_DIR
# Environment: CONFORM_SHIM=path/to/libunstall.so: run every program under the
# shim, and expect the "shim" column where a row has one.
bin=${1:?usage: run.sh BIN_DIR}
here=$(cd "$(dirname "$0")" && pwd)
passed=0 failed=0 skipped=0
pre=""
# a sanitizer's runtime first where tests/sanitize.sh runs the suite
# (SAN_PRELOAD; ':' between them, since $pre is split into words below)
[ -n "$CONFORM_SHIM" ] && pre="LD_PRELOAD=${SAN_PRELOAD:+$SAN_PRELOAD:}$CONFORM_SHIM"
tab=$(printf '\t')
err=$(mktemp) || exit 1
trap 'rm -f "$err"' EXIT

# rows: rule | expected | basis [| shim]; trim the fields
rows=$(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' \
    -e 's/[[:space:]]*|[[:space:]]*/|/g' -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' "$here/expected.txt")

while IFS='|' read -r rule expected basis shim_expected; do
    [ -n "$rule" ] || continue
    [ -n "$CONFORM_SHIM" ] && [ -n "$shim_expected" ] && expected=$shim_expected
    prog=${rule%%.*}
    args=""
    [ "$prog" != "$rule" ] && args=$(echo "${rule#*.}" | tr '.' ' ')
    if [ ! -x "$bin/$prog" ]; then
        echo "FAIL $rule: no program $bin/$prog"
        failed=$((failed + 1))
        continue
    fi
    # shellcheck disable=SC2086 # args are words
    out=$(env $pre timeout -k 5 120 "$bin/$prog" $args 2>"$err" </dev/null)
    rc=$?
    line=$(printf '%s\n' "$out" | grep "^CONFORM $rule " | tail -1)
    observed=${line#"CONFORM $rule "}
    if [ -z "$line" ]; then
        echo "FAIL $rule: no CONFORM line (exit $rc): $(tail -2 "$err" | tr '\n' ' ')"
        failed=$((failed + 1))
    elif [ "$observed" = SKIP ]; then
        # the program's reason; under the shim its report's lines come after it
        why=$(grep -m1 ': needs [0-9]* devices' "$err" || tail -1 "$err")
        echo "SKIP $rule ($why)"
        skipped=$((skipped + 1))
    elif [ "$observed" = "$expected" ] && [ "$rc" -eq 0 ]; then
        echo "PASS $rule: $observed"
        passed=$((passed + 1))
    else
        echo "FAIL $rule: expected '$expected' ($basis), observed '$observed' (exit $rc)${tab}$(tail -1 "$err")"
        failed=$((failed + 1))
    fi
done <<ROWS
$rows
ROWS
[ "$skipped" -gt 0 ] && echo "conformance: $skipped skipped (too few devices)"
echo "conformance: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
