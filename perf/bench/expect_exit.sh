#!/bin/sh
# Runs a command and succeeds only if it exits with exactly the expected status: a test that
# a benchmark's verification fails *as a verification failure* (exit 1), not by crashing.
# With $EXPECT_STDERR set, the command's standard error must also contain that text.
# usage: expect_exit.sh STATUS COMMAND [ARGS...]
want=$1
shift
if [ -n "${EXPECT_STDERR:-}" ]; then
	err=$(mktemp)
	"$@" 2>"$err"
	got=$?
	cat "$err" >&2
	if ! grep -qF -- "$EXPECT_STDERR" "$err"; then
		echo "expect_exit.sh: standard error lacks: $EXPECT_STDERR" >&2
		rm -f "$err"
		exit 1
	fi
	rm -f "$err"
else
	"$@"
	got=$?
fi
if [ "$got" -ne "$want" ]; then
	echo "expect_exit.sh: expected exit status $want, got $got" >&2
	exit 1
fi
exit 0
