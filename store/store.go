// Package store keeps stackd's state in one BoltDB file: the record of
// every stack, each stack's update history and update logs, the history
// of config revisions, the audit trail, each stack's resources as of
// its last update and its last preview, the open pull requests, and
// small metadata values. It is the only package of stackd that imports
// bbolt.
//
// Layout (schema version 6):
//
//	meta      "schema_version" → decimal string; "kv:<key>" → PutMeta values
//	stacks    <name> → JSON model.StackRecord
//	updates   <stack>/ (nested bucket, its sequence numbers the updates)
//	              8-byte big-endian seq → JSON model.Update
//	logs      <stack>/ (nested bucket) 8-byte big-endian seq → log bytes
//	revisions 8-byte big-endian seq (the bucket's sequence) →
//	              JSON model.ConfigRevision (since version 2)
//	audit     8-byte big-endian seq (the bucket's sequence) →
//	              JSON model.AuditEntry (since version 3)
//	resources <stack> → JSON model.Resources (since version 4)
//	previews  <stack> → JSON model.StackPreview (since version 5)
//	pullrequests <forge:repo#number> → JSON review.Record (since version 6)
//
// A *Store is safe for concurrent use by multiple goroutines. bbolt allows
// one writer at a time and any number of readers; every method runs one
// short transaction and copies what it read out of it before returning.
package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/bbolt"

	"github.com/stackd/stackd/daemon/model"
)

// FileName is the name of the store file inside a data dir.
const FileName = "stackd.db"

// Defaults applied by Open to zero (or negative) Options fields.
const (
	defaultTimeout      = 2 * time.Second
	defaultHistoryLimit = 100
	defaultLogLimit     = 1 << 20
)

// ErrLocked is returned (wrapped, test with errors.Is) by Open when another
// process holds the file's lock for longer than Options.Timeout.
var ErrLocked = errors.New("another stackd is using the data dir")

// ErrNotFound is returned (wrapped, test with errors.Is) when a stack,
// update or metadata key does not exist. It is model.ErrNotFound, which
// every Store returns.
var ErrNotFound = model.ErrNotFound

// Options tune Open. Zero values mean the defaults in parentheses.
type Options struct {
	// Timeout is how long Open waits for the file lock (2s).
	Timeout time.Duration
	// HistoryLimit is how many updates are kept per stack, and how many
	// config revisions; older ones (and their logs) are pruned in the
	// transaction that appends (100).
	HistoryLimit int
	// LogLimit is how many bytes of log are kept per update; a longer log
	// keeps its tail, prefixed with a line "[… N bytes truncated …]\n"
	// (1 MiB).
	LogLimit int
	// ReadOnly opens the file for reading only, under a shared lock: every
	// method that writes fails, the file is never created nor migrated.
	ReadOnly bool
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = defaultTimeout
	}
	if o.HistoryLimit <= 0 {
		o.HistoryLimit = defaultHistoryLimit
	}
	if o.LogLimit <= 0 {
		o.LogLimit = defaultLogLimit
	}
	return o
}

// Store is an open store file. It is safe for concurrent use; Close it
// once every other call has returned.
type Store struct {
	db   *bbolt.DB
	path string
	opts Options
	// current is false when a read-only store holds an older schema than
	// this build's: only Check, Backup and SchemaVersion work on it.
	current bool
}

// Open opens (creating it unless opts.ReadOnly) the store file at path,
// typically filepath.Join(dataDir, FileName). It waits up to opts.Timeout
// for the file lock and returns an error wrapping ErrLocked if another
// process holds it. It verifies the file's consistency before anything
// else, refuses a damaged file or one written by a newer stackd without
// modifying it, and migrates an older schema in one transaction (unless
// read-only). A zero-length file is treated as a new, empty store.
func Open(path string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	if err := checkExisting(path, opts.ReadOnly); err != nil {
		return nil, err
	}
	db, err := openBolt(path, opts)
	if err != nil {
		return nil, err
	}
	s := &Store{db: db, path: path, opts: opts}
	if err := s.init(); err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

// checkExisting refuses to open for reading a file that does not exist
// (bbolt would fail less clearly) or that is empty (bbolt would try to
// initialise it).
func checkExisting(path string, readOnly bool) error {
	if !readOnly {
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("store: open %s read-only: %w", path, err)
	}
	if fi.Size() == 0 {
		return fmt.Errorf("store: open %s read-only: the file is empty, it holds no store yet", path)
	}
	return nil
}

// init verifies the file and brings its schema up to date.
func (s *Store) init() error {
	version, err := verify(s.db, s.path)
	if err != nil {
		return err
	}
	latest := latestVersion()
	switch {
	case version > latest:
		return fmt.Errorf("store: %s has schema version %d and was written by a newer stackd (this one knows up to version %d); it was left untouched, run the newer stackd or restore a backup", s.path, version, latest)
	case version == latest:
		s.current = true
		return nil
	case s.opts.ReadOnly:
		return nil // readable for Check and Backup only
	}
	if err := safely(func() error { return s.db.Update(migrate(version)) }); err != nil {
		return fmt.Errorf("store: migrate %s from schema version %d to %d: %w", s.path, version, latest, err)
	}
	s.current = true
	return nil
}

// Close closes the file and releases its lock. It waits for transactions
// in flight to finish.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("store: close %s: %w", s.path, err)
	}
	return nil
}

// Path returns the absolute path of the store file.
func (s *Store) Path() string { return s.path }

// SchemaVersion reads the schema version recorded in the file (0 for a
// file no stackd has initialised).
func (s *Store) SchemaVersion() (int, error) {
	var v int
	err := s.db.View(func(tx *bbolt.Tx) error {
		var err error
		v, err = readVersion(tx)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: schema version: %w", err)
	}
	return v, nil
}

// view runs fn in a read transaction, refusing a store whose schema this
// build cannot read.
func (s *Store) view(fn func(tx *bbolt.Tx) error) error {
	if !s.current {
		return errOldSchema
	}
	return s.db.View(fn)
}

// update runs fn in a read-write transaction committed if fn returns nil.
func (s *Store) update(fn func(tx *bbolt.Tx) error) error {
	if !s.current {
		return errOldSchema
	}
	return s.db.Update(fn)
}

var errOldSchema = errors.New("the file has an older schema; open it read-write once (start stackd) to migrate it")
