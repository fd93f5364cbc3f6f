// Package access is the contract between who says who a request is and
// what it may do (auth implements Access and SignIn) and who asks (web,
// for every request): the actions a role may allow, what a role's stack
// selector sees (StackRef), ErrUnauthenticated, and LocalPath, the check
// of a path both redirect to. It imports only model.
package access
