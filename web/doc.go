// Package web serves stackd over HTTP: the status API, the web UI, push
// and pull-request webhooks and the Prometheus metrics handler. It is the
// only package with net/http server code.
//
// Its files:
//
//	server.go       Server, Options, API (what it asks of the daemon), the routes, health,
//	                a stack, sync, reload, the config, the cluster, JSON answers
//	access.go       who a request is and what it may do: routes to actions, the guard, refusals
//	auth.go         the constant-time comparison of the API token
//	host.go         the Host check against DNS rebinding
//	signin.go       sign-in through OpenID Connect, the CLI's session, sign-out
//	tokensignin.go  sign-in with an API token: the form, its CSRF check, the limit on failures
//	audit.go        the audit trail: recording requests, GET /api/v1/audit, the /audit page
//	forward.go      writes about a stack that another replica holds, forwarded to it
//	stacks.go       GET /api/v1/stacks: stacks rendered once per version, filtered and paged
//	logs.go         update history, config revisions, an update's log (followed, or proxied
//	                from the replica that runs it)
//	resources.go    a stack's resources (the API and the stack page's part), a preview now
//	approval.go     deciding a plan that awaits approval, from the API and the UI
//	windows.go      a sync that overrides closed change windows
//	maintenance.go  backup, pause, resume
//	previews.go     previews of pull requests: the API and the /previews pages
//	stacksets.go    StackSets: the API and the /stacksets pages, resuming and aborting a
//	                rollout, who may see and act on a set
//	webhook.go      POST /api/v1/webhooks/git: verified, replays dropped, pushes polled
//	pullrequest.go  a verified pull-request event, handed to the previews
//	ui.go           the UI's routes and pages, its templates (templates/) and assets (static/)
//	tls.go          the HTTP server's error log, the transport to the other replicas
//
// Its own packages, which import no other leaf (web imports all but the
// tests' helpers):
//
//	view/pages.go             the pages' models, a stack's row, outputs, a log's tail, badges
//	view/format.go            the formatters the templates call: times, commits, counts, paths
//	view/previews.go          the previews' pages
//	view/stacksets.go         the StackSets' pages, a stack's owner and its path
//	view/resources.go         the resource tree and its SVG picture
//	view/summary.go           StackSummary, the list's summary view (the API serves it too)
//	metrics/metrics.go        stackd's metrics: counters observed, gauges read at scrape time
//	                          through metrics.State (no Server)
//	metrics/previews.go       the gauges of pull requests and review stacks
//	metrics/cache.go          a scrape served again while the metrics did not change
//	forgehook/forgehook.go    a webhook's forge and event, its signature or token, push payloads
//	forgehook/pullrequest.go  pull-request payloads of GitHub, Gitea/Forgejo and GitLab
//	tlscert/tlscert.go        the serving certificate, read again when its files change
//	tlstest/tlstest.go        certificates for the TLS tests
//	webtest/webtest.go        what the tests of web and its packages share
package web
