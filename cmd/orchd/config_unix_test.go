//go:build unix

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// config validate with a tokens file that is a named pipe no one writes
// to refuses it at once, as not a regular file, instead of waiting.
func TestConfigValidate_TokensFileNotRegular(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "tokens.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	cfg := filepath.Join(dir, "orchd.yaml")
	if err := os.WriteFile(cfg, []byte("auth:\n  tokensFile: "+fifo+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	code, _, errOut := orchd(t, ctx, "config", "validate", cfg)
	if ctx.Err() != nil {
		t.Fatalf("config validate still reading the pipe after 20s: %v", ctx.Err())
	}
	if code == exitOK || !strings.Contains(errOut, "not a regular file") {
		t.Errorf("config validate: exit %d, stderr %q; want a refusal naming the pipe", code, errOut)
	}
}
