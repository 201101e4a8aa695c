package auth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"time"

	"github.com/orchd/orchd/internal/limitedfile"
)

// fileState is what the last look at the tokens file saw.
type fileState struct {
	seen    bool // a stat was recorded
	mtime   time.Time
	size    int64
	loaded  bool // sum is of a file in force
	sum     [sha256.Size]byte
	lastErr string // last error logged by the watch, to log each once
}

// ReloadTokens reads the tokens file now, whether or not it looks changed.
// On error (unreadable, not YAML, invalid, or a token also configured
// inline) the previous tokens stay in force and the error says why. Without
// a tokens file it does nothing.
func (a *Authenticator) ReloadTokens() error {
	if a.cfg.TokensFile == "" {
		return nil
	}
	return a.reloadTokens(true)
}

// reloadTokens reads the tokens file when force is set or its modification
// time or size changed, and swaps its tokens in when its content (by
// SHA-256) changed and is valid.
func (a *Authenticator) reloadTokens(force bool) error {
	path := a.cfg.TokensFile
	a.fileMu.Lock()
	defer a.fileMu.Unlock()
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	f := &a.file
	if !force && f.seen && st.ModTime().Equal(f.mtime) && st.Size() == f.size {
		return nil
	}
	f.seen, f.mtime, f.size = true, st.ModTime(), st.Size()
	data, err := limitedfile.Read(path, maxTokensFileSize)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	if f.loaded && sum == f.sum {
		return nil
	}
	entries, err := parseTokensFile(path, data)
	if err != nil {
		return err
	}
	all := make([]tokenEntry, 0, len(a.inline)+len(entries))
	all = append(append(all, a.inline...), entries...)
	if len(all) > maxTokens {
		return fmt.Errorf("%s: %d tokens with the inline ones, more than %d", path, len(all), maxTokens)
	}
	if err := checkDuplicates(all); err != nil {
		return err
	}
	f.loaded, f.sum = true, sum
	a.tokens.Store(&tokenSet{entries: all})
	a.warnPlain(entries)
	a.log.Info("auth: tokens file loaded", "file", path, "tokens", len(entries))
	return nil
}

// watchTokens checks the tokens file every TokensFileInterval until ctx
// ends, logging each new failure once; a failure keeps the previous tokens.
func (a *Authenticator) watchTokens(ctx context.Context) {
	interval := a.cfg.TokensFileInterval
	if interval <= 0 {
		interval = defaultTokensFileInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := a.reloadTokens(false)
		a.fileMu.Lock()
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		repeated := msg == a.file.lastErr
		a.file.lastErr = msg
		a.fileMu.Unlock()
		if err != nil && !repeated {
			a.log.Error("auth: tokens file not reloaded; the previous tokens stay in force", "file", a.cfg.TokensFile, "error", err)
		}
	}
}
