package gitwatch

import (
	"context"
	"fmt"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

const peeledSuffix = "^{}"

// remoteRefs is one ls-remote result.
type remoteRefs struct {
	hashes   map[plumbing.ReferenceName]plumbing.Hash // includes "<tag>^{}"
	symbolic map[plumbing.ReferenceName]plumbing.ReferenceName
}

func newRemoteRefs(list []*plumbing.Reference) *remoteRefs {
	r := &remoteRefs{
		hashes:   make(map[plumbing.ReferenceName]plumbing.Hash, len(list)),
		symbolic: map[plumbing.ReferenceName]plumbing.ReferenceName{},
	}
	for _, ref := range list {
		if ref.Type() == plumbing.SymbolicReference {
			r.symbolic[ref.Name()] = ref.Target()
			continue
		}
		r.hashes[ref.Name()] = ref.Hash()
	}
	return r
}

// candidates lists the full names a ref may stand for, in order of
// preference: a branch wins over a tag of the same name.
func candidates(ref string) []plumbing.ReferenceName {
	if ref == string(plumbing.HEAD) || strings.HasPrefix(ref, "refs/") {
		return []plumbing.ReferenceName{plumbing.ReferenceName(ref)}
	}
	return []plumbing.ReferenceName{
		plumbing.NewBranchReferenceName(ref),
		plumbing.NewTagReferenceName(ref),
		plumbing.ReferenceName("refs/" + ref),
	}
}

// find returns the full name ref stands for (symbolic refs followed, a
// semver range resolved to its highest tag) and the commit it points at
// (peeled when the server advertised it).
func (r *remoteRefs) find(ref string) (plumbing.ReferenceName, plumbing.Hash, error) {
	if rng, ok := strings.CutPrefix(ref, spec.SemverPrefix); ok {
		tag, err := r.semverTag(rng)
		if err != nil {
			return "", plumbing.ZeroHash, err
		}
		ref = string(plumbing.NewTagReferenceName(tag))
	}
	for _, name := range candidates(ref) {
		for i := 0; i < 5; i++ { // follow HEAD -> refs/heads/main
			t, ok := r.symbolic[name]
			if !ok {
				break
			}
			name = t
		}
		h, ok := r.hashes[name]
		if !ok {
			continue
		}
		if p, ok := r.hashes[name+peeledSuffix]; ok {
			h = p
		}
		return name, h, nil
	}
	return "", plumbing.ZeroHash, ErrRefNotFound
}

// lsRemote lists the remote's refs with an in-memory remote, bounded by
// Timeout.
func (f *Fetcher) lsRemote(ctx context.Context, src model.GitSource) (*remoteRefs, error) {
	auth, err := f.authFor(src)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
	defer cancel()
	start := time.Now()
	f.opts.RemoteCall(OpLsRemote)
	var list []*plumbing.Reference
	_, err = abandonable(ctx, func() error {
		rem := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{
			Name: "origin",
			URLs: []string{src.URL},
		})
		var err error
		list, err = rem.ListContext(ctx, &git.ListOptions{Auth: auth, PeelingOption: git.AppendPeeled})
		return err
	}, nil)
	if err != nil {
		return nil, f.timedOut(ctx, err)
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("remote advertised no refs (empty repository?)")
	}
	f.log.Debug("gitwatch: ls-remote", "url", SanitizeURL(src.URL), "refs", len(list), "took", time.Since(start))
	return newRemoteRefs(list), nil
}

// semverTag is the tag with the highest version in the range rng.
func (r *remoteRefs) semverTag(rng string) (string, error) {
	sr, err := spec.ParseSemverRange(rng)
	if err != nil {
		return "", err
	}
	var tags []string
	for name := range r.hashes {
		if name.IsTag() && !strings.HasSuffix(string(name), peeledSuffix) {
			tags = append(tags, name.Short())
		}
	}
	tag, ok := spec.HighestTag(sr, tags)
	if !ok {
		return "", fmt.Errorf("no tag in semver range %q: %w", rng, ErrRefNotFound)
	}
	return tag, nil
}
