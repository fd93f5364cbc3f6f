package gitwatch

import (
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/stackd/stackd/daemon/model"
)

// maxSubject bounds the commit subject CommitInfo returns.
const maxSubject = 200

// CommitInfo reads commit sha of the checkout in dir (a directory
// Checkout filled): its subject (the message's first line), author and
// time. It makes no network call.
func (f *Fetcher) CommitInfo(dir, sha string) (model.Commit, error) {
	repo, err := git.PlainOpen(dir)
	if err != nil {
		return model.Commit{}, fmt.Errorf("commit %s: open %s: %w", sha, dir, err)
	}
	c, err := repo.CommitObject(plumbing.NewHash(sha))
	if err != nil {
		return model.Commit{}, fmt.Errorf("commit %s: %w", sha, err)
	}
	return model.Commit{SHA: sha, Subject: subject(c.Message), Author: c.Author.Name, Time: c.Author.When.UTC()}, nil
}

// subject is the first line of message, cut at maxSubject bytes.
func subject(message string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(message), "\n")
	line = strings.TrimSpace(line)
	if len(line) > maxSubject {
		line = strings.ToValidUTF8(line[:maxSubject], "") + "…"
	}
	return line
}
