package a2aserver

import (
	"errors"
	"fmt"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/delegation"
)

// TestInputError: an answer refused downstream is answered with the A2A
// error that says why, its message naming every hop.
func TestInputError(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
		want error
	}{
		{"the hop's own A2A error", fmt.Errorf("send input to vault: %w", a2a.ErrInvalidParams), a2a.ErrInvalidParams},
		{"ended meanwhile", fmt.Errorf("%w: \"d-1\" is TASK_STATE_CANCELED", delegation.ErrEnded), a2a.ErrUnsupportedOperation},
		{"no longer waiting", fmt.Errorf("%w: \"d-1\" is TASK_STATE_WORKING", delegation.ErrNotWaiting), a2a.ErrUnsupportedOperation},
		{"no longer kept", fmt.Errorf("%w: \"d-1\"", delegation.ErrNotFound), a2a.ErrTaskNotFound},
		{"anything else", errors.New("send input to vault: task execution is already in progress"), a2a.ErrInternalError},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := inputError(tt.err)
			var ae *a2a.Error
			if !errors.As(got, &ae) || !errors.Is(got, tt.want) || ae.Message != tt.err.Error() {
				t.Errorf("inputError = %v, want %v with the message %q", got, tt.want, tt.err)
			}
		})
	}
}
