package logfmt

// Words of the periodic snapshot lines (memtrace --interval): a summary per
// process, then its top live call stacks and its open descriptors.
const (
	WordSnapshot    = "snapshot"     // pid= ts= current= peak= peak_ts= blocks= fds=
	WordSnapshotTop = "snapshot-top" // pid= rank= bytes= blocks= stack="f < g < main"
	WordSnapshotFD  = "snapshot-fd"  // pid= fd= kind= call= path=
)
