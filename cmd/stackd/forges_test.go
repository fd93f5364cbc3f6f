package main

import (
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestPreviewResyncIntervalFlag: the check of missed webhooks runs every
// 10m unless told, 0 turns it off, and a negative interval is refused
// with the flag's name.
func TestPreviewResyncIntervalFlag(t *testing.T) {
	parse := func(args ...string) *forgeFlags {
		var f forgeFlags
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f.define(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return &f
	}
	if f := parse(); f.resyncInterval != 10*time.Minute {
		t.Errorf("default --preview-resync-interval = %v, want 10m", f.resyncInterval)
	}
	for _, v := range []string{"0", "30s"} {
		f := parse("--forge", "gitea=https://gitea.example", "--preview-resync-interval", v)
		if _, err := f.build(slog.New(slog.DiscardHandler)); err != nil {
			t.Errorf("--preview-resync-interval %s: %v", v, err)
		}
	}
	f := parse("--forge", "gitea=https://gitea.example", "--preview-resync-interval", "-1m")
	if _, err := f.build(slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "--preview-resync-interval") {
		t.Errorf("a negative interval: %v, want an error naming the flag", err)
	}
}
