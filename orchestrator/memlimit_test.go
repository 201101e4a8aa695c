package orchestrator

import (
	"log/slog"
	"testing"
	"testing/fstest"
)

func TestCgroupMemoryMax(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	cases := []struct {
		name     string
		fs       fstest.MapFS
		want     int64
		wantFile string
		wantErr  bool
	}{
		{"v2 in a namespace", fstest.MapFS{"proc/self/cgroup": file("0::/\n"), "sys/fs/cgroup/memory.max": file("268435456\n")}, 268435456, "sys/fs/cgroup/memory.max", false},
		{"v2 own path", fstest.MapFS{"proc/self/cgroup": file("0::/system.slice/orchd.service\n"),
			"sys/fs/cgroup/system.slice/orchd.service/memory.max": file("1073741824\n"), "sys/fs/cgroup/memory.max": file("max\n")}, 1073741824, "sys/fs/cgroup/system.slice/orchd.service/memory.max", false},
		{"v2 no limit", fstest.MapFS{"proc/self/cgroup": file("0::/\n"), "sys/fs/cgroup/memory.max": file("max\n")}, 0, "sys/fs/cgroup/memory.max", false},
		{"v1", fstest.MapFS{"proc/self/cgroup": file("5:cpu,cpuacct:/x\n4:memory:/docker/abc\n0::/\n"),
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": file("536870912\n")}, 536870912, "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", false},
		{"v1 no limit", fstest.MapFS{"proc/self/cgroup": file("4:memory:/\n"),
			"sys/fs/cgroup/memory/memory.limit_in_bytes": file("9223372036854771712\n")}, 0, "sys/fs/cgroup/memory/memory.limit_in_bytes", false},
		{"no cgroup files", fstest.MapFS{"proc/self/cgroup": file("0::/\n")}, 0, "", false},
		{"not linux", fstest.MapFS{}, 0, "", false},
		{"garbage", fstest.MapFS{"proc/self/cgroup": file("0::/\n"), "sys/fs/cgroup/memory.max": file("lots\n")}, 0, "", true},
		{"negative", fstest.MapFS{"proc/self/cgroup": file("0::/\n"), "sys/fs/cgroup/memory.max": file("-1\n")}, 0, "", true},
		{"path escapes", fstest.MapFS{"proc/self/cgroup": file("0::/../../etc\n"), "sys/fs/cgroup/memory.max": file("1000\n")}, 1000, "sys/fs/cgroup/memory.max", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, file, err := cgroupMemoryMax(c.fs)
			if (err != nil) != c.wantErr || got != c.want || file != c.wantFile {
				t.Fatalf("cgroupMemoryMax = %d, %q, %v; want %d, %q, error %v", got, file, err, c.want, c.wantFile, c.wantErr)
			}
		})
	}
}

func TestApplyMemoryLimit_GOMEMLIMITWins(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "off")
	if got := applyMemoryLimit(slog.New(slog.DiscardHandler)); got != 0 {
		t.Fatalf("applyMemoryLimit set %d with GOMEMLIMIT=off", got)
	}
}
