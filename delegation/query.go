package delegation

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// size returns the query's page size, checked.
func (q Query) size() (int, error) {
	switch {
	case q.PageSize == 0:
		return DefaultPageSize, nil
	case q.PageSize < 0 || q.PageSize > MaxPageSize:
		return 0, fmt.Errorf("%w: pageSize %d is not between 1 and %d", ErrBadRequest, q.PageSize, MaxPageSize)
	}
	return q.PageSize, nil
}

// cursor is where a page of a MemoryStore listing ended: the last record's
// creation time and id.
type cursor struct {
	created time.Time
	id      string
}

func cursorOf(r Record) cursor { return cursor{created: r.CreatedAt, id: r.ID} }

// before reports whether r comes after the cursor in listing order.
func (c cursor) before(r Record) bool {
	return newestFirst(Record{CreatedAt: c.created, ID: c.id}, r) < 0
}

// String encodes the cursor as an opaque page token.
func (c cursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.created.UnixNano(), 10) + " " + c.id))
}

func parseCursor(token string) (cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return cursor{}, fmt.Errorf("%w: %w %q", ErrBadRequest, ErrBadPageToken, token)
	}
	ns, id, ok := strings.Cut(string(b), " ")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || id == "" {
		return cursor{}, fmt.Errorf("%w: %w %q", ErrBadRequest, ErrBadPageToken, token)
	}
	return cursor{created: time.Unix(0, n), id: id}, nil
}
