package gitwatch

import (
	"io/fs"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing/format/index"
)

// fillStat copies the stat data that git compares besides mtime and size
// into e, as go-git's checkout does on Linux.
func fillStat(e *index.Entry, fi fs.FileInfo) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return
	}
	e.CreatedAt = time.Unix(st.Ctim.Unix())
	e.Dev = uint32(st.Dev)
	e.Inode = uint32(st.Ino)
	e.UID, e.GID = st.Uid, st.Gid
}
