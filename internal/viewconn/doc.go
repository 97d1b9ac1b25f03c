// Package viewconn waits for the one viewer a --port or --listen run
// serves its log to, both for the eBPF path and for the LD_PRELOAD path:
// the program starts only once the viewer is there, and a signal ends the
// wait (the program then never runs).
package viewconn
