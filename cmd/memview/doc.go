// Command memview is memtrace's terminal viewer of memtrack-format logs:
//
//	memview LOG                 open a log (the screen opens at once and fills in)
//	memview -f LOG              follow a growing log (every 250 ms, only what was appended)
//	memview -f -                follow stdin
//	memview :PORT [-o FILE]     connect to memtrace --port / memtrack.so MEMTRACK_PORT
//	memview HOST:PORT [-o FILE] (-o/--save tees the stream to a valid log)
//	memview --dump-threads LOG  print the per-thread table and exit
package main
