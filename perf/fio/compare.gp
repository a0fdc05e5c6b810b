# perf/fio/compare.gp - bar chart of perf/fio/compare.sh's results: kIOPS per engine, one
# cluster per (rw, numjobs). Called as
#   gnuplot -e "datafile='x.dat'; outfile='x.png'; ncols=5; title='...'" compare.gp
# datafile: a header row "case eng1 eng2 ...", then one row per case, values in kIOPS.
set terminal pngcairo size 1100,600 font ",10" noenhanced
set output outfile
set title title
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set key top right autotitle columnheader
set ylabel "kIOPS (higher is better)"
set yrange [0:*]
set grid ytics
set xtics nomirror
plot for [i=2:ncols+1] datafile using i:xtic(1)
