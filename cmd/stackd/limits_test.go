package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackd/stackd/daemon/spec"
	"github.com/stackd/stackd/gitwatch"
)

func TestByteSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		text string
		bad  bool
	}{
		{in: "0", want: 0, text: "0"},
		{in: "1000", want: 1000, text: "1000"},
		{in: "512MiB", want: 512 << 20, text: "512MiB"},
		{in: "512mib", want: 512 << 20, text: "512MiB"},
		{in: "64M", want: 64 << 20, text: "64MiB"},
		{in: "2 GiB", want: 2 << 30, text: "2GiB"},
		{in: "1536KiB", want: 1536 << 10, text: "1536KiB"},
		{in: "1024KiB", want: 1 << 20, text: "1MiB"},
		{in: "16B", want: 16, text: "16"},
		{in: "", bad: true},
		{in: "MiB", bad: true},
		{in: "-1", bad: true},
		{in: "1.5GiB", bad: true},
		{in: "12 parsecs", bad: true},
		{in: "9999999999GiB", bad: true},
	} {
		var b byteSize
		err := b.Set(c.in)
		if c.bad {
			if err == nil {
				t.Errorf("%q: want an error, got %d", c.in, b)
			}
			continue
		}
		if err != nil || int64(b) != c.want || b.String() != c.text {
			t.Errorf("%q: got %d %q %v, want %d %q", c.in, b, b.String(), err, c.want, c.text)
		}
	}
}

// TestLimitFlags: the defaults are the packages', a value is taken as
// it is, and 0 turns a limit off.
func TestLimitFlags(t *testing.T) {
	parse := func(args ...string) (runFlags, error) {
		var f runFlags
		fs := newFlagSet("run")
		f.define(fs)
		return f, fs.Parse(args)
	}
	f, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	o := f.withLimits(gitwatch.Options{})
	srcs, _ := (&sourceFlags{config: stringsFlag{"x.yaml"}, maxConfig: f.maxConfig}).sources()
	if o.MaxCheckoutBytes != gitwatch.DefaultMaxCheckoutBytes || o.MaxFileBytes != gitwatch.DefaultMaxFileBytes ||
		srcs[0].MaxBytes != spec.DefaultMaxSourceBytes {
		t.Fatalf("defaults: %+v, config %d", o, srcs[0].MaxBytes)
	}
	f, err = parse("--max-checkout-bytes", "1GiB", "--max-file-bytes", "0", "--max-config-bytes", "0", "--config", "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	o = f.withLimits(gitwatch.Options{})
	srcs, _ = f.sources()
	if o.MaxCheckoutBytes != 1<<30 || o.MaxFileBytes != -1 || srcs[0].MaxBytes != -1 {
		t.Fatalf("set: %+v, config %d", o, srcs[0].MaxBytes)
	}
	if _, err := parse("--max-file-bytes", "lots"); err == nil || !strings.Contains(err.Error(), "512MiB") {
		t.Fatalf("a bad size: %v", err)
	}
	var help strings.Builder
	fs := newFlagSet("run")
	(&runFlags{}).define(fs)
	fs.SetOutput(&help)
	fs.PrintDefaults()
	for _, want := range []string{"(default 512MiB)", "(default 64MiB)", "(default 16MiB)"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("usage lacks %q", want)
		}
	}
}

// TestValidateMaxConfigBytes: validate takes the limit run takes, and
// names the source and its size when it is over.
func TestValidateMaxConfigBytes(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile("../../testdata/config/good/pko-basic.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "stacks.yaml")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, stdout, _ := stackd(t, "validate", "--max-config-bytes", "1KiB", dir); code != exitFail ||
		!strings.Contains(stdout, "config source "+dir+" is ") || !strings.Contains(stdout, "more than --max-config-bytes 1024 bytes") {
		t.Fatalf("over the limit: exit %d\n%s", code, stdout)
	}
	if code, stdout, _ := stackd(t, "validate", "--max-config-bytes", "1MiB", dir); code != exitOK {
		t.Fatalf("within the limit: exit %d\n%s", code, stdout)
	}
}

// TestCheckLocalConfigLimit: at start, a local source over its limit
// stops stackd with the size in the log.
func TestCheckLocalConfigLimit(t *testing.T) {
	src := spec.Source{Path: "../../testdata/config/good/pko-basic.yaml", MaxBytes: 100}
	var log bytes.Buffer
	err := checkLocalConfig([]spec.Source{src}, spec.HostPaths{}, slog.New(slog.NewTextHandler(&log, nil)))
	if err == nil || !strings.Contains(log.String(), "more than --max-config-bytes 100 bytes") {
		t.Fatalf("err = %v, log:\n%s", err, log.String())
	}
	src.MaxBytes = 0 // the default
	if err := checkLocalConfig([]spec.Source{src}, spec.HostPaths{}, slog.New(slog.NewTextHandler(&log, nil))); err != nil {
		t.Fatal(err)
	}
}
