package gitwatch

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// Defaults of the size limits (see Options).
//
// 512 MiB of files is far more than any Pulumi program repository holds
// (they weigh kilobytes to a few megabytes), yet bounds what one stack
// or config source can make stackd write: a checkout is built beside the
// one it replaces, so a stack may take twice the limit while swapping.
//
// 64 MiB for one file sits between GitHub's warning (50 MiB) and its
// refusal (100 MiB), so it passes any file a hosted repository can hold
// in practice; and as go-git holds each object of a fetched pack whole in
// memory while indexing it, it is what bounds a fetch's memory (about
// twice this plus go-git's 96 MiB delta cache).
const (
	DefaultMaxCheckoutBytes int64 = 512 << 20
	DefaultMaxFileBytes     int64 = 64 << 20
)

// streamAbove is the size above which a blob is streamed from the pack to
// its file at checkout rather than read whole into memory first (go-git's
// LargeObjectThreshold, which is off by default).
const streamAbove = 1 << 20

// ErrTooLarge: a checkout, one of its files or a fetched pack is larger
// than the limits allow. Nothing was written to the checkout directory.
var ErrTooLarge = errors.New("too large")

// tooLarge is an ErrTooLarge whose message says what, how large, and
// which limit; the limits are named after stackd's flags.
type tooLarge struct{ msg string }

func (e *tooLarge) Error() string        { return e.msg }
func (e *tooLarge) Is(target error) bool { return target == ErrTooLarge }

func tooLargef(format string, args ...any) error {
	return &tooLarge{msg: fmt.Sprintf(format, args...)}
}

// limits are the size limits of one checkout; a limit ≤ 0 is off.
type limits struct {
	checkout, file int64
}

func (f *Fetcher) limits() limits {
	return limits{checkout: f.opts.MaxCheckoutBytes, file: f.opts.MaxFileBytes}
}

// sizeText writes n bytes for people: "1073741824 bytes (1.0 GiB)".
func sizeText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d bytes", n)
	}
	v, suffix := float64(n)/unit, "KiB"
	for _, s := range []string{"MiB", "GiB", "TiB"} {
		if v < unit {
			break
		}
		v, suffix = v/unit, s
	}
	return fmt.Sprintf("%d bytes (%.1f %s)", n, v, suffix)
}

// checkTree refuses commit when a file of its tree is larger than
// lim.file, or its files together are larger than lim.checkout. It reads
// trees and the sizes in the blobs' object headers only: no blob is
// inflated, and nothing is written. Submodules are not checked out, so
// they weigh nothing.
func checkTree(st *filesystem.Storage, commit plumbing.Hash, lim limits) error {
	if lim.checkout <= 0 && lim.file <= 0 {
		return nil
	}
	c, err := object.GetCommit(st, commit)
	if err != nil {
		return fmt.Errorf("read commit: %w", err)
	}
	w := treeWalk{st: st, lim: lim, commit: commit}
	if err := w.walk(c.TreeHash, ""); err != nil {
		return err
	}
	if lim.checkout > 0 && w.total > lim.checkout {
		return tooLargef("checkout of %.12s is %s, more than --max-checkout-bytes %s",
			commit, sizeText(w.total), sizeText(lim.checkout))
	}
	return nil
}

type treeWalk struct {
	st     *filesystem.Storage
	lim    limits
	commit plumbing.Hash
	total  int64
}

// walk adds the sizes of the files below tree h (at dir) to w.total. It
// goes on past lim.checkout, to report the checkout's whole size: it only
// reads trees, which the pack bounds.
func (w *treeWalk) walk(h plumbing.Hash, dir string) error {
	t, err := object.GetTree(w.st, h)
	if err != nil {
		return fmt.Errorf("read tree %s: %w", dir, err)
	}
	for _, e := range t.Entries {
		p := path.Join(dir, e.Name)
		switch e.Mode {
		case filemode.Dir:
			if err := w.walk(e.Hash, p); err != nil {
				return err
			}
			continue
		case filemode.Submodule:
			continue
		}
		size, err := w.st.EncodedObjectSize(e.Hash)
		if err != nil {
			return fmt.Errorf("size of %s: %w", p, err)
		}
		if w.lim.file > 0 && size > w.lim.file {
			return tooLargef("file %s of %.12s is %s, more than --max-file-bytes %s",
				p, w.commit, sizeText(size), sizeText(w.lim.file))
		}
		w.total += size
	}
	return nil
}

// guardedStorage is a repository's storage whose fetched packs pass a
// packGuard on their way to disk. A pack the guard refuses cancels the
// fetch through cancel: go-git only stops a transport (kills the
// git-upload-pack of file://, closes an SSH session) when a read fails,
// and waits for it otherwise.
type guardedStorage struct {
	*filesystem.Storage
	lim    limits
	cancel context.CancelFunc

	mu      sync.Mutex
	refused error
}

// PackfileWriter implements storer.PackfileWriter, which go-git's fetch
// uses to write the pack it receives.
func (s *guardedStorage) PackfileWriter() (io.WriteCloser, error) {
	w, err := s.Storage.PackfileWriter()
	if err != nil || (s.lim.checkout <= 0 && s.lim.file <= 0) {
		return w, err
	}
	return newPackGuard(w, s.lim, s.refuse), nil
}

func (s *guardedStorage) refuse(err error) {
	s.mu.Lock()
	if s.refused == nil {
		s.refused = err
	}
	s.mu.Unlock()
	if s.cancel != nil {
		s.cancel()
	}
}

// refusal is the error of a refused pack, or nil.
func (s *guardedStorage) refusal() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// trailerLen is the length of a pack's trailing checksum.
const trailerLen = 20

// packGuard passes a fetched pack on to go-git's pack writer while a
// scanner reads it alongside and checks the size of every object, from
// its header (for a delta, the size of its result) and before go-git
// inflates it. go-git's indexer holds each object whole in memory, but
// only once it has read the pack's checksum: the guard keeps the last
// trailerLen bytes back until the scanner has judged the whole pack, and
// withholds them from a pack it refuses, which go-git then discards.
//
// The pack itself, compressed, may not be larger than lim.checkout. Once
// it refused, the guard calls refuse and swallows what still arrives
// until the transport notices the cancelled fetch.
type packGuard struct {
	w      io.WriteCloser // go-git's pack writer
	pipe   *io.PipeWriter // to the scanner
	done   chan error     // the scanner's verdict
	held   []byte         // the last trailerLen bytes received
	n      int64          // bytes received
	lim    limits
	refuse func(error)
	// err is the first error; refused says whether the guard refused
	// the pack (and swallows the rest) rather than failed to write.
	err     error
	refused bool
	closed  bool
}

func newPackGuard(w io.WriteCloser, lim limits, refuse func(error)) *packGuard {
	pr, pw := io.Pipe()
	g := &packGuard{w: w, pipe: pw, done: make(chan error, 1), lim: lim, refuse: refuse}
	go func() {
		err := scanPack(pr, lim.file)
		if err != nil {
			pr.CloseWithError(err) // fails the next Write
		} else {
			_, _ = io.Copy(io.Discard, pr) // the trailer
		}
		g.done <- err
	}()
	return g
}

func (g *packGuard) Write(p []byte) (int, error) {
	if g.refused {
		return len(p), nil
	}
	if g.err != nil {
		return 0, g.err
	}
	g.n += int64(len(p))
	if g.lim.checkout > 0 && g.n > g.lim.checkout {
		return g.fail(tooLargef("the fetched pack is more than --max-checkout-bytes %s", sizeText(g.lim.checkout)), p)
	}
	if _, err := g.pipe.Write(p); err != nil {
		return g.fail(err, p)
	}
	buf := append(g.held, p...)
	if pass := len(buf) - trailerLen; pass > 0 {
		if _, err := g.w.Write(buf[:pass]); err != nil {
			g.err = err
			return 0, err
		}
		buf = buf[pass:]
	}
	g.held = append(g.held[:0:0], buf...)
	return len(p), nil
}

func (g *packGuard) fail(err error, p []byte) (int, error) {
	g.err, g.refused = err, true
	g.refuse(err)
	return len(p), nil
}

// Close waits for the scanner's verdict, passes the pack's last bytes on
// if it passed, and closes go-git's writer.
func (g *packGuard) Close() error {
	if g.closed {
		return g.err
	}
	g.closed = true
	g.pipe.Close()
	if err := <-g.done; g.err == nil && err != nil {
		g.err, g.refused = err, true
		g.refuse(err)
	}
	if g.err == nil {
		_, g.err = g.w.Write(g.held)
	}
	cerr := g.w.Close()
	if g.err != nil {
		return g.err
	}
	return cerr
}

// scanPack reads a pack and refuses it when one of its objects (or what
// one of its deltas makes) is larger than maxObject bytes; it returns
// nil for a pack it cannot read, which go-git's indexer then reports.
// Objects are inflated into nothing but the first bytes of deltas.
func scanPack(r io.Reader, maxObject int64) error {
	if maxObject <= 0 {
		return nil
	}
	s := packfile.NewScanner(r)
	_, count, err := s.Header()
	if err != nil {
		return nil
	}
	var head deltaHead
	for range count {
		h, err := s.NextObjectHeader()
		if err != nil {
			return nil
		}
		if h.Length > maxObject {
			return objectTooLarge(h.Type.String(), h.Length, maxObject)
		}
		head.n = 0
		if _, _, err := s.NextObject(&head); err != nil {
			return nil
		}
		if h.Type.IsDelta() {
			if size, ok := head.target(); ok && size > maxObject {
				return objectTooLarge("delta's result", size, maxObject)
			}
		}
	}
	return nil
}

func objectTooLarge(what string, size, limit int64) error {
	return tooLargef("the fetched pack holds a %s of %s, more than --max-file-bytes %s",
		what, sizeText(size), sizeText(limit))
}

// deltaHead keeps the first bytes of a delta, which hold the sizes of its
// base and result, and discards the rest.
type deltaHead struct {
	b [2 * binary.MaxVarintLen64]byte
	n int
}

func (d *deltaHead) Write(p []byte) (int, error) {
	d.n += copy(d.b[d.n:], p)
	return len(p), nil
}

// target is the size of the delta's result, after that of its base
// (both little-endian base-128, as binary.Uvarint reads them); false
// when the delta is too short to hold them (go-git refuses it).
func (d *deltaHead) target() (int64, bool) {
	b := d.b[:d.n]
	_, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, false
	}
	size, m := binary.Uvarint(b[n:])
	if m <= 0 || size > 1<<62 {
		return 0, false
	}
	return int64(size), true
}
