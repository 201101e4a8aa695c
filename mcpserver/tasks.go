package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpgate"
	"github.com/orchd/orchd/policies"
)

// The Tasks extension (io.modelcontextprotocol/tasks, SEP-2663), built
// here because go-sdk v1.8.0 has none; all of it is in this file, so an
// SDK implementation can replace it.
//
// One delegation is one task: the task id is the delegation id. A client
// that declares the extension on a tools/call of orchd_delegate gets a
// CreateTaskResult once the delegation is stored (tasksMiddleware), then
// polls tasks/get, answers the agent's questions with tasks/update and
// cancels with tasks/cancel. The extension applies from protocol
// 2026-07-28; every task method is authorized as the API's reads and
// actions are, and another caller's task is unknown (-32602).

// Extension and method names.
const (
	ExtTasks         = "io.modelcontextprotocol/tasks"
	MethodTaskGet    = "tasks/get"
	MethodTaskUpdate = "tasks/update"
	MethodTaskCancel = "tasks/cancel"
)

// MCP's error codes this front answers with, beside JSON-RPC's own.
const (
	// codeHeaderMismatch: the Mcp-Name header names another task than the
	// params.
	codeHeaderMismatch = -32020
	// codeMissingCapability: the request did not declare an extension
	// the method needs.
	codeMissingCapability = -32021
	// codeResourceExhausted: the work was refused as over one of orchd's
	// limits on running delegations (the message names it); an
	// implementation-defined server error, as MCP leaves -32000 to -32019
	// to servers, and the code orchd's A2A interfaces answer it with.
	codeResourceExhausted = -32000
)

// Task is a task as the extension shows it.
type Task struct {
	TaskID         string `json:"taskId"`
	Status         string `json:"status"`
	StatusMessage  string `json:"statusMessage,omitempty"`
	CreatedAt      string `json:"createdAt"`
	LastUpdatedAt  string `json:"lastUpdatedAt"`
	TTLMs          *int64 `json:"ttlMs"`
	PollIntervalMs int64  `json:"pollIntervalMs,omitempty"`
}

// CreateTaskResult answers a tools/call that became a task.
type CreateTaskResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
	Task
}

// DetailedTask answers tasks/get: the task with what its status carries.
type DetailedTask struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
	Task
	// InputRequests are the questions outstanding, for input_required,
	// each as the request it stands for ({method, params}).
	InputRequests mcp.InputRequestMap `json:"inputRequests,omitempty"`
	// Result is the tool's result, for completed.
	Result *mcp.CallToolResult `json:"result,omitempty"`
	// Error is the JSON-RPC error, for failed.
	Error *jsonrpc.Error `json:"error,omitempty"`
}

// TaskParams names a task.
type TaskParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

// TaskUpdateParams is tasks/update's params.
type TaskUpdateParams struct {
	mcp.ParamsBase
	TaskID         string                     `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses"`
}

// Ack is the empty answer of tasks/update and tasks/cancel.
type Ack struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

// taskName is the task id of params, for the Mcp-Name check.
func (p *TaskParams) taskName() string       { return p.TaskID }
func (p *TaskUpdateParams) taskName() string { return p.TaskID }

// named is the params of a method about one task.
type named interface{ taskName() string }

// addTasks registers the extension on srv.
func (s *Server) addTasks(srv *mcp.Server) error {
	return errors.Join(
		mcp.AddReceivingCustomMethod(srv, MethodTaskGet, s.taskGet),
		mcp.AddReceivingCustomMethod(srv, MethodTaskUpdate, s.taskUpdate),
		mcp.AddReceivingCustomMethod(srv, MethodTaskCancel, s.taskCancel),
	)
}

// capable is a request that says what its client can do.
type capable interface {
	ClientCapabilities() *mcp.ClientCapabilities
	ProtocolVersion() string
}

// declared reports whether a request of protocol version that declared
// caps declared extension ext: extensions apply from 2026-07-28 on.
func declared(version string, caps *mcp.ClientCapabilities, ext string) bool {
	if caps == nil || version < firstSessionless {
		return false
	}
	_, ok := caps.Extensions[ext]
	return ok
}

// versionOf is the protocol version of req, "" when it does not say.
func versionOf(req mcp.Request) string {
	if c, ok := req.(capable); ok {
		return c.ProtocolVersion()
	}
	return ""
}

// extensionsMiddleware answers what the extensions add to the protocol
// before the SDK's own handling: a tools/call of orchd_delegate that
// declares the Tasks extension becomes a task; a method of an extension
// the request did not declare is refused (-32021), and one whose Mcp-Name
// header names another task than its params (-32020).
func (s *Server) extensionsMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if c, ok := req.(capable); ok {
			ctx = context.WithValue(ctx, capsKey{}, sync.OnceValue(c.ClientCapabilities))
		}
		if method == "tools/call" {
			if call, ok := req.(*mcp.CallToolRequest); ok && call.Params.Name == ToolDelegate && declared(versionOf(req), capabilities(ctx), ExtTasks) {
				return s.createTask(ctx, call)
			}
			return next(ctx, method, req)
		}
		ext := extensionOf(method)
		if ext == "" {
			return next(ctx, method, req)
		}
		name, taskID := "", ""
		if ex := req.GetExtra(); ex != nil && ex.Header != nil {
			name = ex.Header.Get("Mcp-Name")
		}
		if p, ok := req.GetParams().(named); ok {
			taskID = p.taskName()
		}
		if err := checkExtension(method, ext, versionOf(req), capabilities(ctx), name, taskID); err != nil {
			return nil, err
		}
		return next(ctx, method, req)
	}
}

// extensionOf is the extension method belongs to: the Tasks extension's
// or the steering extension's; "" for any other method.
func extensionOf(method string) string {
	switch {
	case strings.HasPrefix(method, "tasks/"):
		return ExtTasks
	case strings.HasPrefix(method, ExtSteering+"/"):
		return ExtSteering
	}
	return ""
}

// checkExtension refuses a request for method of extension ext that did
// not declare ext in caps, at protocol version or later (-32021), and one
// whose Mcp-Name header, when it has one, is not the params' taskId
// (-32020).
func checkExtension(method, ext, version string, caps *mcp.ClientCapabilities, mcpName, taskID string) error {
	if !declared(version, caps, ext) {
		data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{ext: map[string]any{}}}})
		return &jsonrpc.Error{Code: codeMissingCapability, Message: fmt.Sprintf("%s needs the %s extension declared in the request's client capabilities (protocol %s or later)", method, ext, firstSessionless), Data: data}
	}
	if mcpName != "" && mcpName != taskID {
		return &jsonrpc.Error{Code: codeHeaderMismatch, Message: fmt.Sprintf("the Mcp-Name header %q is not the params' taskId %q", mcpName, taskID)}
	}
	return nil
}

// createTask starts the delegation a tools/call of orchd_delegate asks
// for and answers with its task once the delegation is stored, so
// tasks/get finds it.
func (s *Server) createTask(ctx context.Context, call *mcp.CallToolRequest) (mcp.Result, error) {
	var in DelegateInput
	dec := json.NewDecoder(bytes.NewReader(call.Params.Arguments))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "orchd_delegate arguments: " + err.Error()}
	}
	if strings.TrimSpace(in.Text) == "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: `orchd_delegate arguments: "text" is required`}
	}
	rec, err := s.start(ctx, call, in)
	if err != nil {
		return nil, taskError(err)
	}
	return &CreateTaskResult{ResultType: "task", Task: s.taskOf(statusOf(rec), rec)}, nil
}

// taskGet serves tasks/get.
func (s *Server) taskGet(ctx context.Context, _ *mcp.ServerSession, p *TaskParams) (*DetailedTask, error) {
	rec, err := s.authz.Read(ctx, s.engine, p.TaskID)
	if err != nil {
		return nil, taskError(err)
	}
	st := s.describe(ctx, rec)
	dt := &DetailedTask{ResultType: "complete", Task: s.taskOf(st, rec)}
	switch dt.Status {
	case "input_required":
		if ep := s.inputRequest(ctx, st); ep != nil {
			dt.InputRequests = mcp.InputRequestMap{openRequest(st).ID: ep}
		}
	case "completed":
		dt.Result = resultOf(st)
		dt.Result.StructuredContent = st
	}
	dt.Meta = mcp.Meta{ExtSteering: steeringMeta(st)}
	return dt, nil
}

// taskOf is the task of the delegation whose status is st.
func (s *Server) taskOf(st Status, rec delegation.Record) Task {
	t := Task{TaskID: rec.ID, Status: taskStatus(rec.State), StatusMessage: st.Message,
		CreatedAt: rec.CreatedAt.UTC().Format(time.RFC3339Nano), LastUpdatedAt: rec.UpdatedAt.UTC().Format(time.RFC3339Nano),
		PollIntervalMs: 1000}
	if time.Since(rec.CreatedAt) > time.Minute {
		t.PollIntervalMs = 5000
	}
	if st.Error != "" && t.StatusMessage == "" {
		t.StatusMessage = st.Error
	}
	return t
}

// taskStatus is the task status of a delegation in state s: FAILED and
// REJECTED are completed, with a tool error for a result, since the
// extension's failed is for JSON-RPC errors alone.
func taskStatus(s a2a.TaskState) string {
	switch s {
	case a2a.TaskStateInputRequired, a2a.TaskStateAuthRequired:
		return "input_required"
	case a2a.TaskStateCompleted, a2a.TaskStateFailed, a2a.TaskStateRejected:
		return "completed"
	case a2a.TaskStateCanceled:
		return "cancelled"
	}
	return "working"
}

// inputRequest is the elicitation asking the open request of st, in a
// form the request's client declared; nil when it declared none.
func (s *Server) inputRequest(ctx context.Context, st Status) *mcp.ElicitParams {
	return elicitation(capabilities(ctx), st)
}

// capsKey carries the capabilities the request declared, for handlers of
// custom methods, which the SDK gives only their params: a function
// decoding them once, when first asked. The SDK's ClientCapabilities
// decodes them from the request's _meta again on each call (marshalling
// them to JSON and reading them back through a new 32 KiB buffer), and
// most requests need them once or not at all.
type capsKey struct{}

// capabilities returns the capabilities the request of ctx declared; nil
// when it declared none.
func capabilities(ctx context.Context) *mcp.ClientCapabilities {
	if caps, ok := ctx.Value(capsKey{}).(func() *mcp.ClientCapabilities); ok {
		return caps()
	}
	return nil
}

// openRequest is the request of st that is blocking the work; the zero
// Request when none is.
func openRequest(st Status) Request {
	for i := len(st.Requests) - 1; i >= 0; i-- {
		if st.Requests[i].State == "blocked" {
			return st.Requests[i]
		}
	}
	return Request{}
}

// taskUpdate serves tasks/update: each answer to the open request is
// passed on to the agent; answers to keys not outstanding are ignored.
// The ack's _meta lists which were taken.
func (s *Server) taskUpdate(ctx context.Context, _ *mcp.ServerSession, p *TaskUpdateParams) (*Ack, error) {
	if _, err := s.authz.Lookup(ctx, s.engine, p.TaskID, policies.ActionDelegationsSteer); err != nil {
		return nil, taskError(err)
	}
	accepted, ignored := []string{}, []string{}
	for key, raw := range p.InputResponses {
		var er mcp.ElicitResult
		if err := json.Unmarshal(raw, &er); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("inputResponses[%q]: %v", key, err)}
		}
		_, err := s.answerWith(ctx, p.TaskID, key, &er)
		switch {
		case err == nil:
			accepted = append(accepted, key)
		case errors.Is(err, errNotOutstanding):
			ignored = append(ignored, key)
		default:
			return nil, taskError(err)
		}
	}
	ack := &Ack{ResultType: "complete"}
	ack.Meta = mcp.Meta{ExtSteering: map[string]any{"accepted": accepted, "ignored": ignored}}
	return ack, nil
}

// taskCancel serves tasks/cancel: the delegation is canceled down the
// chain; one already ended is acknowledged as it is.
func (s *Server) taskCancel(ctx context.Context, _ *mcp.ServerSession, p *TaskParams) (*Ack, error) {
	if _, err := s.authz.Lookup(ctx, s.engine, p.TaskID, policies.ActionDelegationsCancel); err != nil {
		return nil, taskError(err)
	}
	if _, err := s.engine.Cancel(ctx, p.TaskID); err != nil && !errors.Is(err, delegation.ErrEnded) {
		return nil, taskError(err)
	}
	return &Ack{ResultType: "complete"}, nil
}

// taskError is err as the JSON-RPC error a task method answers: an
// unknown task (another caller's included) and bad params are -32602, a
// refusal is -32600 with what refused it, work over a limit -32000
// (codeResourceExhausted), the rest -32603. data's code is the HTTP API's.
func taskError(err error) error {
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return je
	}
	status, code := httpgate.Classify(err)
	data, _ := json.Marshal(map[string]any{"code": code})
	switch {
	case errors.Is(err, delegation.ErrNotFound), errors.Is(err, delegation.ErrBadRequest), status == 400:
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error(), Data: data}
	case status == 403, status == 409, status == 422:
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: err.Error(), Data: data}
	case status == 429:
		return &jsonrpc.Error{Code: codeResourceExhausted, Message: err.Error(), Data: data}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error(), Data: data}
}
