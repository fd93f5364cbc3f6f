// Package runner runs Pulumi operations for stackd. It is the only package
// that uses the Automation API; each operation runs the pinned pulumi CLI in
// a sandboxed subprocess.
//
// A Runner keeps each stack's config outside the checkout, in
// <DataDir>/workspaces/<name>/Pulumi.<stack>.yaml, passed to every command
// with --config-file, next to a marker that records that the stack exists
// and a keyed digest of the config the file holds. An operation on an
// existing stack with unchanged config is one CLI process: its change
// summary and outputs are read from the engine's event log (--event-log)
// rather than from follow-up commands. A preview whose steps policies
// judge, and whose steps hold secrets, runs up to two more, which read
// their values in clear into memory for the policies (see reveal.go).
//
// Confined, the CLI (the engine) and the plugins it starts (the program)
// run in two Landlock domains, the program's nested in the engine's, so
// that nothing a program writes decides anything (see engine.go); the
// runner's own reads in the directories a program may write follow no
// link out of them (see safefs.go).
package runner
