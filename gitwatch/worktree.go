package gitwatch

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// treeWriter writes a tree into an empty worktree in one walk, and
// collects the index entries of what it wrote.
//
// It replaces go-git's Worktree.Checkout, which looks every file up from
// the root tree again, decoding each directory on the way: quadratic in
// a directory's width (10,000 entries took seconds and gigabytes).
//
// A committer is hostile. Every name passes go-git's checks for tree
// paths (no ".", "..", ".git" or a variant of it, no control character)
// and must be unique in its tree; every write goes through go-git's
// worktree filesystem, which refuses a path through a symlink and a
// symlink named .gitmodules, over a BoundOS that keeps paths inside the
// worktree; and every file and symlink is created exclusively, so no
// write follows or replaces an existing entry.
type treeWriter struct {
	st      storer.EncodedObjectStorer
	fs      billy.Filesystem // go-git's worktree filesystem
	entries []*index.Entry
	buf     []byte
}

func newTreeWriter(st storer.EncodedObjectStorer, wt billy.Filesystem) *treeWriter {
	return &treeWriter{st: st, fs: wt, buf: make([]byte, 32<<10)}
}

// tree writes t's entries below dir ("" for the root).
func (w *treeWriter) tree(t *object.Tree, dir string) error {
	for i := range t.Entries {
		e, err := uniqueEntry(t, i)
		if err != nil {
			return fmt.Errorf("tree %q: %w", dir, err)
		}
		if err := w.entry(e, path.Join(dir, e.Name)); err != nil {
			return err
		}
	}
	return nil
}

// uniqueEntry returns t's entry i once FindEntry, which validates the
// name as go-git does before writing it, finds that very entry by name:
// a second entry of the same name (which git fsck refuses) could
// otherwise make a directory out of a symlink written before it.
func uniqueEntry(t *object.Tree, i int) (*object.TreeEntry, error) {
	e := &t.Entries[i]
	found, err := t.FindEntry(e.Name)
	if err != nil {
		return nil, fmt.Errorf("entry %q: %w", e.Name, err)
	}
	if found != e {
		return nil, fmt.Errorf("entry %q appears twice", e.Name)
	}
	return e, nil
}

func (w *treeWriter) entry(e *object.TreeEntry, p string) error {
	switch e.Mode {
	case filemode.Dir:
		return w.dir(e.Hash, p)
	case filemode.Submodule:
		return w.submodule(e.Hash, p)
	case filemode.Regular, filemode.Deprecated, filemode.Executable:
		return w.file(e, p)
	case filemode.Symlink:
		return w.symlink(e.Hash, p)
	}
	return fmt.Errorf("%s: unsupported mode %s", p, e.Mode)
}

func (w *treeWriter) dir(h plumbing.Hash, p string) error {
	t, err := object.GetTree(w.st, h)
	if err != nil {
		return fmt.Errorf("read tree %s: %w", p, err)
	}
	if err := w.fs.MkdirAll(p, 0o755); err != nil {
		return fmt.Errorf("create directory %s: %w", p, err)
	}
	return w.tree(t, p)
}

// submodule writes an empty directory and a gitlink index entry, as
// go-git's checkout does: submodules are not checked out.
func (w *treeWriter) submodule(h plumbing.Hash, p string) error {
	if err := w.fs.MkdirAll(p, os.ModePerm); err != nil {
		return fmt.Errorf("create submodule directory %s: %w", p, err)
	}
	w.entries = append(w.entries, &index.Entry{Name: p, Hash: h, Mode: filemode.Submodule})
	return nil
}

// file writes a regular file, 0755 when executable, 0644 otherwise
// (umask applied); the index records it as 100755 or 100644.
func (w *treeWriter) file(e *object.TreeEntry, p string) error {
	mode, perm := filemode.Regular, fs.FileMode(0o644)
	if e.Mode == filemode.Executable {
		mode, perm = filemode.Executable, 0o755
	}
	if err := w.copyBlob(e.Hash, p, perm); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return w.add(p, e.Hash, mode)
}

func (w *treeWriter) copyBlob(h plumbing.Hash, p string, perm fs.FileMode) (err error) {
	r, err := blobReader(w.st, h)
	if err != nil {
		return err
	}
	defer r.Close()
	f, err := w.fs.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	_, err = io.CopyBuffer(f, r, w.buf)
	return err
}

// symlink writes a symlink whose target is the blob, verbatim: nothing
// is ever written through it.
func (w *treeWriter) symlink(h plumbing.Hash, p string) error {
	r, err := blobReader(w.st, h)
	if err != nil {
		return fmt.Errorf("read symlink %s: %w", p, err)
	}
	target, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		return fmt.Errorf("read symlink %s: %w", p, err)
	}
	if err := w.fs.Symlink(string(target), p); err != nil {
		return fmt.Errorf("write symlink %s: %w", p, err)
	}
	return w.add(p, h, filemode.Symlink)
}

func blobReader(st storer.EncodedObjectStorer, h plumbing.Hash) (io.ReadCloser, error) {
	b, err := object.GetBlob(st, h)
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", h, err)
	}
	return b.Reader()
}

// add records p, just written, in the index with its stat data, so that
// git and go-git see it unchanged without hashing it again.
func (w *treeWriter) add(p string, h plumbing.Hash, mode filemode.FileMode) error {
	fi, err := w.fs.Lstat(p)
	if err != nil {
		return fmt.Errorf("stat %s: %w", p, err)
	}
	e := &index.Entry{Name: p, Hash: h, Mode: mode, ModifiedAt: fi.ModTime(), Size: uint32(fi.Size())}
	fillStat(e, fi)
	w.entries = append(w.entries, e)
	return nil
}
