package procfs

import (
	"bytes"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// CgroupFS is where the cgroup v2 hierarchy is mounted (memtrace's own
// cgroup namespace's view of it): /sys/fs/cgroup, or on a host with both
// hierarchies (systemd's "hybrid" layout) /sys/fs/cgroup/unified; the
// first cgroup2 mount of /proc/self/mounts, "" when there is none.
func CgroupFS() string {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[2] == "cgroup2" {
			return f[1]
		}
	}
	return ""
}

// ReadCgroup reads the cgroup v2 path of pid from /proc/PID/cgroup (its
// "0::" line), as seen from memtrace's own cgroup namespace; "" when the
// process is only in v1 hierarchies.
func ReadCgroup(pid int) (string, error) {
	b, err := readSmall(Dir(pid) + "/cgroup")
	if err != nil {
		return "", err
	}
	return ParseCgroup(b), nil
}

// ParseCgroup is the v2 path of a /proc/PID/cgroup file's text.
func ParseCgroup(b []byte) string {
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
		if p, ok := bytes.CutPrefix(line, []byte("0::")); ok {
			return string(p)
		}
	}
	return ""
}

// containerID matches the container runtimes' cgroup names: docker's
// systemd scope (docker-ID.scope), containerd's (cri-containerd-ID.scope),
// CRI-O's (crio-ID, crio-conmon-ID is its monitor, not the container),
// podman's (libpod-ID), and a bare 64-hex element (docker's cgroupfs
// driver, /docker/ID; Kubernetes' cgroupfs driver, /kubepods/.../ID).
var containerID = regexp.MustCompile(`^(?:docker-|cri-containerd-|crio-|libpod-)?([0-9a-f]{64})(?:\.scope)?$`)

// ContainerID is the id of the container a cgroup path names, or "": the
// deepest element that is one, so a container nested in another's cgroup
// is named by its own.
func ContainerID(path string) string {
	elems := strings.Split(path, "/")
	for i := len(elems) - 1; i >= 0; i-- {
		if m := containerID.FindStringSubmatch(elems[i]); m != nil {
			return m[1]
		}
	}
	return ""
}

// PIDs lists the processes /proc shows (thread-group ids), in no order.
func PIDs() ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := make([]int, 0, len(ents))
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out, nil
}
