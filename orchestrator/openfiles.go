package orchestrator

import "log/slog"

// What the open-files limit lets orchd run.
//
// Each delegation followed on a stream holds a connection to its agent,
// and each caller following work holds one to orchd: on a busy node the
// process's open-files limit (RLIMIT_NOFILE), not its memory, may be what
// caps the running work. Go raises the soft limit to the hard one when
// the process starts (Go 1.19 and later, on Unix), so orchd does not set
// it again: it reads it when it starts serving, logs it, and warns when
// delegation.maxRunning is more than it holds. Past the limit, a
// connection to an agent that cannot be opened (EMFILE) refuses the work
// as over a limit naming open files (delegation.SettingOpenFiles).

// fdReserve is the file descriptors left for everything but delegations'
// connections to their agents: the listeners, the state store's files,
// the callers' connections.
const fdReserve = 1024

// fdHolds is how many streamed delegations an open-files limit of soft
// holds, after fdReserve; a very large soft limit (RLIM_INFINITY) holds
// any number.
func fdHolds(soft uint64) int {
	const most = 1 << 40
	switch {
	case soft <= fdReserve:
		return 0
	case soft-fdReserve > most:
		return most
	}
	return int(soft - fdReserve)
}

// checkOpenFiles logs the process's open-files limit at info and warns
// when it holds fewer streamed delegations than maxRunning (0: no limit)
// allows to run; it says nothing where the limit cannot be read.
func checkOpenFiles(log *slog.Logger, maxRunning int) {
	if soft, hard, ok := openFilesLimit(); ok {
		noteOpenFiles(log, soft, hard, maxRunning)
	}
}

// noteOpenFiles logs what checkOpenFiles says of limits soft and hard.
func noteOpenFiles(log *slog.Logger, soft, hard uint64, maxRunning int) {
	holds := fdHolds(soft)
	log.Info("open files limit", "soft", soft, "hard", hard, "holdsStreamedDelegations", holds)
	if maxRunning == 0 || maxRunning > holds {
		log.Warn("the open files limit, not delegation.maxRunning, caps the delegations this orchd can follow on streams: past it, new work is refused as over open files",
			"openFiles", soft, "holdsStreamedDelegations", holds, "maxRunning", maxRunning, "reserve", fdReserve)
	}
}
