package a2aserver

import (
	"net/http"
	"testing"
)

func TestWebhook_PushToken(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, key, value string
		want             string
	}{
		{"a2a-go", "A2A-Notification-Token", "t1", "t1"},
		{"python sdk", "X-A2A-Notification-Token", "t2", "t2"},
		{"bearer", "Authorization", "Bearer t3", "t3"},
		{"basic is not a token", "Authorization", "Basic dDpw", ""},
		{"none", "Accept", "*/*", ""},
	} {
		h := http.Header{}
		h.Set(tc.key, tc.value)
		if got := pushToken(h); got != tc.want {
			t.Errorf("%s: pushToken = %q, want %q", tc.name, got, tc.want)
		}
	}
}
