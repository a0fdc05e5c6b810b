#!/bin/sh
# Runs a command and succeeds only if it exits with exactly the expected status: a test that
# a benchmark's verification fails *as a verification failure* (exit 1), not by crashing.
# usage: expect_exit.sh STATUS COMMAND [ARGS...]
want=$1
shift
"$@"
got=$?
if [ "$got" -ne "$want" ]; then
	echo "expect_exit.sh: expected exit status $want, got $got" >&2
	exit 1
fi
exit 0
