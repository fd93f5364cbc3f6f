package dirwatch

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestTree(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"a/b", ".git/objects", "c"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(root, "c", "stacks.yaml")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Tree(root, file)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{root, filepath.Join(root, "a"), filepath.Join(root, "a", "b"), filepath.Join(root, "c")}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("Tree = %v, want %v (no hidden directory, each once)", got, want)
	}
	if _, err := Tree(filepath.Join(root, "none")); err == nil {
		t.Error("a missing path is no error")
	}
}

// TestWatch: a burst of saves is one call; a file in a directory created
// after the start is seen; the watch ends with its context.
func TestWatch(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	calls := make(chan struct{}, 10)
	done, err := Watch(ctx, []string{dir}, func() { calls <- struct{}{} }, func(err error) { t.Error(err) })
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	for i := range 3 {
		if err := os.WriteFile(filepath.Join(dir, "f"), []byte{byte(i)}, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A burst is events closer than Debounce: a busy machine may hold the
	// test back between two saves for longer, and they are two bursts.
	burst := time.Since(begin) < Debounce
	select {
	case <-calls:
	case <-time.After(time.Minute):
		t.Fatal("no call after a save")
	}
	time.Sleep(2 * Debounce) // what should not come: a second call
	if n := len(calls); n != 0 && burst {
		t.Errorf("%d more calls for one burst", n)
	} else if n != 0 {
		t.Logf("the saves took longer than Debounce (the machine is busy): %d more calls are right", n)
		for range n {
			<-calls
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	<-calls // the new directory
	if err := os.WriteFile(filepath.Join(dir, "sub", "g"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case <-calls:
	case <-time.After(time.Minute):
		t.Fatal("no call after a save in a new directory")
	}
	cancel()
	<-done
}
