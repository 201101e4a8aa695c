// Command benchreport runs orchd's headline benchmarks and writes
// docs/benchmarks.md from their results: first the figures users see,
// measured out of process (the client, orchd and the agents each in
// their own process, orchd run as `orchd serve` with a full store): a hop
// against a direct call, a reverse proxy and the thinnest a2a-go hop,
// 1,000 delegations at once, 300 clients sending the largest bodies
// with and without credentials, orchd's MCP endpoint against its HTTP
// API (delegating, reading tasks, steering), 10,000 long delegations on
// one node and across its kill -9, steering across orchd → orchd →
// agent, idle and while 2,000 delegations are held, and three replicas
// on a three-node NATS cluster, one killed with kill -9; then, in
// process, the cached registry lookup,
// profile building, policy evaluation, a hop through orchd against a
// direct call and a reverse proxy (with tracing off and on), a hop to
// agents that answer with a Task, a gRPC hop, steering across a chain,
// storing delegations into a full store, memory per in-flight delegation
// (by stream, poll and push), how soon delegations past their deadline end,
// what the embedded state store costs against keeping state in memory,
// what replicas sharing a NATS server spend keeping their running work
// followed and how soon they carry on a killed one's, and what
// authenticating callers, authorizing them and verifying card signatures
// cost.
// Every ratio in the report compares figures measured in the same run.
//
//	go run ./internal/benchreport                 # about twenty minutes on 2 cores
//	go run ./internal/benchreport -o report.md    # somewhere else
//	go run ./internal/benchreport -raw run.txt    # keep the raw output too
//	go run ./internal/benchreport -from run.txt   # render a saved run again
//	go run ./internal/benchreport -only State     # only the matching runs
//
// With -only, only the runs whose benchmark matches the regular
// expression run, and only the report's sections whose figures all come
// from those runs are written again: the others keep their text from the
// report already at -o.
//
// It builds each package's test binary once (`go test -c`) and runs the
// benchmarks through it in the package's directory, with the flags the
// listed `go test` commands give it, and runs `go build ./cmd/orchd`, all
// in the module's root, so run it from there, on a machine doing nothing
// else. It logs how long each run took.
package main

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/template"
	"time"
)

//go:embed benchmarks.md.tmpl
var reportTemplate string

// run is one `go test -bench` invocation of the report, or, with no
// package, one of this command's own out-of-process runs (processRun)
// named by its -bench pattern.
type run struct {
	pkg  string
	args []string
}

// command is the go command's arguments for r.
func (r run) command() []string {
	if r.pkg == "" {
		return []string{"run", "./internal/benchreport", "-only", r.bench()}
	}
	return append([]string{"test", r.pkg, "-run", "^$"}, r.args...)
}

// bench is the name of the benchmark r runs: its -bench pattern without
// anchors.
func (r run) bench() string {
	for i, a := range r.args {
		if a == "-bench" && i+1 < len(r.args) {
			return strings.TrimSuffix(strings.TrimPrefix(r.args[i+1], "^"), "$")
		}
	}
	return ""
}

// runs are the benchmarks the report is built from.
var runs = []run{
	{"", []string{"-bench", "^" + hopBench + "$"}},
	{"", []string{"-bench", "^" + loadBench + "$"}},
	{"", []string{"-bench", "^" + hostileBench + "$"}},
	{"", []string{"-bench", "^" + mcpBench + "$"}},
	{"", []string{"-bench", "^" + scaleBench + "$"}},
	{"", []string{"-bench", "^" + steerBench + "$"}},
	{"", []string{"-bench", "^" + clusterBench + "$"}},
	{"./registry", []string{"-bench", "^BenchmarkLookup$", "-benchmem", "-benchtime", "500ms"}},
	{"./registry", []string{"-bench", "^BenchmarkMemory$", "-benchtime", "1x"}},
	{"./capability", []string{"-bench", "^BenchmarkBuild$", "-benchmem", "-benchtime", "500ms", "-count", "5"}},
	{"./policies", []string{"-bench", "^BenchmarkEvaluate$", "-benchmem", "-benchtime", "500ms", "-count", "5"}},
	{"./orchestrator", []string{"-bench", "^BenchmarkHop$", "-benchtime", "2000x", "-count", "3"}},
	{"./telemetry", []string{"-bench", "^BenchmarkPassthrough$", "-benchmem", "-benchtime", "500ms", "-count", "5"}},
	{"./orchestrator", []string{"-bench", "^BenchmarkTaskReply$", "-benchtime", "1000x"}},
	{"./orchestrator", []string{"-bench", "^BenchmarkGRPCHop$", "-benchtime", "1s"}},
	{"./orchestrator", []string{"-bench", "^BenchmarkSteerChain$", "-benchtime", "300x", "-count", "3"}},
	{"./delegation", []string{"-bench", "^BenchmarkStorePut$", "-benchmem", "-benchtime", "500ms", "-count", "5"}},
	{"./delegation", []string{"-bench", "^BenchmarkInFlight$", "-benchtime", "1x"}},
	{"./delegation", []string{"-bench", "^BenchmarkInFlightFollow$", "-benchtime", "1x"}},
	{"./delegation", []string{"-bench", "^BenchmarkDeadline$", "-benchtime", "1x", "-count", "3"}},
	{"./orchestrator", []string{"-bench", "^BenchmarkStateHop$", "-benchtime", "500ms"}},
	{"./orchestrator", []string{"-bench", "^BenchmarkStateRestart$", "-benchtime", "5x"}},
	{"./orchestrator", []string{"-bench", "^BenchmarkStateInFlight$", "-benchtime", "1x"}},
	{"./orchestrator", []string{"-bench", "^BenchmarkStateRSS$", "-benchtime", "1x"}},
	{"./store", []string{"-bench", "^BenchmarkStateReplicas$", "-benchtime", "1x"}},
	{"./orchestrator", []string{"-bench", "^BenchmarkAuth$", "-benchtime", "500ms"}},
	{"./auth", []string{"-bench", "^BenchmarkAuthenticate$", "-benchmem", "-benchtime", "500ms", "-count", "5"}},
	{"./policies", []string{"-bench", "^BenchmarkAuthorize$", "-benchmem", "-benchtime", "500ms", "-count", "5"}},
	{"./capability", []string{"-bench", "^BenchmarkVerifyCardSignature$", "-benchmem", "-benchtime", "500ms", "-count", "5"}},
}

func main() {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(playRole(role, os.Getenv(roleArgsEnv)))
	}
	out := flag.String("o", "docs/benchmarks.md", "where to write the report")
	raw := flag.String("raw", "", "also write the benchmarks' raw output here")
	from := flag.String("from", "", "render the report from this saved raw output instead of running the benchmarks")
	only := flag.String("only", "", "run only the benchmarks matching this regular expression, and write again only the sections of the report at -o that they measure")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	// An interrupted run still stops the processes it started.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := report(ctx, options{path: *out, raw: *raw, from: *from, only: *only}, log)
	stop()
	if err != nil {
		log.Error("benchreport failed", "error", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	path, raw, from, only string
}

func report(ctx context.Context, o options, log *slog.Logger) error {
	tmpl, err := template.New("report").Funcs(funcs).Parse(reportTemplate)
	if err != nil {
		return fmt.Errorf("report template: %w", err)
	}
	selected := runs
	var old string
	if o.only != "" {
		if selected, err = selectRuns(o.only); err != nil {
			return err
		}
		b, err := os.ReadFile(o.path)
		if err != nil {
			return fmt.Errorf("-only keeps the other sections of the report: %w", err)
		}
		old = string(b)
	}
	var commands []string
	for _, r := range runs {
		commands = append(commands, "go "+strings.Join(r.command(), " "))
	}
	start := time.Now()
	var rawOut bytes.Buffer
	if o.from != "" {
		b, err := os.ReadFile(o.from)
		if err != nil {
			return fmt.Errorf("read saved run: %w", err)
		}
		rawOut.Write(b)
	} else {
		bins, err := buildTests(ctx, selected, log)
		if err != nil {
			return err
		}
		defer os.RemoveAll(bins)
		for _, r := range selected {
			command := "go " + strings.Join(r.command(), " ")
			log.Info("running", "command", command)
			runStart := time.Now()
			if err := r.execute(ctx, bins, io.MultiWriter(&rawOut, os.Stderr), log); err != nil {
				return fmt.Errorf("%s: %w", command, err)
			}
			log.Info("ran", "bench", r.bench(), "took", time.Since(runStart).Round(100*time.Millisecond))
		}
		if o.raw != "" {
			if err := os.WriteFile(o.raw, rawOut.Bytes(), 0o644); err != nil {
				return fmt.Errorf("write raw output: %w", err)
			}
		}
	}
	res := results{}
	if err := res.parse(&rawOut); err != nil {
		return err
	}
	took := time.Since(start).Round(time.Second).String()
	if o.from != "" {
		took = "rendered again from a saved run"
	}
	data := map[string]any{"R": res, "Machine": machine(), "Commands": commands,
		"Date": time.Now().UTC().Format("2006-01-02"), "Took": took}
	if o.only != "" {
		data["R"], data["Only"], data["Kept"] = partial{res}, o.only, fullRunDate(old)
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, data); err != nil {
		return fmt.Errorf("render report: %w", err)
	}
	text := buf.String()
	if o.only != "" {
		if text, err = splice(old, text); err != nil {
			return err
		}
	} else if incomplete(text) {
		return errors.New("render report: a figure could not be computed")
	}
	if err := os.WriteFile(o.path, []byte(text), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	log.Info("report written", "path", o.path, "took", time.Since(start).Round(time.Second))
	return nil
}

// testTimeout is go test's default -timeout, which the test binaries the
// report runs itself get too.
const testTimeout = "10m"

// buildTests compiles the test binary of every package the runs
// benchmark, once, into a new temporary directory it returns (the
// caller removes it): each package's runs then reuse its binary, as
// `go test` would build and link it again for each.
func buildTests(ctx context.Context, runs []run, log *slog.Logger) (string, error) {
	var pkgs []string
	for _, r := range runs {
		if r.pkg != "" && !slices.Contains(pkgs, r.pkg) {
			pkgs = append(pkgs, r.pkg)
		}
	}
	dir, err := os.MkdirTemp("", "benchreport-")
	if err != nil {
		return "", fmt.Errorf("directory for test binaries: %w", err)
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return "", fmt.Errorf("directory for test binaries: %w", err)
	}
	if len(pkgs) == 0 {
		return dir, nil
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", append([]string{"test", "-c", "-o", dir + string(filepath.Separator)}, pkgs...)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("go test -c %s: %w", strings.Join(pkgs, " "), err)
	}
	log.Info("built test binaries", "packages", len(pkgs), "took", time.Since(start).Round(100*time.Millisecond))
	return dir, nil
}

// testArgs is what `go test` would pass r's test binary: r's flags, each
// as -test.<flag>, after -test.run and go test's default -test.timeout.
func (r run) testArgs() []string {
	args := []string{"-test.run", "^$", "-test.timeout", testTimeout}
	for _, a := range r.args {
		if strings.HasPrefix(a, "-") {
			a = "-test." + a[1:]
		}
		args = append(args, a)
	}
	return args
}

// execute runs r, writing its benchmark output to w: an in-process run
// through its package's test binary in bins (buildTests), run in the
// package's directory with the flags `go test` would give it.
func (r run) execute(ctx context.Context, bins string, w io.Writer, log *slog.Logger) error {
	if r.pkg == "" {
		return processRun(r.bench())(ctx, w, log)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bins, path.Base(r.pkg)+".test"), r.testArgs()...)
	cmd.Dir = r.pkg
	cmd.Stdout = w
	cmd.Stderr = os.Stderr
	return cmd.Run()
}

// selectRuns returns the runs whose benchmark matches the expression.
func selectRuns(expr string) ([]run, error) {
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("-only: %w", err)
	}
	var sel []run
	for _, r := range runs {
		if re.MatchString(r.bench()) {
			sel = append(sel, r)
		}
	}
	if len(sel) == 0 {
		return nil, fmt.Errorf("-only %q matches no benchmark of the report", expr)
	}
	return sel, nil
}

// results holds every value measured: benchmark name (without the
// GOMAXPROCS suffix) → unit → one value per run.
type results map[string]map[string][]float64

// benchLine matches a result line: name, iterations, then value-unit pairs.
var benchLine = regexp.MustCompile(`^(Benchmark\S+)\s+\d+\s+(.+)$`)

// procsSuffix is what go test appends to benchmark names when GOMAXPROCS
// is above 1.
var procsSuffix = "-" + strconv.Itoa(runtime.GOMAXPROCS(0))

// repeatSuffix is what go test appends to the name of a sub-benchmark run
// again in the same benchmark (#01, #02): each is one more run of it.
var repeatSuffix = regexp.MustCompile(`#\d+$`)

// parse adds the result lines of `go test -bench` output.
func (res results) parse(r io.Reader) error {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		name, fields := repeatSuffix.ReplaceAllString(strings.TrimSuffix(m[1], procsSuffix), ""), strings.Fields(m[2])
		if len(fields)%2 != 0 {
			return fmt.Errorf("odd benchmark line %q", sc.Text())
		}
		if res[name] == nil {
			res[name] = map[string][]float64{}
		}
		for i := 0; i < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return fmt.Errorf("benchmark line %q: %w", sc.Text(), err)
			}
			res[name][fields[i+1]] = append(res[name][fields[i+1]], v)
		}
	}
	return sc.Err()
}

// values returns the runs of one benchmark's unit; the report fails when
// the benchmark did not run.
func (res results) values(name, unit string) ([]float64, error) {
	vs := res[name][unit]
	if len(vs) == 0 {
		return nil, fmt.Errorf("no %s result for %s", unit, name)
	}
	return vs, nil
}

// Med is the median over the runs.
func (res results) Med(name, unit string) (float64, error) {
	vs, err := res.values(name, unit)
	if err != nil {
		return 0, err
	}
	vs = slices.Sorted(slices.Values(vs))
	if len(vs)%2 == 1 {
		return vs[len(vs)/2], nil
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2, nil
}

// Range shows the lowest and highest runs ("48–52"), or the one value.
func (res results) Range(name, unit string) (string, error) {
	vs, err := res.values(name, unit)
	if err != nil {
		return "", err
	}
	lo, hi := slices.Min(vs), slices.Max(vs)
	if lo == hi {
		return num(lo), nil
	}
	return num(lo) + "–" + num(hi), nil
}

// Ratio is the median of a over the median of b.
func (res results) Ratio(a, b, unit string) (float64, error) {
	am, err := res.Med(a, unit)
	if err != nil {
		return 0, err
	}
	bm, err := res.Med(b, unit)
	return am / bm, err
}

// RatioRange shows the per-run ratios of a to b, run i against run i.
func (res results) RatioRange(a, b, unit string) (string, error) {
	av, err := res.values(a, unit)
	if err != nil {
		return "", err
	}
	bv, err := res.values(b, unit)
	if err != nil {
		return "", err
	}
	var rs []float64
	for i := range min(len(av), len(bv)) {
		rs = append(rs, av[i]/bv[i])
	}
	lo, hi := slices.Min(rs), slices.Max(rs)
	if fmt.Sprintf("%.2f", lo) == fmt.Sprintf("%.2f", hi) {
		return fmt.Sprintf("%.2f", lo), nil
	}
	return fmt.Sprintf("%.2f–%.2f", lo, hi), nil
}

var funcs = template.FuncMap{
	"num":   num,
	"list":  func(xs ...string) []string { return xs },
	"split": strings.Split,
	"f1":    func(v float64) string { return fixed(v, 1) },
	"f2":    func(v float64) string { return fixed(v, 2) },
	"div":   func(a, b float64) float64 { return a / b },
	"add":   func(a, b float64) float64 { return a + b },
	"sub":   func(a, b float64) float64 { return a - b },
	"mul":   func(a, b float64) float64 { return a * b },
	"pct": func(v float64) string {
		if math.IsNaN(v) {
			return missing
		}
		return strconv.FormatFloat(v*100, 'f', 1, 64) + "%"
	},
	"met": func(ok bool) string {
		if ok {
			return "**met**"
		}
		return "**not met**"
	},
}

// fixed formats v with prec decimals.
func fixed(v float64, prec int) string {
	if math.IsNaN(v) {
		return missing
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

// num formats a figure for a table: thousands separated, one decimal
// below 100.
func num(v float64) string {
	if math.IsNaN(v) {
		return missing
	}
	if v < 100 && v != float64(int64(v)) {
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	s := strconv.FormatInt(int64(v+0.5), 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// machine describes where the figures were measured.
func machine() string {
	desc := fmt.Sprintf("%d cores", runtime.NumCPU())
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				desc += " (" + strings.TrimSpace(v) + ")"
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
					desc += fmt.Sprintf(", %.0f GiB", kb/(1<<20))
				}
			}
		}
	}
	return desc + ", " + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH
}
