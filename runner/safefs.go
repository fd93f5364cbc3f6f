package runner

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// A stack's program may write its checkout, its HOME, TMPDIR and
// PULUMI_HOME, and its state; what it leaves there may be a symbolic
// link, a FIFO or a device where the runner expects a file of its own,
// to make the daemon (unconfined, and often root) read, write or chmod a
// file elsewhere on the host, or block for ever. So the runner reaches
// the files of such directories through an os.Root of a directory the
// program cannot replace (no link leads out of it), and reads regular
// files only. Writes go through writeFileAtomic in such a directory: a
// new file of a random name, renamed over whatever was there, which
// replaces a link instead of following it.

// errForeign is the error of a file that is not the runner's: a link
// leading out of its directory, or not a regular file. Such a file is
// treated as damaged: rebuilt where the runner writes it, never read.
var errForeign = errors.New("not a regular file of the runner's")

// openRegular opens the regular file name (a path relative to dir) for
// reading: never through a link that leads out of dir, never a FIFO or
// a device (errForeign).
func openRegular(dir, name string) (*os.File, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if fi, lerr := root.Lstat(name); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			err = fmt.Errorf("open %s: %w: a link that leads out of its directory", filepath.Join(dir, name), errForeign)
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("open %s: %w: %s", filepath.Join(dir, name), errForeign, fi.Mode().Type())
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// readIn reads the regular file name, a path relative to dir, as
// openRegular opens it.
func readIn(dir, name string) ([]byte, error) {
	f, err := openRegular(dir, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// readRegular is readIn of path's base name in path's directory, which
// the caller trusts: no program can replace it.
func readRegular(path string) ([]byte, error) {
	return readIn(filepath.Dir(path), filepath.Base(path))
}

// readProjectFile reads name of the project in projectDir, a directory
// of the checkout workDir: every directory below workDir is the
// program's, so links are followed inside workDir only. An empty workDir
// is projectDir.
func readProjectFile(workDir, projectDir, name string) ([]byte, error) {
	if workDir == "" {
		workDir = projectDir
	}
	rel, err := filepath.Rel(workDir, projectDir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("the project directory %s is not in the checkout %s", projectDir, workDir)
	}
	return readIn(workDir, filepath.Join(rel, name))
}

// rootRealDir makes dir (relative to ws) a directory, removing a link or
// a file a program left there (a data dir of an older version linked
// the whole plugin cache there too).
func rootRealDir(ws *os.Root, dir string) error {
	fi, err := ws.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	case fi.IsDir():
		return nil
	default:
		if err := ws.Remove(dir); err != nil {
			return err
		}
	}
	return ws.Mkdir(dir, 0o700)
}
