// Package model holds the words every package of stackd shares: who
// acted (Principal) and the audit trail's entries; and, as the loop's
// records move here, plans and steps, resources, window status. It has
// no behaviour beyond formatting and copying, and imports only
// daemon/spec and the standard library, so that auth, web, store and
// cluster read and write these values without importing the reconcile
// loop (daemon) for them.
package model
