package identity

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/stackd/stackd/daemon/model"
)

// Default audiences: what each cloud's token exchange expects.
const (
	AWSAudience   = "sts.amazonaws.com"
	AzureAudience = "api://AzureADTokenExchange"
)

// Files an operation's credentials are written to, in its own directory.
const (
	AWSTokenFile   = "aws-token"
	GCPTokenFile   = "gcp-token"
	GCPConfigFile  = "gcp-credentials.json"
	AzureTokenFile = "azure-token"
	TokenFile      = "token"
)

// Credentials mints req's tokens, one per cloud its spec.credentials
// names (each with that cloud's audience), living at most ttl, and says
// which files to write in dir and which variables the clouds' SDKs read.
func (i *Issuer) Credentials(req model.IdentityRequest, dir string, ttl time.Duration) (model.CredentialSet, error) {
	set := model.CredentialSet{Files: map[string][]byte{}, Env: map[string]string{}}
	token := func(name, audience string) (string, error) {
		tok, exp, err := i.Mint(req, audience, ttl)
		if err != nil {
			return "", err
		}
		set.Files[name] = []byte(tok)
		set.Secrets = append(set.Secrets, tok, signature(tok))
		if set.Expires.IsZero() || exp.Before(set.Expires) {
			set.Expires = exp
		}
		return filepath.Join(dir, name), nil
	}
	c, read := req.Credentials, req.Scope == model.ScopeRead
	if a := c.AWS; a != nil {
		path, err := token(AWSTokenFile, or(a.Audience, AWSAudience))
		if err != nil {
			return model.CredentialSet{}, err
		}
		set.Env["AWS_WEB_IDENTITY_TOKEN_FILE"] = path
		set.Env["AWS_ROLE_ARN"] = pick(read, a.ReadRoleArn, a.RoleArn)
		set.Env["AWS_ROLE_SESSION_NAME"] = or(a.SessionName, SessionName(req.Stack, req.Operation))
	}
	if g := c.GCP; g != nil {
		aud := or(g.Audience, "//iam.googleapis.com/"+g.WorkloadIdentityProvider)
		path, err := token(GCPTokenFile, aud)
		if err != nil {
			return model.CredentialSet{}, err
		}
		conf, err := gcpConfig(aud, path, pick(read, g.ReadServiceAccount, g.ServiceAccount))
		if err != nil {
			return model.CredentialSet{}, err
		}
		set.Files[GCPConfigFile] = conf
		set.Env["GOOGLE_APPLICATION_CREDENTIALS"] = filepath.Join(dir, GCPConfigFile)
		set.Env["CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE"] = filepath.Join(dir, GCPConfigFile)
	}
	if z := c.Azure; z != nil {
		path, err := token(AzureTokenFile, or(z.Audience, AzureAudience))
		if err != nil {
			return model.CredentialSet{}, err
		}
		client := pick(read, z.ReadClientID, z.ClientID)
		for k, v := range map[string]string{
			"AZURE_FEDERATED_TOKEN_FILE": path, "AZURE_CLIENT_ID": client, "AZURE_TENANT_ID": z.TenantID,
			"ARM_OIDC_TOKEN_FILE_PATH": path, "ARM_CLIENT_ID": client, "ARM_TENANT_ID": z.TenantID, "ARM_USE_OIDC": "true",
		} {
			set.Env[k] = v
		}
	}
	if t := c.Token; t != nil {
		path, err := token(TokenFile, t.Audience)
		if err != nil {
			return model.CredentialSet{}, err
		}
		set.Env[t.Env] = path
	}
	return set, nil
}

// gcpConfig is an external_account credentials file: Google's client
// libraries exchange the token in path at Google's STS, and impersonate
// account when one is given.
func gcpConfig(audience, path, account string) ([]byte, error) {
	conf := map[string]any{
		"type":               "external_account",
		"audience":           audience,
		"subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
		"token_url":          "https://sts.googleapis.com/v1/token",
		"credential_source":  map[string]any{"file": path},
	}
	if account != "" {
		conf["service_account_impersonation_url"] = "https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/" + account + ":generateAccessToken"
	}
	data, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("gcp credentials file: %w", err)
	}
	return data, nil
}

// notSession is what a role session name may not hold.
var notSession = regexp.MustCompile(`[^\w+=,.@-]`)

// SessionName is the default AWS role session name of an operation:
// stackd-STACK-OPERATION, cut to the 64 characters STS accepts.
func SessionName(stack, operation string) string {
	s := notSession.ReplaceAllString("stackd-"+stack+"-"+operation, "-")
	if len(s) > 64 {
		s = s[:64]
	}
	return s
}

// signature is a token's last part: a log that shows it alone shows
// what makes the token good.
func signature(tok string) string {
	return tok[strings.LastIndexByte(tok, '.')+1:]
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// pick is readValue for read scope when there is one, else value.
func pick(read bool, readValue, value string) string {
	if read && readValue != "" {
		return readValue
	}
	return value
}
