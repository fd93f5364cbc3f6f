package store

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/storetest"
	"go.etcd.io/bbolt"
)

// validStoreFile writes a closed store with enough data for ~60 pages:
// branch and leaf pages, nested buckets, overflow pages of logs, and
// config revisions, audit entries.
func validStoreFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), FileName)
	s := openAt(t, path, Options{})
	for i := range 20 {
		name := fmt.Sprintf("stack-%02d", i)
		if err := s.PutStack(storetest.Record(name, 1)); err != nil {
			t.Fatal(err)
		}
		for range 5 {
			u := begin(t, s, name)
			if err := s.PutLog(u.ID, bytes.Repeat([]byte(u.ID+" log line\n"), 150)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 3 {
		if _, err := s.PutRevision(storetest.NewRevision("git")); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if _, err := s.PutAudit(storetest.NewAuditEntry("alice", "sync", "stack-01", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutMeta("k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	mustClose(t, s)
	return path
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// overwrite writes b at off in the file at path.
func overwrite(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// flip inverts n bytes at off in the file at path.
func flip(t *testing.T, path string, off int64, n int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b := bytes.Clone(data[off : off+int64(n)])
	for i := range b {
		b[i] ^= 0xff
	}
	overwrite(t, path, off, b)
}

// openDamaged opens path read-write then read-only and returns the
// errors; the file's bytes must not change. A store that opens is
// checked and closed.
func openDamaged(t *testing.T, path string) (errs [2]error, checkErr error) {
	t.Helper()
	sum := fileSum(t, path)
	for i, ro := range []bool{false, true} {
		s, err := Open(path, Options{ReadOnly: ro, Timeout: time.Second})
		errs[i] = err
		if err == nil {
			if err := s.Check(); err != nil && checkErr == nil {
				checkErr = err
			}
			if err := s.Close(); err != nil {
				t.Error(err)
			}
		}
	}
	if fileSum(t, path) != sum {
		t.Errorf("%s was modified", path)
	}
	return errs, checkErr
}

// wantDamaged asserts that both opens of path failed with the message of
// a damaged file, and logs the errors.
func wantDamaged(t *testing.T, path string) {
	t.Helper()
	for i, err := range checkDamaged(t, path) {
		t.Logf("%s: %v", []string{"read-write", "read-only"}[i], err)
	}
}

// checkDamaged asserts that both opens of path failed with the message of
// a damaged file, and returns the errors.
func checkDamaged(t *testing.T, path string) [2]error {
	t.Helper()
	errs, _ := openDamaged(t, path)
	for i, err := range errs {
		mode := []string{"read-write", "read-only"}[i]
		if err == nil {
			t.Errorf("%s open of a damaged file succeeded", mode)
			continue
		}
		msg := err.Error()
		for _, want := range []string{path, "damaged", "stackd store check", "stackd backup"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s open error %q does not contain %q", mode, msg, want)
			}
		}
	}
	return errs
}

func TestDamagedGarbage(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	if err := os.WriteFile(path, randomBytes(t, 16<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	wantDamaged(t, path)
}

func TestDamagedTooShort(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	if err := os.WriteFile(path, randomBytes(t, 100), 0o600); err != nil {
		t.Fatal(err)
	}
	wantDamaged(t, path)
}

func TestDamagedTruncated(t *testing.T) {
	path := validStoreFile(t)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	wantDamaged(t, path)
}

func TestDamagedMetaPages(t *testing.T) {
	path := validStoreFile(t)
	ps := int64(os.Getpagesize())
	overwrite(t, path, 0, randomBytes(t, int(ps)))
	overwrite(t, path, ps, randomBytes(t, int(ps)))
	wantDamaged(t, path)
}

// TestDamagedOneMetaPage: bbolt keeps two meta pages so that a torn write
// of one (checksum mismatch) falls back on the other, the previous
// transaction; that is bbolt's own recovery and the store opens. A meta
// page overwritten whole is damage: bbolt falls back too, but tx.Check
// reports page 0, and Open refuses the file.
func TestDamagedOneMetaPage(t *testing.T) {
	path := validStoreFile(t)
	overwrite(t, path, 16, randomBytes(t, os.Getpagesize()-16)) // page header kept
	errs, checkErr := openDamaged(t, path)
	if errs[0] != nil || errs[1] != nil || checkErr != nil {
		t.Errorf("meta page 0 torn: open %v / %v, check %v; want bbolt to fall back on meta page 1", errs[0], errs[1], checkErr)
	}

	path = validStoreFile(t)
	overwrite(t, path, 0, randomBytes(t, os.Getpagesize()))
	wantDamaged(t, path)
}

// pageInfo lists the pages of the file at path (with bbolt directly: this
// is about the file format, not the store).
func pageInfo(t *testing.T, path string) (pageSize int, pages []struct {
	id    int
	typ   string
	extra int
}) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, PreLoadFreelist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *bbolt.Tx) error {
		for id := 2; ; {
			info, err := tx.Page(id)
			if err != nil || info == nil {
				return err
			}
			pages = append(pages, struct {
				id    int
				typ   string
				extra int
			}{id, info.Type, info.OverflowCount})
			id += 1 + info.OverflowCount
			if info.Type == "free" {
				id = info.ID + 1
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return db.Info().PageSize, pages
}

// TestDamagedDataPages flips bytes of the data pages of a valid store,
// one page and one place per try, and sorts the outcomes (logged with
// -v). The 16-byte header of every page in use must be noticed at Open;
// elsewhere the flip may land in a log, which nothing can check, or in a
// page's unused space, which holds nothing.
func TestDamagedDataPages(t *testing.T) {
	orig := validStoreFile(t)
	pageSize, pages := pageInfo(t, orig)
	data, err := os.ReadFile(orig)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	places := []struct {
		name      string
		off, size int
	}{
		{"header", 0, 16},
		{"element[0][0:8]", 16, 8},  // leaf: flags, pos; branch: pos, ksize
		{"element[0][8:16]", 24, 8}, // leaf: ksize, vsize; branch: child page id
		{"middle", pageSize / 2, 8},
		{"end", pageSize - 8, 8},
	}
	for _, p := range pages {
		for _, place := range places {
			t.Run(fmt.Sprintf("%d-%s/%s", p.id, p.typ, place.name), func(t *testing.T) {
				path := copyFile(t, data)
				flip(t, path, int64(p.id*pageSize+place.off), place.size)
				if place.name == "header" && p.typ != "free" {
					checkDamaged(t, path)
				}
				kind := p.typ
				if p.extra > 0 {
					kind = "overflowing " + kind
				}
				counts[fmt.Sprintf("%s of %s page: %s", place.name, kind, outcome(t, path))]++
			})
		}
	}
	var lines []string
	for k, n := range counts {
		lines = append(lines, fmt.Sprintf("%4d × %s", n, k))
	}
	sort.Strings(lines)
	t.Logf("outcomes:\n%s", strings.Join(lines, "\n"))
}

// outcome opens a file with flipped bytes and says what noticed them.
func outcome(t *testing.T, path string) string {
	t.Helper()
	errs, checkErr := openDamaged(t, path)
	switch {
	case errs[0] != nil && errs[1] != nil:
		if !strings.Contains(errs[0].Error(), "damaged") || !strings.Contains(errs[0].Error(), path) {
			t.Errorf("open error %q", errs[0])
		}
		return "noticed at Open"
	case errs[0] != nil || errs[1] != nil:
		t.Errorf("only one open failed: %v / %v", errs[0], errs[1])
		return "inconsistent"
	case checkErr != nil:
		return "noticed by Check only"
	}
	return "not noticed"
}

func copyFile(t *testing.T, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), FileName)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestZeroLengthFile: bbolt initialises an empty file as a new database;
// it holds nothing to lose, so Open makes it a new, empty store.
func TestZeroLengthFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s := openAt(t, path, Options{})
	if v, err := s.SchemaVersion(); err != nil || v != schemaVersion {
		t.Errorf("SchemaVersion = %d, %v; want %d", v, err, schemaVersion)
	}
	if recs, err := s.Stacks(); err != nil || len(recs) != 0 {
		t.Errorf("Stacks = %v, %v", recs, err)
	}
}

// TestForeignBoltFile: a bbolt file that is not a store is refused as is.
func TestForeignBoltFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucket([]byte("other"))
		if err != nil {
			return err
		}
		return b.Put([]byte("k"), []byte("v"))
	})
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}
	errs, _ := openDamaged(t, path)
	for _, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "not a stackd store") {
			t.Errorf("open of a foreign file: %v", err)
		}
	}
}

// TestMissingBucket: a store whose schema version says its buckets exist
// but one is gone is refused, not crashed on later. (Without meta, the
// file has no schema version: TestForeignBoltFile.)
func TestMissingBucket(t *testing.T) {
	for _, b := range topBuckets {
		if bytes.Equal(b.name, bucketMeta) {
			continue
		}
		t.Run(string(b.name), func(t *testing.T) {
			path := validStoreFile(t)
			db, err := bbolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = db.Update(func(tx *bbolt.Tx) error { return tx.DeleteBucket(b.name) })
			if err := errors.Join(err, db.Close()); err != nil {
				t.Fatal(err)
			}
			wantDamaged(t, path)
		})
	}
}

// TestDamagedRecord: a flipped byte inside a record's JSON is invisible
// to bbolt (data pages have no checksum); Open's JSON check notices it.
func TestDamagedRecord(t *testing.T) {
	for _, record := range []string{`{"name":"stack-07"`, `{"id":"stack-03-4"`, `{"seq":2,`, `"principal":{`} {
		path := validStoreFile(t)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for off := 0; ; off++ {
			i := bytes.Index(data[off:], []byte(record))
			if i < 0 {
				break
			}
			off += i
			flip(t, path, int64(off), 1) // every copy: old ones sit in free pages
			found = true
		}
		if !found {
			t.Fatalf("%s not found in the file", record)
		}
		for _, err := range checkDamaged(t, path) {
			if !strings.Contains(err.Error(), "not valid JSON") {
				t.Errorf("flip in %s: %v", record, err)
			}
		}
	}
}
