// Package resource is the resource model's behaviour: which update last
// changed each resource of a stack's state (Attribute), each one's drift
// status from the stack's last drift check (MarkDrift), and the cache of
// each stack's last snapshot that spares a page view the store (Cache).
// The resources themselves are model.Resource; it imports nothing of the
// reconcile loop.
package resource
