package orchestrator

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/a2aserver"
	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpapi"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/registry"
)

// TestArtifacts_StreamedArtifactCostsLinearStorage streams an artifact of
// 300 chunks through a daemon on the embedded store: what the store holds
// afterwards, and what a client reading the events gets, grow with the
// artifact's size, not with its size times its chunks; the delegation
// read back has the artifact whole, the listing none.
func TestArtifacts_StreamedArtifactCostsLinearStorage(t *testing.T) {
	if testing.Short() {
		t.Skip("takes ~2 s: streams an artifact of 300 chunks into the embedded store")
	}
	t.Parallel()
	const chunks, size = 300, 256
	agent := testagent.Start(t, testagent.Options{Name: "Writer", Skill: "write", Streaming: true}, testagent.Stream(1, chunks, size, nil))
	cfg := loadDefaults(t)
	cfg.StateDir = t.TempDir()
	cfg.Agents = []registry.Spec{{ID: "writer", URL: agent.URL}}
	base := startDaemon(t, cfg)
	st := nodeDaemon(base).state.st
	before, err := st.Usage(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var rec delegation.Record
	if code := call(t, "POST", base+"/v1/delegations", `{"text": "write", "skill": "write"}`, &rec); code != 201 {
		t.Fatalf("delegate = %d", code)
	}
	evs := readEvents(t, base+"/v1/delegations/"+rec.ID+"/events", "")
	streamed := 0
	for _, ev := range evs {
		b, _ := json.Marshal(ev)
		streamed += len(b)
	}
	after, err := st.Usage(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	artifact := chunks * size
	if grew := int(after - before); grew > 4*artifact || streamed > 4*artifact {
		t.Errorf("an artifact of %d bytes grew the store by %d bytes and streamed %d bytes of events; want a few times its size", artifact, grew, streamed)
	}
	call(t, "GET", base+"/v1/delegations/"+rec.ID, "", &rec)
	if diff := cmp.Diff(whole{a2a.TaskStateCompleted, []int{chunks}}, wholeOf(rec)); diff != "" {
		t.Errorf("the delegation read back (-want +got):\n%s", diff)
	} else if text := testagent.Text(&a2a.Message{Parts: rec.Artifacts[0].Parts}); text != strings.TrimSpace(strings.Repeat(strings.Repeat("a", size)+" ", chunks)) {
		t.Errorf("the artifact read back is not the one streamed: %d bytes of text", len(text))
	}
	var list httpapi.DelegationList
	call(t, "GET", base+"/v1/delegations", "", &list)
	if len(list.Delegations) != 1 || len(list.Delegations[0].Artifacts) != 0 {
		t.Errorf("listed %+v, want the delegation without its artifacts", list.Delegations)
	}
	t.Logf("artifact %d bytes in %d chunks: the store grew by %d bytes, the events streamed %d bytes", artifact, chunks, after-before, streamed)
}

// TestA2A_MessageLargerThanATaskIsRefused sends, over A2A, a message
// within http.maxBodyBytes but larger than the durable store keeps in a
// task: it is refused as invalid, saying why, before any agent gets it;
// a message that fits is delegated.
func TestA2A_MessageLargerThanATaskIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("takes ~2 s: sends messages of the store's task limit, 1 MiB and more")
	}
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Echo", Skill: "echo"}, testagent.Reply("pong"))
	cfg := loadDefaults(t)
	cfg.StateDir = t.TempDir()
	cfg.Agents = []registry.Spec{{ID: "echo", URL: agent.URL}}
	base := startDaemon(t, cfg)
	limit := nodeDaemon(base).state.maxTaskBytes - a2aserver.MessageRoom
	c := testagent.Client(t, base)
	send := func(n int64) error {
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(strings.Repeat("x", int(n))))
		msg.Metadata = map[string]any{a2aserver.SkillMetadataKey: "echo"}
		_, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: msg})
		return err
	}
	if err := send(limit + 1<<10); !errors.Is(err, a2a.ErrInvalidParams) || !strings.Contains(err.Error(), "keeps of a message in a task") {
		t.Errorf("a message of %d bytes: %v, want invalid params saying it does not fit a task", limit+1<<10, err)
	}
	if n := len(agent.Messages()); n != 0 {
		t.Errorf("the agent got %d messages", n)
	}
	if err := send(1 << 20); err != nil {
		t.Errorf("a message of 1 MiB: %v", err)
	}
}
