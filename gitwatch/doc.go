// Package gitwatch resolves and checks out Git sources for stackd. It is
// the only package that uses go-git, and implements daemon.Fetcher.
//
// Resolve is one ls-remote (an in-memory go-git remote), cached briefly per
// source and shared by concurrent callers; Checkout fetches the one ref it
// needs (no tags, no submodules, optionally depth 1) into a fresh temp
// directory and swaps it into place, never updating a clone in place (the
// go-git pitfalls with shallow repos and partial writes after a crash make
// a fresh clone the reliable choice, as in Flux). What a checkout may
// cost is bounded (Options.MaxCheckoutBytes, MaxFileBytes): sizes are read
// from pack and object headers before anything is inflated or written.
//
// Every error the package returns has its credentials scrubbed: URLs are
// passed through SanitizeURL, and passwords, tokens, passphrases and URL
// userinfo are replaced by "***". Logs never carry credentials either.
package gitwatch
