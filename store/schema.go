package store

import (
	"fmt"
	"strconv"

	"go.etcd.io/bbolt"
)

// schemaVersion is the schema this build writes. It must equal the "to" of
// the last migration (TestSchemaVersion checks it).
const schemaVersion = 6

// Bucket names and the schema version key.
var (
	bucketMeta      = []byte("meta")
	bucketStacks    = []byte("stacks")
	bucketUpdates   = []byte("updates")
	bucketLogs      = []byte("logs")
	bucketRevisions = []byte("revisions")    // from schema version 2
	bucketAudit     = []byte("audit")        // from schema version 3
	bucketResources = []byte("resources")    // from schema version 4
	bucketPreviews  = []byte("previews")     // from schema version 5
	bucketPRs       = []byte("pullrequests") // from schema version 6

	keySchemaVersion = []byte("schema_version")
)

// metaPrefix prefixes PutMeta keys so they never collide with
// keySchemaVersion or other keys of the store's own.
const metaPrefix = "kv:"

// migration brings a file from schema version to-1 to version to.
type migration struct {
	to   int
	name string
	fn   func(tx *bbolt.Tx) error
}

// migrations, in order. Open runs, in one transaction, every migration
// whose to is above the file's version (0 for a new file), then records
// the last one's to as the file's version. Append, never edit: files in
// the field went through the existing ones.
var migrations = []migration{
	{to: 1, name: "create buckets", fn: createBuckets},
	{to: 2, name: "create revisions bucket", fn: createRevisions},
	{to: 3, name: "create audit bucket", fn: createAudit},
	{to: 4, name: "create resources bucket", fn: createResources},
	{to: 5, name: "create previews bucket", fn: createPreviews},
	{to: 6, name: "create pull requests bucket", fn: createPRs},
}

// topBuckets lists every top-level bucket with the schema version whose
// migration creates it: a file of version v has those with since <= v.
var topBuckets = []struct {
	name  []byte
	since int
}{
	{bucketMeta, 1},
	{bucketStacks, 1},
	{bucketUpdates, 1},
	{bucketLogs, 1},
	{bucketRevisions, 2},
	{bucketAudit, 3},
	{bucketResources, 4},
	{bucketPreviews, 5},
	{bucketPRs, 6},
}

func createBuckets(tx *bbolt.Tx) error {
	for _, name := range [][]byte{bucketMeta, bucketStacks, bucketUpdates, bucketLogs} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return fmt.Errorf("create bucket %q: %w", name, err)
		}
	}
	return nil
}

// createRevisions creates the revisions bucket.
func createRevisions(tx *bbolt.Tx) error {
	if _, err := tx.CreateBucketIfNotExists(bucketRevisions); err != nil {
		return fmt.Errorf("create bucket %q: %w", bucketRevisions, err)
	}
	return nil
}

// createAudit creates the audit bucket.
func createAudit(tx *bbolt.Tx) error {
	if _, err := tx.CreateBucketIfNotExists(bucketAudit); err != nil {
		return fmt.Errorf("create bucket %q: %w", bucketAudit, err)
	}
	return nil
}

// createResources creates the resources bucket.
func createResources(tx *bbolt.Tx) error {
	if _, err := tx.CreateBucketIfNotExists(bucketResources); err != nil {
		return fmt.Errorf("create bucket %q: %w", bucketResources, err)
	}
	return nil
}

// createPreviews creates the previews bucket.
func createPreviews(tx *bbolt.Tx) error {
	if _, err := tx.CreateBucketIfNotExists(bucketPreviews); err != nil {
		return fmt.Errorf("create bucket %q: %w", bucketPreviews, err)
	}
	return nil
}

// createPRs creates the bucket of open pull requests.
func createPRs(tx *bbolt.Tx) error {
	if _, err := tx.CreateBucketIfNotExists(bucketPRs); err != nil {
		return fmt.Errorf("create bucket %q: %w", bucketPRs, err)
	}
	return nil
}

// latestVersion is the version the last migration brings a file to.
func latestVersion() int {
	if len(migrations) == 0 {
		return 0
	}
	return migrations[len(migrations)-1].to
}

// migrate returns the transaction function that brings a file from
// version from to latestVersion.
func migrate(from int) func(tx *bbolt.Tx) error {
	return func(tx *bbolt.Tx) error {
		for _, m := range migrations {
			if m.to <= from {
				continue
			}
			if err := m.fn(tx); err != nil {
				return fmt.Errorf("migration to version %d (%s): %w", m.to, m.name, err)
			}
		}
		return writeVersion(tx, latestVersion())
	}
}

// readVersion reads the file's schema version; 0 when it has none.
func readVersion(tx *bbolt.Tx) (int, error) {
	b := tx.Bucket(bucketMeta)
	if b == nil {
		return 0, nil
	}
	v := b.Get(keySchemaVersion)
	if v == nil {
		return 0, nil
	}
	n, err := strconv.Atoi(string(v))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("schema version %q is not a number", v)
	}
	return n, nil
}

func writeVersion(tx *bbolt.Tx, version int) error {
	b, err := tx.CreateBucketIfNotExists(bucketMeta)
	if err != nil {
		return err
	}
	return b.Put(keySchemaVersion, []byte(strconv.Itoa(version)))
}
