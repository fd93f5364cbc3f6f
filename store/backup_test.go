package store

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stackd/stackd/daemon/storetest"
)

func TestBackupWhileWriting(t *testing.T) {
	s := openTest(t, Options{HistoryLimit: 10})
	for i := range 100 {
		if err := s.PutStack(storetest.Record(fmt.Sprintf("s%03d", i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	var (
		stop    atomic.Bool
		wg      sync.WaitGroup
		writes  atomic.Int64
		once    sync.Once
		written = make(chan struct{})
	)
	started := func() { once.Do(func() { close(written) }) }
	wg.Add(1)
	go func() { // writes until stopped, racing the backup
		defer wg.Done()
		defer started()
		for i := 0; !stop.Load(); i++ {
			name := fmt.Sprintf("w%d", i%7)
			u, err := s.BeginUpdate(storetest.NewUpdate(name))
			if err == nil {
				err = s.PutLog(u.ID, bytes.Repeat([]byte("x"), 5000))
			}
			if err == nil {
				err = s.PutStack(storetest.Record(name, int64(i)))
			}
			if err != nil {
				t.Error(err)
				return
			}
			if writes.Add(1) == 20 {
				started()
			}
		}
	}()
	<-written // the writer is going
	dst := filepath.Join(t.TempDir(), "backup.db")
	err := BackupFile(s, dst)
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d writes while backing up", writes.Load())
	checkBackup(t, dst)
}

func checkBackup(t *testing.T, dst string) {
	t.Helper()
	fi, err := os.Stat(dst)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("backup mode %v, want 0600", fi.Mode().Perm())
	}
	if _, err := os.Stat(dst + ".tmp"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("temporary file left: %v", err)
	}
	b := openAt(t, dst, Options{ReadOnly: true})
	if err := b.Check(); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if _, err := b.Stack(fmt.Sprintf("s%03d", i)); err != nil {
			t.Error(err)
		}
	}
}

func TestBackupToItself(t *testing.T) {
	s := openTest(t, Options{})
	for _, dst := range []string{s.Path(), filepath.Join(filepath.Dir(s.Path()), ".", FileName)} {
		if err := BackupFile(s, dst); err == nil {
			t.Errorf("BackupFile(%s) over the store succeeded", dst)
		}
	}
	link := filepath.Join(t.TempDir(), "link.db")
	if err := os.Link(s.Path(), link); err != nil {
		t.Fatal(err)
	}
	if err := BackupFile(s, link); err == nil {
		t.Errorf("BackupFile over a hard link of the store succeeded")
	}
}

func TestBackupWriter(t *testing.T) {
	s := openTest(t, Options{})
	if err := s.PutStack(storetest.Record("a", 1)); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	n, err := s.Backup(&buf)
	if err != nil || n != int64(buf.Len()) || n == 0 {
		t.Fatalf("Backup = %d, %v (buffer %d)", n, err, buf.Len())
	}
	dst := filepath.Join(t.TempDir(), FileName)
	if err := os.WriteFile(dst, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	b := openAt(t, dst, Options{})
	if _, err := b.Stack("a"); err != nil {
		t.Error(err)
	}
}
