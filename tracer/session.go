//go:build amd64 || arm64

package tracer

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Session uprobes (BPF_TRACE_UPROBE_SESSION, Linux 6.13+) run one program
// at a call's entry and at its return through a single consumer, where
// uprobe_multi needs an entry link and a return link. cilium/ebpf v0.22
// creates no such link, so it is made here with BPF_LINK_CREATE.
const attachUprobeSession = 57 // enum bpf_attach_type BPF_TRACE_UPROBE_SESSION

// linkCreateUprobeMulti mirrors union bpf_attr's link_create with its
// uprobe_multi member.
type linkCreateUprobeMulti struct {
	progFD     uint32
	targetFD   uint32
	attachType uint32
	flags      uint32
	path       uint64
	offsets    uint64
	refCtr     uint64
	cookies    uint64
	cnt        uint32
	umFlags    uint32
	pid        uint32
	_          uint32
}

var errNoSession = errors.New("uprobe session links unsupported")

func createSessionLink(prog *ebpf.Program, path string, offsets, cookies []uint64, pid int) (link.Link, error) {
	if len(offsets) == 0 {
		return nil, errors.New("no probe points")
	}
	p, err := unix.BytePtrFromString(path)
	if err != nil {
		return nil, err
	}
	attr := linkCreateUprobeMulti{
		progFD:     uint32(prog.FD()),
		attachType: attachUprobeSession,
		path:       uint64(uintptr(unsafe.Pointer(p))),
		offsets:    uint64(uintptr(unsafe.Pointer(&offsets[0]))),
		cookies:    uint64(uintptr(unsafe.Pointer(&cookies[0]))),
		cnt:        uint32(len(offsets)),
		pid:        uint32(pid),
	}
	fd, _, errno := unix.Syscall(unix.SYS_BPF, 28 /* BPF_LINK_CREATE */, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	runtime.KeepAlive(p)
	runtime.KeepAlive(offsets)
	runtime.KeepAlive(cookies)
	if errno != 0 {
		if errno == unix.EINVAL || errno == unix.EOPNOTSUPP {
			return nil, fmt.Errorf("%w: %w", errNoSession, errno)
		}
		return nil, fmt.Errorf("create uprobe session link: %w", errno)
	}
	l, err := link.NewFromFD(int(fd))
	if err != nil {
		unix.Close(int(fd))
		return nil, fmt.Errorf("wrap uprobe session link: %w", err)
	}
	return l, nil
}
