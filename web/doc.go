// Package web serves stackd over HTTP: the status API, the web UI, push
// and pull-request webhooks and the Prometheus metrics handler. It is the
// only package with net/http server code.
package web
