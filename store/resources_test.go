package store

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/stackd/stackd/daemon/storetest"
)

// TestMigrateV3Resources: a file of schema version 3, the last without a
// resources bucket, gets one at Open and keeps its stacks; resources can
// be written to it then.
func TestMigrateV3Resources(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	atVersion(3, func() {
		s := openAt(t, path, Options{})
		if err := s.PutStack(storetest.Record("a", 1)); err != nil {
			t.Fatal(err)
		}
		if hasBucket(t, s, bucketResources) {
			t.Fatal("a version 3 store has a resources bucket")
		}
		mustClose(t, s)
	})
	s := openAt(t, path, Options{})
	if v, err := s.SchemaVersion(); err != nil || v != schemaVersion {
		t.Errorf("SchemaVersion = %d, %v; want %d", v, err, schemaVersion)
	}
	if _, err := s.Stack("a"); err != nil {
		t.Errorf("Stack(a) after migration: %v", err)
	}
	_, err := s.Resources("a")
	storetest.WantNotFound(t, "Resources(a) of a migrated store", err)
	want := storetest.Resources("a", 3)
	if err := s.PutResources("a", want); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Resources("a"); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Resources(a) = %+v, %v", got, err)
	}
}
