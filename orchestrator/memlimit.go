package orchestrator

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"runtime/debug"
	"strconv"
	"strings"
)

// memoryLimitShare is the share of the cgroup's memory limit that orchd
// gives the Go runtime as its soft memory limit. The rest is for what the
// runtime does not count: the binary's mapped code and the kernel's socket
// buffers for each connection.
const memoryLimitShare = 0.9

// cgroupFileMax bounds what is read of a cgroup file.
const cgroupFileMax = 64 << 10

// noCgroupLimit is a cgroup v1 limit at or above which there is none (the
// kernel shows "no limit" as the largest page-aligned int64).
const noCgroupLimit = 1 << 62

// applyMemoryLimit gives the Go runtime a soft memory limit of
// memoryLimitShare of the cgroup's memory limit (cgroup v2 memory.max, or
// v1 memory.limit_in_bytes) when the process runs under one and GOMEMLIMIT
// is not set, and logs it. With it the collector runs more often as the
// heap nears the limit instead of letting it grow to twice the live heap
// (GOGC=100) and be killed by the kernel. GOMEMLIMIT, including
// GOMEMLIMIT=off, always wins, and GOGC is left to the runtime. It returns
// the limit it set, 0 for none.
func applyMemoryLimit(log *slog.Logger) int64 {
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		log.Debug("memory limit from GOMEMLIMIT", "GOMEMLIMIT", v)
		return 0
	}
	max, file, err := cgroupMemoryMax(os.DirFS("/"))
	if err != nil {
		log.Warn("no memory limit: the cgroup's could not be read", "error", err)
		return 0
	}
	if max <= 0 {
		return 0
	}
	limit := int64(float64(max) * memoryLimitShare)
	debug.SetMemoryLimit(limit)
	log.Info("memory limit set from the cgroup's", "limit_bytes", limit, "cgroup_bytes", max, "file", "/"+file, "share", memoryLimitShare)
	return limit
}

// cgroupMemoryMax is the memory limit of the process's cgroup in fsys (the
// root file system), and the file it is read from; 0 when there is none
// (no cgroup with the memory controller, or no limit set).
func cgroupMemoryMax(fsys fs.FS) (int64, string, error) {
	own, err := readSmall(fsys, "proc/self/cgroup")
	if errors.Is(err, fs.ErrNotExist) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", err
	}
	var candidates []string
	sc := bufio.NewScanner(bytes.NewReader(own))
	for sc.Scan() { // "hierarchy-ID:controllers:path"
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		dir := path.Clean("/" + parts[2])[1:]
		switch {
		case parts[0] == "0" && parts[1] == "": // v2
			candidates = append(candidates, path.Join("sys/fs/cgroup", dir, "memory.max"), "sys/fs/cgroup/memory.max")
		case hasController(parts[1], "memory"): // v1
			candidates = append(candidates, path.Join("sys/fs/cgroup/memory", dir, "memory.limit_in_bytes"), "sys/fs/cgroup/memory/memory.limit_in_bytes")
		}
	}
	for _, file := range candidates {
		b, err := readSmall(fsys, file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, "", err
		}
		v := strings.TrimSpace(string(b))
		if v == "max" {
			return 0, file, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, "", fmt.Errorf("read /%s: %q is not a memory limit", file, v)
		}
		if n >= noCgroupLimit {
			return 0, file, nil
		}
		return n, file, nil
	}
	return 0, "", nil
}

// hasController reports whether a v1 hierarchy's controller list names c.
func hasController(list, c string) bool {
	for name := range strings.SplitSeq(list, ",") {
		if name == c {
			return true
		}
	}
	return false
}

// readSmall reads a file of fsys, refusing one over cgroupFileMax.
func readSmall(fsys fs.FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, cgroupFileMax+1))
	if err != nil {
		return nil, fmt.Errorf("read /%s: %w", name, err)
	}
	if len(b) > cgroupFileMax {
		return nil, fmt.Errorf("read /%s: more than %d bytes", name, cgroupFileMax)
	}
	return b, nil
}
