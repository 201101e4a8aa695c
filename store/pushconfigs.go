package store

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"github.com/nats-io/nats.go/jetstream"
)

// Defaults of PushConfigsConfig.
const (
	// DefaultMaxPushConfigsPerTask bounds the push configs of one task.
	DefaultMaxPushConfigsPerTask = 10
	// DefaultMaxPushURLBytes bounds a webhook URL.
	DefaultMaxPushURLBytes = 2048
	// DefaultMaxPushTokenBytes bounds a config's token and, separately,
	// its authentication credentials.
	DefaultMaxPushTokenBytes = 4096
	// DefaultMaxPushTasks bounds the tasks with push configs a memory
	// store holds.
	DefaultMaxPushTasks = 10_000
)

// Limits the push config store keeps whatever the configuration says.
const (
	// maxPushIDBytes bounds a config id.
	maxPushIDBytes = 256
	// maxPushSchemeBytes bounds an authentication scheme name.
	maxPushSchemeBytes = 64
	// pushRecordVersion is the version of the stored record's layout.
	pushRecordVersion = 1
	// pushSaveAttempts bounds the read-and-swap rounds of one write. A
	// round is lost only to another write that succeeded, so a write
	// racing fewer than this many others always gets through.
	pushSaveAttempts = 16
)

// ErrTooManyPushConfigs is returned by Save for a task that already has
// PushConfigsConfig.MaxPerTask configs. It wraps a2a.ErrInvalidParams.
var ErrTooManyPushConfigs = fmt.Errorf("too many push notification configs for the task: %w", a2a.ErrInvalidParams)

// errPushConfigNotFound is what Get returns for a config that is not
// there: a2a-go's sentinel, answered on the wire as the not-found error
// (A2A has no error of its own for a missing config).
var errPushConfigNotFound = fmt.Errorf("%w: %w", push.ErrPushConfigNotFound, a2a.ErrTaskNotFound)

// errPushRevMismatch is a lost compare-and-swap, whichever backend.
var errPushRevMismatch = errors.New("push configs revision mismatch")

// PushConfigsConfig configures PushConfigs. The zero value is usable.
type PushConfigsConfig struct {
	// Bucket is the key-value bucket; "<namespace>-pushconfigs" when
	// opened through Store.PushConfigs, "orchd-pushconfigs" otherwise.
	Bucket string
	// Replicas is how many servers keep the bucket (1 to 5); 1 when 0.
	Replicas int
	// Retention is how long a task's configs are kept after their last
	// change; DefaultTaskRetention when 0, at least one second.
	Retention time.Duration
	// Timeout bounds each store operation; DefaultTaskTimeout when 0.
	Timeout time.Duration
	// MaxPerTask bounds the configs of one task; beyond it Save returns
	// ErrTooManyPushConfigs. DefaultMaxPushConfigsPerTask when 0.
	MaxPerTask int
	// MaxURLBytes bounds a webhook URL; DefaultMaxPushURLBytes when 0.
	MaxURLBytes int
	// MaxTokenBytes bounds a token and authentication credentials, each;
	// DefaultMaxPushTokenBytes when 0.
	MaxTokenBytes int
	// MaxTasks bounds the tasks a memory store keeps configs for;
	// DefaultMaxPushTasks when 0. The NATS store is bounded by its
	// bucket's limits and Retention instead.
	MaxTasks int
	// Authenticator names the user a call acts for; a task's configs
	// belong to the user who saved the first of them.
	// a2asrv.NewTaskStoreAuthenticator() when nil, as for Tasks.
	Authenticator taskstore.Authenticator
}

// withDefaults fills the zero fields of c and checks the rest.
func (c *PushConfigsConfig) withDefaults() error {
	if c.Bucket == "" {
		c.Bucket = "orchd-pushconfigs"
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		return fmt.Errorf("push configs: replicas %d: want 1 to 5", c.Replicas)
	}
	if c.Retention == 0 {
		c.Retention = DefaultTaskRetention
	}
	if c.Retention < time.Second {
		return fmt.Errorf("push configs: retention %s: want at least 1s", c.Retention)
	}
	for _, f := range []struct {
		name string
		v    *int
		def  int
	}{
		{"max per task", &c.MaxPerTask, DefaultMaxPushConfigsPerTask},
		{"max URL bytes", &c.MaxURLBytes, DefaultMaxPushURLBytes},
		{"max token bytes", &c.MaxTokenBytes, DefaultMaxPushTokenBytes},
		{"max tasks", &c.MaxTasks, DefaultMaxPushTasks},
	} {
		if *f.v == 0 {
			*f.v = f.def
		}
		if *f.v < 0 {
			return fmt.Errorf("push configs: %s %d is negative", f.name, *f.v)
		}
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTaskTimeout
	}
	if c.Timeout < 0 {
		return fmt.Errorf("push configs: timeout %s is negative", c.Timeout)
	}
	if c.Authenticator == nil {
		c.Authenticator = a2asrv.NewTaskStoreAuthenticator()
	}
	return nil
}

// PushConfigs is an a2a-go push notification config store
// (push.ConfigStore) that keeps each task's configs, with the user they
// belong to, in one record: in a JetStream key-value bucket (NewPushConfigs,
// Store.PushConfigs), so configs survive restarts and every orchd on the
// cluster sees them, or in memory (NewMemoryPushConfigs).
//
// Each task's record is one key, p.<task token> (the key form of Tasks),
// written by create-if-absent or compare-and-swap, so concurrent saves of
// one task never lose each other's configs and the per-task bound holds.
// A record expires Retention after its last change.
//
// Secrets: a config's token and authentication credentials are stored as
// given (the bucket is as private as the tasks' bucket) but are
// write-only through the push.ConfigStore methods: Save, Get and List
// return configs without the token and with only the authentication
// scheme. ForDelivery, for the sender alone, returns them whole. No error
// of this store contains a URL's query, a token or credentials.
//
// Isolation: the configs of a task belong to the user that saved the
// first of them; for another user Save and Get answer a2a.ErrTaskNotFound,
// List answers an empty list and Delete does nothing, as if the task had
// none. A PushConfigs is safe for concurrent use.
type PushConfigs struct {
	cfg PushConfigsConfig
	rec pushRecords
}

var _ push.ConfigStore = (*PushConfigs)(nil)

// pushRecords is where PushConfigs keeps records: a key-value bucket or
// memory. get returns a nil value and revision 0 for a missing key; put
// with rev 0 creates, otherwise swaps on rev; del with rev 0 deletes
// unconditionally. Lost swaps return errPushRevMismatch.
type pushRecords interface {
	get(ctx context.Context, key string) ([]byte, uint64, error)
	put(ctx context.Context, key string, value []byte, rev uint64) error
	del(ctx context.Context, key string, rev uint64) error
}

// pushRecord is the stored record of one task's configs.
type pushRecord struct {
	V       int               `json:"v"`
	User    string            `json:"user"`
	Configs []*a2a.PushConfig `json:"configs"`
}

// NewPushConfigs opens the push config store on js, creating or updating
// its bucket.
func NewPushConfigs(ctx context.Context, js jetstream.JetStream, cfg PushConfigsConfig) (*PushConfigs, error) {
	if js == nil {
		return nil, errors.New("push configs: no JetStream")
	}
	if err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	opCtx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	kv, err := openKV(opCtx, js, cfg.bucket())
	if err != nil {
		return nil, fmt.Errorf("push configs: open bucket %s: %w", cfg.Bucket, unavailable(ctx, err))
	}
	return &PushConfigs{cfg: cfg, rec: newKVPushRecords(js, kv, cfg)}, nil
}

// PushConfigs opens the push config store in the Store's namespace
// (bucket <namespace>-pushconfigs unless cfg names one, with the Store's
// replicas, retention and timeout where cfg leaves them zero).
func (s *Store) PushConfigs(ctx context.Context, cfg PushConfigsConfig) (*PushConfigs, error) {
	s.inherit(&cfg.Bucket, "-pushconfigs", &cfg.Replicas, &cfg.Retention, &cfg.Timeout)
	if err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	kv, err := s.ensureKV(ctx, cfg.bucket())
	if err != nil {
		return nil, fmt.Errorf("push configs: open bucket %s: %w", cfg.Bucket, err)
	}
	return &PushConfigs{cfg: cfg, rec: newKVPushRecords(s.js, kv, cfg)}, nil
}

// NewMemoryPushConfigs returns a push config store in process memory, for
// orchd's memory mode: the same checks, limits and isolation as the NATS
// store, holding at most MaxTasks tasks' configs, lost when the process
// ends. Records do not expire.
func NewMemoryPushConfigs(cfg PushConfigsConfig) (*PushConfigs, error) {
	if err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	return &PushConfigs{cfg: cfg, rec: &memPushRecords{max: cfg.MaxTasks, m: map[string]memPushRecord{}}}, nil
}

// bucket is the configuration of the bucket c keeps configs in.
func (c *PushConfigsConfig) bucket() jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:         c.Bucket,
		Description:    "orchd A2A push notification configs, one record per task",
		History:        1,
		Storage:        jetstream.FileStorage,
		Replicas:       c.Replicas,
		LimitMarkerTTL: taskMarkerTTL,
	}
}

// Save adds config to the task's configs, or replaces the one with its id,
// for the calling user. A config without an id gets a random one. It
// returns the saved config without its secrets (see PushConfigs), an error
// wrapping a2a.ErrInvalidParams for a config that breaks a limit or is not
// a usable webhook, ErrTooManyPushConfigs when the task has MaxPerTask
// configs, and a2a.ErrTaskNotFound when another user's configs are kept
// for the task.
func (p *PushConfigs) Save(ctx context.Context, taskID a2a.TaskID, config *a2a.PushConfig) (*a2a.PushConfig, error) {
	tok, err := taskToken(taskID)
	if err != nil {
		return nil, fmt.Errorf("save push config: %w", err)
	}
	if err := p.check(config); err != nil {
		return nil, fmt.Errorf("save push config for task %q: %w", taskID, err)
	}
	user, err := p.cfg.Authenticator(ctx)
	if err != nil {
		return nil, fmt.Errorf("save push config for task %q: authenticate: %w", taskID, err)
	}
	saved := &a2a.PushConfig{ID: config.ID, TaskID: taskID, Tenant: config.Tenant, URL: config.URL, Token: config.Token}
	if config.Auth != nil {
		saved.Auth = &a2a.PushAuthInfo{Scheme: config.Auth.Scheme, Credentials: config.Auth.Credentials}
	}
	if saved.ID == "" {
		saved.ID = rand.Text()
	}
	err = p.modify(ctx, tok, func(r *pushRecord) error {
		if r.User != user {
			return fmt.Errorf("configs of another user: %w", a2a.ErrTaskNotFound)
		}
		if i := slices.IndexFunc(r.Configs, func(c *a2a.PushConfig) bool { return c.ID == saved.ID }); i >= 0 {
			r.Configs[i] = saved
			return nil
		}
		if len(r.Configs) >= p.cfg.MaxPerTask {
			return fmt.Errorf("the task has %d, the most it may have; delete one first: %w", len(r.Configs), ErrTooManyPushConfigs)
		}
		r.Configs = append(r.Configs, saved)
		return nil
	}, user)
	if err != nil {
		return nil, fmt.Errorf("save push config for task %q: %w", taskID, err)
	}
	return redact(saved), nil
}

// Get returns the task's config with id configID, without its secrets. It
// returns an error wrapping push.ErrPushConfigNotFound and
// a2a.ErrTaskNotFound when there is none, and a2a.ErrTaskNotFound when the
// configs are another user's.
func (p *PushConfigs) Get(ctx context.Context, taskID a2a.TaskID, configID string) (*a2a.PushConfig, error) {
	r, err := p.owned(ctx, taskID)
	if err != nil {
		return nil, fmt.Errorf("get push config of task %q: %w", taskID, err)
	}
	for _, c := range r.Configs {
		if c.ID == configID {
			return redact(c), nil
		}
	}
	return nil, fmt.Errorf("get push config of task %q: %w", taskID, errPushConfigNotFound)
}

// List returns the task's configs without their secrets, in the order
// they were first saved; an empty list when there are none or they are
// another user's.
func (p *PushConfigs) List(ctx context.Context, taskID a2a.TaskID) ([]*a2a.PushConfig, error) {
	r, err := p.owned(ctx, taskID)
	if errors.Is(err, a2a.ErrTaskNotFound) {
		return []*a2a.PushConfig{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list push configs of task %q: %w", taskID, err)
	}
	out := make([]*a2a.PushConfig, 0, len(r.Configs))
	for _, c := range r.Configs {
		out = append(out, redact(c))
	}
	return out, nil
}

// Delete removes the task's config with id configID. Deleting a config
// that is not there, or another user's, does nothing and returns nil: the
// operation is idempotent, and tells nothing of other users' configs.
func (p *PushConfigs) Delete(ctx context.Context, taskID a2a.TaskID, configID string) error {
	user, err := p.cfg.Authenticator(ctx)
	if err != nil {
		return fmt.Errorf("delete push config of task %q: authenticate: %w", taskID, err)
	}
	return p.remove(ctx, taskID, user, func(c *a2a.PushConfig) bool { return c.ID == configID })
}

// DeleteAll removes all the task's configs of the calling user.
func (p *PushConfigs) DeleteAll(ctx context.Context, taskID a2a.TaskID) error {
	user, err := p.cfg.Authenticator(ctx)
	if err != nil {
		return fmt.Errorf("delete push configs of task %q: authenticate: %w", taskID, err)
	}
	return p.remove(ctx, taskID, user, func(*a2a.PushConfig) bool { return true })
}

// ForDelivery returns the task's config with id configID whole, token and
// credentials included, whoever it belongs to: for the sender delivering a
// notification, never for answering a caller. It returns an error wrapping
// push.ErrPushConfigNotFound when the config is gone.
func (p *PushConfigs) ForDelivery(ctx context.Context, taskID a2a.TaskID, configID string) (*a2a.PushConfig, error) {
	tok, err := taskToken(taskID)
	if err != nil {
		return nil, fmt.Errorf("push config of task %q: %w", taskID, errPushConfigNotFound)
	}
	r, _, err := p.read(ctx, tok)
	if err != nil {
		return nil, fmt.Errorf("push config of task %q: %w", taskID, err)
	}
	if r != nil {
		for _, c := range r.Configs {
			if c.ID == configID {
				cp := *c
				if c.Auth != nil {
					auth := *c.Auth
					cp.Auth = &auth
				}
				return &cp, nil
			}
		}
	}
	return nil, fmt.Errorf("push config of task %q: %w", taskID, errPushConfigNotFound)
}

// owned reads the task's record for the calling user: a2a.ErrTaskNotFound
// when there is none or it is another user's.
func (p *PushConfigs) owned(ctx context.Context, taskID a2a.TaskID) (*pushRecord, error) {
	tok, err := taskToken(taskID)
	if err != nil {
		return nil, fmt.Errorf("%w", a2a.ErrTaskNotFound)
	}
	user, err := p.cfg.Authenticator(ctx)
	if err != nil {
		return nil, fmt.Errorf("authenticate: %w", err)
	}
	r, _, err := p.read(ctx, tok)
	if err != nil {
		return nil, err
	}
	if r == nil || r.User != user {
		return nil, errPushConfigNotFound
	}
	return r, nil
}

// remove deletes the configs of user's record for the task that match.
func (p *PushConfigs) remove(ctx context.Context, taskID a2a.TaskID, user string, match func(*a2a.PushConfig) bool) error {
	tok, err := taskToken(taskID)
	if err != nil {
		return nil //nolint:nilerr // a task id that makes no token names no task, so no configs
	}
	err = p.modify(ctx, tok, func(r *pushRecord) error {
		if r.User != user {
			return errPushNothing
		}
		n := len(r.Configs)
		r.Configs = slices.DeleteFunc(r.Configs, match)
		if len(r.Configs) == n {
			return errPushNothing
		}
		return nil
	}, "")
	if errors.Is(err, errPushNothing) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete push config of task %q: %w", taskID, err)
	}
	return nil
}

// errPushNothing is a modification that has nothing to write.
var errPushNothing = errors.New("nothing to change")

// modify applies change to the task's record and writes it, swapping on
// the revision it read and retrying a bounded number of lost swaps. A
// missing record is created for creator, or, when creator is "" (a
// removal), left missing. A record left with no configs is deleted.
func (p *PushConfigs) modify(ctx context.Context, tok string, change func(*pushRecord) error, creator string) error {
	key := "p." + tok
	for range pushSaveAttempts {
		r, rev, err := p.read(ctx, tok)
		if err != nil {
			return err
		}
		if r == nil {
			if creator == "" {
				return errPushNothing
			}
			r = &pushRecord{V: pushRecordVersion, User: creator}
		}
		if err := change(r); err != nil {
			return err
		}
		if len(r.Configs) == 0 {
			err = p.rec.del(ctx, key, rev)
		} else {
			var value []byte
			if value, err = json.Marshal(r); err != nil {
				return fmt.Errorf("encode: %w", err)
			}
			err = p.rec.put(ctx, key, value, rev)
		}
		if errors.Is(err, errPushRevMismatch) {
			continue
		}
		return err
	}
	return fmt.Errorf("the task's push configs changed %d times while this write was tried; try again", pushSaveAttempts)
}

// read returns the task's record and its revision; nil and 0 when there
// is none.
func (p *PushConfigs) read(ctx context.Context, tok string) (*pushRecord, uint64, error) {
	value, rev, err := p.rec.get(ctx, "p."+tok)
	if err != nil || value == nil {
		return nil, 0, err
	}
	var r pushRecord
	if err := json.Unmarshal(value, &r); err != nil {
		return nil, 0, fmt.Errorf("decode stored push configs: %w", err)
	}
	if r.V != pushRecordVersion {
		return nil, 0, fmt.Errorf("stored push configs have layout version %d; this orchd reads %d", r.V, pushRecordVersion)
	}
	return &r, rev, nil
}

// check refuses a config that breaks a limit or that no webhook could
// take. Its errors wrap a2a.ErrInvalidParams and name sizes, never
// contents.
func (p *PushConfigs) check(c *a2a.PushConfig) error {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), a2a.ErrInvalidParams)
	}
	switch {
	case c == nil:
		return invalid("no push config")
	case c.URL == "":
		return invalid("push config url is empty")
	case len(c.URL) > p.cfg.MaxURLBytes:
		return invalid("push config url is %d bytes, over the %d allowed", len(c.URL), p.cfg.MaxURLBytes)
	case len(c.ID) > maxPushIDBytes:
		return invalid("push config id is %d bytes, over the %d allowed", len(c.ID), maxPushIDBytes)
	case len(c.Token) > p.cfg.MaxTokenBytes:
		return invalid("push config token is %d bytes, over the %d allowed", len(c.Token), p.cfg.MaxTokenBytes)
	case !headerSafe(c.Token):
		return invalid("push config token holds characters an HTTP header cannot carry")
	}
	u, err := url.Parse(c.URL)
	switch {
	case err != nil:
		return invalid("push config url does not parse")
	case u.Scheme != "http" && u.Scheme != "https":
		return invalid("push config url has scheme %q; want http or https", u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return invalid("push config url names no host")
	case !validPort(u.Port()):
		return invalid("push config url has an invalid port; want 1 to 65535")
	case u.User != nil:
		return invalid("push config url carries user information; put credentials in authentication")
	case u.Fragment != "":
		return invalid("push config url has a fragment")
	}
	if a := c.Auth; a != nil {
		switch {
		case a.Scheme == "" && a.Credentials != "":
			return invalid("push config authentication has credentials but no scheme")
		case len(a.Scheme) > maxPushSchemeBytes || !schemeToken(a.Scheme):
			return invalid("push config authentication scheme is not an HTTP authentication scheme name")
		case len(a.Credentials) > p.cfg.MaxTokenBytes:
			return invalid("push config authentication credentials are %d bytes, over the %d allowed", len(a.Credentials), p.cfg.MaxTokenBytes)
		case !headerSafe(a.Credentials):
			return invalid("push config authentication credentials hold characters an HTTP header cannot carry")
		}
	}
	return nil
}

// validPort reports whether port, a URL's port as url.URL.Port gives it
// (digits or empty), is absent or one a connection can be made to.
func validPort(port string) bool {
	if port == "" {
		return true
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= 1 && n <= 65535
}

// redact is c as callers see it: no token, and of its authentication
// only the scheme.
func redact(c *a2a.PushConfig) *a2a.PushConfig {
	out := &a2a.PushConfig{ID: c.ID, TaskID: c.TaskID, Tenant: c.Tenant, URL: c.URL}
	if c.Auth != nil {
		out.Auth = &a2a.PushAuthInfo{Scheme: c.Auth.Scheme}
	}
	return out
}

// headerSafe reports whether s can be an HTTP header value as it is:
// visible ASCII and spaces, no leading or trailing space.
func headerSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return strings.TrimSpace(s) == s
}

// schemeToken reports whether s is an RFC 9110 token, as an
// authentication scheme name must be; "" is allowed (no scheme).
func schemeToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// kvPushRecords keeps records in a key-value bucket; each write carries
// the TTL.
type kvPushRecords struct {
	js       jetstream.JetStream
	kv       jetstream.KeyValue
	subjects string // "$KV.<bucket>."
	ttl      time.Duration
	timeout  time.Duration
}

func newKVPushRecords(js jetstream.JetStream, kv jetstream.KeyValue, cfg PushConfigsConfig) *kvPushRecords {
	return &kvPushRecords{js: js, kv: kv, subjects: "$KV." + cfg.Bucket + ".", ttl: cfg.Retention, timeout: cfg.Timeout}
}

func (k *kvPushRecords) get(ctx context.Context, key string) ([]byte, uint64, error) {
	opCtx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	e, err := k.kv.Get(opCtx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, unavailable(ctx, err)
	}
	return e.Value(), e.Revision(), nil
}

func (k *kvPushRecords) put(ctx context.Context, key string, value []byte, rev uint64) error {
	opCtx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	var err error
	if rev == 0 {
		_, err = k.kv.Create(opCtx, key, value, jetstream.KeyTTL(k.ttl))
		if errors.Is(err, jetstream.ErrKeyExists) {
			return errPushRevMismatch
		}
	} else {
		// kv.Update sends no TTL, and a write without one clears the
		// key's: the record is published on its subject with both.
		_, err = k.js.Publish(opCtx, k.subjects+key, value,
			jetstream.WithMsgTTL(k.ttl), jetstream.WithExpectLastSequencePerSubject(rev))
		if isWrongLastSequence(err) {
			return errPushRevMismatch
		}
	}
	return unavailable(ctx, err)
}

func (k *kvPushRecords) del(ctx context.Context, key string, rev uint64) error {
	opCtx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	var opts []jetstream.KVDeleteOpt
	if rev != 0 {
		opts = append(opts, jetstream.LastRevision(rev))
	}
	err := k.kv.Delete(opCtx, key, opts...)
	if isWrongLastSequence(err) {
		return errPushRevMismatch
	}
	return unavailable(ctx, err)
}

// memPushRecords keeps at most max records in memory.
type memPushRecords struct {
	mu  sync.Mutex
	max int
	rev uint64
	m   map[string]memPushRecord
}

type memPushRecord struct {
	value []byte
	rev   uint64
}

func (m *memPushRecords) get(_ context.Context, key string) ([]byte, uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.m[key]
	if !ok {
		return nil, 0, nil
	}
	return slices.Clone(r.value), r.rev, nil
}

func (m *memPushRecords) put(_ context.Context, key string, value []byte, rev uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m[key].rev != rev {
		return errPushRevMismatch
	}
	if rev == 0 && len(m.m) >= m.max {
		return fmt.Errorf("push configs kept for %d tasks, the most memory mode holds: %w", len(m.m), a2a.ErrInvalidParams)
	}
	m.rev++
	m.m[key] = memPushRecord{value: slices.Clone(value), rev: m.rev}
	return nil
}

func (m *memPushRecords) del(_ context.Context, key string, rev uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rev != 0 && m.m[key].rev != rev {
		return errPushRevMismatch
	}
	delete(m.m, key)
	return nil
}
