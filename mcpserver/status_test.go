package mcpserver_test

import (
	"strings"
	"testing"

	"github.com/orchd/orchd/internal/orchdtest"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/mcpserver"
	"github.com/orchd/orchd/registry"
)

func TestStatus_StreamedArtifactIsTheTextSent(t *testing.T) {
	// Three chunks of "aaaa", streamed: the artifact is their text one
	// after the other, as the agent sent it.
	stream := testagent.Start(t, testagent.Options{Name: "streamer", Skill: "stream", Streaming: true}, testagent.Stream(1, 3, 4, nil))
	base := orchdtest.Node(t, "mcp-node", nil, registry.Spec{ID: "stream", URL: stream.URL})
	cs := connect(t, base, versions[0], nil)
	var st mcpserver.Status
	res := call(t, cs, mcpserver.ToolDelegate, map[string]any{"text": "stream it", "agent": "stream"}, &st)
	want := []mcpserver.Artifact{{Name: "answer 1", Text: strings.Repeat("a", 12)}}
	if st.State != "completed" || len(st.Artifacts) != 1 || st.Artifacts[0] != want[0] {
		t.Fatalf("got %+v, want completed with artifacts %+v", st, want)
	}
	if !strings.Contains(textOf(res), "[answer 1]\n"+strings.Repeat("a", 12)) {
		t.Errorf("the text does not carry the artifact as sent: %q", textOf(res))
	}
}
