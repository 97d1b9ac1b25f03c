package procfs

import (
	"os"
	"strings"
	"testing"
)

func TestParseCgroup(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"0::/system.slice/ssh.service\n", "/system.slice/ssh.service"},
		{"12:memory:/x\n1:name=systemd:/y\n0::/user.slice\n", "/user.slice"},
		{"12:memory:/x\n", ""},
		{"0::/a b/c\n", "/a b/c"},
	} {
		if got := ParseCgroup([]byte(c.in)); got != c.want {
			t.Errorf("ParseCgroup(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestContainerID(t *testing.T) {
	id := strings.Repeat("0123456789abcdef", 4)
	for _, c := range []struct{ in, want string }{
		{"/system.slice/docker-" + id + ".scope", id},
		{"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-" + id + ".scope", id},
		{"/kubepods/burstable/pod1/" + id, id},
		{"/machine.slice/libpod-" + id + ".scope/container", id},
		{"/crio-" + id, id},
		{"/docker/" + id, id},
		{"/crio-conmon-" + id, ""},
		{"/system.slice/ssh.service", ""},
		{"/docker-" + id[:63] + ".scope", ""},
		{"/docker-" + strings.ToUpper(id) + ".scope", ""},
		{"", ""},
	} {
		if got := ContainerID(c.in); got != c.want {
			t.Errorf("ContainerID(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestReadCgroupSelf(t *testing.T) {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil {
		t.Skip("no cgroup v2 here")
	}
	p, err := ReadCgroup(os.Getpid())
	if err != nil || !strings.HasPrefix(p, "/") {
		t.Fatalf("ReadCgroup(self) = %q, %v: want a path", p, err)
	}
	pids, err := PIDs()
	if err != nil || len(pids) == 0 {
		t.Fatalf("PIDs() = %d, %v", len(pids), err)
	}
}
