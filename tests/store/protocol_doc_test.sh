#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# tests/store/protocol_doc_test.sh PROTO_H PROTOCOL_MD - docs/protocol.md states the
# protocol version that runtime/proto.h speaks (title and the header's version field), so
# that a peer written from the page sends the version the store accepts.
set -eu
v=$(sed -n 's/^#define COFFER_PROTO_VERSION \([0-9]*\)u*$/\1/p' "$1")
[ -n "$v" ] || { echo "no COFFER_PROTO_VERSION in $1" >&2; exit 1; }
grep -q "^# coffer wire protocol (version $v)\$" "$2" ||
	{ echo "$2: title does not say version $v" >&2; exit 1; }
grep -q "^| version | u16 | ${v}[ |]" "$2" ||
	{ echo "$2: header table's version field is not $v" >&2; exit 1; }
echo "docs/protocol.md states version $v"
