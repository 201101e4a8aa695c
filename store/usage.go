package store

import (
	"context"
	"fmt"
)

// Usage is how many bytes the store's streams and buckets hold, as the
// server counts them: the JetStream storage of the account orchd uses,
// every namespace on it included.
func (s *Store) Usage(ctx context.Context) (uint64, error) {
	octx, cancel := s.opContext(ctx)
	defer cancel()
	info, err := s.js.AccountInfo(octx)
	if err != nil {
		return 0, fmt.Errorf("state store usage: %w", s.unavailable(ctx, err))
	}
	return info.Store, nil
}
