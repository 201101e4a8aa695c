// Command fuzzall fuzzes every fuzz target in the module, one after the
// other, for the same time each. It finds the targets itself (every
// `func FuzzXxx(*testing.F)` in a package's test files), so a new target is
// fuzzed without anyone editing a list.
//
//	go run ./internal/fuzzall                  # every target, 1m each
//	go run ./internal/fuzzall -time 30s        # shorter
//	go run ./internal/fuzzall -match JSONNames # only the targets matching a regexp
//	go run ./internal/fuzzall -list            # list the targets, fuzz nothing
//
// Each target runs as `go test <pkg> -run '^$' -fuzz '^Name$' -fuzztime T
// -fuzzminimizetime M` in the module's root. M (-minimize, 5s) is below go
// test's 60s default, which lets a short run spend all its time shrinking
// the new inputs it finds instead of fuzzing.
//
// When a target fails, the input that made it fail is in
// <pkg>/testdata/fuzz/<Name>/, and the command prints that path. Fix the
// bug and commit the input with the fix: from then on plain `go test` (and
// so CI) replays it as a seed. CI itself never fuzzes, since what a random
// run finds depends on luck and time.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

func main() {
	var opts options
	flag.DurationVar(&opts.time, "time", time.Minute, "how long to fuzz each target")
	flag.DurationVar(&opts.minimize, "minimize", 5*time.Second, "how long go test may spend shrinking each input it finds")
	flag.StringVar(&opts.match, "match", "", "fuzz only the targets whose name matches this regexp")
	flag.BoolVar(&opts.list, "list", false, "list the fuzz targets and exit without fuzzing")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, ".", opts); err != nil {
		fmt.Fprintln(os.Stderr, "fuzzall:", err)
		os.Exit(1)
	}
}

// errFound is returned when a target failed; the details are already
// printed.
var errFound = errors.New("fuzzing found failures (see above)")

// options are the command's flags.
type options struct {
	time     time.Duration // per target
	minimize time.Duration // per input found
	match    string        // a regexp on target names
	list     bool          // list, do not fuzz
}

// run fuzzes (or lists) the targets of the module that dir is in.
func run(ctx context.Context, w io.Writer, dir string, opts options) error {
	if opts.time <= 0 {
		return fmt.Errorf("-time %s: must be above zero", opts.time)
	}
	if opts.minimize < 0 {
		return fmt.Errorf("-minimize %s: must not be below zero", opts.minimize)
	}
	re, err := regexp.Compile(opts.match)
	if err != nil {
		return fmt.Errorf("-match: %w", err)
	}
	root, err := moduleRoot(ctx, dir)
	if err != nil {
		return err
	}
	all, err := discover(ctx, root)
	if err != nil {
		return err
	}
	var targets []target
	for _, t := range all {
		if re.MatchString(t.name) {
			targets = append(targets, t)
		}
	}
	if len(targets) == 0 {
		return fmt.Errorf("no fuzz target matches %q", opts.match)
	}
	if opts.list {
		for _, t := range targets {
			fmt.Fprintf(w, "%s %s\n", t.pkg, t.name)
		}
		return nil
	}
	fmt.Fprintf(w, "fuzzing %d targets for %s each\n", len(targets), opts.time)
	var failed []result
	for _, t := range targets {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted before %s %s: %w", t.pkg, t.name, ctx.Err())
		}
		fmt.Fprintf(w, "--- %s %s\n", t.pkg, t.name)
		res := fuzz(ctx, root, t, opts, w)
		if res.err != nil {
			fmt.Fprintf(w, "%s\n", res.summary())
			failed = append(failed, res)
		}
	}
	if len(failed) == 0 {
		fmt.Fprintf(w, "no failures in %d targets\n", len(targets))
		return nil
	}
	fmt.Fprintf(w, "\n%d of %d targets failed:\n", len(failed), len(targets))
	for _, res := range failed {
		fmt.Fprintf(w, "  %s\n", res.summary())
	}
	fmt.Fprintln(w, "Each crash input is a new seed: fix the bug, then commit the input in <pkg>/testdata/fuzz/<Name>/ with the fix, so plain `go test` replays it from then on.")
	return errFound
}

// target is one fuzz target.
type target struct {
	pkg  string // as given to go test, relative to the module root: ./orchestrator
	dir  string // the package's directory
	name string // FuzzJSONNames
}

// moduleRoot is the directory of the main module's go.mod, seen from dir.
func moduleRoot(ctx context.Context, dir string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "env", "GOMOD")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("%s is not inside a Go module", dir)
	}
	return filepath.Dir(gomod), nil
}

// discover lists the fuzz targets of every package under root, in package
// order and then in the order they appear in the files.
func discover(ctx context.Context, root string) ([]target, error) {
	// One line per package: its directory, then its test files.
	cmd := exec.CommandContext(ctx, "go", "list", "-f",
		`{{.Dir}}{{range .TestGoFiles}}{{"\t"}}{{.}}{{end}}{{range .XTestGoFiles}}{{"\t"}}{{.}}{{end}}`, "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list ./...: %w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	var targets []target
	for line := range strings.Lines(string(out)) {
		fields := strings.Split(strings.TrimSpace(line), "\t")
		dir, files := fields[0], fields[1:]
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			return nil, fmt.Errorf("package %s: %w", dir, err)
		}
		pkg := "./" + filepath.ToSlash(rel)
		if rel == "." {
			pkg = "."
		}
		for _, f := range files {
			names, err := fuzzFuncs(filepath.Join(dir, f))
			if err != nil {
				return nil, err
			}
			for _, n := range names {
				targets = append(targets, target{pkg: pkg, dir: dir, name: n})
			}
		}
	}
	return targets, nil
}

// fuzzFuncs returns the fuzz targets declared in one test file: top-level
// functions named Fuzz or FuzzXxx (not Fuzzxxx, as go test decides) with
// one *testing.F parameter.
func fuzzFuncs(path string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	var names []string
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Recv != nil || !isFuzzName(fn.Name.Name) {
			continue
		}
		params := fn.Type.Params.List
		if len(params) != 1 || len(params[0].Names) > 1 {
			continue
		}
		star, ok := params[0].Type.(*ast.StarExpr)
		if !ok {
			continue
		}
		if sel, ok := star.X.(*ast.SelectorExpr); ok && sel.Sel.Name == "F" {
			names = append(names, fn.Name.Name)
		}
	}
	return names, nil
}

// isFuzzName applies go test's rule: "Fuzz" alone or followed by a
// character that is not a lower-case letter.
func isFuzzName(name string) bool {
	rest, ok := strings.CutPrefix(name, "Fuzz")
	if !ok {
		return false
	}
	if rest == "" {
		return true
	}
	r, _ := utf8.DecodeRuneInString(rest)
	return !unicode.IsLower(r)
}

// result is how one target's run ended.
type result struct {
	target
	err   error
	crash string // the failing input's file, relative to the module root; "" if none was written
}

// summary is one line on a failed run.
func (r result) summary() string {
	if r.crash == "" {
		return fmt.Sprintf("FAIL %s %s: %v; no new input was written (a seed in testdata/fuzz/%s/ or a build error?)", r.pkg, r.name, r.err, r.name)
	}
	return fmt.Sprintf("FAIL %s %s: crash input written to %s; re-run it with: go test %s -run '^%s$/^%s$'",
		r.pkg, r.name, r.crash, r.pkg, r.name, filepath.Base(r.crash))
}

// failingInput matches go test's line naming the input it saved, a path
// relative to the package's directory.
var failingInput = regexp.MustCompile(`Failing input written to (\S+)`)

// fuzz runs one target, copying go test's output to w.
func fuzz(ctx context.Context, root string, t target, opts options, w io.Writer) result {
	cmd := exec.CommandContext(ctx, "go", "test", t.pkg, "-run", "^$", "-fuzz", "^"+t.name+"$",
		"-fuzztime", opts.time.String(), "-fuzzminimizetime", opts.minimize.String())
	cmd.Dir = root
	// On Ctrl-C let go test stop its workers and report, as it does by itself.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout = io.MultiWriter(w, &out)
	cmd.Stderr = cmd.Stdout
	res := result{target: t}
	if err := cmd.Run(); err != nil {
		res.err = fmt.Errorf("go test %s -fuzz %s: %w", t.pkg, t.name, err)
	}
	if m := failingInput.FindSubmatch(out.Bytes()); m != nil {
		p := filepath.Join(t.dir, filepath.FromSlash(string(m[1])))
		if rel, err := filepath.Rel(root, p); err == nil {
			p = rel
		}
		res.crash = filepath.ToSlash(p)
	}
	return res
}
