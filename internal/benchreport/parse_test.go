package main

import (
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// statusSample is the part of a real /proc/<pid>/status the harness reads.
const statusSample = "Name:\torchd\nVmPeak:\t 1300000 kB\nVmHWM:\t   90112 kB\nVmRSS:\t   61440 kB\nThreads:\t12\n"

func TestParseStatus(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     procStatus
		wantErr  bool
	}{
		{"real", statusSample, procStatus{rssKiB: 61440, hwmKiB: 90112, threads: 12}, false},
		{"no VmRSS", "VmHWM:\t 5 kB\nThreads:\t1\n", procStatus{}, true},
		{"zero VmRSS", "VmRSS:\t 0 kB\n", procStatus{}, true},
		{"garbled values skipped", "VmRSS:\t 7 kB\nVmHWM:\tx kB\nThreads:\t-3\n", procStatus{rssKiB: 7}, false},
		{"empty", "", procStatus{}, true},
		{"too big", "VmRSS:\t1 kB\n" + strings.Repeat(" ", maxStatusBytes), procStatus{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStatus([]byte(tc.in))
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("parseStatus = %+v, %v; want %+v (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func FuzzParseStatus(f *testing.F) {
	f.Add([]byte(statusSample))
	f.Add([]byte("VmRSS: 1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := parseStatus(b)
		if err == nil && (s.rssKiB <= 0 || s.hwmKiB < 0 || s.threads < 0) {
			t.Errorf("parseStatus(%q) = %+v with no error", b, s)
		}
	})
}

func TestMetricValue(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     float64
		ok       bool
	}{
		{"present", "# HELP go_goroutines x\n# TYPE go_goroutines gauge\ngo_goroutines 42\n", 42, true},
		{"with timestamp", "go_goroutines 7 1700000000\n", 7, true},
		{"absent", "go_threads 9\notel_scope_info{a=\"b\"} 1\n", 0, false},
		{"prefix of another name", "go_goroutines_total 3\n", 0, false},
		{"not a number", "go_goroutines many\n", 0, false},
		{"negative", "go_goroutines -1\n", 0, false},
		{"NaN", "go_goroutines NaN\n", 0, false},
		{"no value", "go_goroutines \n", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := metricValue(strings.NewReader(tc.in), "go_goroutines")
			if got != tc.want || ok != tc.ok {
				t.Errorf("metricValue = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func FuzzMetricValue(f *testing.F) {
	f.Add("go_goroutines 42\n")
	f.Add("# TYPE go_goroutines gauge\ngo_goroutines 1e3 17\n")
	f.Fuzz(func(t *testing.T, in string) {
		v, ok := metricValue(strings.NewReader(in), "go_goroutines")
		if ok && (v < 0 || v > 1<<40) || !ok && v != 0 {
			t.Errorf("metricValue(%q) = %v, %v", in, v, ok)
		}
	})
}

// eventsSample is a delegation's event stream as orchd sends it.
const eventsSample = "id: 1\ndata: {\"seq\":1,\"kind\":\"state\",\"state\":\"TASK_STATE_WORKING\"}\n\n" +
	"id: 2\ndata: {\"seq\":2,\"kind\":\"artifact\",\"state\":\"TASK_STATE_WORKING\",\"artifact\":{\"artifactId\":\"a\",\"parts\":[{\"text\":\"pong\"}]}}\n\n" +
	"id: 3\ndata: {\"seq\":3,\"kind\":\"state\",\"state\":\"TASK_STATE_COMPLETED\"}\n\n"

func TestReadEvents(t *testing.T) {
	for _, tc := range []struct {
		name, in     string
		state        a2a.TaskState
		artifact, ok bool
	}{
		{"completed", eventsSample, a2a.TaskStateCompleted, true, true},
		{"no artifact", "data: {\"kind\":\"state\",\"state\":\"TASK_STATE_COMPLETED\"}\n", a2a.TaskStateCompleted, false, true},
		{"failed", "data: {\"kind\":\"state\",\"state\":\"TASK_STATE_FAILED\"}\n", a2a.TaskStateFailed, false, true},
		{"cut short", "data: {\"kind\":\"sta", "", false, false},
		{"empty", "", "", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state, artifact, err := readEvents(strings.NewReader(tc.in))
			if (err == nil) != tc.ok {
				t.Errorf("readEvents: err %v, want ok %v", err, tc.ok)
			}
			if state != tc.state || artifact != tc.artifact {
				t.Errorf("readEvents = %s, artifact %v; want %s, %v", state, artifact, tc.state, tc.artifact)
			}
		})
	}
}

func FuzzReadEvents(f *testing.F) {
	f.Add(eventsSample)
	f.Add("data: {}\n")
	f.Fuzz(func(t *testing.T, in string) {
		state, artifact, err := readEvents(strings.NewReader(in))
		if err != nil {
			return
		}
		// A stream that ended cleanly reads the same with one more
		// blank line at its end, as servers may send.
		if s2, a2, err2 := readEvents(strings.NewReader(in + "\n")); s2 != state || a2 != artifact || err2 != nil {
			t.Errorf("readEvents(%q) = %s, %v; with a blank line more %s, %v, %v", in, state, artifact, s2, a2, err2)
		}
	})
}

// statSample is a real /proc/<pid>/stat line: utime 250, stime 31 ticks.
const statSample = "4242 (orchd) S 1 4242 4242 0 -1 4194560 9000 0 0 0 250 31 0 0 20 0 12 0 3717603 1300000000 15000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"

func TestParseCPU(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     time.Duration
		wantErr  bool
	}{
		{"real", statSample, 2810 * time.Millisecond, false},
		{"name with spaces and parentheses", strings.Replace(statSample, "(orchd)", "(a) b (c)", 1), 2810 * time.Millisecond, false},
		{"no name", "4242 orchd S 1", 0, true},
		{"too few fields", "4242 (orchd) S 1 2 3", 0, true},
		{"negative time", strings.Replace(statSample, " 250 31 ", " -250 31 ", 1), 0, true},
		{"not a number", strings.Replace(statSample, " 250 31 ", " x 31 ", 1), 0, true},
		{"too big", statSample + strings.Repeat(" ", maxStatBytes), 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseCPU([]byte(tc.in))
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("parseCPU = %v, %v; want %v (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func FuzzParseCPU(f *testing.F) {
	f.Add([]byte(statSample))
	f.Add([]byte("1 ()) R 0 0 0 0 0 0 0 0 0 0 1 1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := parseCPU(b)
		if err == nil && d < 0 || err != nil && d != 0 {
			t.Errorf("parseCPU(%q) = %v, %v", b, d, err)
		}
	})
}
