#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
#
# perf/plot.sh - draw coffer-bench results as PNG charts with gnuplot: Mops/s against threads,
# one line per implementation, one chart per (bench, workload).
#
# usage: perf/plot.sh CSV [OUTDIR]
#   CSV     written by `coffer-bench ... --csv CSV` (columns bench,impl,workload,threads,
#           seconds,ops,mops,per_thread_mops,status)
#   OUTDIR  where the PNGs go (default: the CSV's folder); one file per chart, named
#           <csv-name>-<bench>-<workload>.png, plus <csv-name>-all.png with every chart.
# Rows whose status is FAIL are left out (and counted on stderr): a failed run has no rate.
set -eu

if [ $# -lt 1 ] || [ $# -gt 2 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
	echo "usage: $0 CSV [OUTDIR]" >&2
	exit 2
fi
csv=$1
[ -r "$csv" ] || { echo "$0: cannot read $csv" >&2; exit 2; }
outdir=${2:-$(dirname "$csv")}
mkdir -p "$outdir"
command -v gnuplot >/dev/null 2>&1 || { echo "$0: gnuplot not installed (apt-get install gnuplot-nox)" >&2; exit 2; }

base=$(basename "$csv" .csv)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# Check the header, then split the rows into one data file per (bench, workload, impl):
# "threads mops", sorted by threads. Rows repeated with --repeat are reduced to their median.
head -n 1 "$csv" | grep -q '^bench,impl,workload,threads,seconds,ops,mops,per_thread_mops,status$' || {
	echo "$0: $csv does not start with the coffer-bench CSV header" >&2
	exit 2
}
awk -F, -v dir="$tmp" '
NR == 1 { next }
$9 == "FAIL" { failed++; next }
{
	k = dir "/" $1 "@" $3 "@" $2 ".dat" SUBSEP $4
	n = ++cnt[k]
	val[k, n] = $7 + 0
	charts[$1 "@" $3] = 1
}
function median(k,    i, j, n, a, t) {
	n = cnt[k]
	for (i = 1; i <= n; i++) a[i] = val[k, i]
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
END {
	for (k in cnt) {
		split(k, p, SUBSEP)
		print p[2], median(k) >> p[1]
	}
	for (c in charts) print c > (dir "/charts")
	if (failed) printf("plot.sh: %d FAIL row(s) left out\n", failed) > "/dev/stderr"
}' "$csv"
[ -s "$tmp/charts" ] || { echo "$0: no plottable rows in $csv" >&2; exit 1; }
for f in "$tmp"/*.dat; do
	sort -n -k1,1 "$f" -o "$f"
done

# Machine line, if the CSV folder has one (perf/results/*.txt "# machine: ..." line).
machine=""
for t in "$(dirname "$csv")/$base.txt" "$(dirname "$csv")/machine.txt"; do
	if [ -r "$t" ]; then
		machine=$(grep -m1 '^# machine:' "$t" | sed 's/^# machine: //; s/"//g' || true)
		[ -n "$machine" ] && break
	fi
done

# One gnuplot "plot" clause for a chart: every impl file of that (bench, workload).
plot_clause() {
	chart=$1
	clause=""
	for f in "$tmp/$chart"@*.dat; do
		impl=$(basename "$f" .dat)
		impl=${impl##*@}
		[ -n "$clause" ] && clause="$clause, "
		clause="$clause'$f' using 1:2 with linespoints lw 2 pt 7 title '$impl'"
	done
	echo "$clause"
}

nchart=$(wc -l < "$tmp/charts")
sort "$tmp/charts" -o "$tmp/charts"
{
	echo "set datafile separator whitespace"
	echo "set key top left noenhanced"
	echo "set grid"
	echo "set xlabel 'threads'"
	echo "set ylabel 'Mops/s'"
	echo "set yrange [0:*]"
	echo "set logscale x 2"
	while read -r chart; do
		bench=${chart%@*}
		wl=${chart#*@}
		echo "set terminal pngcairo size 800,560"
		echo "set output '$outdir/$base-$bench-$wl.png'"
		printf 'set title "%s %s\\n%s" noenhanced font ",8"\n' "$bench" "$wl" "$machine"
		echo "plot $(plot_clause "$chart")"
	done < "$tmp/charts"
	cols=2
	rows=$(( (nchart + cols - 1) / cols ))
	echo "set terminal pngcairo size $((cols * 640)),$((rows * 440))"
	echo "set output '$outdir/$base-all.png'"
	printf 'set multiplot layout %s,%s title "coffer-bench: Mops/s vs threads\\n%s" noenhanced font ",10"\n' "$rows" "$cols" "$machine"
	while read -r chart; do
		bench=${chart%@*}
		wl=${chart#*@}
		echo "set title '$bench $wl' noenhanced font ',12'"
		echo "plot $(plot_clause "$chart")"
	done < "$tmp/charts"
	echo "unset multiplot"
} > "$tmp/plot.gp"
gnuplot "$tmp/plot.gp"
ls "$outdir/$base"-*.png
