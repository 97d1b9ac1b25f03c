package symbols

import (
	"fmt"
	"os"
	"strings"
	"sync"
)

// Options configures a Cache.
type Options struct {
	// DebugDirs are the global debug directories searched for build-id and
	// debuglink files, in order. Default: /usr/lib/debug.
	DebugDirs []string
	Limits    Limits
}

// Cache holds parsed modules shared by every AddressSpace (and by log
// readers through Open and SourceLine). A module is keyed by its GNU build
// ID when it has one, else by the (device, inode) of the mapped file; a
// second process mapping the same library reuses the tables parsed for the
// first. All methods are safe for concurrent use.
type Cache struct {
	opts Options

	mu        sync.Mutex
	byBuildID map[string]*Module
	byFile    map[FileID]*Module
	byPath    map[string]*Module
	all       []*Module

	srcMu   sync.Mutex
	srcMemo map[srcKey]srcResult
}

type srcKey struct {
	module, symbol string
	off            uint64
}

type srcResult struct {
	frames []SourceFrame
	err    error
}

// srcMemoMax bounds the SourceFrames memo; a viewer asks for the same
// frames on every redraw.
const srcMemoMax = 1 << 16

// NewCache returns an empty cache. opts may be nil.
func NewCache(opts *Options) *Cache {
	c := &Cache{byBuildID: map[string]*Module{}, byFile: map[FileID]*Module{}, byPath: map[string]*Module{}}
	if opts != nil {
		c.opts = *opts
	}
	if c.opts.DebugDirs == nil {
		c.opts.DebugDirs = []string{"/usr/lib/debug"}
	}
	c.opts.Limits.fill()
	return c
}

// Close releases every file the cache holds open. Modules stay usable for
// what was already parsed; later loads fail.
func (c *Cache) Close() error {
	c.mu.Lock()
	all := c.all
	c.all = nil
	c.byBuildID, c.byFile, c.byPath = map[string]*Module{}, map[FileID]*Module{}, map[string]*Module{}
	c.mu.Unlock()
	for _, m := range all {
		m.close()
	}
	return nil
}

// Len reports how many distinct modules the cache holds.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.all)
}

// byFileID returns a cached module for a mapped file identity.
func (c *Cache) byFileID(id FileID) *Module {
	if id.Zero() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byFile[id]
}

// adopt registers an opened file as a module, or returns the module already
// cached under its identity or build ID (closing f). mapID is the identity
// from /proc/PID/maps (zero when unknown); the file's own fstat identity is
// registered too.
func (c *Cache) adopt(f *os.File, path string, mapID FileID, root *fsRoot) (*Module, error) {
	statID, size, mtime, err := fileIDOf(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	c.mu.Lock()
	for _, id := range []FileID{mapID, statID} {
		if m := c.byFile[id]; m != nil && !id.Zero() && m.size == size && m.mtime == mtime {
			c.mu.Unlock()
			f.Close()
			return m, nil
		}
	}
	c.mu.Unlock()

	e, err := openELF(f, size, c.opts.Limits)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m := &Module{path: path, root: root, cache: c, file: f, elf: e, size: size, mtime: mtime, statID: statID}
	func() {
		defer guard("reading build ID", &err)
		m.buildID = e.buildID()
		m.loads = e.loads()
	}()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if m.buildID != "" {
		if old := c.byBuildID[m.buildID]; old != nil {
			// Same build, other path or container: share the tables.
			f.Close()
			c.registerIDs(old, mapID, statID)
			return old, nil
		}
		c.byBuildID[m.buildID] = m
	}
	c.registerIDs(m, mapID, statID)
	c.all = append(c.all, m)
	if root != nil && root != hostFS {
		// The module may outlive the address space that found it; keep the
		// root alive through the module's own reference.
		m.root = root
	}
	return m, nil
}

func (c *Cache) registerIDs(m *Module, ids ...FileID) {
	for _, id := range ids {
		if !id.Zero() {
			c.byFile[id] = m
		}
	}
}

// Open returns the module for a host path (a log reader's MODULE column).
// It is cached by path and revalidated by (device, inode, size, mtime), so a
// rebuilt binary is re-read.
func (c *Cache) Open(path string) (*Module, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening module: %w", err)
	}
	id, size, mtime, err := fileIDOf(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	c.mu.Lock()
	if m := c.byPath[path]; m != nil && m.statID == id && m.size == size && m.mtime == mtime {
		c.mu.Unlock()
		f.Close()
		return m, nil
	}
	c.mu.Unlock()
	m, err := c.adopt(f, path, FileID{}, hostFS)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.byPath[path] = m
	c.mu.Unlock()
	return m, nil
}

// SourceLine answers a log reader that only has a frame line
// "MODULE(SYMBOL+0xOFF) [0xADDR]" or "MODULE(+0xOFF)": it opens MODULE (with
// its debug files), takes SYMBOL's value (mangled, as written in the log;
// an empty symbol means OFF is relative to the module's load base, which is
// the ELF virtual address for PIE and shared objects), adds OFF and returns
// the line-table row covering the call. Frames in logs are return
// addresses, so the row looked up is the one for the byte before them (the
// call instruction); OFF 0 is looked up as is. Results are cached.
func (c *Cache) SourceLine(module, symbol string, off uint64) (file string, line int, err error) {
	fr, err := c.SourceFrames(module, symbol, off)
	if err != nil {
		return "", 0, err
	}
	return fr[0].File, fr[0].Line, nil
}

// SourceFrames is SourceLine with the inlined-call chain, innermost first
// (as addr2line -i prints it).
//
// Answers are memoized by (module, symbol, off) for the life of the cache,
// without re-checking the file; a viewer that wants to see a rebuilt binary
// uses a new Cache.
func (c *Cache) SourceFrames(module, symbol string, off uint64) ([]SourceFrame, error) {
	k := srcKey{module, symbol, off}
	c.srcMu.Lock()
	r, ok := c.srcMemo[k]
	c.srcMu.Unlock()
	if ok {
		return r.frames, r.err
	}
	r.frames, r.err = c.sourceFrames(module, symbol, off)
	c.srcMu.Lock()
	if c.srcMemo == nil || len(c.srcMemo) >= srcMemoMax {
		c.srcMemo = make(map[srcKey]srcResult)
	}
	c.srcMemo[k] = r
	c.srcMu.Unlock()
	return r.frames, r.err
}

func (c *Cache) sourceFrames(module, symbol string, off uint64) ([]SourceFrame, error) {
	m, err := c.Open(module)
	if err != nil {
		return nil, err
	}
	base := uint64(0)
	if symbol != "" {
		base, err = m.SymbolValue(symbol)
		if err != nil {
			return nil, err
		}
	}
	pc := base + off
	if off > 0 {
		pc--
	}
	return m.Source(pc)
}

// SymbolValue returns the ELF address of a symbol given by its mangled name
// (a "name@plt", "name@VERSION" or "name@@VERSION" suffix is accepted).
func (m *Module) SymbolValue(name string) (uint64, error) {
	t, err := m.symbols()
	if t == nil {
		return 0, err
	}
	if v, ok := t.value(name); ok {
		return v, nil
	}
	if i := strings.IndexByte(name, '@'); i > 0 && !strings.HasSuffix(name, "@plt") {
		if v, ok := t.value(name[:i]); ok {
			return v, nil
		}
	}
	return 0, fmt.Errorf("symbol %q in %s: %w", clip(name, 200), m.path, ErrNotFound)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
