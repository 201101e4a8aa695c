package main

import (
	"encoding/json"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestVersionOf(t *testing.T) {
	t.Parallel()
	platform := runtime.GOOS + "/" + runtime.GOARCH
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want versionInfo
	}{
		{"no build info", nil, false, versionInfo{Version: "unknown", Go: runtime.Version(), Platform: platform}},
		{"go install of a release", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/orchd/orchd", Version: "v1.2.3"}}, true,
			versionInfo{Version: "v1.2.3", Go: "go1.26.8", Platform: platform}},
		{"a checkout with changes", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}, {Key: "vcs.modified", Value: "true"},
		}}, true, versionInfo{Version: "(devel)", Revision: "0123abcd", Time: "2026-12-01T10:00:00Z", Modified: true, Go: "go1.26.8", Platform: platform}},
	}
	for _, tt := range tests {
		if got := versionOf(tt.bi, tt.ok); got != tt.want {
			t.Errorf("%s: versionOf = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestVersionCommand(t *testing.T) {
	t.Parallel()
	want := versionOf(debug.ReadBuildInfo())
	code, out, errOut := orchd(t, t.Context(), "version")
	if code != exitOK {
		t.Errorf("version: exit %d\n%s", code, errOut)
	}
	if !strings.HasPrefix(out, "orchd  "+want.Version+"\n") || !strings.Contains(out, "go     "+want.Go+" "+want.Platform+"\n") {
		t.Errorf("version printed\n%s\nwant version %s, go %s %s", out, want.Version, want.Go, want.Platform)
	}
	code, out, errOut = orchd(t, t.Context(), "version", "-o", "json")
	if code != exitOK {
		t.Fatalf("version -o json: exit %d\n%s", code, errOut)
	}
	var got versionInfo
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("version -o json: %v\n%s", err, out)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("version -o json (-want +got):\n%s", diff)
	}
}
