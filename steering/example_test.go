package steering_test

import (
	"context"
	"fmt"
	"iter"
	"net"
	"net/http"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2aext"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/orchd/orchd/steering"
)

// researcher is a steerable, interruptible a2a-go executor. It works on a
// survey, taking each steer into its brief, until a client interrupts it;
// it then stops and waits for input, and the next message resumes the task,
// which it finishes.
type researcher struct {
	st *steering.Steering
}

func (r *researcher) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if ec.StoredTask != nil {
			// A message to the interrupted task resumes it.
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted,
				a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("resumed: "+ec.Message.Parts[0].Text()))), nil)
			return
		}
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		inbox := r.st.Open(ec)
		defer inbox.Close() // on every way out; Close is idempotent
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		var brief []string
		for {
			select {
			case <-ctx.Done():
				return
			case <-inbox.Ready():
			}
			for _, sig := range inbox.Take() {
				if sig.Control == steering.Interrupt {
					// Close before the final event: signals acknowledged
					// meanwhile come back, and must be handled too.
					for _, late := range inbox.Close() {
						brief = append(brief, late.Message.Parts[0].Text())
					}
					yield(inbox.Interrupted(ec, "stopped having taken: "+strings.Join(brief, "; ")), nil)
					return
				}
				brief = append(brief, sig.Message.Parts[0].Text())
				if !yield(steering.Acknowledged(ec, sig), nil) { // the steer becomes the status message
					return
				}
			}
		}
	}
}

func (r *researcher) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// Example serves the researcher as an a2a-go agent on 127.0.0.1 and, as a
// client, steers a task it works on, interrupts it, and resumes it.
func Example() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	url := "http://" + ln.Addr().String()

	// The agent. Steering reads tasks from the store the handler writes.
	store := taskstore.NewInMemory(&taskstore.InMemoryStoreConfig{Authenticator: a2asrv.NewTaskStoreAuthenticator()})
	st := steering.New(steering.Config{Modes: steering.Modes{Steerable: true, Interruptible: true}, Name: "researcher", Tasks: store})
	handler := a2asrv.NewHandler(&researcher{st: st}, a2asrv.WithTaskStore(store), a2asrv.WithCallInterceptors(st.Interceptor()),
		a2asrv.WithExecutorContextInterceptor(st.ExecutorInterceptor()))
	card := &a2a.AgentCard{Name: "Researcher", Description: "Surveys a field.", Version: "1.0.0",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(url+"/a2a", a2a.TransportProtocolJSONRPC)},
		Capabilities:        a2a.AgentCapabilities{Streaming: true, Extensions: []a2a.AgentExtension{st.Extension()}}}
	mux := http.NewServeMux()
	mux.Handle("/a2a", steering.Echo(a2asrv.NewJSONRPCHandler(handler)))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	// A client. It activates the extension on its calls.
	ctx := context.Background()
	found, err := agentcard.DefaultResolver.Resolve(ctx, url)
	if err != nil {
		fmt.Println(err)
		return
	}
	client, err := a2aclient.NewFromCard(ctx, found, a2aclient.WithCallInterceptors(a2aext.NewActivator(steering.URI)))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = client.Destroy() }()

	// Start the work, and follow it until the agent is working on it.
	var task a2a.TaskID
	for ev, err := range client.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("survey agent protocols"))}) {
		if err != nil {
			fmt.Println(err)
			return
		}
		if up, ok := ev.(*a2a.TaskStatusUpdateEvent); ok && up.Status.State == a2a.TaskStateWorking {
			task = up.TaskID
			break
		}
	}

	// signal sends a steer or an interrupt to the task; the answer is the
	// task, with the receipt in its metadata.
	signal := func(control steering.Control, text string) (*a2a.Task, steering.Receipt, error) {
		m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
		m.TaskID = task
		m.Metadata = map[string]any{steering.ControlKey: string(control)}
		res, err := client.SendMessage(ctx, &a2a.SendMessageRequest{Message: m})
		if err != nil {
			return nil, steering.Receipt{}, err
		}
		ack := res.(*a2a.Task)
		receipt, _ := steering.ReceiptFrom(ack)
		return ack, receipt, nil
	}
	_, r, err := signal(steering.Steer, "only papers from 2025")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s %d accepted by %s #%d\n", r.Control, r.Seq, r.Hops[0].Agent, r.Hops[0].Seq)

	// An interrupt is acknowledged once the task stopped.
	ack, r, err := signal(steering.Interrupt, "stop: the premise changed")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s %d accepted: %s, %q\n", r.Control, r.Seq, ack.Status.State, ack.Status.Message.Parts[0].Text())

	// The next message resumes the task.
	res, err := client.SendMessage(ctx, &a2a.SendMessageRequest{Message: &a2a.Message{ID: a2a.NewMessageID(), Role: a2a.MessageRoleUser,
		TaskID: task, Parts: a2a.ContentParts{a2a.NewTextPart("cover 2026 too")}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	done := res.(*a2a.Task)
	fmt.Println(done.Status.State, done.Status.Message.Parts[0].Text())
	// Output:
	// steer 1 accepted by researcher #1
	// interrupt 2 accepted: TASK_STATE_INPUT_REQUIRED, "stopped having taken: only papers from 2025"
	// TASK_STATE_COMPLETED resumed: cover 2026 too
}
