// Package gitwatch resolves and checks out Git sources for stackd. It is
// the only package that uses go-git.
package gitwatch

import _ "github.com/go-git/go-git/v5" // pinned here until the package uses it
