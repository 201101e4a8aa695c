package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"
	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/internal/natstest"
)

// pushBackends opens a fresh store of each kind with cfg.
func pushBackends(t *testing.T, cfg PushConfigsConfig) map[string]*PushConfigs {
	t.Helper()
	mem, err := NewMemoryPushConfigs(cfg)
	if err != nil {
		t.Fatalf("NewMemoryPushConfigs: %v", err)
	}
	kv, err := NewPushConfigs(t.Context(), natstest.JetStream(t, natstest.Server(t, "")), cfg)
	if err != nil {
		t.Fatalf("NewPushConfigs: %v", err)
	}
	return map[string]*PushConfigs{"memory": mem, "nats": kv}
}

// secretConfig is a config with every secret field set.
func secretConfig(id string) *a2a.PushConfig {
	return &a2a.PushConfig{ID: id, URL: "https://hooks.example.com/a2a?q=1", Token: "tok-" + id + "-secret",
		Auth: &a2a.PushAuthInfo{Scheme: "Bearer", Credentials: "cred-" + id + "-secret"}}
}

func TestPushConfigs_SaveGetListDelete(t *testing.T) {
	t.Parallel()
	for name, p := range pushBackends(t, PushConfigsConfig{}) {
		t.Run(name, func(t *testing.T) {
			ctx := tasksAs(t.Context(), "alice")
			saved, err := p.Save(ctx, "task-1", secretConfig("c1"))
			if err != nil {
				t.Fatalf("Save: %v", err)
			}
			want := &a2a.PushConfig{ID: "c1", TaskID: "task-1", URL: "https://hooks.example.com/a2a?q=1", Auth: &a2a.PushAuthInfo{Scheme: "Bearer"}}
			if got := tasksJSON(saved); got != tasksJSON(want) {
				t.Errorf("Save returned %s, want %s (no token, no credentials)", got, tasksJSON(want))
			}
			noID := secretConfig("")
			generated, err := p.Save(ctx, "task-1", noID)
			if err != nil || generated.ID == "" {
				t.Fatalf("Save without id: %+v, %v; want a generated id", generated, err)
			}
			got, err := p.Get(ctx, "task-1", "c1")
			if err != nil || tasksJSON(got) != tasksJSON(want) {
				t.Errorf("Get = %s, %v; want %s", tasksJSON(got), err, tasksJSON(want))
			}
			list, err := p.List(ctx, "task-1")
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			var ids []string
			for _, c := range list {
				ids = append(ids, c.ID)
				if c.Token != "" || c.Auth == nil || c.Auth.Credentials != "" {
					t.Errorf("List shows a secret: %s", tasksJSON(c))
				}
			}
			if diff := cmp.Diff([]string{"c1", generated.ID}, ids); diff != "" {
				t.Fatalf("List's ids (-want +got):\n%s", diff)
			}
			full, err := p.ForDelivery(t.Context(), "task-1", "c1")
			if err != nil {
				t.Fatalf("ForDelivery: %v", err)
			}
			if full.Token != "tok-c1-secret" || full.Auth == nil || full.Auth.Credentials != "cred-c1-secret" {
				t.Errorf("ForDelivery = %s; want the token and credentials", tasksJSON(full))
			}
			// Saving the same id replaces it.
			repl := secretConfig("c1")
			repl.URL = "https://other.example.com/"
			if _, err := p.Save(ctx, "task-1", repl); err != nil {
				t.Fatal(err)
			}
			if got, _ := p.Get(ctx, "task-1", "c1"); got == nil || got.URL != repl.URL {
				t.Errorf("after replacing, Get = %s", tasksJSON(got))
			}
			if err := p.Delete(ctx, "task-1", "c1"); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			if err := p.Delete(ctx, "task-1", "c1"); err != nil {
				t.Errorf("second Delete = %v; want nil (idempotent)", err)
			}
			_, err = p.Get(ctx, "task-1", "c1")
			if !errors.Is(err, push.ErrPushConfigNotFound) || !errors.Is(err, a2a.ErrTaskNotFound) {
				t.Errorf("Get deleted = %v; want ErrPushConfigNotFound and ErrTaskNotFound", err)
			}
			if _, err := p.ForDelivery(t.Context(), "task-1", "c1"); !errors.Is(err, push.ErrPushConfigNotFound) {
				t.Errorf("ForDelivery deleted = %v; want ErrPushConfigNotFound", err)
			}
			if err := p.DeleteAll(ctx, "task-1"); err != nil {
				t.Fatal(err)
			}
			if list, err := p.List(ctx, "task-1"); err != nil || len(list) != 0 {
				t.Errorf("List after DeleteAll = %s, %v; want empty", tasksJSON(list), err)
			}
			// The task's configs are gone: another user may now save some.
			if _, err := p.Save(tasksAs(t.Context(), "bob"), "task-1", secretConfig("b")); err != nil {
				t.Errorf("Save by bob after alice deleted all: %v", err)
			}
		})
	}
}

func TestPushConfigs_OtherUser(t *testing.T) {
	t.Parallel()
	for name, p := range pushBackends(t, PushConfigsConfig{}) {
		t.Run(name, func(t *testing.T) {
			alice, bob, anon := tasksAs(t.Context(), "alice"), tasksAs(t.Context(), "bob"), tasksAs(t.Context(), "")
			if _, err := p.Save(alice, "t", secretConfig("c1")); err != nil {
				t.Fatal(err)
			}
			for who, ctx := range map[string]context.Context{"bob": bob, "anonymous": anon} {
				if _, err := p.Get(ctx, "t", "c1"); !errors.Is(err, a2a.ErrTaskNotFound) {
					t.Errorf("%s Get = %v; want ErrTaskNotFound", who, err)
				}
				if list, err := p.List(ctx, "t"); err != nil || len(list) != 0 {
					t.Errorf("%s List = %s, %v; want empty", who, tasksJSON(list), err)
				}
				if _, err := p.Save(ctx, "t", secretConfig("c1")); !errors.Is(err, a2a.ErrTaskNotFound) {
					t.Errorf("%s Save over alice's = %v; want ErrTaskNotFound", who, err)
				}
				if err := p.Delete(ctx, "t", "c1"); err != nil {
					t.Errorf("%s Delete = %v; want nil", who, err)
				}
				if err := p.DeleteAll(ctx, "t"); err != nil {
					t.Errorf("%s DeleteAll = %v; want nil", who, err)
				}
			}
			got, err := p.ForDelivery(t.Context(), "t", "c1")
			if err != nil || got.Token != "tok-c1-secret" {
				t.Errorf("alice's config after the others' deletes: %s, %v; want it kept", tasksJSON(got), err)
			}
			if list, _ := p.List(alice, "t"); len(list) != 1 {
				t.Errorf("alice List = %s; want her one config", tasksJSON(list))
			}
		})
	}
}

func TestPushConfigs_Limits(t *testing.T) {
	t.Parallel()
	cfg := PushConfigsConfig{MaxPerTask: 2, MaxURLBytes: 64, MaxTokenBytes: 32}
	long := strings.Repeat("s", 33)
	cases := []struct {
		name   string
		config *a2a.PushConfig
		want   string
	}{
		{"nil", nil, "no push config"},
		{"empty url", &a2a.PushConfig{}, "url is empty"},
		{"long url", &a2a.PushConfig{URL: "https://example.com/" + strings.Repeat("p", 60)}, "url is 80 bytes, over the 64 allowed"},
		{"scheme", &a2a.PushConfig{URL: "ftp://example.com/"}, `scheme "ftp"`},
		{"no host", &a2a.PushConfig{URL: "https:///path"}, "names no host"},
		{"userinfo", &a2a.PushConfig{URL: "https://user:pw-secret@example.com/"}, "user information"},
		{"port 0", &a2a.PushConfig{URL: "https://example.com:0/"}, "invalid port; want 1 to 65535"},
		{"port over 65535", &a2a.PushConfig{URL: "https://example.com:65536/"}, "invalid port"},
		{"port overflowing", &a2a.PushConfig{URL: "http://[2001:db8::1]:99999999999999999999/"}, "invalid port"},
		{"long token", &a2a.PushConfig{URL: "https://example.com/", Token: long}, "token is 33 bytes, over the 32 allowed"},
		{"token newline", &a2a.PushConfig{URL: "https://example.com/", Token: "a\r\nX-Injected: tok-secret"}, "token holds characters"},
		{"long credentials", &a2a.PushConfig{URL: "https://example.com/", Auth: &a2a.PushAuthInfo{Scheme: "Bearer", Credentials: long}}, "credentials are 33 bytes, over the 32 allowed"},
		{"credentials newline", &a2a.PushConfig{URL: "https://example.com/", Auth: &a2a.PushAuthInfo{Scheme: "Bearer", Credentials: "x\ncred-secret"}}, "credentials hold characters"},
		{"scheme not a token", &a2a.PushConfig{URL: "https://example.com/", Auth: &a2a.PushAuthInfo{Scheme: "Bear er", Credentials: "c"}}, "not an HTTP authentication scheme"},
		{"credentials without scheme", &a2a.PushConfig{URL: "https://example.com/", Auth: &a2a.PushAuthInfo{Credentials: "cred-secret"}}, "no scheme"},
		{"long id", &a2a.PushConfig{ID: strings.Repeat("i", 257), URL: "https://example.com/"}, "id is 257 bytes"},
	}
	for name, p := range pushBackends(t, cfg) {
		t.Run(name, func(t *testing.T) {
			ctx := tasksAs(t.Context(), "alice")
			for _, tc := range cases {
				_, err := p.Save(ctx, "t", tc.config)
				if !errors.Is(err, a2a.ErrInvalidParams) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: Save = %v; want ErrInvalidParams saying %q", tc.name, err, tc.want)
				}
				if err != nil && strings.Contains(err.Error(), "secret") {
					t.Errorf("%s: error shows a secret: %v", tc.name, err)
				}
			}
			// Ports at both ends of the range are webhooks.
			for id, u := range map[string]string{"a": "https://example.com:1/", "b": "https://example.com:65535/"} {
				if _, err := p.Save(ctx, "t", &a2a.PushConfig{ID: id, URL: u}); err != nil {
					t.Fatalf("Save %s: %v", id, err)
				}
			}
			_, err := p.Save(ctx, "t", &a2a.PushConfig{ID: "c", URL: "https://example.com/"})
			if !errors.Is(err, ErrTooManyPushConfigs) || !errors.Is(err, a2a.ErrInvalidParams) {
				t.Errorf("third Save = %v; want ErrTooManyPushConfigs", err)
			}
			if _, err := p.Save(ctx, "t", &a2a.PushConfig{ID: "a", URL: "https://example.com/new"}); err != nil {
				t.Errorf("replacing one of the two: %v; want it allowed", err)
			}
		})
	}
}

func TestPushConfigs_MemoryBoundsTasks(t *testing.T) {
	t.Parallel()
	p, err := NewMemoryPushConfigs(PushConfigsConfig{MaxTasks: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := tasksAs(t.Context(), "alice")
	for _, task := range []a2a.TaskID{"t1", "t2"} {
		if _, err := p.Save(ctx, task, secretConfig("c")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Save(ctx, "t3", secretConfig("c")); err == nil || !strings.Contains(err.Error(), "the most memory mode holds") {
		t.Errorf("Save for a third task = %v; want the memory bound", err)
	}
	if err := p.DeleteAll(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Save(ctx, "t3", secretConfig("c")); err != nil {
		t.Errorf("Save after freeing a task: %v", err)
	}
}

func TestPushConfigs_SurviveRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := natstest.Server(t, dir)
	p, err := NewPushConfigs(t.Context(), natstest.JetStream(t, s), PushConfigsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := tasksAs(t.Context(), "alice")
	if _, err := p.Save(ctx, "t", secretConfig("c1")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Save(ctx, "t", secretConfig("c2")); err != nil { // an update of the record
		t.Fatal(err)
	}
	s.Shutdown()
	s.WaitForShutdown()
	p, err = NewPushConfigs(t.Context(), natstest.JetStream(t, natstest.Server(t, dir)), PushConfigsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	list, err := p.List(ctx, "t")
	if err != nil || len(list) != 2 {
		t.Fatalf("List after restart = %s, %v; want both configs", tasksJSON(list), err)
	}
	if full, err := p.ForDelivery(t.Context(), "t", "c2"); err != nil || full.Auth.Credentials != "cred-c2-secret" {
		t.Errorf("ForDelivery after restart = %s, %v", tasksJSON(full), err)
	}
}

// TestPushConfigs_ConcurrentSaves saves configs on one task from many
// goroutines at once: every save within the bound is kept, the rest are
// refused with ErrTooManyPushConfigs, none is lost to a lost swap.
func TestPushConfigs_ConcurrentSaves(t *testing.T) {
	t.Parallel()
	const writers, limit = 12, 8
	for name, p := range pushBackends(t, PushConfigsConfig{MaxPerTask: limit}) {
		t.Run(name, func(t *testing.T) {
			ctx := tasksAs(t.Context(), "alice")
			var wg sync.WaitGroup
			errs := make([]error, writers)
			for i := range writers {
				wg.Go(func() { _, errs[i] = p.Save(ctx, "t", secretConfig(fmt.Sprint(i))) })
			}
			wg.Wait()
			saved := 0
			for i, err := range errs {
				switch {
				case err == nil:
					saved++
				case !errors.Is(err, ErrTooManyPushConfigs):
					t.Errorf("writer %d: %v", i, err)
				}
			}
			list, err := p.List(ctx, "t")
			if err != nil || len(list) != saved || saved != limit {
				t.Errorf("%d saves succeeded, List has %d (%v); want %d of each", saved, len(list), err, limit)
			}
		})
	}
}

// FuzzPushConfigs_Save saves arbitrary configs: a save either fails with
// ErrInvalidParams and an error holding neither secret, or reads back
// with the same URL and no secrets, while ForDelivery has them.
func FuzzPushConfigs_Save(f *testing.F) {
	f.Add("https://example.com/hook", "tok", "Bearer", "cred")
	f.Add("http://[::1]:8080/a?b=c", "", "", "")
	f.Add("https://h/\x00", "t\r\n", "Basic", "dXNlcjpwdw==")
	p, err := NewMemoryPushConfigs(PushConfigsConfig{MaxTasks: 1 << 20, MaxPerTask: 1 << 20})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, rawURL, token, scheme, creds string) {
		ctx := tasksAs(context.Background(), "u")
		in := &a2a.PushConfig{URL: rawURL, Token: token}
		if scheme != "" || creds != "" {
			in.Auth = &a2a.PushAuthInfo{Scheme: scheme, Credentials: creds}
		}
		saved, err := p.Save(ctx, "t", in)
		if err != nil {
			if !errors.Is(err, a2a.ErrInvalidParams) {
				t.Fatalf("Save = %v; want ErrInvalidParams", err)
			}
			for _, secret := range []string{token, creds} {
				if len(secret) > 3 && strings.Contains(err.Error(), secret) {
					t.Fatalf("error %q shows a secret", err)
				}
			}
			return
		}
		if saved.URL != rawURL {
			t.Fatalf("Save returned the URL %q, want %q", saved.URL, rawURL)
		}
		if saved.Token != "" || saved.Auth != nil && saved.Auth.Credentials != "" {
			t.Fatalf("Save returned a secret: %+v", saved)
		}
		full, err := p.ForDelivery(ctx, "t", saved.ID)
		if err != nil {
			t.Fatalf("ForDelivery: %v", err)
		}
		if full.Token != token || in.Auth != nil && (full.Auth == nil || full.Auth.Credentials != creds) {
			t.Fatalf("ForDelivery = %+v, want the token and credentials saved", full)
		}
	})
}
