package daemon

import "github.com/stackd/stackd/daemon/notify"

// Notifier delivers events (webhooks, chat). Notify must not block: the
// reconcile loop calls it with its lock held.
type Notifier interface {
	Notify(e notify.Event)
}

type nopNotifier struct{}

func (nopNotifier) Notify(notify.Event) {}
