package view

import (
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/review"
)

// PreviewsPage is the open pull requests' page at /previews.
type PreviewsPage struct {
	Page
	// Configured is whether previews run at all (--forge).
	Configured   bool
	PullRequests []review.PullRequest
}

// Open counts the pull requests listed that are still open; the others are
// closed ones listed until their review stacks are destroyed.
func (p PreviewsPage) Open() int {
	n := 0
	for _, pr := range p.PullRequests {
		if !pr.Closed {
			n++
		}
	}
	return n
}

// Closing counts the closed pull requests still listed.
func (p PreviewsPage) Closing() int { return len(p.PullRequests) - p.Open() }

// PreviewPage is one preview's page at /previews/{id}, id being the
// preview's update.
type PreviewPage struct {
	Page
	Update model.Update
	// PR is the open pull request the preview belongs to; nil once it is
	// closed or its head moved on.
	PR  *review.PullRequest
	Log *Log
}
