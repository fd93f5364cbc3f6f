// Package notify tells people about stack events: drift detected and
// resolved, failed updates, stalls and recoveries. Event is what the
// reconcile loop hands over; Webhook delivers it as signed JSON to webhook
// receivers and as a one-line message to Slack-compatible chats.
//
// Delivery never holds up the loop: Notify only queues (a bounded queue
// that drops the oldest event when full), and one goroutine posts each
// event in order, retrying network errors, 5xx, 408 and 429 with backoff.
// Payloads hold no secret value, and logs name only a receiver's host.
//
// It imports nothing of the loop: the daemon package declares the
// Notifier interface that Webhook satisfies.
package notify
