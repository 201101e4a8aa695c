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
		"| `Get(id)` | 16.9 | 0 | 1.9× |",
		"| orchd traced | 130 | 1,325 | 9,614 |",
		"| orchd, caller sends trace context | 136 | 1,750 | 8,300 |",
		"costs no measurable\n  throughput (≥ 0.95× orchd without it): **met**",
		"| no trace headers | 1,103 | 512 | 3 |",
		"| direct steer (C only) | 321 | 1,030 | 1× |",
		"| does not stream (orchd polls) | 5.2 KiB | 1 |",
		"| streamed-100 | 12.5–29.6 ms | 46.9–66.8 ms | 5 | 405 | 5 |",
		"left running:\n**met**",
		"| 10,000 ended records | 571 | 353 | 1 | 1.5× |",
		"tracing on costs ≤ 10% throughput against tracing off:\n  **met**",
		"Target ≤ 2 ms p99 on loopback: steer **not met**",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "<no value>") {
		t.Errorf("report has an empty value:\n%s", out)
	}
}

func TestResults_ParseAndSummarize(t *testing.T) {
	res := results{}
	in := "goos: linux\nBenchmarkX/a-2   \t 100\t  10.0 ns/op\t 3 p50-µs\nBenchmarkX/a-2 \t 100\t 30.0 ns/op\t 5 p50-µs\nBenchmarkX/b-2 \t 100\t 20 ns/op\t 4 p50-µs\nPASS\n"
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
