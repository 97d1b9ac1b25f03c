package symbols

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path"

	"github.com/ulikunitz/xz"
)

// debugFile is a separate file holding the symbols and/or DWARF of a
// stripped module.
type debugFile struct {
	path string
	file *os.File
	elf  *elfFile
}

// findDebugFile looks for a separate debug file, in this order:
//
//  1. DIR/.build-id/xx/yyyy.debug for each debug dir, the build ID checked;
//  2. .gnu_debuglink NAME in the binary's directory, its .debug/
//     subdirectory, then DIR/<binary's dir>/NAME for each debug dir, the
//     CRC32 checked.
//
// Each candidate is tried in the process's root first (the container's own
// debug files), then on the host. A candidate that fails its check is
// skipped, not used.
func (m *Module) findDebugFile() (*debugFile, error) {
	roots := []*fsRoot{m.root}
	if !m.root.isHost() {
		roots = append(roots, hostFS)
	}
	if id := m.buildID; len(id) > 2 {
		for _, dir := range m.cache.opts.DebugDirs {
			p := path.Join(dir, ".build-id", id[:2], id[2:]+".debug")
			for _, r := range roots {
				if d := m.tryDebug(r, p, func(d *debugFile) bool { return d.elf.buildID() == id }); d != nil {
					return d, nil
				}
			}
		}
	}
	if name, crc, ok := m.elf.debugLink(); ok {
		dir := path.Dir(m.path)
		cands := []string{path.Join(dir, name), path.Join(dir, ".debug", name)}
		for _, d := range m.cache.opts.DebugDirs {
			cands = append(cands, path.Join(d, dir, name))
		}
		check := func(d *debugFile) bool {
			if id, _, _, err := fileIDOf(d.file); err == nil && id == m.statID {
				return false // the link names the binary itself
			}
			sum, err := crcFile(d.file)
			return err == nil && sum == crc
		}
		for _, p := range cands {
			for _, r := range roots {
				if d := m.tryDebug(r, p, check); d != nil {
					return d, nil
				}
			}
		}
	}
	return nil, ErrNotFound
}

func (m *Module) tryDebug(r *fsRoot, p string, ok func(*debugFile) bool) *debugFile {
	f, err := r.open(p)
	if err != nil {
		return nil
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil
	}
	e, err := openELF(f, st.Size(), m.cache.opts.Limits)
	if err != nil {
		f.Close()
		return nil
	}
	d := &debugFile{path: p, file: f, elf: e}
	if !ok(d) {
		f.Close()
		return nil
	}
	return d
}

func crcFile(f *os.File) (uint32, error) {
	h := crc32.NewIEEE()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, 1<<62)); err != nil {
		return 0, err
	}
	return h.Sum32(), nil
}

// miniDebugInfo decompresses .gnu_debugdata (an xz-compressed ELF holding a
// .symtab of the functions that .dynsym lacks, as Fedora and others ship).
func miniDebugInfo(e *elfFile) (*elfFile, error) {
	s := e.section(".gnu_debugdata")
	if s == nil {
		return nil, ErrNotFound
	}
	comp, err := e.data(s)
	if err != nil {
		return nil, err
	}
	zr, err := xz.NewReader(bytes.NewReader(comp))
	if err != nil {
		return nil, fmt.Errorf("decompressing .gnu_debugdata: %w: %w", ErrMalformed, err)
	}
	lim := e.lim.MaxMiniDebugInfo
	raw, err := io.ReadAll(io.LimitReader(zr, lim+1))
	if err != nil {
		return nil, fmt.Errorf("decompressing .gnu_debugdata: %w: %w", ErrMalformed, err)
	}
	if int64(len(raw)) > lim {
		return nil, fmt.Errorf(".gnu_debugdata decompresses to more than %d bytes: %w", lim, ErrTooLarge)
	}
	return openELF(bytes.NewReader(raw), int64(len(raw)), e.lim)
}
