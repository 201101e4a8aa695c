package main

import (
	"errors"
	"log/slog"
	"math"
	"os"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// setMemoryLimit gives the Go runtime a soft memory limit of 90% of the
// cgroup's memory limit (cgroup v2 memory.max, or v1
// memory.limit_in_bytes) when orchd runs under one, so the collector runs
// more often as the heap nears it instead of letting the heap grow to
// twice what is live (GOGC=100) and the kernel kill the process. GOMEMLIMIT
// always wins; AUTOMEMLIMIT changes the share (0.8) or turns it off
// ("off"). It logs the limit it set, and why it set none when the cgroup
// could not be read.
func setMemoryLimit(log *slog.Logger) {
	limit, err := memlimit.Set(memlimit.WithProvider(memlimit.FromCgroup))
	switch {
	case errors.Is(err, memlimit.ErrCgroupsNotSupported):
		log.Debug("no memory limit: no cgroups here")
	case err != nil:
		log.Warn("no memory limit: the cgroup's could not be read", "error", err)
	case limit < math.MaxInt64 && os.Getenv("GOMEMLIMIT") == "":
		log.Info("memory limit set from the cgroup's", "limit_bytes", limit)
	}
}
