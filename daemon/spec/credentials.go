package spec

import (
	"fmt"
	"regexp"
	"strings"
)

// Credentials are the cloud identities a stack's operations get: for each
// cloud named, stackd mints a short-lived token (an OpenID Connect ID
// token it signs as the issuer of --oidc-issuer-url) and writes the files
// and variables that cloud's SDKs read, so that a program needs no
// change. The cloud's trust policy decides what the token may do; the
// token says which stack, which operation and which scope (read for
// previews and drift checks, write for operations that apply). stackd's
// own field, not PKO's (PKO has a service account per stack).
//
// The JSON form is how a removed stack's record keeps what its destroy
// needs.
type Credentials struct {
	AWS   *AWSCredentials   `yaml:"aws" json:"aws,omitempty"`
	GCP   *GCPCredentials   `yaml:"gcp" json:"gcp,omitempty"`
	Azure *AzureCredentials `yaml:"azure" json:"azure,omitempty"`
	// Token is a token for anything else (Vault's JWT auth, a custom
	// STS): its audience, and the variable that names its file.
	Token *TokenCredentials `yaml:"token" json:"token,omitempty"`
}

// AWSCredentials assume a role with web identity (AWS_ROLE_ARN and
// AWS_WEB_IDENTITY_TOKEN_FILE, which every AWS SDK reads).
type AWSCredentials struct {
	RoleArn string `yaml:"roleArn" json:"roleArn"`
	// ReadRoleArn, when set, is the role of operations of read scope.
	ReadRoleArn string `yaml:"readRoleArn" json:"readRoleArn,omitempty"`
	// SessionName is AWS_ROLE_SESSION_NAME; default stackd-STACK-OPERATION.
	SessionName string `yaml:"sessionName" json:"sessionName,omitempty"`
	// Audience is the token's aud; default sts.amazonaws.com.
	Audience string `yaml:"audience" json:"audience,omitempty"`
}

// GCPCredentials exchange the token through a workload identity pool's
// provider (an external_account credentials file, named by
// GOOGLE_APPLICATION_CREDENTIALS), impersonating ServiceAccount when set.
type GCPCredentials struct {
	// WorkloadIdentityProvider is the provider's resource name:
	// projects/NUMBER/locations/global/workloadIdentityPools/POOL/providers/PROVIDER.
	WorkloadIdentityProvider string `yaml:"workloadIdentityProvider" json:"workloadIdentityProvider"`
	ServiceAccount           string `yaml:"serviceAccount" json:"serviceAccount,omitempty"`
	// ReadServiceAccount, when set, is impersonated by operations of read
	// scope.
	ReadServiceAccount string `yaml:"readServiceAccount" json:"readServiceAccount,omitempty"`
	// Audience is the token's aud; default //iam.googleapis.com/ and the
	// provider's name.
	Audience string `yaml:"audience" json:"audience,omitempty"`
}

// AzureCredentials sign in an app registration or managed identity with a
// federated credential (AZURE_FEDERATED_TOKEN_FILE for the Azure SDKs,
// ARM_OIDC_TOKEN_FILE_PATH for the azurerm and azure-native providers).
type AzureCredentials struct {
	TenantID string `yaml:"tenantId" json:"tenantId"`
	ClientID string `yaml:"clientId" json:"clientId"`
	// ReadClientID, when set, is the client of operations of read scope.
	ReadClientID string `yaml:"readClientId" json:"readClientId,omitempty"`
	// Audience is the token's aud; default api://AzureADTokenExchange.
	Audience string `yaml:"audience" json:"audience,omitempty"`
}

// TokenCredentials is a token for any relying party: Env names the
// variable that holds the token file's path.
type TokenCredentials struct {
	Audience string `yaml:"audience" json:"audience"`
	Env      string `yaml:"env" json:"env"`
}

// ReservedCredentialEnv says whether name is a variable that token.env may
// not name: the runner's own (PULUMI_*, HOME, TMPDIR, PATH), the dynamic
// linker's (LD_*), and those the clouds' credentials set.
func ReservedCredentialEnv(name string) bool {
	return CloudCredentialEnv(name) || strings.HasPrefix(name, "PULUMI_") || strings.HasPrefix(name, "LD_") ||
		name == "PATH" || name == "HOME" || name == "TMPDIR"
}

// CloudCredentialEnv says whether name is of the variables the clouds'
// credentials set (AWS_ROLE_ARN, GOOGLE_APPLICATION_CREDENTIALS, …).
func CloudCredentialEnv(name string) bool {
	for _, prefix := range []string{"AWS_", "AZURE_", "ARM_", "GOOGLE_", "CLOUDSDK_"} {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// Any says whether c asks for a token at all.
func (c *Credentials) Any() bool {
	return c != nil && (c.AWS != nil || c.GCP != nil || c.Azure != nil || c.Token != nil)
}

var (
	awsRoleArn  = regexp.MustCompile(`^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]{1,512}$`)
	gcpProvider = regexp.MustCompile(`^projects/\d+/locations/global/workloadIdentityPools/[a-z0-9-]{4,32}/providers/[a-z0-9-]{4,32}$`)
	gcpAccount  = regexp.MustCompile(`^[^@\s]+@[^@\s]+\.iam\.gserviceaccount\.com$|^[^@\s]+@[^@\s]+$`)
	azureID     = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	envName     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// sessionName is what STS accepts as a role session name.
	sessionName = regexp.MustCompile(`^[\w+=,.@-]{2,64}$`)
)

// problems lists what is wrong with c, by field path relative to it.
func (c *Credentials) problems() [][2]string {
	var out [][2]string
	add := func(field, format string, args ...any) {
		out = append(out, [2]string{field, fmt.Sprintf(format, args...)})
	}
	check := func(field, value string, re *regexp.Regexp, want string, required bool) {
		switch {
		case value == "" && required:
			add(field, "required")
		case value != "" && !re.MatchString(value):
			add(field, "%q is not %s", value, want)
		}
	}
	audience := func(field, aud string) {
		if strings.TrimSpace(aud) != aud || strings.ContainsAny(aud, "\n\r") {
			add(field, "must not hold spaces at its ends or line breaks")
		}
	}
	if a := c.AWS; a != nil {
		check("aws.roleArn", a.RoleArn, awsRoleArn, "a role's ARN (arn:aws:iam::ACCOUNT:role/NAME)", true)
		check("aws.readRoleArn", a.ReadRoleArn, awsRoleArn, "a role's ARN (arn:aws:iam::ACCOUNT:role/NAME)", false)
		check("aws.sessionName", a.SessionName, sessionName, "a session name (2 to 64 of letters, digits and +=,.@_-)", false)
		audience("aws.audience", a.Audience)
	}
	if g := c.GCP; g != nil {
		check("gcp.workloadIdentityProvider", g.WorkloadIdentityProvider, gcpProvider,
			"a provider's name (projects/NUMBER/locations/global/workloadIdentityPools/POOL/providers/PROVIDER)", true)
		check("gcp.serviceAccount", g.ServiceAccount, gcpAccount, "a service account's email", false)
		check("gcp.readServiceAccount", g.ReadServiceAccount, gcpAccount, "a service account's email", false)
		audience("gcp.audience", g.Audience)
	}
	if z := c.Azure; z != nil {
		check("azure.tenantId", z.TenantID, azureID, "a tenant ID (a GUID)", true)
		check("azure.clientId", z.ClientID, azureID, "a client ID (a GUID)", true)
		check("azure.readClientId", z.ReadClientID, azureID, "a client ID (a GUID)", false)
		audience("azure.audience", z.Audience)
	}
	if t := c.Token; t != nil {
		if t.Audience == "" {
			add("token.audience", "required")
		}
		audience("token.audience", t.Audience)
		check("token.env", t.Env, envName, "a variable's name", true)
		if ReservedCredentialEnv(t.Env) {
			add("token.env", "%s is a variable stackd or a cloud's credentials set: name another", t.Env)
		}
	}
	return out
}

// credentials checks spec.credentials.
func (v *validator) credentials(c *Credentials) {
	if c == nil {
		return
	}
	if !c.Any() {
		v.errorf("credentials", "names no cloud: give aws, gcp, azure or token")
	}
	for _, p := range c.problems() {
		v.errorf(joinPath("credentials", p[0]), "%s", p[1])
	}
}
