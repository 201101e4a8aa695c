package capability

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/internal/testcmp"
)

func mustBuild(t *testing.T, card string) *Profile {
	t.Helper()
	p, err := Build([]byte(card), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDiff(t *testing.T) {
	t.Parallel()
	const (
		base = `{"name":"D","supportedInterfaces":[{"url":"http://d.example.com","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],
			"capabilities":{"streaming":true,"pushNotifications":true,"artifactStreaming":true}}`
		// push removed without deprecation, artifact streaming (deprecated)
		// removed, pause_resume added, 0.3 added over JSON-RPC.
		next = `{"name":"D","supportedInterfaces":[{"url":"http://d.example.com","protocolBinding":"JSONRPC","protocolVersions":["0.3","1.0"]}],
			"capabilities":{"streaming":true,"pauseResume":true}}`
		cosmetic = `{"name":"D","description":"now with words","supportedInterfaces":[{"url":"http://d.example.com","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],
			"capabilities":{"streaming":true,"pushNotifications":true,"artifactStreaming":true}}`
	)
	old, cur := mustBuild(t, base), mustBuild(t, next)
	d := Diff(old, cur)
	if !slices.Equal(d.Added, []string{PauseResume}) {
		t.Errorf("Added = %v", d.Added)
	}
	if !slices.Equal(d.Removed, []string{ArtifactStreaming, PushNotifications}) {
		t.Errorf("Removed = %v", d.Removed)
	}
	if !slices.Equal(d.Violations, []string{"push_notifications was removed without being deprecated first"}) {
		t.Errorf("Violations = %v", d.Violations)
	}
	if diff := cmp.Diff([]VersionChange{{Binding: BindingJSONRPC, Added: []string{"0.3"}}}, d.Versions); diff != "" {
		t.Errorf("Versions (-want +got):\n%s", diff)
	}
	if d.Empty() || d.From == d.To {
		t.Errorf("drift reported empty: %+v", d)
	}

	c := Diff(old, mustBuild(t, cosmetic))
	if !c.Empty() || c.From == c.To {
		t.Errorf("cosmetic change: Empty = %v, digests %s %s", c.Empty(), c.From, c.To)
	}

	dep := Diff(old, mustBuild(t, `{"name":"D","url":"http://d.example.com","protocolVersion":"1.0","capabilities":{"streaming":true,"pushNotifications":true,"artifactStreaming":true}}`))
	if len(dep.Versions) != 0 || dep.Range != nil {
		t.Errorf("same versions in 0.3 layout reported as drift: %+v", dep)
	}

	r := Diff(old, mustBuild(t, `{"name":"D","maxProtocolVersion":"1.0","supportedInterfaces":[{"url":"http://d.example.com","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],
		"capabilities":{"streaming":true,"pushNotifications":true,"artifactStreaming":true}}`))
	if diff := cmp.Diff(&RangeChange{NewMax: "1.0"}, r.Range, testcmp.Only[RangeChange]("OldMax", "NewMax")); diff != "" {
		t.Errorf("Range (-want +got):\n%s", diff)
	}
}

func TestDiff_DeprecatedThenRemoved(t *testing.T) {
	t.Parallel()
	card := `{"name":"D","url":"http://d.example.com","capabilities":{"streaming":true,"pushNotifications":true}}`
	p1 := mustBuild(t, card)
	p2, err := Build([]byte(card), Options{Deprecated: []string{PushNotifications}})
	if err != nil {
		t.Fatal(err)
	}
	p3 := mustBuild(t, `{"name":"D","url":"http://d.example.com","capabilities":{"streaming":true}}`)
	if d := Diff(p1, p2); !slices.Equal(d.Deprecated, []string{PushNotifications}) {
		t.Errorf("Deprecated = %v", d.Deprecated)
	}
	if d := Diff(p2, p3); len(d.Violations) != 0 || !slices.Equal(d.Removed, []string{PushNotifications}) {
		t.Errorf("removal after deprecation: %+v", d)
	}
}
