package symbols

import (
	"path/filepath"
	"strconv"
)

// Call is one function of a call stack at its call site, as people read
// it in the HTML report and in memview's groups and trees: a logged frame
// in inlined code stands for several (Calls), and two calls of one
// function that differ only by address read apart, by their line or,
// where no line is known, by their offset.
type Call struct {
	Func string // demangled
	File string // the line's file, full path; "" when the line is unknown
	Line int
	// Off is where the call is when its line is unknown: "+0x1a2" from
	// the symbol, " (libx.so+0x1a2)" from the module (a name looked up in
	// the module's symbols); "" when the line is known or the caller
	// leaves it out.
	Off string
}

// At is the call's line, "file.c:12" with the file's base name; "" when
// unknown.
func (c Call) At() string {
	if c.File == "" {
		return ""
	}
	return filepath.Base(c.File) + ":" + strconv.Itoa(c.Line)
}

// Label is the call in one line: "Cache::put leaky.cpp:15" where its line
// is known, "sqlite3VdbeExec+0x1a2" where it is not.
func (c Call) Label() string {
	switch {
	case c.File != "":
		return c.Func + " " + c.At()
	case c.Off != "":
		return c.Func + c.Off
	}
	return c.Func
}

// Calls is one logged frame as the functions it stands for, innermost
// first. chain is Cache.SourceFrames' answer for the frame (nil when it
// has none); name names the physical function as the reader names the
// frame (its symbol, demangled); off is the frame's Call.Off, used when
// its line is unknown. With an inline chain of more than one function,
// each inlined function is a Call at the line of its call ("??" when
// DWARF does not name it) and the physical function, named name, is the
// last; otherwise the frame is one Call.
func Calls(chain []SourceFrame, name, off string) []Call {
	if len(chain) > 1 {
		out := make([]Call, len(chain))
		for j, c := range chain {
			fn := name
			if j < len(chain)-1 {
				fn = "??"
				if c.Function != "" {
					fn = Demangle(c.Function)
				}
			}
			out[j] = Call{Func: fn, File: c.File, Line: c.Line}
		}
		return out
	}
	c := Call{Func: name, Off: off}
	if len(chain) == 1 && chain[0].File != "" {
		c.File, c.Line, c.Off = chain[0].File, chain[0].Line, ""
	}
	return []Call{c}
}
