package steering

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	lru "github.com/hashicorp/golang-lru/v2"
)

// The extension's URI and the metadata keys it defines.
const (
	// URI identifies the steering extension.
	URI = "https://a2a-protocol.org/extensions/steering/v1"
	// ControlKey is the message metadata key whose value, "steer" or
	// "interrupt", makes a message a steering signal.
	ControlKey = URI + "/control"
	// InterruptedKey is the task metadata key set to true when a task is
	// INPUT_REQUIRED because a client interrupted it.
	InterruptedKey = URI + "/interrupted"
	// ReceiptKey is the task metadata key under which an acknowledgement
	// carries its [Receipt].
	ReceiptKey = URI + "/receipt"
	// ReferenceKey is the message metadata key naming the message id of the
	// output a steer or interrupt reacts to.
	ReferenceKey = URI + "/referenceMessageId"
	// SeqKey is the status metadata key carrying a task's signal number:
	// on an acknowledgement (Acknowledged), the number of the signal it
	// answers; on an interrupted task's status (Inbox.Interrupted), the
	// last number the task gave, from which the execution that resumes
	// it numbers on.
	SeqKey = URI + "/seq"
	// SeenKey is the status metadata key under which Inbox.Interrupted
	// stores the receipts of the task's latest signals (at most
	// StoredReceipts, oldest first): a retry of one of them is answered
	// with its receipt, and not delivered again, even once the agent has
	// forgotten the inbox or restarted.
	SeenKey = URI + "/seen"
)

// StoredReceipts bounds the receipts an interrupted status stores under
// SeenKey: a retry comes soon after its signal, and each receipt adds
// about 100 bytes to the task every client reads.
const StoredReceipts = 16

// Control is the kind of a steering signal.
type Control string

// The two controls.
const (
	Steer     Control = "steer"
	Interrupt Control = "interrupt"
)

// ControlOf returns the control a message carries; ok is false for an
// ordinary message.
func ControlOf(m *a2a.Message) (c Control, ok bool) {
	if m == nil {
		return "", false
	}
	v, ok := m.Metadata[ControlKey]
	if !ok {
		return "", false
	}
	s, _ := v.(string)
	return Control(s), true
}

// Modes are the steering modes an agent advertises.
type Modes struct {
	// Steerable: a WORKING task accepts messages it incorporates in flight.
	Steerable bool
	// Interruptible: a WORKING task can be stopped to wait for new input.
	Interruptible bool
}

// Allows reports whether the modes include c.
func (m Modes) Allows(c Control) bool {
	return (c == Steer && m.Steerable) || (c == Interrupt && m.Interruptible)
}

// Extension returns the card declaration of the extension with the modes.
func (m Modes) Extension() a2a.AgentExtension {
	return a2a.AgentExtension{URI: URI, Description: "Supports interrupting and/or steering an actively working task.",
		Params: map[string]any{"steerable": m.Steerable, "interruptible": m.Interruptible}}
}

// Signal is a steer or interrupt delivered to an executor.
type Signal struct {
	// Control says what the client asks.
	Control Control
	// Message is the client's message; for a steer, what to incorporate.
	Message *a2a.Message
	// Seq numbers the task's signals from 1, in delivery order.
	Seq int64
	// ReferenceMessageID is the id of the output the signal reacts to, if
	// the client named one.
	ReferenceMessageID string
}

// Receipt acknowledges a delivered signal.
type Receipt struct {
	// Control and MessageID identify the signal.
	Control   Control `json:"control"`
	MessageID string  `json:"messageId"`
	// Seq is the signal's number at the agent that received it.
	Seq int64 `json:"seq"`
	// ReferenceMessageID echoes the output the signal reacts to.
	ReferenceMessageID string `json:"referenceMessageId,omitempty"`
	// Hops lists every agent that accepted the signal, this one first and
	// then, for orchestrators, each hop it was passed to.
	Hops []Hop `json:"hops"`
	// Duplicate is true when the message id was seen before: the signal was
	// not delivered again.
	Duplicate bool `json:"duplicate,omitempty"`
}

// Hop is one agent's acceptance of a signal.
type Hop struct {
	// Agent names the agent.
	Agent string `json:"agent"`
	// Seq is the signal's number at that agent.
	Seq int64 `json:"seq"`
}

// Config configures steering for an agent.
type Config struct {
	// Modes are the modes the agent advertises and accepts.
	Modes Modes
	// Name is the agent's name in receipts. Default "agent".
	Name string
	// Tasks is the task store the agent's handler uses
	// (a2asrv.WithTaskStore); acknowledgements and errors read tasks from
	// it. Required.
	Tasks taskstore.Store
	// SettleTimeout bounds how long an interrupt waits for the executor to
	// stop, and a2a-go to release the execution, before it is acknowledged
	// anyway. Default 10s.
	SettleTimeout time.Duration
	// Remember is how many closed inboxes keep their counter and the
	// receipts of their signals, so that a retried signal is known after
	// its execution ended. A task forgotten (or an agent restarted)
	// numbers on from its stored status when it was interrupted with
	// Inbox.Interrupted, and knows the retries of its latest
	// StoredReceipts signals from it. Default 4,096.
	Remember int
}

// Steering holds the open inboxes of one agent's running tasks.
type Steering struct {
	cfg     Config
	mu      sync.Mutex
	inboxes map[a2a.TaskID]*Inbox
	// execs follows a2a-go's executions for ExecutorInterceptor.
	execs *Executions
	// numbering remembers closed inboxes' counters and seen message ids,
	// so a task resumed after an interrupt keeps numbering its signals
	// and recognizing retries; bounded (Config.Remember), oldest
	// forgotten first. A task it forgot numbers on from its stored
	// status (SeqKey), and knows its latest receipts from it (SeenKey).
	numbering *lru.Cache[a2a.TaskID, numbering]
}

// numbering is what a closed inbox leaves: its counter, the receipts by
// message id (never written again: an inbox opened later copies them), and
// when a2a-go let go of its execution.
type numbering struct {
	seq      int64
	seen     map[string]Receipt
	released <-chan struct{}
	owner    string
}

// New returns steering for an agent.
func New(cfg Config) *Steering {
	if cfg.Name == "" {
		cfg.Name = "agent"
	}
	if cfg.SettleTimeout <= 0 {
		cfg.SettleTimeout = 10 * time.Second
	}
	if cfg.Remember <= 0 {
		cfg.Remember = 4096
	}
	n, _ := lru.New[a2a.TaskID, numbering](cfg.Remember) // only a non-positive size fails
	return &Steering{cfg: cfg, inboxes: map[a2a.TaskID]*Inbox{}, execs: NewExecutions(), numbering: n}
}

// Extension returns the card declaration for the configured modes.
func (s *Steering) Extension() a2a.AgentExtension { return s.cfg.Modes.Extension() }

// Activated reports whether a request activated the extension, in
// A2A-Extensions (0.3 clients' X-A2A-Extensions arrives under that name).
func Activated(cc *a2asrv.CallContext) bool {
	vals, _ := cc.ServiceParams().Get(a2a.SvcParamExtensions)
	for _, v := range vals {
		for _, uri := range strings.Split(v, ",") {
			if strings.TrimSpace(uri) == URI {
				return true
			}
		}
	}
	return false
}

// Echo wraps an A2A HTTP handler so that responses to requests activating
// the extension name it in the A2A-Extensions header (a2a-go echoes
// extensions only over gRPC).
func Echo(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, h := range append(r.Header.Values(a2a.SvcParamExtensions), r.Header.Values("X-A2A-Extensions")...) {
			if slices.ContainsFunc(strings.Split(h, ","), func(u string) bool { return strings.TrimSpace(u) == URI }) {
				w.Header().Add(a2a.SvcParamExtensions, URI)
				break
			}
		}
		next.ServeHTTP(w, r)
	})
}

// Open opens the inbox of the execution's task. The executor must Close it
// before it yields its final event.
func (s *Steering) Open(ec *a2asrv.ExecutorContext) *Inbox {
	in := &Inbox{s: s, task: ec.TaskID, owner: UserName(ec.User), ready: make(chan struct{}, 1), done: make(chan struct{}), seen: map[string]Receipt{}}
	if prev, ok := s.numbering.Get(ec.TaskID); ok && prev.owner == in.owner {
		in.seq, in.base, in.seen = prev.seq, prev.seq, maps.Clone(prev.seen)
	} else if !ok {
		in.seq = storedSeq(ec.StoredTask)
		in.base = in.seq
		in.seen = storedSeen(ec.StoredTask)
	}
	// a2a-go intercepted this execution just before it called Execute.
	in.released = s.execs.Released(ec.TaskID)
	s.mu.Lock()
	s.inboxes[ec.TaskID] = in
	s.mu.Unlock()
	return in
}

// ExecutorInterceptor returns the a2asrv.ExecutorContextInterceptor that
// lets an interrupt be acknowledged only once the next message to the task
// can resume it. Register it with a2asrv.WithExecutorContextInterceptor.
//
// a2a-go refuses a message to a task whose execution it still holds ("task
// execution is already in progress"), and still holds it for a while
// after it stored the final event. The interceptor, an [Executions], hands
// the end of the execution's context, which comes once a2a-go let go, to
// the inbox the executor opens, and an interrupt is acknowledged after it.
// Without the interceptor an interrupt is acknowledged once the task's new
// state is stored, and a message sent at once may still be refused.
func (s *Steering) ExecutorInterceptor() a2asrv.ExecutorContextInterceptor { return s.execs }

// closed forgets a closed inbox, keeping its numbering.
func (s *Steering) closed(in *Inbox, seq int64, seen map[string]Receipt) {
	s.numbering.Add(in.task, numbering{seq: seq, seen: seen, released: in.released, owner: in.owner})
	s.mu.Lock()
	if s.inboxes[in.task] == in {
		delete(s.inboxes, in.task)
	}
	s.mu.Unlock()
}

func (s *Steering) inbox(id a2a.TaskID) *Inbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inboxes[id]
}

// Interceptor returns the a2asrv.CallInterceptor that answers steering
// messages. Ordinary messages pass through untouched.
func (s *Steering) Interceptor() a2asrv.CallInterceptor { return interceptor{s} }

type interceptor struct{ s *Steering }

// FromCall returns the steering message a call carries and its control;
// ok is false for any call that is not a SendMessage or
// SendStreamingMessage with a control. Interceptors that route steering
// (orchd's, for one) recognise it with this.
func FromCall(cc *a2asrv.CallContext, req *a2asrv.Request) (m *a2a.Message, c Control, ok bool) {
	if method := cc.Method(); method != "SendMessage" && method != "SendStreamingMessage" {
		return nil, "", false
	}
	smr, isSend := req.Payload.(*a2a.SendMessageRequest)
	if !isSend {
		return nil, "", false
	}
	c, ok = ControlOf(smr.Message)
	return smr.Message, c, ok
}

func (i interceptor) Before(ctx context.Context, cc *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	msg, control, ok := FromCall(cc, req)
	if !ok {
		return ctx, nil, nil
	}
	task, err := i.s.Accept(ctx, cc, msg, control)
	if err != nil {
		return ctx, nil, err
	}
	ext := i.s.Extension()
	cc.Extensions().Activate(&ext)
	return ctx, task, nil
}

func (interceptor) After(context.Context, *a2asrv.CallContext, *a2asrv.Response) error { return nil }

// Check refuses a steering message the agent cannot take: the extension
// not activated, an unknown control, a mode not advertised, or no task id.
// Errors are A2A errors with the right wire codes.
func Check(cc *a2asrv.CallContext, m *a2a.Message, c Control, modes Modes) error {
	switch {
	case !Activated(cc):
		return a2a.NewError(a2a.ErrUnsupportedOperation, "the steering extension "+URI+" was not activated: send it in the A2A-Extensions header")
	case c != Steer && c != Interrupt:
		return a2a.NewError(a2a.ErrInvalidParams, fmt.Sprintf("unknown steering control %q: want steer or interrupt", c))
	case !modes.Allows(c):
		return a2a.NewError(a2a.ErrUnsupportedOperation, fmt.Sprintf("this agent does not advertise the %s mode of %s", modeName(c), URI))
	case m.TaskID == "":
		return a2a.NewError(a2a.ErrInvalidParams, "a steering message needs the taskId of the task to "+string(c))
	}
	return nil
}

func modeName(c Control) string {
	if c == Interrupt {
		return "interruptible"
	}
	return "steerable"
}

// Accept checks a steering message, delivers it to the task's executor if
// the caller is the user whose call started the execution (anyone else
// gets a2a.ErrTaskNotFound and nothing is delivered), and returns the
// acknowledgement: the task, with the message in its history
// and the receipt in its metadata. An interrupt is acknowledged once the
// executor stopped and a2a-go released the execution (see
// ExecutorInterceptor), or SettleTimeout passed. A retry (a message id
// seen before) is acknowledged as a duplicate, a retried interrupt once
// the task settled, like the first.
func (s *Steering) Accept(ctx context.Context, cc *a2asrv.CallContext, m *a2a.Message, c Control) (*a2a.Task, error) {
	if err := Check(cc, m, c, s.cfg.Modes); err != nil {
		return nil, err
	}
	// Only the user whose call started the task's execution reaches it:
	// another user hears what it would of a task that does not exist,
	// before anything is delivered.
	caller := UserName(cc.User)
	in := s.inbox(m.TaskID)
	if in != nil && in.owner != caller {
		return nil, TaskNotFound(m.TaskID)
	}
	receipt, err := in.deliver(c, m)
	switch {
	case errors.Is(err, errNotRunning):
		prev, ok := s.retried(m)
		if ok && prev.owner != caller {
			return nil, TaskNotFound(m.TaskID)
		}
		if !ok {
			// Its execution has ended: a retry the stored task knows is
			// answered, and an interrupt has settled.
			if receipt, err = s.notRunning(ctx, m); err != nil {
				return nil, err
			}
			break
		}
		receipt = prev.seen[m.ID]
		receipt.Duplicate = true
		if receipt.Control == Interrupt {
			s.settle(ctx, m.TaskID, nil, prev.released)
		}
	case err != nil:
		return nil, err
	case receipt.Control == Interrupt && (!receipt.Duplicate || receipt.Seq > in.base):
		// A new interrupt, or a retry of one this execution took.
		s.settle(ctx, m.TaskID, in.done, in.released)
	}
	receipt.Hops = []Hop{{Agent: s.cfg.Name, Seq: receipt.Seq}}
	return s.ack(ctx, m, receipt)
}

// retried returns what the task's last closed inbox left, when it took a
// signal with m's id.
func (s *Steering) retried(m *a2a.Message) (numbering, bool) {
	if m.ID == "" {
		return numbering{}, false
	}
	prev, ok := s.numbering.Get(m.TaskID)
	if !ok {
		return numbering{}, false
	}
	_, ok = prev.seen[m.ID]
	return prev, ok
}

// settle waits, after an interrupt, for the executor to close the task's
// inbox (done; nil when it has), then for a2a-go to let go of the
// execution (released), together up to SettleTimeout. Without
// ExecutorInterceptor released is nil and there is no sign of that: it
// waits for the executor's last event, which a2a-go stores
// asynchronously.
func (s *Steering) settle(ctx context.Context, task a2a.TaskID, done, released <-chan struct{}) {
	t := time.NewTimer(s.cfg.SettleTimeout)
	defer t.Stop()
	if done != nil {
		select {
		case <-done:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
	if released != nil {
		// The final event is stored before the release.
		select {
		case <-released:
		case <-t.C:
		case <-ctx.Done():
		}
		return
	}
	for {
		st, err := s.cfg.Tasks.Get(ctx, task)
		if err != nil || st.Task.Status.State != a2a.TaskStateWorking {
			return
		}
		select {
		case <-t.C:
			return
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Microsecond):
		}
	}
}

// notRunning answers a signal to a task with no open inbox, which the
// agent does not remember having taken: a retry of one of the latest
// signals the stored task names (SeenKey) gets its receipt again, marked
// Duplicate; anything else is refused, saying why.
func (s *Steering) notRunning(ctx context.Context, m *a2a.Message) (Receipt, error) {
	id := m.TaskID
	st, err := s.cfg.Tasks.Get(ctx, id)
	if err != nil {
		if errors.Is(err, a2a.ErrTaskNotFound) {
			return Receipt{}, TaskNotFound(id)
		}
		return Receipt{}, fmt.Errorf("read task %s: %w", id, err)
	}
	if r, ok := storedSeen(st.Task)[m.ID]; ok && m.ID != "" {
		r.Duplicate = true
		return r, nil
	}
	if state := st.Task.Status.State; state != a2a.TaskStateWorking {
		return Receipt{}, a2a.NewError(a2a.ErrUnsupportedOperation,
			fmt.Sprintf("task %s is %s: only a WORKING task can be steered or interrupted", id, state))
	}
	return Receipt{}, a2a.NewError(a2a.ErrUnsupportedOperation,
		fmt.Sprintf("task %s is WORKING but its executor is not taking steering signals now (it is finishing, or it reads no inbox)", id))
}

// TaskNotFound answers a signal to a task the caller cannot see: the same
// whether no task has the id or another user's execution runs it, so the
// answer tells the caller nothing of others' tasks.
func TaskNotFound(id a2a.TaskID) error {
	return a2a.NewError(a2a.ErrTaskNotFound, fmt.Sprintf("task %s not found", id))
}

// UserName is the name of a call's user, as a2asrv.NewTaskStoreAuthenticator
// reads it: the owner of the tasks its calls create; "" for none.
func UserName(u *a2asrv.User) string {
	if u == nil {
		return ""
	}
	return u.Name
}

// ack builds the acknowledgement Task from the stored task.
func (s *Steering) ack(ctx context.Context, m *a2a.Message, r Receipt) (*a2a.Task, error) {
	st, err := s.cfg.Tasks.Get(ctx, m.TaskID)
	if err != nil {
		return nil, fmt.Errorf("read task %s: %w", m.TaskID, err)
	}
	return Acknowledgement(st.Task, m, r), nil
}

// Acknowledgement returns task with the signal message appended to its
// history and the receipt under ReceiptKey in its metadata.
func Acknowledgement(task *a2a.Task, m *a2a.Message, r Receipt) *a2a.Task {
	t := *task
	t.History = append(slices.Clone(t.History), m)
	t.Metadata = cloneMap(t.Metadata)
	t.Metadata[ReceiptKey] = r.asMap()
	return &t
}

func cloneMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// asMap renders the receipt as plain JSON values for metadata.
func (r Receipt) asMap() map[string]any {
	hops := make([]any, len(r.Hops))
	for i, h := range r.Hops {
		hops[i] = map[string]any{"agent": h.Agent, "seq": h.Seq}
	}
	m := map[string]any{"control": string(r.Control), "messageId": r.MessageID, "seq": r.Seq, "hops": hops}
	if r.ReferenceMessageID != "" {
		m["referenceMessageId"] = r.ReferenceMessageID
	}
	if r.Duplicate {
		m["duplicate"] = true
	}
	return m
}

// ReceiptFrom reads the receipt of an acknowledgement Task.
func ReceiptFrom(t *a2a.Task) (Receipt, bool) {
	m, ok := t.Metadata[ReceiptKey].(map[string]any)
	if !ok {
		return Receipt{}, false
	}
	return receiptOf(m), true
}

// receiptOf is the receipt asMap rendered.
func receiptOf(m map[string]any) Receipt {
	r := Receipt{MessageID: str(m["messageId"]), Control: Control(str(m["control"])), ReferenceMessageID: str(m["referenceMessageId"]), Seq: num(m["seq"])}
	r.Duplicate, _ = m["duplicate"].(bool)
	hops, _ := m["hops"].([]any)
	for _, h := range hops {
		hm, _ := h.(map[string]any)
		r.Hops = append(r.Hops, Hop{Agent: str(hm["agent"]), Seq: num(hm["seq"])})
	}
	return r
}

// storedReceipts renders the latest StoredReceipts of seen, oldest first,
// for SeenKey: plain JSON values, which every task store keeps.
func storedReceipts(seen map[string]Receipt) []any {
	rs := slices.SortedFunc(maps.Values(seen), func(a, b Receipt) int { return cmp.Compare(a.Seq, b.Seq) })
	rs = rs[max(len(rs)-StoredReceipts, 0):]
	out := make([]any, len(rs))
	for i, r := range rs {
		r.Hops, r.Duplicate = nil, false
		out[i] = r.asMap()
	}
	return out
}

// storedSeen is the receipts a stored task's metadata names under SeenKey
// (storedReceipts), by message id; empty when there are none.
func storedSeen(t *a2a.Task) map[string]Receipt {
	seen := map[string]Receipt{}
	if t == nil {
		return seen
	}
	list, _ := t.Metadata[SeenKey].([]any)
	for _, v := range list[:min(len(list), StoredReceipts)] {
		m, ok := v.(map[string]any)
		if !ok {
			continue
		}
		if r := receiptOf(m); r.MessageID != "" && r.Seq > 0 && r.Seq <= 1<<53 {
			r.Hops = nil
			seen[r.MessageID] = r
		}
	}
	return seen
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func num(v any) int64 {
	switch n := v.(type) {
	case float64:
		return int64(n)
	case int64:
		return n
	case int:
		return int64(n)
	}
	return 0
}

// Acknowledged returns the WORKING status update an executor yields when
// it takes a steer: the steer becomes the status message, so it shows in
// the task's event stream and history.
func Acknowledged(ec a2a.TaskInfoProvider, sig Signal) *a2a.TaskStatusUpdateEvent {
	m := *sig.Message
	info := ec.TaskInfo()
	m.TaskID, m.ContextID = info.TaskID, info.ContextID
	ev := a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, &m)
	ev.Metadata = map[string]any{SeqKey: sig.Seq}
	return ev
}

// storedSeq is the signal number a stored task's metadata carries under
// SeqKey (a2a-go folds each status update's metadata into its task's),
// 0 when there is none.
func storedSeq(t *a2a.Task) int64 {
	if t == nil {
		return 0
	}
	switch v := t.Metadata[SeqKey].(type) {
	case int64:
		return max(v, 0)
	case int:
		return int64(max(v, 0))
	case float64:
		if v >= 1 && v <= 1<<53 {
			return int64(v)
		}
	}
	return 0
}

// Interrupted returns the status update an executor yields when it stops
// for an interrupt: INPUT_REQUIRED with InterruptedKey set, and an
// optional message. Inbox.Interrupted adds the task's signal number,
// which survives the agent forgetting the inbox.
func Interrupted(ec a2a.TaskInfoProvider, text string) *a2a.TaskStatusUpdateEvent {
	var msg *a2a.Message
	if text != "" {
		msg = a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(text))
	}
	ev := a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired, msg)
	ev.Metadata = map[string]any{InterruptedKey: true}
	return ev
}
