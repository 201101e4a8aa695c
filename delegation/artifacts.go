package delegation

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// Artifacts as the delegation keeps them.
//
// An agent streams an artifact as chunks: the first carries the artifact,
// each later one (Append) the parts to add to it. A delegation keeps its
// artifacts whole in memory, and logs each chunk as one event, as it came:
// what the log and its readers (the API's event streams, orchd's own A2A
// task) take is linear in what the agent sent. The stored record holds no
// artifacts at all, so a write of the record, which comes with every
// event, costs the same however much the agent produced. A record read
// from the store gets its artifacts back from the log (rebuildArtifacts).
//
// The log keeps only its latest MaxEvents events. So that it always holds
// what rebuilds the artifacts, Progress.ArtifactsFrom names the event to
// fold from, and once that event is MaxEvents/2 events behind, every
// artifact is logged again whole (restate) and ArtifactsFrom moves there.
// MaxArtifacts, at most MaxEvents/4, bounds what a restatement logs.
//
// What an agent may produce is bounded (Config.MaxArtifactBytes,
// MaxArtifacts, MaxEventBytes): past a bound the delegation fails saying
// which, and its task is canceled downstream.

// Artifact bounds' defaults.
const (
	// DefaultMaxArtifactBytes is how many bytes a delegation's artifacts
	// may hold together unless Config.MaxArtifactBytes says otherwise.
	DefaultMaxArtifactBytes = 4 << 20
	// DefaultMaxArtifacts is how many artifacts a delegation may produce
	// unless Config.MaxArtifacts says otherwise.
	DefaultMaxArtifacts = 1_000
	// DefaultMaxEventBytes is the largest event a delegation logs unless
	// Config.MaxEventBytes says otherwise: under the embedded state
	// store's largest message (8 MiB), with room for the event's
	// envelope.
	DefaultMaxEventBytes = 8<<20 - 64<<10
)

// artifactBounds are the limits of one delegation's artifacts; zero
// fields take their defaults, and MaxArtifacts is at most MaxEvents/4.
func (c Config) artifactBounds() Config {
	if c.MaxArtifactBytes <= 0 {
		c.MaxArtifactBytes = DefaultMaxArtifactBytes
	}
	if c.MaxArtifacts <= 0 {
		c.MaxArtifacts = DefaultMaxArtifacts
	}
	c.MaxArtifacts = max(1, min(c.MaxArtifacts, c.MaxEvents/4))
	if c.MaxEventBytes <= 0 {
		c.MaxEventBytes = DefaultMaxEventBytes
	}
	return c
}

// FoldArtifact applies an artifact update to arts, as a2a-go's task
// machinery folds one into a task (internal/taskupdate/manager.go): a new id adds the artifact, an update
// that does not append replaces the one with its id, and one that appends
// adds its parts and merges its metadata into that one's. It returns arts
// and the artifact as it now is; nothing the update or arts held is
// changed.
func FoldArtifact(arts []*a2a.Artifact, a *a2a.Artifact, appendParts bool) ([]*a2a.Artifact, *a2a.Artifact) {
	i := slices.IndexFunc(arts, func(old *a2a.Artifact) bool { return old.ID == a.ID })
	switch {
	case i < 0:
		return append(arts, a), a
	case !appendParts:
		arts[i] = a
		return arts, a
	}
	grown := *arts[i]
	grown.Parts = slices.Concat(grown.Parts, a.Parts)
	if a.Metadata != nil {
		grown.Metadata = maps.Clone(grown.Metadata)
		if grown.Metadata == nil {
			grown.Metadata = map[string]any{}
		}
		maps.Copy(grown.Metadata, a.Metadata)
	}
	arts[i] = &grown
	return arts, &grown
}

// artifactSize is about how many bytes an artifact takes in JSON: its
// parts' content and its own fields. It reads text and raw bytes by
// length, encoding only structured data and metadata.
func artifactSize(a *a2a.Artifact) int64 {
	if a == nil {
		return 0
	}
	n := int64(len(a.ID)+len(a.Name)+len(a.Description)) + jsonSize(a.Metadata) + partsSize(a.Parts)
	for _, e := range a.Extensions {
		n += int64(len(e))
	}
	return n
}

// partsSize is about how many bytes parts take in JSON.
func partsSize(parts a2a.ContentParts) int64 {
	var n int64
	for _, p := range parts {
		if p == nil {
			continue
		}
		n += 16 + int64(len(p.Filename)+len(p.MediaType)) + jsonSize(p.Metadata)
		switch c := p.Content.(type) {
		case a2a.Text:
			n += jsonStringSize(string(c))
		case a2a.Raw:
			n += int64(len(c)+2) / 3 * 4 // base64
		case a2a.URL:
			n += jsonStringSize(string(c))
		case a2a.Data:
			n += jsonSize(c.Value)
		}
	}
	return n
}

// MessageSize is about how many bytes a message takes in JSON: its parts'
// content and its own fields, text and raw bytes read by length.
func MessageSize(m *a2a.Message) int64 {
	if m == nil {
		return 0
	}
	return int64(len(m.ID)+len(m.TaskID)+len(m.ContextID)+64) + jsonSize(m.Metadata) + partsSize(m.Parts)
}

// jsonStringSize is the length of s as encoding/json writes it, quotes
// included, or a little more: <, >, & and control bytes, U+2028 and
// U+2029 escaped as \uXXXX, invalid UTF-8 as \ufffd. A text of escapes
// (an agent's, or a caller's) takes up to six times its length.
func jsonStringSize(s string) int64 {
	n := int64(2)
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
				n += 2
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029':
			n += 6
		default:
			n += int64(size)
		}
		i += size
	}
	return n
}

// jsonSize is the length of v in JSON; 0 for nil or what does not encode.
func jsonSize(v any) int64 {
	if v == nil || reflect.ValueOf(v).Kind() == reflect.Map && reflect.ValueOf(v).Len() == 0 {
		return 0
	}
	b, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return int64(len(b))
}

// takeArtifactLocked folds an artifact update into the delegation, within its
// bounds, and returns the event that logs it: the update as it came, or
// the whole artifact when its parts have no earlier chunk to join. Past a
// bound it fails the delegation instead (overLimitLocked) and returns false.
// Callers hold mu.
func (d *Delegation) takeArtifactLocked(a *a2a.Artifact, appendParts, lastChunk bool) (Event, bool) {
	cfg := d.engine.cfg
	i := slices.IndexFunc(d.rec.Artifacts, func(old *a2a.Artifact) bool { return old.ID == a.ID })
	appendParts = appendParts && i >= 0
	chunk := artifactSize(a)
	total := d.artifactBytes + chunk
	if i >= 0 && !appendParts {
		total -= artifactSize(d.rec.Artifacts[i])
	}
	switch {
	case i < 0 && len(d.rec.Artifacts) >= cfg.MaxArtifacts:
		d.overLimitLocked(fmt.Sprintf("the agent produced more than %d artifacts (delegation.maxArtifacts)", cfg.MaxArtifacts))
		return Event{}, false
	case total > cfg.MaxArtifactBytes:
		d.overLimitLocked(fmt.Sprintf("the agent's artifacts came to over %d bytes (delegation.maxArtifactBytes)", cfg.MaxArtifactBytes))
		return Event{}, false
	case chunk > cfg.MaxEventBytes:
		d.overLimitLocked(fmt.Sprintf("the agent sent an artifact update of about %d bytes, over the %d an event may hold (delegation.maxEventBytes)", chunk, cfg.MaxEventBytes))
		return Event{}, false
	}
	var whole *a2a.Artifact
	d.rec.Artifacts, whole = FoldArtifact(d.rec.Artifacts, a, appendParts)
	d.artifactBytes = total
	if d.prog.ArtifactsFrom == 0 {
		d.prog.ArtifactsFrom = d.nextSeqLocked()
	}
	ev := Event{Kind: "artifact", Artifact: a, Append: appendParts, LastChunk: lastChunk}
	if i >= 0 && !appendParts {
		ev.Artifact = whole
	}
	return ev, true
}

// taskArtifactLocked folds an artifact as a read of the whole task shows it (a
// poll, a push notification's read, a resume catching up) and returns the
// event that logs the change: none when the artifact is as the delegation
// has it; the parts it gained, when it only grew (a poll of a streamed
// artifact); else the whole artifact. Callers hold mu.
func (d *Delegation) taskArtifactLocked(a *a2a.Artifact) (Event, bool) {
	i := slices.IndexFunc(d.rec.Artifacts, func(old *a2a.Artifact) bool { return old.ID == a.ID })
	if i < 0 {
		return d.takeArtifactLocked(a, false, false)
	}
	old := d.rec.Artifacts[i]
	if reflect.DeepEqual(old, a) {
		return Event{}, false
	}
	head := *a
	head.Parts = a.Parts[:min(len(old.Parts), len(a.Parts))]
	if len(a.Parts) > len(old.Parts) && reflect.DeepEqual(*old, head) {
		grown := *a
		grown.Parts, grown.Metadata = a.Parts[len(old.Parts):], nil
		return d.takeArtifactLocked(&grown, true, false)
	}
	return d.takeArtifactLocked(a, false, false)
}

// nextSeqLocked is the Seq the next event gets. Callers hold mu.
func (d *Delegation) nextSeqLocked() int64 { return d.first + int64(len(d.events)) }

// restateIfDueLocked logs every artifact again, whole, once the event the
// artifacts are rebuilt from is MaxEvents/2 events behind, so the log
// never loses what rebuilds them; ArtifactsFrom moves to the first of the
// restating events with the last of them, so a process stopped halfway
// rebuilds from the earlier point, still in the log. Callers hold mu.
func (d *Delegation) restateIfDueLocked() {
	from := d.prog.ArtifactsFrom
	if from == 0 || d.restating || d.rec.State.Terminal() || d.nextSeqLocked()-from < int64(d.engine.cfg.MaxEvents/2) {
		return
	}
	d.restating = true
	defer func() { d.restating = false }()
	start := d.nextSeqLocked()
	arts := slices.Clone(d.rec.Artifacts)
	for i, a := range arts {
		if i == len(arts)-1 {
			d.prog.ArtifactsFrom = start
		}
		d.emitLocked(Event{Kind: "artifact", Artifact: a})
	}
}

// overLimitLocked ends the delegation FAILED for a reason the agent gave (it
// produced more than the bounds let orchd keep), and cancels its task
// downstream in a goroutine of the engine's, as the caller holds mu.
// Callers hold mu.
func (d *Delegation) overLimitLocked(reason string) {
	agent, taskID := d.rec.Downstream.Agent, d.rec.Downstream.TaskID
	d.rec.Error = fmt.Sprintf("hop %s (task %s): %s; orchd stopped the work and canceled the task", agent, taskID, reason)
	d.emitLocked(Event{Kind: "state", State: a2a.TaskStateFailed, Error: d.rec.Error})
	e := d.engine
	if !e.track() {
		return
	}
	go func() {
		defer e.wg.Done()
		outcome := d.cancelDownstream(agent, taskID)
		e.log.Warn("delegation stopped: the agent produced more than orchd keeps", "delegation", d.rec.ID, "agent", agent, "reason", reason, "outcome", outcome)
	}()
}

// rebuildArtifacts folds a stored record's artifacts back from its log,
// from the event Progress.ArtifactsFrom names; the record holds none
// (see above). It returns the artifacts and their size.
func (e *Engine) rebuildArtifacts(ctx context.Context, rec Record) ([]*a2a.Artifact, int64, error) {
	if rec.Progress == nil || rec.Progress.ArtifactsFrom == 0 {
		return nil, 0, nil
	}
	evs, err := e.store.Events(ctx, rec.ID, rec.Progress.ArtifactsFrom-1, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("read the artifacts of delegation %s: %w", rec.ID, err)
	}
	if len(evs) > 0 && evs[0].Seq != rec.Progress.ArtifactsFrom {
		e.log.Warn("the log of a delegation no longer holds all its artifacts; they may be incomplete",
			"delegation", rec.ID, "from", rec.Progress.ArtifactsFrom, "firstKept", evs[0].Seq)
	}
	var arts []*a2a.Artifact
	for _, ev := range evs {
		if ev.Kind == "artifact" && ev.Artifact != nil {
			arts, _ = FoldArtifact(arts, ev.Artifact, ev.Append)
		}
	}
	var n int64
	for _, a := range arts {
		n += artifactSize(a)
	}
	return arts, n, nil
}
