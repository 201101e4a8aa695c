package a2aserver

import (
	"cmp"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// How the push notifications given up are logged (pushGiveUpLog).
const (
	// pushLogPeriod is how long one period of the log lasts.
	pushLogPeriod = 10 * time.Second
	// pushLogLines bounds the lines logged one by one in a period, over
	// all hosts.
	pushLogLines = 10
	// pushLogHosts bounds the hosts a summary names.
	pushLogHosts = 10
)

// pushGiveUpLog writes the WARN lines of push notifications given up, so
// that a dead webhook cannot flood the log: in each period (pushLogPeriod,
// starting with the first notification given up) the first notification
// given up for each webhook host is logged one by one, up to
// pushLogLines in all; the others are counted, and one summary line at
// the period's end says how many there were, for which hosts. Counting
// them in metrics is the caller's business.
//
// A period's timer runs only while a period does; close ends the period
// at once and waits for the timer's function.
type pushGiveUpLog struct {
	log    *slog.Logger
	period time.Duration

	// mu guards the fields below.
	mu         sync.Mutex
	lines      int
	logged     map[string]bool // hosts with a line this period
	suppressed map[string]int  // host → notifications given up without a line
	timer      *time.Timer     // ends the period; nil between periods
	closed     bool
	wg         sync.WaitGroup // the timer's function
}

func newPushGiveUpLog(log *slog.Logger) *pushGiveUpLog {
	return &pushGiveUpLog{log: log, period: pushLogPeriod, logged: map[string]bool{}, suppressed: map[string]int{}}
}

// giveUp logs a notification to host given up, with args (slog's
// key-value pairs), or counts it for the period's summary. After close,
// every one is logged.
func (l *pushGiveUpLog) giveUp(host string, args ...any) {
	l.mu.Lock()
	write := l.closed || (!l.logged[host] && l.lines < pushLogLines)
	if write {
		l.logged[host] = true
		l.lines++
	} else {
		l.suppressed[host]++
	}
	if !l.closed && l.timer == nil {
		l.wg.Add(1)
		l.timer = time.AfterFunc(l.period, l.endPeriod)
	}
	l.mu.Unlock()
	if write {
		l.log.Warn("push notification given up", append([]any{"host", host}, args...)...)
	}
}

// endPeriod ends the period when its timer fires.
func (l *pushGiveUpLog) endPeriod() {
	defer l.wg.Done()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.timer = nil
	l.summarize()
}

// summarize writes the period's summary line, if anything went unlogged,
// and begins afresh. The caller holds mu.
func (l *pushGiveUpLog) summarize() {
	if len(l.suppressed) > 0 {
		hosts := slices.SortedFunc(maps.Keys(l.suppressed), func(a, b string) int {
			return cmp.Or(cmp.Compare(l.suppressed[b], l.suppressed[a]), strings.Compare(a, b))
		})
		total := 0
		for _, n := range l.suppressed {
			total += n
		}
		var named []string
		for _, h := range hosts[:min(len(hosts), pushLogHosts)] {
			named = append(named, fmt.Sprintf("%s (%d)", h, l.suppressed[h]))
		}
		args := []any{"notifications", total, "period", l.period, "hosts", strings.Join(named, ", ")}
		if more := len(hosts) - pushLogHosts; more > 0 {
			args = append(args, "otherHosts", more)
		}
		l.log.Warn("push notifications given up and not logged one by one", args...)
	}
	l.lines = 0
	clear(l.logged)
	clear(l.suppressed)
}

// close writes the summary of the period running, if any, and waits for
// its timer's function; from then on every notification given up is
// logged one by one (few are: nothing is queued after close).
func (l *pushGiveUpLog) close() {
	l.mu.Lock()
	l.closed = true
	if l.timer != nil && l.timer.Stop() {
		l.wg.Done()
	}
	l.timer = nil
	l.summarize()
	l.mu.Unlock()
	l.wg.Wait()
}
