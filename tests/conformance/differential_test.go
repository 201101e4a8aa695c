package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	grpcv0 "github.com/a2aproject/a2a-go/v2/a2agrpc/v0"
	grpcv1 "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/a2aschema"
	"github.com/orchd/orchd/internal/orchdtest"
	"github.com/orchd/orchd/orchestrator"
	"github.com/orchd/orchd/registry"
)

// diffRow is one differential check, read from testdata/differential:
// one call (after its setup) made the same way in every world, and the
// fields of the answers that must be equal.
type diffRow struct {
	Name string `json:"name"`
	// Method is an A2A method, "GetCard" (the public card) or
	// "RawJSONRPC" (a hand-made HTTP request to the JSON-RPC interface).
	Method string `json:"method"`
	// Binding and Version name the card interface the client uses:
	// JSONRPC, HTTP+JSON or GRPC; 1.0 or 0.3. GetCard rows use "card".
	Binding string `json:"binding"`
	Version string `json:"version"`
	// Setup, when set, is the text of a message sent first; the check
	// addresses the task it made.
	Setup string    `json:"setup"`
	Input diffInput `json:"input"`
	// Compare lists the fields compared besides error and interface,
	// which are always compared.
	Compare []string `json:"compare"`
	// Expect holds field values the direct answer must have, so a row
	// cannot pass by every world failing alike.
	Expect map[string]string `json:"expect"`
	// KnownGap is "<field>[,<field>...]: <what differs>": the row then
	// asserts that exactly those fields differ.
	KnownGap string `json:"knownGap"`
}

// diffInput is what a row sends.
type diffInput struct {
	Text          string `json:"text"`
	HistoryLength *int   `json:"historyLength"`
	// TaskID addresses a task that does not exist instead of the setup's.
	TaskID string `json:"taskId"`
	// Header overrides service parameters (A2A-Version, ...).
	Header map[string]string `json:"header"`
	// ContentType, Path and Body make a RawJSONRPC request: Path is
	// appended to the interface URL.
	ContentType string `json:"contentType"`
	Path        string `json:"path"`
	Body        string `json:"body"`
}

// gapFields parses the fields a known gap names: those that differ in
// every run, and those ("?field") that differ in some runs only, where
// what orchd answers depends on timing.
func (r diffRow) gapFields() (always, sometimes []string, err error) {
	if r.KnownGap == "" {
		return nil, nil, nil
	}
	fields, what, ok := strings.Cut(r.KnownGap, ": ")
	if !ok || strings.TrimSpace(what) == "" || fields == "" {
		return nil, nil, fmt.Errorf("knownGap %q is not \"<field>[,<field>]: <what differs>\"", r.KnownGap)
	}
	for _, f := range strings.Split(fields, ",") {
		f = strings.TrimSpace(f)
		if s, ok := strings.CutPrefix(f, "?"); ok {
			sometimes = append(sometimes, s)
		} else {
			always = append(always, f)
		}
	}
	slices.Sort(always)
	slices.Sort(sometimes)
	return always, sometimes, nil
}

// gapHolds reports whether the fields that differ are those the known
// gap names: every field it says always differs, and no field it does not
// name.
func gapHolds(differ, always, sometimes []string) bool {
	for _, f := range always {
		if !slices.Contains(differ, f) {
			return false
		}
	}
	for _, f := range differ {
		if !slices.Contains(always, f) && !slices.Contains(sometimes, f) {
			return false
		}
	}
	return true
}

// diffMethods are the methods a row may name.
var diffMethods = []string{"SendMessage", "SendStreamingMessage", "GetTask", "ListTasks", "CancelTask", "SubscribeToTask",
	"CreateTaskPushConfig", "GetTaskPushConfig", "ListTaskPushConfigs", "DeleteTaskPushConfig", "GetExtendedAgentCard",
	"GetCard", "RawJSONRPC"}

func loadDiffRows(t *testing.T) []diffRow {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "differential", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no differential rows: %v", err)
	}
	var rows []diffRow
	names := map[string]bool{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var rs []diffRow
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rs); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, r := range rs {
			switch {
			case r.Name == "" || names[r.Name]:
				t.Fatalf("%s: row name %q is empty or repeated", f, r.Name)
			case !slices.Contains(diffMethods, r.Method):
				t.Fatalf("%s: row %s: unknown method %q", f, r.Name, r.Method)
			case len(r.Expect) == 0:
				t.Fatalf("%s: row %s expects nothing of the direct answer", f, r.Name)
			}
			if _, _, err := r.gapFields(); err != nil {
				t.Fatalf("%s: row %s: %v", f, r.Name, err)
			}
			names[r.Name] = true
			rows = append(rows, r)
		}
	}
	return rows
}

// world is one way of reaching a reference agent: directly, through one
// orchd, or through two.
type world struct {
	name string
	base string
	ref  *refAgent
}

// observation is an answer as compared: field name → normalised value.
type observation map[string]string

// TestDifferential runs every row against a reference a2a-go agent
// directly, through one orchd and through orchd A → orchd B, and asserts
// that the answers are equivalent field by field, or differ exactly as
// the row's known gap says.
func TestDifferential(t *testing.T) {
	rows := loadDiffRows(t)
	direct := startRefAgent(t)
	refOne, refChain := startRefAgent(t), startRefAgent(t)
	one := diffNode(t, "b1", registry.Spec{ID: "ref", URL: refOne.URL})
	b2 := diffNode(t, "b2", registry.Spec{ID: "ref", URL: refChain.URL})
	a := diffNode(t, "a", registry.Spec{ID: "b2", URL: b2})
	worlds := []world{{"direct", direct.URL, direct}, {"one", one, refOne}, {"chain", a, refChain}}

	type count struct{ equivalent, gap int }
	counts := map[string]*count{}
	for _, r := range rows {
		key := r.Binding + " " + r.Version
		if counts[key] == nil {
			counts[key] = &count{}
		}
		ok := t.Run(r.Name, func(t *testing.T) {
			obs := make([]observation, len(worlds))
			for i, w := range worlds {
				obs[i] = runRow(t, r, w)
			}
			for f, want := range r.Expect {
				if got := obs[0][f]; got != want {
					t.Errorf("direct %s = %q, want %q (observed %v)", f, got, want, obs[0])
				}
			}
			var differ []string
			for i := 1; i < len(worlds); i++ {
				for _, f := range diffFields(r, obs[0], obs[i]) {
					if !slices.Contains(differ, f) {
						differ = append(differ, f)
					}
				}
			}
			slices.Sort(differ)
			t.Logf("fields that differ: %v", differ)
			for _, f := range differ {
				t.Logf("  %s: direct %q, one %q, chain %q", f, obs[0][f], obs[1][f], obs[2][f])
			}
			always, sometimes, _ := r.gapFields()
			gap := append(slices.Clone(always), sometimes...)
			if !gapHolds(differ, always, sometimes) {
				var b strings.Builder
				seen := slices.Clone(differ)
				for _, f := range gap {
					if !slices.Contains(seen, f) {
						seen = append(seen, f)
					}
				}
				for _, f := range seen {
					fmt.Fprintf(&b, "\n  %s: direct %q, one %q, chain %q", f, obs[0][f], obs[1][f], obs[2][f])
				}
				if len(gap) == 0 {
					t.Errorf("through orchd, fields %v differ:%s", differ, b.String())
				} else {
					t.Errorf("known gap %q: fields %v differ, the row says %v (fixed? then drop knownGap):%s", r.KnownGap, differ, gap, b.String())
				}
			}
		})
		if ok {
			if r.KnownGap != "" {
				counts[key].gap++
			} else {
				counts[key].equivalent++
			}
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		t.Logf("differential %-16s equivalent %3d  known gap %3d", k, counts[k].equivalent, counts[k].gap)
	}
}

// diffNode runs an orchd on the embedded defaults, named self, serving
// gRPC too, with one agent; it returns the daemon's base URL.
func diffNode(t *testing.T, self string, agent registry.Spec) string {
	t.Helper()
	cfg, err := orchestrator.LoadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Delegation.Self = self
	cfg.Agent.GRPC.Listen = "127.0.0.1:0"
	cfg.Agents = []registry.Spec{agent}
	// The push rows' webhook is on loopback, which the reference agent's
	// sender allows too (AllowPrivateNetworks).
	cfg.Agent.Push.AllowNetworks = []string{"127.0.0.0/8"}
	return orchdtest.Start(t, cfg)
}

// diffFields lists the fields of row r in which b differs from a. When
// one world lacks the interface, only that is reported.
func diffFields(r diffRow, a, b observation) []string {
	if a["interface"] != b["interface"] {
		return []string{"interface"}
	}
	var out []string
	for _, f := range append([]string{"error"}, r.Compare...) {
		if a[f] != b[f] {
			out = append(out, f)
		}
	}
	return out
}

// runRow runs row r in world w.
func runRow(t *testing.T, r diffRow, w world) observation {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	switch r.Method {
	case "GetCard":
		return getCard(t, ctx, r, w)
	case "RawJSONRPC":
		return rawJSONRPC(t, ctx, r, w)
	}
	c, o := diffClient(t, ctx, r, w)
	if c == nil {
		return o
	}
	defer func() { _ = c.Destroy() }()
	d := driver{t: t, ctx: ctx, c: c, r: r, w: w, o: observation{}}
	d.run()
	return d.o
}

// driver runs one row with one client.
type driver struct {
	t   *testing.T
	ctx context.Context
	c   *a2aclient.Client
	r   diffRow
	w   world
	o   observation
}

func (d *driver) run() {
	r := d.r
	var task *a2a.Task
	if r.Setup != "" && r.Setup != "hold" {
		res, err := d.c.SendMessage(d.ctx, &a2a.SendMessageRequest{Message: d.message(r.Name+"-setup", r.Setup, "")})
		var ok bool
		if task, ok = res.(*a2a.Task); err != nil || !ok {
			d.o["error"] = "setup: " + errCode(err)
			d.t.Logf("%s: setup %q: %T %v", d.w.name, r.Setup, res, err)
			return
		}
		d.settle(task.ID)
	}
	taskID := func() a2a.TaskID {
		if r.Input.TaskID != "" {
			return a2a.TaskID(r.Input.TaskID)
		}
		if task == nil {
			return ""
		}
		return task.ID
	}
	switch r.Method {
	case "SendMessage":
		m := d.message(r.Name, r.Input.Text, taskID())
		if task != nil {
			m.ContextID = task.ContextID
		}
		res, err := d.c.SendMessage(d.ctx, &a2a.SendMessageRequest{Message: m, Config: d.config()})
		d.result(res, err)
	case "SendStreamingMessage":
		d.stream(d.c.SendStreamingMessage(d.ctx, &a2a.SendMessageRequest{Message: d.message(r.Name, r.Input.Text, taskID()), Config: d.config()}))
	case "GetTask":
		res, err := d.c.GetTask(d.ctx, &a2a.GetTaskRequest{ID: taskID(), HistoryLength: r.Input.HistoryLength})
		d.result(res, err)
	case "ListTasks":
		ctxID := ""
		if task != nil {
			ctxID = task.ContextID
		}
		res, err := d.c.ListTasks(d.ctx, &a2a.ListTasksRequest{ContextID: ctxID, HistoryLength: r.Input.HistoryLength})
		if err != nil {
			d.fail(err)
			return
		}
		var tasks []string
		for _, t := range res.Tasks {
			o := observation{}
			observeTask(o, t)
			tasks = append(tasks, o["state"]+" "+o["history"]+" "+o["artifacts"])
		}
		d.o["tasks"] = strings.Join(tasks, "; ")
		d.o["totalSize"] = strconv.Itoa(res.TotalSize)
		d.o["nextPageToken"] = presence(res.NextPageToken)
	case "CancelTask":
		if r.Setup == "hold" {
			d.cancelHeld()
			return
		}
		res, err := d.c.CancelTask(d.ctx, &a2a.CancelTaskRequest{ID: taskID()})
		d.result(res, err)
	case "SubscribeToTask":
		if r.Setup == "hold" {
			d.subscribeHeld()
			return
		}
		d.stream(d.c.SubscribeToTask(d.ctx, &a2a.SubscribeToTaskRequest{ID: taskID()}))
	case "CreateTaskPushConfig", "GetTaskPushConfig", "ListTaskPushConfigs", "DeleteTaskPushConfig":
		d.push(taskID())
	case "GetExtendedAgentCard":
		card, err := d.c.GetExtendedAgentCard(d.ctx, &a2a.GetExtendedAgentCardRequest{})
		if err != nil {
			d.fail(err)
			return
		}
		d.o["card"] = presence(card.Name)
		d.o["interfaces"] = interfaces(card)
	}
}

// settle waits until the task's execution has ended, which a2a-go does
// only after it answered: until then a cancel or a further message finds
// the execution still in progress. A subscription to a task without a
// running execution is refused or ended at once, or (orchd) starts with
// the task; one that waits for events has found it running.
func (d *driver) settle(task a2a.TaskID) {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(d.ctx, 50*time.Millisecond)
		settled := true
		for ev, err := range d.c.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: task}) {
			_, isTask := ev.(*a2a.Task)
			settled = err == nil && isTask || err != nil && ctx.Err() == nil
			break
		}
		cancel()
		if settled {
			return
		}
	}
	d.t.Logf("%s: task %s still running after 5s", d.w.name, task)
}

func (d *driver) message(id, text string, task a2a.TaskID) *a2a.Message {
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
	m.ID, m.TaskID = id, task
	return m
}

func (d *driver) config() *a2a.SendMessageConfig {
	if d.r.Input.HistoryLength == nil {
		return nil
	}
	return &a2a.SendMessageConfig{HistoryLength: d.r.Input.HistoryLength}
}

func (d *driver) fail(err error) {
	d.o["error"] = errCode(err)
	d.o["error.text"] = err.Error()
}

// result observes a Task, a Message or an error.
func (d *driver) result(res any, err error) {
	if err != nil {
		d.fail(err)
		return
	}
	switch v := res.(type) {
	case *a2a.Task:
		observeTask(d.o, v)
	case *a2a.Message:
		d.o["kind"] = "message"
		d.o["message"] = summarizeMessage(v)
	default:
		d.o["kind"] = fmt.Sprintf("%T", res)
	}
}

// stream observes a stream of events: their kinds and states in order,
// the last state, and the artifacts put together, read until a message,
// a terminal state or INPUT_REQUIRED.
func (d *driver) stream(events func(func(a2a.Event, error) bool)) {
	s := newStreamObs()
	for ev, err := range events {
		if err != nil {
			d.fail(err)
			break
		}
		if s.add(ev) {
			break
		}
	}
	s.into(d.o)
}

// subscribeHeld starts a held task by a stream, subscribes to it, nudges
// the agent until the subscription sees an event, then lets it finish and
// observes the subscription.
func (d *driver) subscribeHeld() {
	ctx, cancel := context.WithCancel(d.ctx)
	defer cancel()
	before := heldBefore(d.w.ref)
	type item struct {
		ev  a2a.Event
		err error
	}
	started := make(chan item, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(started)
		for ev, err := range d.c.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: d.message(d.r.Name+"-setup", "hold", "")}) {
			select {
			case started <- item{ev, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() { cancel(); <-done }()
	var task a2a.TaskID
	for it := range started {
		if it.err != nil {
			d.fail(it.err)
			return
		}
		if tk, ok := it.ev.(*a2a.Task); ok {
			task = tk.ID
			break
		}
	}
	if task == "" {
		d.o["error"] = "no task started"
		return
	}
	go func() {
		for range started { // drain the starting stream
		}
	}()
	d.w.ref.waitHeld(d.t, before+1)
	sub := make(chan item, 64)
	subDone := make(chan struct{})
	go func() {
		defer close(subDone)
		defer close(sub)
		for ev, err := range d.c.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: task}) {
			select {
			case sub <- item{ev, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() { cancel(); <-subDone }()
	s := newStreamObs()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	// Nudge until the subscription has seen an event, then finish.
	finished := false
	for {
		select {
		case it, ok := <-sub:
			if !ok {
				s.into(d.o)
				return
			}
			if it.err != nil {
				d.fail(it.err)
				s.into(d.o)
				return
			}
			if s.add(it.ev) {
				s.into(d.o)
				return
			}
			if !finished {
				finished = true
				select {
				case d.w.ref.finish <- struct{}{}:
				case <-deadline:
					d.o["error"] = "the held task did not take finish"
					return
				}
			}
		case <-tick.C:
			if !finished {
				select {
				case d.w.ref.nudge <- struct{}{}:
				default:
				}
			}
		case <-deadline:
			d.o["error"] = "the subscription saw no end in 10s"
			s.into(d.o)
			return
		}
	}
}

// cancelHeld starts a held task by a stream and cancels it while it
// works.
func (d *driver) cancelHeld() {
	ctx, cancel := context.WithCancel(d.ctx)
	defer cancel()
	before := heldBefore(d.w.ref)
	first := make(chan a2a.TaskID, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(first)
		sent := false
		for ev, err := range d.c.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: d.message(d.r.Name+"-setup", "hold", "")}) {
			if tk, ok := ev.(*a2a.Task); ok && err == nil && !sent {
				first <- tk.ID
				sent = true
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() { cancel(); <-done }()
	task, ok := <-first
	if !ok {
		d.o["error"] = "no task started"
		return
	}
	d.w.ref.waitHeld(d.t, before+1)
	res, err := d.c.CancelTask(d.ctx, &a2a.CancelTaskRequest{ID: task})
	d.result(res, err)
}

// heldBefore is how many executions the agent held before this one.
func heldBefore(r *refAgent) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held
}

// streamObs gathers a stream's events.
type streamObs struct {
	events    []string
	state     string
	artifacts map[a2a.ArtifactID]string
	order     []a2a.ArtifactID
	first     string
}

func newStreamObs() *streamObs { return &streamObs{artifacts: map[a2a.ArtifactID]string{}} }

// add takes an event and reports whether the stream is at its end: a
// message, or a terminal or interrupted state.
func (s *streamObs) add(ev a2a.Event) bool {
	var kind, state string
	switch v := ev.(type) {
	case *a2a.Task:
		kind, state = "task", string(v.Status.State)
		for _, art := range v.Artifacts {
			s.artifact(art, false)
		}
	case *a2a.TaskStatusUpdateEvent:
		kind, state = "status", string(v.Status.State)
	case *a2a.TaskArtifactUpdateEvent:
		kind = "artifact:" + string(v.Artifact.ID)
		s.artifact(v.Artifact, v.Append)
	case *a2a.Message:
		kind = "message:" + v.ID
	default:
		kind = fmt.Sprintf("%T", ev)
	}
	if s.first == "" {
		s.first = kind
	}
	e := kind
	if state != "" {
		e += ":" + state
		s.state = state
	}
	s.events = append(s.events, e)
	st := a2a.TaskState(state)
	return strings.HasPrefix(kind, "message:") || st.Terminal() || st == a2a.TaskStateInputRequired
}

func (s *streamObs) artifact(art *a2a.Artifact, appendTo bool) {
	if _, ok := s.artifacts[art.ID]; !ok {
		s.order = append(s.order, art.ID)
	}
	text := partsText(art.Parts)
	if appendTo {
		s.artifacts[art.ID] += text
	} else {
		s.artifacts[art.ID] = text
	}
}

func (s *streamObs) into(o observation) {
	o["events"] = strings.Join(s.events, " ")
	o["first"] = s.first
	o["state"] = s.state
	var arts []string
	for _, id := range s.order {
		arts = append(arts, string(id)+"="+s.artifacts[id])
	}
	o["artifacts"] = strings.Join(arts, " ")
}

// push runs a push config row on task: create a config, then get, list
// or delete it.
func (d *driver) push(task a2a.TaskID) {
	cfg := &a2a.PushConfig{TaskID: task, ID: "cfg-1", URL: "http://127.0.0.1:9/webhook", Token: "push-token"}
	created, err := d.c.CreateTaskPushConfig(d.ctx, cfg)
	if err != nil {
		d.fail(err)
		return
	}
	d.o["config"] = summarizePush(created)
	switch d.r.Method {
	case "GetTaskPushConfig":
		got, err := d.c.GetTaskPushConfig(d.ctx, &a2a.GetTaskPushConfigRequest{TaskID: task, ID: created.ID})
		if err != nil {
			d.fail(err)
			return
		}
		d.o["config"] = summarizePush(got)
	case "ListTaskPushConfigs":
		d.listPush(task)
	case "DeleteTaskPushConfig":
		if err := d.c.DeleteTaskPushConfig(d.ctx, &a2a.DeleteTaskPushConfigRequest{TaskID: task, ID: created.ID}); err != nil {
			d.fail(err)
			return
		}
		d.listPush(task)
	}
}

func (d *driver) listPush(task a2a.TaskID) {
	list, err := d.c.ListTaskPushConfigs(d.ctx, &a2a.ListTaskPushConfigRequest{TaskID: task})
	if err != nil {
		d.fail(err)
		return
	}
	var out []string
	for _, c := range list {
		out = append(out, summarizePush(c))
	}
	slices.Sort(out)
	d.o["configs"] = "[" + strings.Join(out, "; ") + "]"
}

func summarizePush(c *a2a.PushConfig) string {
	if c == nil {
		return "nil"
	}
	return c.ID + " " + c.URL + " " + c.Token
}

// observeTask records a task's fields, normalised: no task, context or
// time stamps, and no metadata under the delegation extension's URI.
func observeTask(o observation, t *a2a.Task) {
	o["kind"] = "task"
	o["state"] = string(t.Status.State)
	o["status.message"] = summarizeMessage(t.Status.Message)
	var arts []string
	for _, a := range t.Artifacts {
		arts = append(arts, string(a.ID)+"="+partsText(a.Parts))
	}
	o["artifacts"] = strings.Join(arts, " ")
	var hist []string
	for _, m := range t.History {
		hist = append(hist, string(m.Role)+":"+m.ID)
	}
	o["history"] = "[" + strings.Join(hist, " ") + "]"
	md := map[string]any{}
	for k, v := range t.Metadata {
		if k != delegation.ExtensionURI {
			md[k] = v
		}
	}
	b, _ := json.Marshal(md)
	o["metadata"] = string(b)
}

func summarizeMessage(m *a2a.Message) string {
	if m == nil {
		return ""
	}
	return string(m.Role) + " " + m.ID + " " + strconv.Quote(partsText(m.Parts))
}

func partsText(parts a2a.ContentParts) string {
	var b strings.Builder
	for _, p := range parts {
		if s, ok := p.Content.(a2a.Text); ok {
			b.WriteString(string(s))
		}
	}
	return b.String()
}

func presence(s string) string {
	if s == "" {
		return "empty"
	}
	return "set"
}

// errorCodes map the errors a2a-go's clients return to their JSON-RPC
// codes, the A2A classes first.
var errorCodes = []struct {
	err  error
	code string
}{
	{a2a.ErrTaskNotFound, "-32001"}, {a2a.ErrTaskNotCancelable, "-32002"}, {a2a.ErrPushNotificationNotSupported, "-32003"},
	{a2a.ErrUnsupportedOperation, "-32004"}, {a2a.ErrUnsupportedContentType, "-32005"}, {a2a.ErrInvalidAgentResponse, "-32006"},
	{a2a.ErrExtendedCardNotConfigured, "-32007"}, {a2a.ErrExtensionSupportRequired, "-32008"}, {a2a.ErrVersionNotSupported, "-32009"},
	{a2a.ErrParseError, "-32700"}, {a2a.ErrInvalidRequest, "-32600"}, {a2a.ErrMethodNotFound, "-32601"}, {a2a.ErrInvalidParams, "-32602"},
	{a2a.ErrInternalError, "-32603"}, {a2a.ErrServerError, "-32000"}, {a2a.ErrUnauthenticated, "-31401"}, {a2a.ErrUnauthorized, "-31403"},
}

func errCode(err error) string {
	if err == nil {
		return ""
	}
	for _, e := range errorCodes {
		if errors.Is(err, e.err) {
			return e.code
		}
	}
	return "not an A2A error"
}

// diffClient builds an a2a-go client for the row's interface of the
// world's card, or returns the observation that the card has none.
func diffClient(t *testing.T, ctx context.Context, r diffRow, w world) (*a2aclient.Client, observation) {
	t.Helper()
	resolver := &agentcard.Resolver{Client: http.DefaultClient, CardParser: a2av0.NewAgentCardParser()}
	card, err := resolver.Resolve(ctx, w.base)
	if err != nil {
		return nil, observation{"interface": "card: " + err.Error()}
	}
	var iface *a2a.AgentInterface
	for _, i := range card.SupportedInterfaces {
		if string(i.ProtocolBinding) == r.Binding && string(i.ProtocolVersion) == r.Version {
			iface = i
			break
		}
	}
	if iface == nil {
		return nil, observation{"interface": "missing"}
	}
	one := *card
	one.SupportedInterfaces = []*a2a.AgentInterface{iface}
	hc := &http.Client{}
	creds := grpc.WithTransportCredentials(insecure.NewCredentials())
	c, err := a2aclient.NewFromCard(ctx, &one,
		a2aclient.WithJSONRPCTransport(hc), a2aclient.WithRESTTransport(hc),
		a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{Client: hc}), a2av0.WithRESTTransport(a2av0.RESTTransportConfig{Client: hc}),
		grpcv1.WithGRPCTransport(creds), grpcv0.WithGRPCTransport(creds),
		a2aclient.WithCallInterceptors(headerOverride(r.Input.Header)))
	if err != nil {
		return nil, observation{"interface": "client: " + err.Error()}
	}
	return c, nil
}

// headerOverride sets service parameters on every call, replacing what
// the client would send; an empty value removes the parameter.
type headerOverride map[string]string

func (h headerOverride) Before(ctx context.Context, req *a2aclient.Request) (context.Context, any, error) {
	for k, v := range h {
		for have := range req.ServiceParams {
			if strings.EqualFold(have, k) {
				delete(req.ServiceParams, have)
			}
		}
		if v != "" {
			req.ServiceParams[k] = []string{v}
		}
	}
	return ctx, nil, nil
}

func (headerOverride) After(context.Context, *a2aclient.Response) error { return nil }

// getCard fetches the world's public card as a client of the row's
// version does, and observes its schema validity (1.0), interfaces and
// capabilities.
func getCard(t *testing.T, ctx context.Context, r diffRow, w world) observation {
	t.Helper()
	path := "/.well-known/agent-card.json"
	if r.Input.Path != "" {
		path = r.Input.Path
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, w.base+path, nil)
	if r.Version == "1.0" {
		req.Header.Set("A2A-Version", "1.0")
	}
	for k, v := range r.Input.Header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return observation{"error": err.Error()}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return observation{"error": err.Error()}
	}
	o := observation{"status": strconv.Itoa(resp.StatusCode), "contentType": resp.Header.Get("Content-Type"),
		"vary": presence(strings.Join(resp.Header.Values("Vary"), ",")), "lastModified": presence(resp.Header.Get("Last-Modified"))}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		o["error"] = "not JSON: " + err.Error()
		return o
	}
	var legacy []string
	for _, f := range []string{"url", "preferredTransport", "protocolVersion", "additionalInterfaces"} {
		if _, ok := fields[f]; ok {
			legacy = append(legacy, f)
		}
	}
	o["legacyFields"] = strings.Join(legacy, ",")
	card, err := a2av0.NewAgentCardParser()(body)
	if err != nil {
		o["error"] = "card: " + err.Error()
		return o
	}
	o["interfaces"] = interfaces(card)
	o["capabilities"] = fmt.Sprintf("streaming=%v push=%v extended=%v", card.Capabilities.Streaming, card.Capabilities.PushNotifications, card.Capabilities.ExtendedAgentCard)
	o["schema"] = validateCard(t, body)
	return o
}

// interfaces lists a card's interfaces as binding/version, sorted.
func interfaces(card *a2a.AgentCard) string {
	var out []string
	for _, i := range card.SupportedInterfaces {
		out = append(out, string(i.ProtocolBinding)+"/"+string(i.ProtocolVersion))
	}
	slices.Sort(out)
	return strings.Join(slices.Compact(out), " ")
}

// cardSchema is the A2A 1.0.0 JSON schema bundle orchd's tests validate
// cards against.
const cardSchema = "../../orchestrator/testdata/a2a-schema/a2a-v1.0.0-agentcard.json"

// validateCard says whether body validates against the A2A 1.0 schema's
// AgentCard definition: "valid" or "invalid" (the reason is logged).
func validateCard(t *testing.T, body []byte) string {
	t.Helper()
	sch, err := a2aschema.AgentCard(cardSchema)
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return "invalid"
	}
	if err := sch.Validate(v); err != nil {
		t.Logf("card against the AgentCard schema: %#v", err)
		return "invalid"
	}
	return "valid"
}

// rawJSONRPC posts the row's body to the JSON-RPC interface of the
// row's version, plus the row's path, and observes the HTTP status and
// the JSON-RPC error code.
func rawJSONRPC(t *testing.T, ctx context.Context, r diffRow, w world) observation {
	t.Helper()
	resolver := &agentcard.Resolver{Client: http.DefaultClient, CardParser: a2av0.NewAgentCardParser()}
	card, err := resolver.Resolve(ctx, w.base)
	if err != nil {
		return observation{"interface": "card: " + err.Error()}
	}
	url := ""
	for _, i := range card.SupportedInterfaces {
		if i.ProtocolBinding == a2a.TransportProtocolJSONRPC && string(i.ProtocolVersion) == r.Version {
			url = i.URL
			break
		}
	}
	if url == "" {
		return observation{"interface": "missing"}
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+r.Input.Path, strings.NewReader(r.Input.Body))
	req.Header.Set("Content-Type", r.Input.ContentType)
	if r.Version == "1.0" {
		req.Header.Set("A2A-Version", "1.0")
	}
	for k, v := range r.Input.Header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return observation{"error": err.Error()}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	o := observation{"status": strconv.Itoa(resp.StatusCode)}
	var rpc struct {
		JSONRPC string          `json:"jsonrpc"`
		Result  json.RawMessage `json:"result"`
		Error   *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	switch {
	case json.Unmarshal(body, &rpc) != nil || rpc.JSONRPC != "2.0":
		o["error"] = "not JSON-RPC"
		o["error.text"] = string(body)
	case rpc.Error != nil:
		o["error"] = strconv.Itoa(rpc.Error.Code)
	default:
		o["kind"] = "result"
	}
	return o
}
