// Package forge implements review.Forge for GitHub (and GitHub
// Enterprise Server), GitLab and Gitea (and Forgejo): it lists the files
// a pull request changes, sets commit statuses, keeps one comment per
// pull request up to date, and tells a pull request's state (open,
// closed or merged, and its head commit) so that stackd catches up with
// the webhooks it missed.
//
// forge is the only package of stackd that imports the forges' client
// libraries; the rest of stackd sees review.Forge alone. Each library is
// the forge's own or its best-kept Go client:
//
//   - github.com/google/go-github: Google's client, maintained for a
//     decade, typed after GitHub's REST reference and released with it;
//     it speaks GitHub Enterprise Server through WithEnterpriseURLs.
//   - gitlab.com/gitlab-org/api/client-go: GitLab's official client
//     (formerly xanzy/go-gitlab), maintained by GitLab itself. Its own
//     retryablehttp retries are switched off so that this package's
//     retry policy is the only one.
//   - code.gitea.io/sdk/gitea: the Gitea project's official SDK, which
//     Forgejo's API stays compatible with. Its context is per client, so
//     a light client is made per call to carry the call's context.
//
// Every client sends through one http.RoundTripper (retry.go) that
// retries answers 5xx and 429, GitHub's secondary rate limit (403 with
// Retry-After) and transport errors, with exponential backoff and jitter,
// honouring Retry-After, until the call's context ends. Errors are
// wrapped with lowercase context ("github: set status of ...") and never
// carry the token.
//
// Package forgetest fakes the three forges' REST APIs for tests.
package forge
