package logfmt

// Notice is a "notice msg=" line: something the tracer tells the user
// (the preload library waiting for a viewer), which readers show as is.
type Notice struct {
	Msg string
}

// AppendNotice appends n's line to b.
func AppendNotice(b []byte, n Notice) []byte {
	b = appendWord(b, WordNotice)
	b = appendStr(b, "msg", n.Msg)
	return append(b, '\n')
}

// ParseNotice reads the fields of a notice line.
func ParseNotice(rest []byte) (Notice, error) {
	var n Notice
	for _, kv := range Fields(rest) {
		if kv.Key == "msg" {
			n.Msg = kv.Value
		}
	}
	return n, nil
}
