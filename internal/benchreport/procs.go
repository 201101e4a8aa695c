package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The out-of-process runs (hops.go, load.go, hostile.go, mcp.go,
// scale.go, steer.go, cluster.go) measure orchd as users run it: the
// client is this process, and the agents, a reverse proxy, the floor hop
// and each orchd are processes of their own on 127.0.0.1. The helper
// processes are this binary again, told their role by roleEnv (roles.go);
// orchd is the real daemon, built from ./cmd/orchd and run as `orchd
// serve --config`.

const (
	// readyWait bounds how long a process may take to get ready.
	readyWait = 60 * time.Second
	// stopWait bounds how long a process may take to exit once asked to,
	// before it is killed.
	stopWait = 15 * time.Second
	// tailLines is how many of a process's last log lines are kept for
	// error messages.
	tailLines = 20
	// keptProblems is how many of orchd's WARN and ERROR lines are kept to
	// be shown after a run.
	keptProblems = 5
)

// harness owns the processes of one out-of-process run and the temporary
// directory their files live in.
type harness struct {
	log   *slog.Logger
	dir   string
	exe   string // this binary, re-executed for the helper roles
	orchd string // the orchd binary
	procs []*proc
}

// newHarness makes the run's temporary directory, raises the limit on
// open files as far as the system allows, for this process and the
// processes it starts, and builds orchd into the directory (buildOrchd).
// Every run of the report starts orchd; the directory is removed again
// when the build fails.
func newHarness(ctx context.Context, log *slog.Logger) (*harness, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this binary: %w", err)
	}
	dir, err := os.MkdirTemp("", "benchreport-")
	if err != nil {
		return nil, fmt.Errorf("temporary directory: %w", err)
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			log.Warn("could not raise the open files limit", "error", err)
		}
	}
	h := &harness{log: log, dir: dir, exe: exe}
	if err := h.buildOrchd(ctx); err != nil {
		h.close()
		return nil, err
	}
	return h, nil
}

// close stops every process, the last started first, and removes the
// temporary directory.
func (h *harness) close() {
	for i := len(h.procs) - 1; i >= 0; i-- {
		if err := h.procs[i].stop(); err != nil {
			h.log.Warn("process did not stop cleanly", "process", h.procs[i].name, "error", err)
		}
	}
	h.procs = nil
	if err := os.RemoveAll(h.dir); err != nil {
		h.log.Warn("temporary directory not removed", "error", err)
	}
}

// buildOrchd builds the daemon from the module's ./cmd/orchd.
func (h *harness) buildOrchd(ctx context.Context) error {
	bin := filepath.Join(h.dir, "orchd")
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/orchd/orchd/cmd/orchd")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/orchd: %w: %s", err, bounded(out))
	}
	h.log.Info("built orchd", "took", time.Since(start).Round(time.Millisecond))
	h.orchd = bin
	return nil
}

// role starts this binary again playing role with args, and returns the
// base URLs it serves once it has said it is ready: one per listener.
func (h *harness) role(ctx context.Context, role string, args ...string) (*proc, []string, error) {
	cmd := exec.Command(h.exe)
	cmd.Env = append(os.Environ(), roleEnv+"="+role, roleArgsEnv+"="+strings.Join(args, ","))
	p, err := h.start(role, cmd)
	if err != nil {
		return nil, nil, err
	}
	select {
	case line, ok := <-p.ready:
		urls, found := strings.CutPrefix(line, readyPrefix)
		if !ok || !found {
			return nil, nil, fmt.Errorf("%s did not get ready: %s", role, p.tail())
		}
		return p, strings.Fields(urls), nil
	case <-time.After(readyWait):
		return nil, nil, fmt.Errorf("%s not ready in %s: %s", role, readyWait, p.tail())
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
}

// orchdSpec is what one orchd serves: its name, the skills its card
// lists, and the agents it registers (id → base URL, in order).
type orchdSpec struct {
	name   string
	skills []string
	agents [][2]string
	memory bool // store: memory, instead of the embedded durable store
	// extra is more of the config file, YAML added at its end; token is
	// the bearer token the readiness checks send, when extra configures
	// authentication; grpc is agent.grpc.listen, "" for none.
	extra, token, grpc string
}

// daemon runs `orchd serve --config` on a config file for spec: a free
// loopback port, a state directory of its own (so the embedded durable
// store, unless spec.memory), its default logger (text at info on
// standard error, drained), everything else the embedded defaults. It
// returns once orchd is ready and has registered every agent.
func (h *harness) daemon(ctx context.Context, spec orchdSpec) (*proc, string, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	state := filepath.Join(h.dir, spec.name+"-state")
	var y strings.Builder
	fmt.Fprintf(&y, "listen: %s\nstateDir: %s\nagent:\n  name: %s\n", addr, state, spec.name)
	if spec.grpc != "" {
		fmt.Fprintf(&y, "  grpc:\n    listen: %s\n", spec.grpc)
	}
	if len(spec.skills) > 0 {
		y.WriteString("  skills:\n")
		for _, s := range spec.skills {
			fmt.Fprintf(&y, "    - {id: %s}\n", s)
		}
	}
	if spec.memory {
		y.WriteString("store: memory\n")
	}
	y.WriteString("agents:\n")
	for _, a := range spec.agents {
		fmt.Fprintf(&y, "  - {id: %s, url: %q}\n", a[0], a[1])
	}
	y.WriteString(spec.extra)
	cfg := filepath.Join(h.dir, spec.name+".yaml")
	if err := os.WriteFile(cfg, []byte(y.String()), 0o600); err != nil {
		return nil, "", fmt.Errorf("write %s's config: %w", spec.name, err)
	}
	p, err := h.start(spec.name, exec.Command(h.orchd, "serve", "--config", cfg))
	if err != nil {
		return nil, "", err
	}
	base := "http://" + addr
	deadline := time.Now().Add(readyWait)
	for {
		var page struct {
			Agents []json.RawMessage `json:"agents"`
		}
		if getJSON(ctx, base+"/readyz", nil) == nil && getJSONAs(ctx, base+"/v1/agents", spec.token, &page) == nil && len(page.Agents) == len(spec.agents) {
			p.resetCounts() // what it says starting up is not what it does measured
			return p, base, nil
		}
		select {
		case <-p.exited:
			return nil, "", fmt.Errorf("%s exited before it was ready: %s", spec.name, p.tail())
		case <-ctx.Done():
			return nil, "", ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, "", fmt.Errorf("%s not ready with its %d agents in %s: %s", spec.name, len(spec.agents), readyWait, p.tail())
		}
	}
}

// readyPrefix starts the line a helper process writes on its standard
// output once it listens, followed by its base URLs.
const readyPrefix = "ready "

// proc is one process the harness started. Its standard error is read to
// the end: the last lines are kept for error messages and orchd's WARN and
// ERROR lines are counted.
type proc struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	ready  chan string   // the first line of standard output
	exited chan struct{} // closed once the process has exited
	logs   sync.WaitGroup

	mu       sync.Mutex
	last     []string
	warns    int
	errs     int
	problems []string
	waitErr  error
}

// start starts cmd as the process name, owned by h.
func (h *harness) start(name string, cmd *exec.Cmd) (*proc, error) {
	p := &proc{name: name, cmd: cmd, ready: make(chan string, 1), exited: make(chan struct{})}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p.stdin = stdin
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	h.procs = append(h.procs, p)
	p.logs.Add(2)
	go func() {
		defer p.logs.Done()
		defer outR.Close()
		sc := bufio.NewScanner(outR)
		if sc.Scan() {
			p.ready <- sc.Text()
		}
		close(p.ready)
		_, _ = io.Copy(io.Discard, outR)
	}()
	go func() {
		defer p.logs.Done()
		defer errR.Close()
		sc := bufio.NewScanner(errR)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.record(sc.Text())
		}
		_, _ = io.Copy(io.Discard, errR) // past an over-long line
	}()
	go func() {
		p.logs.Wait()
		err := cmd.Wait()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(p.exited)
	}()
	return p, nil
}

// record keeps one line of the process's log.
func (p *proc) record(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.last) == tailLines {
		p.last = append(p.last[:0], p.last[1:]...)
	}
	p.last = append(p.last, line)
	warn, bad := strings.Contains(line, "level=WARN"), strings.Contains(line, "level=ERROR")
	if warn {
		p.warns++
	}
	if bad {
		p.errs++
	}
	if (warn || bad) && len(p.problems) < keptProblems {
		p.problems = append(p.problems, line)
	}
}

// resetCounts forgets the WARN and ERROR lines logged so far.
func (p *proc) resetCounts() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.warns, p.errs, p.problems = 0, 0, nil
}

// tail is the last lines the process logged, for an error message.
func (p *proc) tail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.last, "\n")
}

// logCounts is how many WARN and ERROR lines the process logged so far,
// and the first few of them.
func (p *proc) logCounts() (warns, errs int, first []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.warns, p.errs, append([]string(nil), p.problems...)
}

// pid is the process's id.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// stop closes the process's standard input (a helper exits on it), sends
// SIGTERM (orchd shuts down gracefully on it) and waits; a process still
// running after stopWait is killed.
func (p *proc) stop() error {
	select {
	case <-p.exited:
	default:
		p.stdin.Close()
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(stopWait):
			_ = p.cmd.Process.Kill()
			<-p.exited
			return fmt.Errorf("%s did not exit within %s of SIGTERM and was killed", p.name, stopWait)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var ee *exec.ExitError
	if p.waitErr == nil || errors.As(p.waitErr, &ee) && !ee.Exited() { // exit 0, or ended by the SIGTERM
		return nil
	}
	return fmt.Errorf("%s: %w: %s", p.name, p.waitErr, strings.Join(p.last, "\n"))
}

// kill kills the process with SIGKILL, as kill -9 does, and waits for it
// to exit.
func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// procStatus is what /proc/<pid>/status says of a process's memory and
// threads.
type procStatus struct {
	rssKiB, hwmKiB int64
	threads        int
}

// readStatus reads pid's /proc status.
func readStatus(pid int) (procStatus, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return procStatus{}, fmt.Errorf("process status: %w", err)
	}
	s, err := parseStatus(b)
	if err != nil {
		return s, fmt.Errorf("process %d: %w", pid, err)
	}
	return s, nil
}

// maxStatusBytes bounds a /proc status file parseStatus reads.
const maxStatusBytes = 64 << 10

// parseStatus reads VmRSS, VmHWM (kB) and Threads from the text of a
// /proc/<pid>/status file; one without a positive VmRSS is an error.
func parseStatus(b []byte) (procStatus, error) {
	if len(b) > maxStatusBytes {
		return procStatus{}, fmt.Errorf("process status is over %d bytes", maxStatusBytes)
	}
	var s procStatus
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || v < 0 {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			s.rssKiB = v
		case "VmHWM:":
			s.hwmKiB = v
		case "Threads:":
			s.threads = int(min(v, 1<<30))
		}
	}
	if s.rssKiB <= 0 {
		return procStatus{}, errors.New("process status has no VmRSS")
	}
	return s, nil
}

// clockTick is the unit of a process's CPU times in /proc/<pid>/stat:
// USER_HZ, 100 on every Linux architecture Go runs on.
const clockTick = 10 * time.Millisecond

// maxStatBytes bounds a /proc stat file parseCPU reads.
const maxStatBytes = 4 << 10

// cpuTime is the CPU time pid has used so far, user and system.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("process CPU time: %w", err)
	}
	d, err := parseCPU(b)
	if err != nil {
		return 0, fmt.Errorf("process %d: %w", pid, err)
	}
	return d, nil
}

// parseCPU reads utime and stime (the 14th and 15th fields) from the text
// of a /proc/<pid>/stat file. The command name, the 2nd field, is in
// parentheses and may hold spaces and parentheses itself, so the fields
// are counted from its last closing parenthesis.
func parseCPU(b []byte) (time.Duration, error) {
	if len(b) > maxStatBytes {
		return 0, fmt.Errorf("process stat is over %d bytes", maxStatBytes)
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("process stat has no command name")
	}
	f := strings.Fields(s[i+1:]) // from the 3rd field, the state
	if len(f) < 13 {
		return 0, fmt.Errorf("process stat has %d fields after the command name, want at least 13", len(f))
	}
	var ticks int64
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > 1<<32 { // beyond a year of CPU: garbled
			return 0, fmt.Errorf("process stat: CPU time %q", v)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// cpuOf is the CPU time the processes have used so far, together.
func cpuOf(ps []*proc) (time.Duration, error) {
	var sum time.Duration
	for _, p := range ps {
		d, err := cpuTime(p.pid())
		if err != nil {
			return 0, err
		}
		sum += d
	}
	return sum, nil
}

// resetPeak sets pid's peak resident set size (VmHWM) to its current
// one, so a later VmHWM is the peak since now.
func resetPeak(pid int) error {
	if err := os.WriteFile("/proc/"+strconv.Itoa(pid)+"/clear_refs", []byte("5"), 0); err != nil {
		return fmt.Errorf("reset peak RSS: %w", err)
	}
	return nil
}

// freeAddr returns a loopback address free a moment ago, for orchd's
// config (orchd on an ephemeral port would not say it in its card).
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// maxJSON bounds a JSON answer the harness reads from orchd or a helper.
const maxJSON = 16 << 20

// getJSON GETs url (within 5 seconds) into out, which may be nil; any
// status but 200 is an error.
func getJSON(ctx context.Context, url string, out any) error {
	return getJSONAs(ctx, url, "", out)
}

// getJSONAs is getJSON sending token as a bearer token, when not empty.
func getJSONAs(ctx context.Context, url, token string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxJSON))
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxJSON)).Decode(out); err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	return nil
}

// bounded is at most the last 4 KiB of a command's output, for an error.
func bounded(out []byte) string {
	if len(out) > 4<<10 {
		out = out[len(out)-4<<10:]
	}
	return strings.TrimSpace(string(out))
}

// processRun is the out-of-process run named bench; the report's runs
// name only these.
func processRun(bench string) func(context.Context, io.Writer, *slog.Logger) error {
	switch bench {
	case hopBench:
		return runHops
	case loadBench:
		return runLoad
	case hostileBench:
		return runHostile
	case mcpBench:
		return runMCP
	case scaleBench:
		return runScale
	case steerBench:
		return runSteer
	case clusterBench:
		return runCluster
	}
	return func(context.Context, io.Writer, *slog.Logger) error {
		return fmt.Errorf("no out-of-process run is named %s", bench)
	}
}
