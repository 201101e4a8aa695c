package delegation

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// readAll reads every event of body, each at most max bytes.
func readAll(body io.Reader, max int) ([]string, error) {
	r := newSSEReader(body, max)
	var out []string
	for {
		data, err := r.next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, string(data))
	}
}

func TestSSEReader(t *testing.T) {
	long := strings.Repeat("y", 3*sseReadSize)
	cases := []struct {
		name, body string
		want       []string
		wantErr    error
	}{
		{"one", "data: {\"a\":1}\n\n", []string{`{"a":1}`}, nil},
		{"two lines joined", "data: a\ndata: b\n\n", []string{"a\nb"}, nil},
		{"no space", "data:a\n\n", []string{"a"}, nil},
		{"one space dropped", "data:  a\n\n", []string{" a"}, nil},
		{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", []string{"a", "b"}, nil},
		{"other fields and comments", ": keep-alive\n\nid: 1\nevent: x\ndata: a\nretry: 5\n\n", []string{"a"}, nil},
		{"empty data is no event", "data:\n\ndata: \n\n", nil, nil},
		{"empty first line", "data:\ndata: a\n\n", []string{"a"}, nil},
		{"empty last line", "data: a\ndata:\n\n", []string{"a\n"}, nil},
		{"unended at the end", "data: a\n\ndata: b", []string{"a", "b"}, nil},
		{"line over the read buffer", "data: " + long + "\n\n", []string{long}, nil},
		{"at the bound", "data: " + strings.Repeat("z", 64) + "\n\n", []string{strings.Repeat("z", 64)}, nil},
		{"over the bound", "data: " + strings.Repeat("z", 65) + "\n\n", nil, errSSETooLarge},
		{"event over the bound", "data: " + strings.Repeat("z", 40) + "\ndata: " + strings.Repeat("z", 40) + "\n\n", nil, errSSETooLarge},
		{"long comment line", ": " + strings.Repeat("c", 200) + "\n\ndata: a\n\n", nil, errSSETooLarge},
		{"empty", "", nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			max := 64
			if strings.Contains(c.name, "read buffer") {
				max = maxSSEEvent
			}
			for name, body := range map[string]io.Reader{"whole": strings.NewReader(c.body), "a byte at a time": iotest.OneByteReader(strings.NewReader(c.body))} {
				got, err := readAll(body, max)
				if !errors.Is(err, c.wantErr) || !reflect.DeepEqual(got, c.want) {
					t.Errorf("%s: events %q, error %v; want %q, %v", name, got, err, c.want, c.wantErr)
				}
			}
		})
	}
}

// TestSSEReader_ReadError passes the body's read error on.
func TestSSEReader_ReadError(t *testing.T) {
	boom := errors.New("boom")
	got, err := readAll(io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(boom)), 64)
	if !errors.Is(err, boom) || !reflect.DeepEqual(got, []string{"a"}) {
		t.Fatalf("events %q, error %v; want [a], %v", got, err, boom)
	}
}

// TestSSEReader_KeepsLittle reads a large event then small ones: the
// buffer of the large one is not kept.
func TestSSEReader_KeepsLittle(t *testing.T) {
	body := "data: " + strings.Repeat("x", 4*sseKeepCap) + "\n\ndata: a\n\ndata: b\n\n"
	r := newSSEReader(strings.NewReader(body), maxSSEEvent)
	for _, want := range []int{4 * sseKeepCap, 1, 1} {
		data, err := r.next()
		if err != nil || len(data) != want {
			t.Fatalf("event of %d bytes, %v; want %d", len(data), err, want)
		}
	}
	if cap(r.event) > sseKeepCap {
		t.Errorf("event buffer of %d bytes kept after small events", cap(r.event))
	}
}

// referenceEvents reads SSE data as a2a-go's reader does, with lines
// split by a bufio.Scanner, and no bound.
func referenceEvents(body []byte) []string {
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, len(body)+16)
	var out []string
	var ev []byte
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			if len(ev) > 0 {
				out = append(out, string(ev))
			}
			ev = ev[:0]
			continue
		}
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		data, _ = bytes.CutPrefix(data, []byte(" "))
		if len(ev) > 0 {
			ev = append(ev, '\n')
		}
		ev = append(ev, data...)
	}
	if len(ev) > 0 {
		out = append(out, string(ev))
	}
	return out
}

// longestLine is the length of body's longest line, without its end.
func longestLine(body []byte) int {
	n := 0
	for line := range bytes.SplitSeq(body, []byte("\n")) {
		n = max(n, len(bytes.TrimSuffix(line, []byte("\r"))))
	}
	return n
}

// FuzzSSEReader reads arbitrary bodies with a small bound and wants the
// events a line-by-line reference reader finds, up to any event or line
// over the bound, where it wants errSSETooLarge.
func FuzzSSEReader(f *testing.F) {
	for _, seed := range []string{
		"data: {\"jsonrpc\":\"2.0\"}\n\n",
		"data: a\r\ndata: b\r\n\r\n",
		": comment\n\nid: 1\ndata:x\n\n\n\ndata: y",
		"data:\ndata:\n\ndata: \n",
		"data: " + strings.Repeat("q", 40) + "\ndata: " + strings.Repeat("q", 40) + "\n\n",
		"\r\r\n\ndata:\r",
	} {
		f.Add([]byte(seed))
	}
	const bound = 64
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := readAll(iotest.HalfReader(bytes.NewReader(body)), bound)
		want := referenceEvents(body)
		if err != nil && !errors.Is(err, errSSETooLarge) {
			t.Fatalf("error %v", err)
		}
		for _, ev := range got {
			if len(ev) == 0 || len(ev) > bound {
				t.Fatalf("event of %d bytes, want 1 to %d", len(ev), bound)
			}
		}
		if len(got) > len(want) || !slices.Equal(got, want[:len(got)]) {
			t.Fatalf("events %q, reference %q", got, want)
		}
		if err != nil { // the next event, or some line, is over the bound
			if (len(got) >= len(want) || len(want[len(got)]) <= bound) && longestLine(body) <= bound+sseLineExtra-2 {
				t.Fatalf("refused with %q, reference %q", got, want)
			}
			return
		}
		if len(got) != len(want) {
			t.Fatalf("events %q, reference %q", got, want)
		}
	})
}
