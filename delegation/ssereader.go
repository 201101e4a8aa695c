package delegation

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// maxSSEEvent bounds one server-sent event from an agent, and each of its
// lines: 10 MiB, the most a2a-go's own SSE reader takes in a line.
const maxSSEEvent = 10 << 20

// sseReadSize is how much of a stream is read at once. Lines that fit are
// read without a copy; longer ones are gathered up to maxSSEEvent.
const sseReadSize = 4 << 10

// sseKeepCap is the largest event buffer kept for the next event: one
// larger event does not hold its memory for the rest of the stream.
const sseKeepCap = 64 << 10

// sseLineExtra is how much longer than an event's bound a line may be:
// its "data: " and its "\r\n".
const sseLineExtra = len("data: \r\n")

// errSSETooLarge says an agent sent an event, or a line, larger than the
// reader's bound.
var errSSETooLarge = errors.New("SSE event too large")

// sseReader reads the data of the events of a text/event-stream body, as
// the WHATWG rules say: "data:" lines (one space after the colon dropped)
// are joined by "\n" up to the blank line that ends the event, a line ends
// at "\n" or "\r\n", and other fields and comments are skipped. An event
// whose data is empty is no event, and the end of the body ends the last
// one: as a2a-go's own reader does.
//
// It keeps a small read buffer and an event buffer as large as the largest
// event so far (below sseKeepCap), where a2a-go's reader takes 64 KiB for
// every stream before the first byte arrives.
type sseReader struct {
	r     *bufio.Reader
	max   int
	line  []byte // a line longer than the read buffer, gathered
	event []byte
	done  bool
}

// newSSEReader reads events from body, each at most max bytes.
func newSSEReader(body io.Reader, max int) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(body, sseReadSize), max: max}
}

// next returns the data of the next event. The slice is valid until the
// next call. It returns io.EOF when the body ended, and the read error, or
// errSSETooLarge, otherwise.
func (s *sseReader) next() ([]byte, error) {
	if cap(s.event) > sseKeepCap {
		s.event = nil
	}
	s.event = s.event[:0]
	for !s.done {
		line, err := s.readLine()
		if err == io.EOF {
			s.done = true
			if line == nil {
				break
			}
		} else if err != nil {
			return nil, err
		}
		if len(line) == 0 { // the blank line ending an event
			if len(s.event) > 0 {
				return s.event, nil
			}
			continue
		}
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		data, _ = bytes.CutPrefix(data, []byte(" "))
		if len(s.event) > 0 {
			s.event = append(s.event, '\n')
		}
		if len(s.event)+len(data) > s.max {
			return nil, fmt.Errorf("%w: more than %d bytes", errSSETooLarge, s.max)
		}
		s.event = append(s.event, data...)
	}
	if len(s.event) > 0 {
		return s.event, nil
	}
	return nil, io.EOF
}

// readLine returns the next line without its end. At the end of the body
// it returns the unended last line, if any, with io.EOF; a nil line with
// io.EOF means there was none.
func (s *sseReader) readLine() ([]byte, error) {
	s.line = s.line[:0]
	for {
		chunk, err := s.r.ReadSlice('\n')
		if len(s.line)+len(chunk) > s.max+sseLineExtra {
			return nil, fmt.Errorf("%w: a line of more than %d bytes", errSSETooLarge, s.max+sseLineExtra)
		}
		if err == nil && len(s.line) == 0 { // the whole line was in the buffer
			return trimEOL(chunk), nil
		}
		s.line = append(s.line, chunk...)
		switch {
		case err == nil:
			return trimEOL(s.line), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF:
			if len(s.line) == 0 {
				return nil, io.EOF
			}
			return trimEOL(s.line), io.EOF
		default:
			return nil, err
		}
	}
}

// trimEOL drops a line's "\n" or "\r\n".
func trimEOL(line []byte) []byte {
	line, _ = bytes.CutSuffix(line, []byte("\n"))
	line, _ = bytes.CutSuffix(line, []byte("\r"))
	return line
}
