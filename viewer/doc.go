// Package viewer is memview's terminal interface: it renders the model of
// package analysis with tcell and maps keys to actions through one key table
// (keys.go), which also generates the `?` help overlay. It owns no log
// parsing and no analysis: selections, groups, timelines and thread figures
// come from analysis, so the same numbers appear in `memtrace report`.
//
// The model is shared with the loader goroutine; every access holds App.Mu,
// which the loader takes around each batch it applies.
package viewer
