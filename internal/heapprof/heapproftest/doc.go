// Package heapproftest holds a heap profile to the rules the
// continuous-profiling servers (Parca, Grafana Pyroscope) read it by, for
// the tests of every writer of one: the live endpoint, --profile-dir and
// `memtrace report --pprof`.
//
// Parca marks a profile with a non-zero duration a delta (its series show
// a rate and its merges add the profiles up), makes series labels of
// string labels only, and names the series after the sample type and unit;
// Pyroscope's scrape of a "memory" profile looks its sample types up by
// Go's names. So: a snapshot has no duration and a delta one; the sample
// types are Go's heap profile's, by name, unit and order; the default is
// one of them; every label is a string label with a key both accept.
package heapproftest
