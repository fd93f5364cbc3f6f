package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"go.etcd.io/bbolt"
)

// Check runs bbolt's consistency check (tx.Check) over the whole file and
// returns every problem it reports, joined; nil means consistent. On a
// read-write store it runs in a write transaction that is rolled back, as
// bbolt requires when other writers may run: writers wait until it ends.
func (s *Store) Check() error {
	var err error
	if s.opts.ReadOnly {
		err = s.db.View(checkTx)
	} else {
		err = checkLocked(s.db)
	}
	if err != nil {
		return fmt.Errorf("store: check %s: %w", s.path, err)
	}
	return nil
}

// checkLocked runs checkTx in a write transaction it rolls back.
func checkLocked(db *bbolt.DB) error {
	tx, err := db.Begin(true)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	return checkTx(tx)
}

// Backup writes a consistent copy of the whole file to w, from one read
// transaction, while other calls go on (writers are not blocked). It
// returns the number of bytes written. The copy is a store file that Open
// accepts as it is.
func (s *Store) Backup(w io.Writer) (int64, error) {
	var n int64
	err := s.db.View(func(tx *bbolt.Tx) error {
		var err error
		n, err = tx.WriteTo(w)
		return err
	})
	if err != nil {
		return n, fmt.Errorf("store: backup %s: %w", s.path, err)
	}
	return n, nil
}

// BackupFile writes a consistent copy of s to the file dst (mode 0600):
// it writes dst+".tmp" in the same directory, syncs it, renames it to dst
// and syncs the directory, so dst is either the old file or the whole new
// copy. dst must not be the store's own file.
func BackupFile(s *Store, dst string) error {
	tmp := dst + ".tmp"
	if err := notStoreFile(s, dst, tmp); err != nil {
		return err
	}
	if err := writeBackup(s, tmp); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("store: backup to %s: %w", dst, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("store: backup to %s: %w", dst, err)
	}
	if err := syncDir(filepath.Dir(dst)); err != nil {
		return fmt.Errorf("store: backup to %s: %w", dst, err)
	}
	return nil
}

// notStoreFile refuses backup paths that would overwrite the store.
func notStoreFile(s *Store, paths ...string) error {
	live, err := os.Stat(s.path)
	if err != nil {
		return fmt.Errorf("store: backup: %w", err)
	}
	for _, p := range paths {
		abs, _ := filepath.Abs(p)
		fi, err := os.Stat(p)
		if abs == s.path || (err == nil && os.SameFile(fi, live)) {
			return fmt.Errorf("store: backup to %s: that is the store's own file", p)
		}
	}
	return nil
}

// writeBackup writes and syncs the copy at path.
func writeBackup(s *Store, path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = s.Backup(f)
	if err == nil {
		err = f.Chmod(0o600) // in case path existed with another mode
	}
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
