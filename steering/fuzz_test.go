package steering

import (
	"encoding/json"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// FuzzReceiptFrom checks that no acknowledgement metadata a downstream hop
// sends makes ReceiptFrom panic, and that what it reads survives being
// passed on: written into an acknowledgement, sent as JSON and read again.
func FuzzReceiptFrom(f *testing.F) {
	f.Add(`{"control":"steer","messageId":"m-1","seq":3,"hops":[{"agent":"b","seq":3},{"agent":"c","seq":1}],"referenceMessageId":"out-7","duplicate":true}`)
	f.Add(`{"hops":[1,"x",null,{"agent":2,"seq":"3"}],"seq":1e300}`)
	f.Add(`{"seq":-9223372036854775808,"hops":{}}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, raw string) {
		var v any
		if json.Unmarshal([]byte(raw), &v) != nil {
			return
		}
		r, ok := ReceiptFrom(&a2a.Task{Metadata: map[string]any{ReceiptKey: v}})
		if !ok {
			return
		}
		ack := Acknowledgement(&a2a.Task{ID: "t"}, a2a.NewMessage(a2a.MessageRoleUser), r)
		b, err := json.Marshal(ack.Metadata)
		if err != nil {
			t.Fatal(err)
		}
		var md map[string]any
		if err := json.Unmarshal(b, &md); err != nil {
			t.Fatal(err)
		}
		back, ok := ReceiptFrom(&a2a.Task{Metadata: md})
		if !ok {
			t.Fatalf("passed on, %+v read back as no receipt", r)
		}
		if diff := cmp.Diff(r, back, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("passed on and read back (-passed +read):\n%s", diff)
		}
	})
}

// FuzzStoredSeen checks that no task metadata under SeenKey makes
// storedSeen panic or keep more than StoredReceipts receipts, each with a
// message id and a positive number, and that what it keeps survives being
// stored again (storedReceipts) through JSON, as a task store keeps it.
func FuzzStoredSeen(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw string) {
		var v any
		if json.Unmarshal([]byte(raw), &v) != nil {
			return
		}
		seen := storedSeen(&a2a.Task{Metadata: map[string]any{SeenKey: v}})
		if len(seen) > StoredReceipts {
			t.Fatalf("kept %d receipts, more than %d", len(seen), StoredReceipts)
		}
		for id, r := range seen {
			if id == "" || id != r.MessageID || r.Seq <= 0 {
				t.Fatalf("kept %+v under %q", r, id)
			}
		}
		b, err := json.Marshal(map[string]any{SeenKey: storedReceipts(seen)})
		if err != nil {
			t.Fatal(err)
		}
		var md map[string]any
		if err := json.Unmarshal(b, &md); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(seen, storedSeen(&a2a.Task{Metadata: md}), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("stored and read back (-stored +read):\n%s", diff)
		}
	})
}
