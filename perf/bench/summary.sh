#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
#
# perf/bench/summary.sh - Markdown tables from a coffer-bench CSV: for each hash workload,
# Mops/s of every impl at each thread count, and coffer's ratio to each baseline (coffer /
# baseline, same workload and thread count, same run); then the obj_open phases. Rows
# repeated with --repeat are reduced to their median; a point with any FAIL row shows FAIL.
# usage: perf/bench/summary.sh CSV
set -eu
[ $# -eq 1 ] && [ -r "$1" ] || { echo "usage: $0 CSV" >&2; exit 2; }

awk -F, '
NR == 1 { next }
{
	key = $1 SUBSEP $3 SUBSEP $2 SUBSEP $4
	n = ++cnt[key]
	val[key, n] = $7 + 0
	if ($9 == "FAIL" || !(key in st)) st[key] = $9
	if (!(($1 SUBSEP $3) in seenwl)) { seenwl[$1 SUBSEP $3] = 1; wls[++nwl] = $1 SUBSEP $3 }
	if (!(($1 SUBSEP $2) in seenimpl)) { seenimpl[$1 SUBSEP $2] = 1; impls[$1] = impls[$1] " " $2 }
	if (!(($1 SUBSEP $4) in seent)) { seent[$1 SUBSEP $4] = 1; ts[$1] = ts[$1] " " $4 }
}
function median(k,    i, j, n, a, t) {
	n = cnt[k]
	for (i = 1; i <= n; i++) a[i] = val[k, i]
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function cell(k) {
	if (!(k in mops)) return "-"
	if (st[k] == "FAIL") return "FAIL"
	return sprintf("%.2f%s", mops[k], st[k] == "oversub" ? "*" : "")
}
END {
	for (k in cnt) mops[k] = median(k)
	for (w = 1; w <= nwl; w++) {
		split(wls[w], bw, SUBSEP)
		b = bw[1]; wl = bw[2]
		ni = split(substr(impls[b], 2), il, " ")
		nt = split(substr(ts[b], 2), tl, " ")
		printf("\n**%s %s** (Mops/s; * = more threads than cores)\n\n| impl |", b, wl)
		for (t = 1; t <= nt; t++) printf(" %s thr |", tl[t])
		printf("\n|---|")
		for (t = 1; t <= nt; t++) printf("---|")
		printf("\n")
		for (i = 1; i <= ni; i++) {
			printf("| %s |", il[i])
			for (t = 1; t <= nt; t++) printf(" %s |", cell(b SUBSEP wl SUBSEP il[i] SUBSEP tl[t]))
			printf("\n")
		}
		if (b != "hash") continue
		for (i = 1; i <= ni; i++) {
			if (il[i] == "coffer") continue
			printf("| coffer / %s |", il[i])
			for (t = 1; t <= nt; t++) {
				c = b SUBSEP wl SUBSEP "coffer" SUBSEP tl[t]
				o = b SUBSEP wl SUBSEP il[i] SUBSEP tl[t]
				if ((c in mops) && (o in mops) && mops[o] > 0 && st[c] != "FAIL" && st[o] != "FAIL")
					printf(" %.2fx |", mops[c] / mops[o])
				else
					printf(" - |")
			}
			printf("\n")
		}
	}
}' "$1"
