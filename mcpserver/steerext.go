package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchd/orchd/httpgate"
	"github.com/orchd/orchd/steering"
)

// The steering extension (io.github.orchd/steering): a carrier for a
// client's steers and interrupts with the acknowledgement MCP Tasks lacks.
// A method of its own, not a tasks/ one (that prefix is the Tasks
// extension's): io.github.orchd/steer and io.github.orchd/interrupt take
// a task id and a message id chosen by the client, and answer with the
// receipt once every hop queued the steer (an interrupt: once it
// settled), naming each hop with the signal's number there. A retried
// message id is delivered once and answered with the first receipt
// (duplicate). A hop that does not take the mode refuses, named, with
// -32011; nothing is accepted and dropped. A server without the extension
// answers -32601, so no client mistakes silence for delivery. The
// orchd_steer and orchd_interrupt tools give the same to clients without
// the extension.

// Extension and method names.
const (
	ExtSteering     = "io.github.orchd/steering"
	MethodSteer     = ExtSteering + "/steer"
	MethodInterrupt = ExtSteering + "/interrupt"
)

// codeRefused is the refusal of a steer or interrupt by a hop that does
// not take it, or by work that is not WORKING (an implementation-defined
// JSON-RPC code).
const codeRefused = -32011

// SteerParams is the params of the extension's methods.
type SteerParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
	// MessageID is chosen by the client: sent again, the signal is
	// delivered once.
	MessageID string `json:"messageId"`
	// Content is the signal's message; an interrupt may have none.
	Content []SteerContent `json:"content,omitempty"`
	// ReferenceMessageID names the agent's output the signal reacts to.
	ReferenceMessageID string `json:"referenceMessageId,omitempty"`
}

// SteerContent is one part of a signal's message: text.
type SteerContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func (p *SteerParams) taskName() string { return p.TaskID }

// SteerResult answers a steer or interrupt with its receipt.
type SteerResult struct {
	mcp.ResultBase
	ResultType string      `json:"resultType"`
	Receipt    TaskReceipt `json:"receipt"`
}

// TaskReceipt is the receipt of a signal, with the task it went to and
// the delegation's latest event once it was accepted (its generation):
// what the agent does after that event reflects the signal.
type TaskReceipt struct {
	steering.Receipt
	TaskID     string `json:"taskId"`
	Generation int64  `json:"generation"`
}

// steeringCapability is what the extension's entry in server/discover
// says.
var steeringCapability = map[string]any{"version": 1, "methods": []string{MethodSteer, MethodInterrupt},
	"receipts": true, "requestStates": []string{"blocked", "resolved"}}

// addSteering registers the extension's methods on srv.
func (s *Server) addSteering(srv *mcp.Server) error {
	return errors.Join(
		mcp.AddReceivingCustomMethod(srv, MethodSteer, s.steerMethod(steering.Steer)),
		mcp.AddReceivingCustomMethod(srv, MethodInterrupt, s.steerMethod(steering.Interrupt)),
	)
}

// steerMethod serves io.github.orchd/steer or /interrupt.
func (s *Server) steerMethod(c steering.Control) func(context.Context, *mcp.ServerSession, *SteerParams) (*SteerResult, error) {
	return func(ctx context.Context, _ *mcp.ServerSession, p *SteerParams) (*SteerResult, error) {
		if strings.TrimSpace(p.MessageID) == "" {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "messageId is required: it makes a retry safe"}
		}
		var text []string
		for i, part := range p.Content {
			if part.Type != "text" {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("content[%d].type %q: only text is taken", i, part.Type)}
			}
			text = append(text, part.Text)
		}
		r, err := s.signal(ctx, p.TaskID, c, strings.Join(text, "\n"), p.ReferenceMessageID, p.MessageID)
		if err != nil {
			return nil, steerError(c, err)
		}
		gen := int64(0)
		if rec, err := s.engine.LookupHead(ctx, p.TaskID); err == nil {
			gen = rec.LastEvent
		}
		return &SteerResult{ResultType: "complete", Receipt: TaskReceipt{Receipt: r, TaskID: p.TaskID, Generation: gen}}, nil
	}
}

// steerError is err as the extension answers it: a refusal (by this hop
// or one below, or of work that is not WORKING: what the API answers 409)
// is -32011 with the mode and the reason, which names the hop.
func steerError(c steering.Control, err error) error {
	if status, _ := httpgate.Classify(err); status == http.StatusConflict {
		data, _ := json.Marshal(map[string]any{"mode": string(c), "reason": err.Error()})
		return &jsonrpc.Error{Code: codeRefused, Message: err.Error(), Data: data}
	}
	return taskError(err)
}

// steeringMeta is the steering state st shows in a task's _meta, with
// the delegation's own state (working stands for submitted too, and only
// WORKING work takes signals).
func steeringMeta(st Status) map[string]any {
	return map[string]any{"state": st.State, "generation": st.Seq, "steerable": st.Steerable, "interruptible": st.Interruptible,
		"requests": st.Requests, "receipts": st.Receipts}
}
