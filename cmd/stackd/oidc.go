package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stackd/stackd/cluster"
	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/identity"
	"github.com/stackd/stackd/runner"
	"github.com/stackd/stackd/web"
)

// oidcFlags make stackd an OpenID issuer of its stacks' cloud
// identities (spec.credentials).
type oidcFlags struct {
	idIssuerURL string
	idRotation  time.Duration
	idTokenTTL  time.Duration
	idSubject   string
}

// A cluster shares its replicas' public keys (see issuer).
var _ identity.Directory = (*cluster.Cluster)(nil)

// oidcDir is the issuer's directory in the data dir: its signing keys.
const oidcDir = "oidc"

func (f *oidcFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.idIssuerURL, "oidc-issuer-url", "", "stackd's own issuer `URL` (not sign-in's --oidc-issuer): the https URL at which clouds reach this daemon's /.well-known/openid-configuration and JWKS: stackd then signs a token for each operation of a stack with spec.credentials (unset: none)")
	fs.DurationVar(&f.idRotation, "oidc-key-rotation", identity.DefaultRotation, "how long a signing key signs before the next one takes over")
	fs.DurationVar(&f.idTokenTTL, "oidc-token-ttl", identity.DefaultTokenTTL, "longest life of an operation's token (made anew before it ends)")
	fs.StringVar(&f.idSubject, "oidc-subject", identity.DefaultSubject, "template of the tokens' sub claim, over .Stack .Operation .Scope .Repository .Commit .Labels .PullRequest")
}

// issuer opens the issuer, when --oidc-issuer-url is set, and keeps its
// keys rotated until ctx ends. In a cluster the replicas share their
// public keys through etcd (own). nil without the flag.
func (f *oidcFlags) issuer(ctx context.Context, dataDir string, own daemon.Ownership, log *slog.Logger) (*identity.Issuer, error) {
	if f.idIssuerURL == "" {
		return nil, nil
	}
	ttl, rotation := cmp.Or(f.idTokenTTL, identity.DefaultTokenTTL), cmp.Or(f.idRotation, identity.DefaultRotation)
	if ttl < time.Minute {
		return nil, usageErrorf("run: --oidc-token-ttl must be at least 1m")
	}
	if rotation < ttl {
		return nil, usageErrorf("run: --oidc-key-rotation must be longer than --oidc-token-ttl")
	}
	opts := identity.Options{URL: f.idIssuerURL, Dir: filepath.Join(dataDir, oidcDir), Rotation: f.idRotation,
		TokenTTL: f.idTokenTTL, Subject: f.idSubject, Log: log.With("component", "oidc")}
	if dir, ok := own.(identity.Directory); ok {
		opts.Directory = dir
	}
	iss, err := identity.New(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("oidc issuer: %w", err)
	}
	go func() {
		tick := time.NewTicker(time.Minute)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if err := iss.Maintain(ctx); err != nil {
					log.Warn("cannot maintain the OpenID signing keys", "component", "oidc", "err", err)
				}
			}
		}
	}()
	return iss, nil
}

// registerOIDCMetrics exports the tokens minted by stack and scope, and
// the signing key's age beside its rotation period, for the alert on an
// overdue rotation.
func registerOIDCMetrics(reg *prometheus.Registry, iss *identity.Issuer) {
	if iss == nil {
		return
	}
	reg.MustRegister(oidcCollector{iss})
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "stackd_oidc_signing_key_age_seconds",
		Help: "How long the current OpenID signing key has signed.",
	}, func() float64 { return iss.KeyAge().Seconds() }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "stackd_oidc_signing_key_rotation_seconds",
		Help: "How long a signing key signs before the next takes over (--oidc-key-rotation).",
	}, func() float64 { return iss.RotationPeriod().Seconds() }))
}

// oidcCollector exports stackd_oidc_tokens_minted_total.
type oidcCollector struct{ iss *identity.Issuer }

var mintedDesc = prometheus.NewDesc("stackd_oidc_tokens_minted_total",
	"Cloud tokens signed for operations, by stack and scope (read or write).", []string{"stack", "scope"}, nil)

func (c oidcCollector) Describe(ch chan<- *prometheus.Desc) { ch <- mintedDesc }

func (c oidcCollector) Collect(ch chan<- prometheus.Metric) {
	for k, n := range c.iss.Minted() {
		ch <- prometheus.MustNewConstMetric(mintedDesc, prometheus.CounterValue, float64(n), k[0], k[1])
	}
}

// oidcCommand runs "stackd oidc rotate [--emergency]": a new signing key
// on the daemon asked, at once.
func oidcCommand(args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "rotate" {
		return usageErrorf("oidc: want `stackd oidc rotate [--emergency]`")
	}
	fs := newFlagSet("oidc rotate")
	opts := clientFlags(fs)
	emergency := fs.Bool("emergency", false, "withdraw the previous key at once: the tokens it signed stop validating (running operations get new ones)")
	if err := parseFlags(fs, "oidc rotate [--emergency] [flags]", args[1:], stdout); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageErrorf("oidc rotate: unexpected argument %q", fs.Arg(0))
	}
	c, err := opts.newClient()
	if err != nil {
		return err
	}
	resp, err := c.do(http.MethodPost, "/api/v1/oidc/rotate?"+url.Values{"emergency": {fmt.Sprint(*emergency)}}.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var out struct {
		Kid string `json:"kid"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return fmt.Errorf("oidc rotate: decode: %w", err)
	}
	what := "the previous key stays published until its last token expires"
	if *emergency {
		what = "the previous key is withdrawn: its tokens no longer validate"
	}
	fmt.Fprintf(stdout, "new signing key %s; %s\n", out.Kid, what)
	return nil
}

// runnerIdentity and webIssuer are iss, or a nil interface without one.
func runnerIdentity(iss *identity.Issuer) runner.Identity {
	if iss == nil {
		return nil
	}
	return iss
}

func webIssuer(iss *identity.Issuer) web.Issuer {
	if iss == nil {
		return nil
	}
	return iss
}
