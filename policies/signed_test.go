package policies

import (
	"strings"
	"testing"

	"github.com/orchd/orchd/capability"
	"github.com/orchd/orchd/registry"
)

// TestEvaluate_signed checks agent.signed(), agent.signedBy(kid) and the
// agent.signature fields against agents whose cards verified, failed and
// carried no signature.
func TestEvaluate_signed(t *testing.T) {
	t.Parallel()
	signed := testAgent(t, "signed", "v1-full.json")
	signed.Signature = capability.Signature{Present: true, Verified: true, KeyID: "corp-2026", Algorithm: "ES256"}
	forged := testAgent(t, "forged", "v1-full.json")
	forged.Signature = capability.Signature{Present: true, Error: `signature does not match the card (kid "corp-2026")`}
	unsigned := testAgent(t, "unsigned", "v1-full.json")
	tests := []struct {
		expr  string
		agent *registry.Agent
		want  bool
	}{
		{`agent.signed()`, signed, true},
		{`agent.signed()`, forged, false},
		{`agent.signed()`, unsigned, false},
		{`agent.signedBy("corp-2026")`, signed, true},
		{`agent.signedBy("other")`, signed, false},
		{`agent.signedBy("corp-2026")`, forged, false},
		{`agent.signature.present && !agent.signature.verified && agent.signature.error.contains("does not match")`, forged, true},
		{`agent.signature.alg == "ES256" && agent.signature.keyId == "corp-2026"`, signed, true},
	}
	for _, tt := range tests {
		set := compileText(t, "policy: p\nrules:\n  - name: r\n    allow: '"+strings.ReplaceAll(tt.expr, "'", "''")+"'\n")
		d := set.Evaluate(t.Context(), []*registry.Agent{tt.agent}, Input{}).Decisions[0]
		if d.Allowed != tt.want {
			t.Errorf("%s on %s = %v, want %v (reasons %q)", tt.expr, tt.agent.ID, d.Allowed, tt.want, d.Reasons)
		}
	}
}
