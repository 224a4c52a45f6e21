# queue.gp -- W4: fair.lua's Redis-side time against the queue depth, from
# rmutex-bench --data DIR (median of the repetitions, bars: min-max).
#   gnuplot -e "dir='DATA'; out='FILE.svg'; machine='...'" queue.gp
set terminal svg size 960,560 dynamic enhanced font 'sans,12' background rgb 'white'
set output out
set title sprintf("W4 fair.lua Redis-side time per call (INFO commandstats) against queue depth\n%s", machine) noenhanced
set xlabel 'waiters queued (N)'
set ylabel 'µs per call (median of 25-call chunks; bars: min–max over repetitions)'
set logscale x
set xrange [0.5:20000]
set yrange [0:*]
set key left top
set grid
plot dir.'/w4_queue.dat' using 1:2:3:4 with yerrorlines lw 2 title 'enqueue', \
     ''                  using 1:5:6:7 with yerrorlines lw 2 title 'cancel', \
     ''                  using 1:8:9:10 with yerrorlines lw 2 title 'unlock (hand-off to head)', \
     ''                  using 1:11:12:13 with yerrorlines lw 2 title 'grant (lock found free)'
