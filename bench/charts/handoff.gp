# handoff.gp -- W3's hand-off latency distribution (CDF), one curve per lock
# and layout, from rmutex-bench --data DIR.  bench/run.sh calls:
#   gnuplot -e "dir='DATA'; out='FILE.svg'; rtt=RTT_US; xmin=P1; xmax=P99; machine='...'" handoff.gp
# (xmin, xmax: the smallest 1st and the largest 99th percentile of the four)
set terminal svg size 960,560 dynamic enhanced font 'sans,12' background rgb 'white'
set output out
set title sprintf("W3 hand-off latency: unlock returns → next owner's lock returns (CDF, p1 to p99)\n%s", machine) noenhanced
set xlabel 'µs (negative: the next owner returned before the releaser got its reply)'
set ylabel 'fraction of hand-offs'
set xlabel noenhanced
set key noenhanced
set key right bottom
set grid
set yrange [0:1]
set xrange [xmin:xmax]
set arrow 1 from rtt, graph 0 to rtt, graph 1 nohead dt 2 lw 1.5 lc rgb '#555555'
set label 1 sprintf(' RTT limit %.1f µs', rtt) at rtt, graph 0.05 left textcolor rgb '#555555'
plot dir.'/w3_handoff_nonfair_1x8.dat' using 2:1 with lines lw 2 title 'non-fair 1×8', \
     dir.'/w3_handoff_nonfair_4x2.dat' using 2:1 with lines lw 2 title 'non-fair 4×2', \
     dir.'/w3_handoff_fair_1x8.dat' using 2:1 with lines lw 2 title 'fair 1×8', \
     dir.'/w3_handoff_fair_4x2.dat' using 2:1 with lines lw 2 title 'fair 4×2'
