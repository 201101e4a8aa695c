package delegation

import (
	"context"
	"fmt"
	"regexp"
)

// DelegateOption is an option of one Engine.Delegate call, made by the
// function that says what it does (KeepEndedUpstream, WithID). The zero
// DelegateOption asks for nothing. Options are for fronts: how they keep
// their own records and name work, not part of the work a caller asks
// for (Request).
type DelegateOption struct {
	// endedUpstream, when hasEndedUpstream is set, is the upstream task
	// the record of work ended at once names, and keepUpstream keeps it
	// (keepupstream.go).
	endedUpstream    Upstream
	hasEndedUpstream bool
	keepUpstream     func(ctx context.Context, rec Record, evs []Event) error
	// id, when set, is the delegation's id (WithID).
	id string
}

// WithID gives the delegation id instead of a new random one, for a front
// that derives ids from its callers' idempotency keys, so that a request
// sent again finds the delegation the first one started. The front looks
// the id up first and starts nothing when it is taken: Delegate does not
// check, and a delegation given an id another has would replace its
// record. id is 1 to 64 letters, digits and hyphens.
func WithID(id string) DelegateOption { return DelegateOption{id: id} }

// validID is the shape WithID takes: that of the ids Delegate makes
// (UUIDs), and any other name that is safe in a URL path and a store key.
var validID = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)

// delegateOptions folds the options of one Delegate call into one: for
// each thing asked for, the last option that asks for it counts.
func delegateOptions(opts []DelegateOption) (DelegateOption, error) {
	var o DelegateOption
	for _, opt := range opts {
		if opt.hasEndedUpstream {
			o.endedUpstream, o.hasEndedUpstream, o.keepUpstream = opt.endedUpstream, true, opt.keepUpstream
		}
		if opt.id != "" {
			if !validID.MatchString(opt.id) {
				return DelegateOption{}, fmt.Errorf("%w: delegation id %q: want 1 to 64 letters, digits and hyphens", ErrBadRequest, opt.id)
			}
			o.id = opt.id
		}
	}
	return o, nil
}
