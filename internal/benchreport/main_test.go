package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"text/template"
)

// TestReport_RendersFromSampleOutput renders the report from a saved run
// of every benchmark it reads, so a renamed benchmark or a template typo
// fails here rather than after a long run.
func TestReport_RendersFromSampleOutput(t *testing.T) {
	f, err := os.Open("testdata/sample.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res := results{}
	if err := res.parse(f); err != nil {
		t.Fatal(err)
	}
	tmpl, err := template.New("report").Funcs(funcs).Parse(reportTemplate)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, map[string]any{"R": res, "Machine": "2 cores", "Commands": []string{"go test"}, "Date": "today", "Took": "1s"}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"| through orchd | 12.4 | 806 | 60.3 | 421 | 5.6 | 88.1 | 10,000 | 0 | 151,500 | 66.1 | 1,590 MiB |",
		"- orchd's peak RSS ≤ 600 MiB: 713 MiB **not met**.",
		"per event in the logs (starting the work, storing each event, sending it\nto its followers, reading the logs back), against the agent's\n436 µs",
		"| 100,000 | 10,000 | 2,650 | 10,000 | 0 | 0 | 0 | 1,000 of 1,000 | 0 | 0 | 640 MiB |",
		"Targets: ready ≤ 3 s after start: **met**;",
		"| 3,000 | 3,000 | 8.1 s | 10.2 s | 11.8 s | 10.9 s | 13.1 s | 9,000 | 0 (0) | 0 | 0 | 0 | 0 | 0 |",
		"`leaseTTL` + 2 s (12.0 s):\n  11.8 s **met**.",
		"once a survivor has taken it over and asked the agent for its task's", // the failover's measure
		"each replica used\n6.40 ms of CPU a second (the busiest\n7.99 ms)",
		"| floor hop | 1 | 1,113 | 770 | 4,586 | 0.56 | 1.00 | 1.00 | 413 | 1.00 |",
		"| orchd, state in memory | 1 | 605 | 1,358 | 7,673 | 0.31 | 0.54 | 1.76 | 1,037 | 2.51 |",
		"in memory, nothing durable: 0.54, 0.64, 0.79 the floor hop's",
		"| orchd → orchd | 64 | 93.2 | 621,620 | 1,179,385 | 0.08 | 0.10 | 10.59 | 9,634 | 26.01 |",
		"| through orchd | 6.71 | 4,139 | 6,624 | 1,000 | 0 | 0 | 1,000 | 1,000 | 3.47 | 135.4 MiB | 2.74 | 201.9 MiB | 10 | not on /metrics |",
		"Wall time through orchd: 2.17× the direct",
		"| MCP | 833 | 8,231 | 24,366 | 1,468 | 0.45 | 2.84 |",
		"| `tasks/get` | completed | each every 1,000 ms | 48.2 | 2,306 | 8,206 | — |",
		"| MCP, the steering method | 2,699 | 14,738 | 2,700 | 1.40 |",
		"The method's steer takes 769 µs more than the API's at p50;",
		"| `Get(id)` | 16.9 | 0 | 1.9× |",
		"| orchd traced | 130 | 1,325 | 9,614 |",
		"| orchd, caller sends trace context | 136 | 1,750 | 8,300 |",
		"costs no measurable\n  throughput (≥ 0.95× orchd without it): **met**",
		"| no trace headers | 1,103 | 512 | 3 |",
		"| direct steer (C only) | 321 | 1,030 | 1× |",
		"| idle | steer | A → B → agent | 300 | 3.05 | 7.12 | 5.00 | 0 | 0 |",
		"| under load | interrupt | direct (agent only) | 50 | 1.51 | 3.30 | 1× | 0 | 0 |",
		"steer p99 ≤ 2 ms: idle\n**not met** (7.12 ms), under load **not met**\n(12.48 ms)",
		"Holding them, A's RSS was 231 MiB, B's\n263 MiB",
		"| does not stream (orchd polls) | 5.2 KiB | 1 |",
		"| streamed-100 | 12.5–29.6 ms | 46.9–66.8 ms | 5 | 405 | 5 |",
		"left running:\n**met**",
		"| 10,000 ended records | 571 | 353 | 1 | 1.5× |",
		"tracing on costs ≤ 10% throughput against tracing off:\n  **met**",
		"Targets on loopback: steer p99 ≤ 2 ms **not met**",
		"which is nil here, **not met**\n(7.18 ms)",
		"| message | embedded | 1,269 | 4,609 | 1,151 | 1.71–2.29 | 0.39–0.48 |",
		"message **not met** (0.42×), with a task **met**",
		"| 10,000 ended, 100 running carried on | 217 | 247 |",
		"| one liveness lease per replica, takeover on departure | 2.8 | 6.2 | 1.3 | 12.0 s |",
		"`leaseTTL` + 2 s: **met** (12.0 s)",
		"| embedded | 8.7 KiB | 1.0 | 1.41× |",
		"Target ≤ 16 KiB per in-flight polled delegation on the embedded store:\n**met** (8.7 KiB).",
		"| 100,000 ended, written earlier | 87.0 MiB | 87.0 MiB | 37.0 MiB | 12.2 ms | 2.05× |",
		"**met** (87.0 MiB); right after they were written, **not met**",
		"| quick | orchd, A2A | 507,267 | 551,240 | 50% | 9,939 | 67,834 | 0.5% | 3.7 | 4.0 |",
		"| completed | direct | 1,389 | 9,801 | 0% | 1,208 | 5,373 | 0% | 1.0 | 1.0 |",
		"Task-reply hop p99 ≤ 10 ms on loopback:\n  **not met**",
		"| orchd over gRPC, both ways | 6,900 | 61,300 | 790 | 0.31–0.37 |",
		"direct gRPC call, on the medians: **not met** (0.34×)",
		"| push | 10,000 | 5.1 KiB | 0.00 | 0.05× |",
		"| stream | 2,000 | 106.9 KiB | 4.00 | 1.00× |",
		"Target ≤ 8 KiB per in-flight delegation followed by push: **met**\n(5.1 KiB",
		"the floor hop's CPU per call: 2.63 **not met**,",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "<no value>") || incomplete(out) {
		t.Errorf("report has an empty value:\n%s", out)
	}
}

func TestResults_ParseAndSummarize(t *testing.T) {
	res := results{}
	in := "goos: linux\nBenchmarkX/a-2   \t 100\t  10.0 ns/op\t 3 p50-µs\nBenchmarkX/a#01-2 \t 100\t 30.0 ns/op\t 5 p50-µs\nBenchmarkX/b-2 \t 100\t 20 ns/op\t 4 p50-µs\nPASS\n"
	if err := res.parse(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	if m, _ := res.Med("BenchmarkX/a", "ns/op"); m != 20 {
		t.Errorf("median = %v, want 20", m)
	}
	if r, _ := res.Range("BenchmarkX/a", "p50-µs"); r != "3–5" {
		t.Errorf("range = %q", r)
	}
	if r, _ := res.RatioRange("BenchmarkX/a", "BenchmarkX/b", "ns/op"); r != "0.50" {
		t.Errorf("ratio range = %q, want 0.50 (only run 1 pairs up)", r)
	}
	if _, err := res.Med("BenchmarkY", "ns/op"); err == nil {
		t.Error("a missing benchmark gave no error")
	}
	if err := res.parse(strings.NewReader("BenchmarkZ-2 10 5 ns/op 7\n")); err == nil {
		t.Error("an odd line gave no error")
	}
}

// TestSplice_KeepsSectionsNotMeasured renders the report from a run of
// only the state store's benchmarks over an older report: the state
// store's section is new, every other section keeps the older text, and
// the preamble says which date the kept sections come from.
func TestSplice_KeepsSectionsNotMeasured(t *testing.T) {
	f, err := os.Open("testdata/sample.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	all := results{}
	if err := all.parse(f); err != nil {
		t.Fatal(err)
	}
	tmpl, err := template.New("report").Funcs(funcs).Parse(reportTemplate)
	if err != nil {
		t.Fatal(err)
	}
	var full bytes.Buffer
	if err := tmpl.Execute(&full, map[string]any{"R": all, "Machine": "2 cores", "Commands": []string{"go test"}, "Date": "2026-01-02", "Took": "1s"}); err != nil {
		t.Fatal(err)
	}
	old := strings.Replace(full.String(), "| direct map read |", "| direct map read (older run) |", 1)
	old = strings.Replace(old, "| message | embedded |", "| message | embedded (older run) |", 1)

	state := results{}
	for name, units := range all {
		if strings.HasPrefix(name, "BenchmarkState") {
			state[name] = units
		}
	}
	var part bytes.Buffer
	if err := tmpl.Execute(&part, map[string]any{"R": partial{state}, "Only": "State", "Kept": fullRunDate(old),
		"Machine": "2 cores", "Commands": []string{"go test"}, "Date": "2026-02-03", "Took": "1s"}); err != nil {
		t.Fatal(err)
	}
	got, err := splice(old, part.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| direct map read (older run) |",
		"| message | embedded | 1,269 |",
		"Measured on 2026-02-03 by `go run ./internal/benchreport -only 'State'`",
		"the others are\nkept from the full run of 2026-01-02.",
		"## Hardening",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("spliced report lacks %q:\n%s", want, got)
		}
	}
	for _, bad := range []string{missing, "| message | embedded (older run) |", "NaN"} {
		if strings.Contains(got, bad) {
			t.Errorf("spliced report has %q:\n%s", bad, got)
		}
	}
	if n, m := strings.Count(got, "\n## "), strings.Count(full.String(), "\n## "); n != m {
		t.Errorf("spliced report has %d sections, want %d", n, m)
	}
	if again := fullRunDate(got); again != "2026-01-02" {
		t.Errorf("the spliced report's full run is %q, want 2026-01-02", again)
	}

	// A section whose figures did not run and that the old report lacks
	// cannot be written.
	noState := strings.Replace(old, "## State store", "## Something else", 1)
	if _, err := splice(noState, strings.Replace(part.String(), "| message | embedded | 1,269 |", "| message | embedded | "+missing+" |", 1)); err == nil {
		t.Error("splice wrote a section with figures missing")
	}
}

func TestSelectRuns(t *testing.T) {
	for _, tc := range []struct {
		expr    string
		want    int
		wantErr bool
	}{
		{"^BenchmarkState", 5, false},
		{"^BenchmarkHop$", 1, false},
		{"^BenchmarkProcess", 7, false},
		{"ProcessSteer", 1, false},
		{"ProcessLoad", 1, false},
		{"^BenchmarkInFlight", 2, false},
		{"TaskReply|GRPCHop|InFlightFollow", 3, false},
		{"NoSuchBenchmark", 0, true},
		{"(", 0, true},
	} {
		got, err := selectRuns(tc.expr)
		if (err != nil) != tc.wantErr || len(got) != tc.want {
			t.Errorf("selectRuns(%q) = %d runs, %v; want %d (error %v)", tc.expr, len(got), err, tc.want, tc.wantErr)
		}
	}
}

// TestRun_TestArgs checks a run's go test flags reach its test binary as
// go test would pass them.
func TestRun_TestArgs(t *testing.T) {
	for _, tc := range []struct {
		r    run
		want string
	}{
		{run{"./registry", []string{"-bench", "^BenchmarkLookup$", "-benchmem", "-benchtime", "500ms"}},
			"-test.run ^$ -test.timeout 10m -test.bench ^BenchmarkLookup$ -test.benchmem -test.benchtime 500ms"},
		{run{"./orchestrator", []string{"-bench", "^BenchmarkHop$", "-benchtime", "2000x", "-count", "5"}},
			"-test.run ^$ -test.timeout 10m -test.bench ^BenchmarkHop$ -test.benchtime 2000x -test.count 5"},
	} {
		if got := strings.Join(tc.r.testArgs(), " "); got != tc.want {
			t.Errorf("testArgs(%v) = %q, want %q", tc.r.args, got, tc.want)
		}
	}
}
